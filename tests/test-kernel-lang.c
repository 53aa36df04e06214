/* SPDX-License-Identifier: MIT */
/* test-kernel-lang: conformance of the portable kernel language
 * (keel/kernel_lang.h) on every backend. Each kernel is written once below,
 * built with keel_module_build for the device under test (the system C
 * compiler on the CPU, NVRTC on CUDA, hipRTC on HIP), launched with
 * KEEL_LAUNCH and checked against a float64 reference computed here on fresh
 * random data, with outputs poisoned first so that an element no thread
 * wrote shows. Then the error paths: compile errors that name the user's
 * line, the language's rules, bad arguments, checked launches, the CPU
 * backend's compilation cache and a missing C compiler.
 *
 * Unless KEEL_CACHE_DIR is set, the suite compiles into a fresh cache
 * directory of its own, so every run exercises the compilers instead of
 * whatever an earlier run left in ~/.cache/keel. */
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fixture.h"

static keel_dim3_t dim3(unsigned x, unsigned y, unsigned z)
{
    keel_dim3_t d = {x, y, z};
    return d;
}

/* ---- helpers ---- */

static keel_module_t *build_ok(keel_device_t *dev, const char *src, const char *name, const char *const *opts,
                               int nopts)
{
    keel_module_t *m = NULL;
    keel_status_t st = keel_module_build(dev, src, name, opts, nopts, &m);
    ck_assert_msg(st == KEEL_OK, "%sbuilding %s: %s\n%s", kt_where(), name, keel_status_name(st), keel_last_error());
    ck_assert_ptr_nonnull(m);
    return m;
}

static keel_kernel_t *kernel_of(keel_module_t *m, const char *name)
{
    keel_kernel_t *k = NULL;
    KT_OK(keel_module_get_kernel(m, name, &k));
    return k;
}

static void *dalloc(keel_device_t *dev, size_t bytes)
{
    void *p = NULL;
    KT_OK(keel_malloc(dev, bytes, &p));
    return p;
}

static void upload(void *d, const void *h, size_t bytes)
{
    KT_OK(keel_memcpy(d, h, bytes));
}

static void download(void *h, const void *d, size_t bytes)
{
    KT_OK(keel_memcpy(h, d, bytes));
}

/* Float outputs are poisoned with NaN: a stale element can never pass a tolerance. */
static void poison_nan_f32(float *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    upload(d, h, n * sizeof *h);
    free(h);
}

static void poison_nan_f64(double *d, size_t n)
{
    double *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    upload(d, h, n * sizeof *h);
    free(h);
}

static void poison_bytes(void *d, size_t bytes)
{
    KT_OK(keel_memset(d, KT_POISON_BYTE, bytes));
}

static keel_stream_t *stream_new(keel_device_t *dev)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    return s;
}

/* The backend name of @p dev: "cpu", "cuda", "hip". */
static const char *backend_name(keel_device_t *dev)
{
    keel_backend_t *be = NULL;
    KT_OK(keel_device_get_backend(dev, &be));
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_backend_get_info(be, &info));
    return info.name;
}

/* A random int in [lo, hi]. */
static int rand_int(int lo, int hi)
{
    return lo + (int)(kt_rand64() % (uint64_t)(hi - lo + 1));
}

/* Whether @p log names @p name at @p line, as "name:line" (GCC, Clang) or
 * "name(line)" (NVRTC), the number not followed by another digit. */
static int log_names_line(const char *log, const char *name, unsigned line)
{
    char pat[2][256];
    snprintf(pat[0], sizeof pat[0], "%s:%u", name, line);
    snprintf(pat[1], sizeof pat[1], "%s(%u)", name, line);
    for (int f = 0; f < 2; f++)
        for (const char *p = strstr(log, pat[f]); p; p = strstr(p + 1, pat[f])) {
            char next = p[strlen(pat[f])];
            if (f == 1 || !(next >= '0' && next <= '9'))
                return 1;
        }
    return 0;
}

/* ==== vector add: a thread kernel with a bounds check ==== */

static const char vadd_src[] =
    "keel_kernel void vadd(int n, const float *a, const float *b, float *c)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        c[i] = a[i] + b[i];\n"
    "}\n";

KT_DEVICE_TEST(kernel_parameters_are_listed)
{
    keel_module_t *m = build_ok(dev, vadd_src, "vadd.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "vadd");
    static const char *const types[] = {"int", "const float *", "const float *", "float *"};
    static const char *const names[] = {"n", "a", "b", "c"};
    static const size_t sizes[] = {sizeof(int), sizeof(float *), sizeof(float *), sizeof(float *)};
    int nargs = 0;
    KT_OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_NUM_ARGS, &nargs));
    ck_assert_int_eq(nargs, 4);
    for (unsigned i = 0; i < 4; i++) {
        keel_kernel_param_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        KT_OK(keel_kernel_get_param(k, i, &p));
        ck_assert_str_eq(p.type, types[i]);
        ck_assert_str_eq(p.name, names[i]);
        ck_assert_uint_eq(p.size, sizes[i]);
    }
    keel_kernel_param_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_kernel_get_param(k, 4, &p));
    KT_DETAIL_HAS("vadd");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_get_param(k, 0, NULL));
    p.struct_size = 4;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_get_param(k, 0, &p));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_get_param(NULL, 0, &p));
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(vector_add_guards_the_last_block)
{
    keel_module_t *m = build_ok(dev, vadd_src, "vadd.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "vadd");
    keel_stream_t *s = stream_new(dev);
    const int sizes[] = {1, 255, 3 * 256 + 17, 100003};
    const int bd = 256, guard = 300;
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        int n = sizes[c];
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *out = malloc((n + guard) * sizeof *out);
        double *ref = malloc(n * sizeof *ref);
        kt_fill_random_f32(a, n);
        kt_fill_random_f32(b, n);
        for (int i = 0; i < n; i++)
            ref[i] = (double)a[i] + b[i];
        float *da = dalloc(dev, n * sizeof *a), *db = dalloc(dev, n * sizeof *b);
        float *dc = dalloc(dev, (n + guard) * sizeof *out);
        upload(da, a, n * sizeof *a);
        upload(db, b, n * sizeof *b);
        poison_nan_f32(dc, n);
        poison_bytes(dc + n, guard * sizeof *out);
        /* n is no multiple of the block: the last block has threads past n. */
        KT_OK(KEEL_LAUNCH(k, dim3((n + bd - 1) / bd, 1, 1), dim3(bd, 1, 1), 0, s, n, (const float *)da,
                          (const float *)db, dc));
        KT_OK(keel_stream_synchronize(s));
        download(out, dc, (n + guard) * sizeof *out);
        long bad = kt_check_f32(out, ref, n, 1e-7, 0.0);
        ck_assert_msg(bad < 0, "%sn %d: c[%ld] = %.9g, expected %.9g", kt_where(), n, bad, bad < 0 ? 0 : out[bad],
                      bad < 0 ? 0 : ref[bad]);
        const unsigned char *tail = (const unsigned char *)(out + n);
        for (size_t i = 0; i < guard * sizeof *out; i++)
            ck_assert_msg(tail[i] == KT_POISON_BYTE, "%sn %d: a thread past n wrote byte %zu after the end", kt_where(),
                          n, i);
        KT_OK(keel_free(da));
        KT_OK(keel_free(db));
        KT_OK(keel_free(dc));
        free(a);
        free(b);
        free(out);
        free(ref);
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== 2D and 3D grids and blocks ==== */

/* Each thread writes its record at its global linear index: every index
 * and extent the language offers, and a function of all of them. The
 * thread kernel and a block kernel's region must see the same. */
enum { IDX_FIELDS = 20 };
static const char index_src[] =
    "#define IDX_FIELDS 20\n"
    "keel_device void record(int *out, int gx, int gy, int gz, int tx, int ty, int tz, int bx, int by, int bz,\n"
    "                        int dx, int dy, int dz, int nx, int ny, int nz, int tl, int sx, int sy, int sz)\n"
    "{\n"
    "    int *o = out + ((gz * sy + gy) * sx + gx) * IDX_FIELDS;\n"
    "    o[0] = gx; o[1] = gy; o[2] = gz; o[3] = tx; o[4] = ty; o[5] = tz; o[6] = bx; o[7] = by; o[8] = bz;\n"
    "    o[9] = dx; o[10] = dy; o[11] = dz; o[12] = nx; o[13] = ny; o[14] = nz; o[15] = tl;\n"
    "    o[16] = sx; o[17] = sy; o[18] = sz;\n"
    "    o[19] = (gx * 7 + gy * 131 + gz * 1031) ^ (tl * 17 + bx * 3 + by * 5 + bz * 11);\n"
    "}\n"
    "#define RECORD(out) record(out, keel_global_x(), keel_global_y(), keel_global_z(),\\\n"
    "    keel_thread_x(), keel_thread_y(), keel_thread_z(), keel_block_x(), keel_block_y(), keel_block_z(),\\\n"
    "    keel_block_dim_x(), keel_block_dim_y(), keel_block_dim_z(),\\\n"
    "    keel_grid_dim_x(), keel_grid_dim_y(), keel_grid_dim_z(), keel_thread_linear(),\\\n"
    "    keel_global_size_x(), keel_global_size_y(), keel_global_size_z())\n"
    "keel_kernel void index_thread(int *out)\n"
    "{\n"
    "    RECORD(out);\n"
    "}\n"
    "keel_block_kernel void index_block(int *out)\n"
    "{\n"
    "    keel_threads {\n"
    "        RECORD(out);\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(grids_and_blocks_in_two_and_three_dimensions)
{
    keel_module_t *m = build_ok(dev, index_src, "index.kc", NULL, 0);
    const char *names[2] = {"index_thread", "index_block"};
    keel_stream_t *s = stream_new(dev);
    const keel_dim3_t grids[] = {{5, 3, 1}, {3, 2, 4}, {2, 3, 2}, {1, 1, 1}, {1, 7, 1}};
    const keel_dim3_t blocks[] = {{16, 8, 1}, {4, 4, 4}, {8, 2, 3}, {1, 1, 1}, {3, 1, 5}};
    for (int kk = 0; kk < 2; kk++) {
        keel_kernel_t *k = kernel_of(m, names[kk]);
        for (size_t c = 0; c < sizeof grids / sizeof grids[0]; c++) {
            keel_dim3_t g = grids[c], b = blocks[c];
            int sx = g.x * b.x, sy = g.y * b.y, sz = g.z * b.z;
            size_t nthreads = (size_t)sx * sy * sz, bytes = nthreads * IDX_FIELDS * sizeof(int);
            int *out = malloc(bytes), *d = dalloc(dev, bytes);
            poison_bytes(d, bytes);
            KT_OK(KEEL_LAUNCH(k, g, b, 0, s, d));
            KT_OK(keel_stream_synchronize(s));
            download(out, d, bytes);
            for (int gz = 0; gz < sz; gz++)
                for (int gy = 0; gy < sy; gy++)
                    for (int gx = 0; gx < sx; gx++) {
                        int tx = gx % b.x, ty = gy % b.y, tz = gz % b.z;
                        int bx = gx / b.x, by = gy / b.y, bz = gz / b.z;
                        int tl = (tz * (int)b.y + ty) * (int)b.x + tx;
                        const int want[IDX_FIELDS] = {gx, gy, gz, tx, ty, tz, bx, by, bz, (int)b.x, (int)b.y, (int)b.z,
                                                      (int)g.x, (int)g.y, (int)g.z, tl, sx, sy, sz,
                                                      (gx * 7 + gy * 131 + gz * 1031) ^
                                                          (tl * 17 + bx * 3 + by * 5 + bz * 11)};
                        const int *o = out + (((size_t)gz * sy + gy) * sx + gx) * IDX_FIELDS;
                        for (int f = 0; f < IDX_FIELDS; f++)
                            ck_assert_msg(o[f] == want[f],
                                          "%s%s: grid %ux%ux%u block %ux%ux%u: thread (%d,%d,%d) field %d is %d (%#x), "
                                          "expected %d",
                                          kt_where(), names[kk], g.x, g.y, g.z, b.x, b.y, b.z, gx, gy, gz, f, o[f],
                                          (unsigned)o[f], want[f]);
                    }
            KT_OK(keel_free(d));
            free(out);
        }
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== tiled matrix multiply: shared tiles, a private accumulator, barriers ==== */

static const char matmul_src[] =
    "#define TILE 16\n"
    "/* C (M x N) = A (M x K) * B (K x N), row-major; one 16x16 block per tile of C. */\n"
    "keel_block_kernel void matmul(int M, int N, int K, const float *A, const float *B, float *C)\n"
    "{\n"
    "    keel_shared float As[TILE][TILE];\n"
    "    keel_shared float Bs[TILE][TILE];\n"
    "    keel_private(float, acc);\n"
    "    keel_threads {\n"
    "        keel_priv(acc) = 0.0f;\n"
    "    }\n"
    "    for (int k0 = 0; k0 < K; k0 += TILE) {\n"
    "        keel_threads {\n"
    "            int tx = keel_thread_x(), ty = keel_thread_y();\n"
    "            int row = keel_block_y() * TILE + ty, col = keel_block_x() * TILE + tx;\n"
    "            As[ty][tx] = row < M && k0 + tx < K ? A[row * K + k0 + tx] : 0.0f;\n"
    "            Bs[ty][tx] = k0 + ty < K && col < N ? B[(k0 + ty) * N + col] : 0.0f;\n"
    "        }\n"
    "        keel_barrier();\n"
    "        keel_threads {\n"
    "            float s = keel_priv(acc);\n"
    "            for (int k = 0; k < TILE; k++)\n"
    "                s += As[keel_thread_y()][k] * Bs[k][keel_thread_x()];\n"
    "            keel_priv(acc) = s;\n"
    "        }\n"
    "        keel_barrier();\n"
    "    }\n"
    "    keel_threads {\n"
    "        int row = keel_block_y() * TILE + keel_thread_y(), col = keel_block_x() * TILE + keel_thread_x();\n"
    "        if (row < M && col < N)\n"
    "            C[row * N + col] = keel_priv(acc);\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(tiled_matmul_matches_a_double_reference)
{
    keel_module_t *m = build_ok(dev, matmul_src, "matmul.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "matmul");
    keel_stream_t *s = stream_new(dev);
    /* Multiples of the tile, and not: the guarded loads and stores. */
    const int shapes[][3] = {{64, 48, 32}, {37, 53, 29}, {16, 16, 16}, {1, 1, 1}, {17, 15, 33}, {96, 80, 112}};
    const int guard = 64;
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int M = shapes[c][0], N = shapes[c][1], K = shapes[c][2];
        float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
        float *C = malloc(((size_t)M * N + guard) * sizeof *C);
        double *ref = malloc((size_t)M * N * sizeof *ref), *mag = malloc((size_t)M * N * sizeof *mag);
        kt_fill_random_f32(A, (size_t)M * K);
        kt_fill_random_f32(B, (size_t)K * N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double acc = 0.0, abs_acc = 0.0;
                for (int p = 0; p < K; p++) {
                    acc += (double)A[i * K + p] * B[p * N + j];
                    abs_acc += fabs((double)A[i * K + p] * B[p * N + j]);
                }
                ref[i * N + j] = acc;
                mag[i * N + j] = abs_acc;
            }
        float *dA = dalloc(dev, (size_t)M * K * sizeof *A), *dB = dalloc(dev, (size_t)K * N * sizeof *B);
        float *dC = dalloc(dev, ((size_t)M * N + guard) * sizeof *C);
        upload(dA, A, (size_t)M * K * sizeof *A);
        upload(dB, B, (size_t)K * N * sizeof *B);
        poison_nan_f32(dC, (size_t)M * N);
        poison_bytes(dC + (size_t)M * N, guard * sizeof *C);
        KT_OK(KEEL_LAUNCH(k, dim3((N + 15) / 16, (M + 15) / 16, 1), dim3(16, 16, 1), 0, s, M, N, K,
                          (const float *)dA, (const float *)dB, dC));
        KT_OK(keel_stream_synchronize(s));
        download(C, dC, ((size_t)M * N + guard) * sizeof *C);
        /* A float sum of K products: at most about K roundings of the magnitudes. */
        const double u = 0x1p-24;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double got = C[i * N + j], want = ref[i * N + j], tol = 2.0 * (K + 2) * u * mag[i * N + j] + 1e-30;
                ck_assert_msg(fabs(got - want) <= tol, "%s%dx%dx%d: C[%d][%d] = %.9g, expected %.9g (tolerance %.3g)",
                              kt_where(), M, N, K, i, j, got, want, tol);
            }
        const unsigned char *tail = (const unsigned char *)(C + (size_t)M * N);
        for (size_t i = 0; i < guard * sizeof *C; i++)
            ck_assert_msg(tail[i] == KT_POISON_BYTE, "%s%dx%dx%d: a store past C at byte %zu", kt_where(), M, N, K, i);
        KT_OK(keel_free(dA));
        KT_OK(keel_free(dB));
        KT_OK(keel_free(dC));
        free(A);
        free(B);
        free(C);
        free(ref);
        free(mag);
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== block reduction: a tree in shared memory ==== */

static const char reduce_src[] =
    "keel_block_kernel void block_sum(int n, const float *x, float *partial)\n"
    "{\n"
    "    keel_shared float part[256];\n"
    "    keel_threads {\n"
    "        int i = keel_global_x();\n"
    "        part[keel_thread_x()] = i < n ? x[i] : 0.0f;\n"
    "    }\n"
    "    for (int s = keel_block_dim_x() / 2; s > 0; s /= 2) {\n"
    "        keel_barrier();\n"
    "        keel_threads {\n"
    "            int t = keel_thread_x();\n"
    "            if (t < s)\n"
    "                part[t] += part[t + s];\n"
    "        }\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        if (keel_thread_x() == 0)\n"
    "            partial[keel_block_x()] = part[0];\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(block_reduction_writes_per_block_partial_sums)
{
    keel_module_t *m = build_ok(dev, reduce_src, "reduce.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "block_sum");
    keel_stream_t *s = stream_new(dev);
    const int sizes[] = {1, 1000, 65537};
    const int bds[] = {256, 128, 64, 32, 2};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++)
        for (size_t b = 0; b < sizeof bds / sizeof bds[0]; b++) {
            int n = sizes[c], bd = bds[b], nb = (n + bd - 1) / bd;
            float *x = malloc(n * sizeof *x), *part = malloc((nb + 1) * sizeof *part);
            kt_fill_random_f32(x, n);
            float *dx = dalloc(dev, n * sizeof *x), *dp = dalloc(dev, (nb + 1) * sizeof *part);
            upload(dx, x, n * sizeof *x);
            poison_nan_f32(dp, nb + 1);
            KT_OK(KEEL_LAUNCH(k, dim3(nb, 1, 1), dim3(bd, 1, 1), 0, s, n, (const float *)dx, dp));
            KT_OK(keel_stream_synchronize(s));
            download(part, dp, (nb + 1) * sizeof *part);
            for (int blk = 0; blk < nb; blk++) {
                double ref = 0.0, mag = 0.0;
                for (int t = 0; t < bd && blk * bd + t < n; t++) {
                    ref += x[blk * bd + t];
                    mag += fabs(x[blk * bd + t]);
                }
                /* A tree of depth log2(bd): that many roundings of the magnitude. */
                double tol = 9 * 0x1p-24 * mag + 1e-30;
                ck_assert_msg(fabs(part[blk] - ref) <= tol, "%sn %d block %d: block %d's sum %.9g, expected %.9g",
                              kt_where(), n, bd, blk, part[blk], ref);
            }
            ck_assert_msg(isnan(part[nb]), "%sn %d block %d: a store past the last block's partial sum", kt_where(), n,
                          bd);
            KT_OK(keel_free(dx));
            KT_OK(keel_free(dp));
            free(x);
            free(part);
        }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* A block kernel that declares its block size: the only launch it takes,
 * and what keel_kernel_suggest_block_size answers for it. */
static const char fixed_block_src[] =
    "keel_block_kernel keel_block_size(64, 1, 1) void tile_sum(int n, const float *x, float *partial)\n"
    "{\n"
    "    keel_shared float part[64];\n"
    "    keel_threads {\n"
    "        int i = keel_global_x();\n"
    "        part[keel_thread_x()] = i < n ? x[i] : 0.0f;\n"
    "    }\n"
    "    for (int s = keel_block_dim_x() / 2; s > 0; s /= 2) {\n"
    "        keel_barrier();\n"
    "        keel_threads {\n"
    "            int t = keel_thread_x();\n"
    "            if (t < s)\n"
    "                part[t] += part[t + s];\n"
    "        }\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        if (keel_thread_x() == 0)\n"
    "            partial[keel_block_x()] = part[0];\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(declared_block_size_is_the_only_launch)
{
    keel_module_t *m = build_ok(dev, fixed_block_src, "tile.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "tile_sum");
    keel_stream_t *s = stream_new(dev);
    const int n = 1000, nb = (n + 63) / 64;
    float *x = malloc(n * sizeof *x), part[(1000 + 63) / 64 + 1]; /* nb + 1 */
    kt_fill_random_f32(x, n);
    float *dx = dalloc(dev, n * sizeof *x), *dp = dalloc(dev, (nb + 1) * sizeof *part);
    upload(dx, x, n * sizeof *x);
    poison_nan_f32(dp, nb + 1);
    KT_OK(KEEL_LAUNCH(k, dim3(nb, 1, 1), dim3(64, 1, 1), 0, s, n, (const float *)dx, dp));
    KT_OK(keel_stream_synchronize(s));
    download(part, dp, (nb + 1) * sizeof *part);
    for (int b = 0; b < nb; b++) {
        double ref = 0.0, mag = 0.0;
        for (int t = 0; t < 64 && b * 64 + t < n; t++) {
            ref += x[b * 64 + t];
            mag += fabs(x[b * 64 + t]);
        }
        ck_assert_msg(fabs(part[b] - ref) <= 7 * 0x1p-24 * mag + 1e-30, "%sblock %d: %.9g, expected %.9g",
                      kt_where(), b, part[b], ref);
    }
    ck_assert_msg(isnan(part[nb]), "%sa store past the last partial sum", kt_where());
    /* Any other block is refused before it reaches the device. */
    const keel_dim3_t wrong[] = {{32, 1, 1}, {128, 1, 1}, {8, 8, 1}, {64, 1, 2}};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, dim3(nb, 1, 1), wrong[i], 0, s, n, (const float *)dx, dp));
        KT_DETAIL_HAS("keel_block_size(64, 1, 1)");
    }
    /* The suggestion is the declared size, with a grid that fills the device. */
    int threads = 0, grid = 0;
    keel_status_t st = keel_kernel_suggest_block_size(k, 0, 0, &threads, &grid);
    if (!kt_unsupported(dev, KT_OCCUPANCY, st)) {
        ck_assert_msg(st == KEEL_OK && threads == 64 && grid >= 1, "%ssuggestion: %s, %d threads, grid %d (%s)",
                      kt_where(), keel_status_name(st), threads, grid, keel_last_error());
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_suggest_block_size(k, SIZE_MAX, 0, &threads, &grid));
        KT_DETAIL_HAS("keel_block_size");
    }
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dp));
    free(x);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== atomics ==== */

static const char atomics_src[] =
    "keel_kernel void histogram(int n, const unsigned *keys, int nbins, unsigned *bins)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        keel_atomic_add(&bins[keys[i] % (unsigned)nbins], 1u);\n"
    "}\n"
    "keel_kernel void float_sums(int n, const float *x, const float *xg, float *sum, double *dsum, float *fmin,\n"
    "                            float *fmax)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        keel_atomic_add(sum, xg[i]);\n"
    "        keel_atomic_add_f64(dsum, (double)x[i]);\n"
    "        keel_atomic_min(fmin, x[i]);\n"
    "        keel_atomic_max_f32(fmax, x[i]);\n"
    "    }\n"
    "}\n"
    "keel_kernel void int64_ops(int n, const long long *x, long long *sum, int64_t *mn, int64_t *mx,\n"
    "                           uint64_t *usum, unsigned long long *umax)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        keel_atomic_add(sum, x[i]);\n"
    "        keel_atomic_min_i64(mn, (int64_t)x[i]);\n"
    "        keel_atomic_max(mx, (int64_t)x[i]);\n"
    "        keel_atomic_add_u64(usum, (uint64_t)x[i] * 0x9e3779b97f4a7c15ull);\n"
    "        keel_atomic_max(umax, (unsigned long long)x[i]);\n"
    "    }\n"
    "}\n"
    "keel_kernel void int32_ops(int n, const int *x, int *mn, int *mx, unsigned *umn, unsigned *umx, int *sum)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        keel_atomic_min(mn, x[i]);\n"
    "        keel_atomic_max_i32(mx, x[i]);\n"
    "        keel_atomic_min_u32(umn, (unsigned)x[i]);\n"
    "        keel_atomic_max(umx, (unsigned)x[i]);\n"
    "        keel_atomic_add_i32(sum, x[i]);\n"
    "    }\n"
    "}\n"
    "/* Each thread claims the first free slot from its own start: a compare-and-swap each. */\n"
    "keel_kernel void claim(int n, int nslots, int *slots, int *won)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        won[i] = -1;\n"
    "        for (int k = 0; k < nslots; k++) {\n"
    "            int s = (int)(((unsigned)i * 2654435761u + (unsigned)k) % (unsigned)nslots);\n"
    "            if (keel_atomic_cas(&slots[s], -1, i) == -1) {\n"
    "                won[i] = s;\n"
    "                break;\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "}\n"
    "/* Each thread swaps its value into one cell and keeps what it found. */\n"
    "keel_kernel void exchange(int n, const float *x, int *cell, int *got, float *fcell, float *fgot)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        got[i] = keel_atomic_xchg(cell, i);\n"
    "        fgot[i] = keel_atomic_xchg_f32(fcell, x[i]);\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(atomic_histogram_counts_every_key)
{
    keel_module_t *m = build_ok(dev, atomics_src, "atomics.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "histogram");
    keel_stream_t *s = stream_new(dev);
    const int nbins_list[] = {1, 37, 256};
    /* Enough keys that the CPU backend's threads run blocks at the same time
     * (a plain increment loses counts here). */
    const int n = 2000003, bd = 128;
    unsigned *keys = malloc(n * sizeof *keys);
    for (int i = 0; i < n; i++)
        keys[i] = (unsigned)kt_rand64();
    unsigned *dkeys = dalloc(dev, n * sizeof *keys);
    upload(dkeys, keys, n * sizeof *keys);
    for (size_t c = 0; c < sizeof nbins_list / sizeof nbins_list[0]; c++) {
        int nbins = nbins_list[c], grid = (n + bd - 1) / bd;
        unsigned bins[257], ref[257];
        /* Random starting counts: the atomics add to what is there. */
        for (int b = 0; b < nbins; b++)
            ref[b] = bins[b] = (unsigned)(kt_rand64() % 1000000u);
        bins[nbins] = ref[nbins] = 0xA5A5A5A5u; /* one past the end must stay */
        for (int i = 0; i < n; i++)
            ref[keys[i] % (unsigned)nbins]++;
        unsigned *dbins = dalloc(dev, (nbins + 1) * sizeof *bins);
        upload(dbins, bins, (nbins + 1) * sizeof *bins);
        KT_OK(KEEL_LAUNCH(k, dim3(grid, 1, 1), dim3(bd, 1, 1), 0, s, n, (const unsigned *)dkeys, nbins, dbins));
        KT_OK(keel_stream_synchronize(s));
        download(bins, dbins, (nbins + 1) * sizeof *bins);
        for (int b = 0; b <= nbins; b++)
            ck_assert_msg(bins[b] == ref[b], "%s%d bins: bin %d holds %u, expected %u", kt_where(), nbins, b, bins[b],
                          ref[b]);
        KT_OK(keel_free(dbins));
    }
    KT_OK(keel_free(dkeys));
    free(keys);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(atomic_float_and_double_sums_min_and_max)
{
    keel_module_t *m = build_ok(dev, atomics_src, "atomics.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "float_sums");
    keel_stream_t *s = stream_new(dev);
    const int n = 500009, bd = 256;
    /* The float sum adds multiples of 1/16 of at most 1: every partial sum,
     * in whatever order, is below 2^20 and so exact in float, and the
     * result must be the reference exactly. The double sum, min and max
     * take any floats. */
    float *x = malloc(n * sizeof *x), *xg = malloc(n * sizeof *xg);
    kt_fill_random_f32(x, n);
    for (int i = 0; i < n; i++)
        xg[i] = (float)rand_int(-16, 16) / 16.0f;
    float init[3];
    kt_fill_random_f32(init, 3);
    init[0] = (float)rand_int(-1000, 1000) / 16.0f;
    double dinit = init[1] * 3.0;
    double ref = init[0], dref = dinit, mag = fabs(dinit);
    float fmin_ref = init[1] * 0.5f, fmax_ref = init[2] * 0.5f, fmin0 = fmin_ref, fmax0 = fmax_ref;
    for (int i = 0; i < n; i++) {
        ref += xg[i];
        dref += x[i];
        mag += fabs(x[i]);
        fmin_ref = x[i] < fmin_ref ? x[i] : fmin_ref;
        fmax_ref = x[i] > fmax_ref ? x[i] : fmax_ref;
    }
    float *dx = dalloc(dev, n * sizeof *x), *dxg = dalloc(dev, n * sizeof *xg), *dsum = dalloc(dev, 3 * sizeof(float));
    double *ddsum = dalloc(dev, sizeof(double));
    upload(dx, x, n * sizeof *x);
    upload(dxg, xg, n * sizeof *xg);
    float f3[3] = {init[0], fmin0, fmax0};
    upload(dsum, f3, sizeof f3);
    upload(ddsum, &dinit, sizeof dinit);
    KT_OK(KEEL_LAUNCH(k, dim3((n + bd - 1) / bd, 1, 1), dim3(bd, 1, 1), 0, s, n, (const float *)dx, (const float *)dxg,
                      dsum, ddsum, dsum + 1, dsum + 2));
    KT_OK(keel_stream_synchronize(s));
    double dgot = 0;
    download(f3, dsum, sizeof f3);
    download(&dgot, ddsum, sizeof dgot);
    ck_assert_msg(f3[0] == ref, "%sfloat atomic sum %.9g, expected %.9g exactly", kt_where(), f3[0], ref);
    /* In any order, n double roundings of at most the magnitude. */
    double tol = n * 0x1p-53 * mag;
    ck_assert_msg(fabs(dgot - dref) <= tol, "%sdouble atomic sum %.17g, expected %.17g (tolerance %.3g)", kt_where(),
                  dgot, dref, tol);
    ck_assert_msg(f3[1] == fmin_ref, "%sfloat atomic min %.9g, expected %.9g", kt_where(), f3[1], fmin_ref);
    ck_assert_msg(f3[2] == fmax_ref, "%sfloat atomic max %.9g, expected %.9g", kt_where(), f3[2], fmax_ref);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dxg));
    KT_OK(keel_free(dsum));
    KT_OK(keel_free(ddsum));
    free(x);
    free(xg);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(atomic_integer_add_min_max_of_32_and_64_bits)
{
    keel_module_t *m = build_ok(dev, atomics_src, "atomics.kc", NULL, 0);
    keel_kernel_t *k64 = kernel_of(m, "int64_ops"), *k32 = kernel_of(m, "int32_ops");
    keel_stream_t *s = stream_new(dev);
    const int n = 40009, bd = 192;
    /* 64 bits: values past 32 bits of either sign. */
    long long *x = malloc(n * sizeof *x);
    for (int i = 0; i < n; i++)
        x[i] = (long long)(kt_rand64() >> 23) - (1ll << 40);
    long long init[5];
    init[0] = (long long)(kt_rand64() >> 20) - (1ll << 43);
    init[1] = (1ll << 40) - (long long)(kt_rand64() % 1000); /* above every x: the min moves */
    init[2] = -(1ll << 40) + (long long)(kt_rand64() % 1000);
    init[3] = (long long)kt_rand64();
    init[4] = (long long)(kt_rand64() >> 2);
    long long ref[5] = {init[0], init[1], init[2], init[3], init[4]};
    for (int i = 0; i < n; i++) {
        ref[0] += x[i];
        ref[1] = x[i] < ref[1] ? x[i] : ref[1];
        ref[2] = x[i] > ref[2] ? x[i] : ref[2];
        ref[3] = (long long)((unsigned long long)ref[3] + (unsigned long long)x[i] * 0x9e3779b97f4a7c15ull);
        ref[4] = (unsigned long long)x[i] > (unsigned long long)ref[4] ? x[i] : ref[4];
    }
    long long *dx = dalloc(dev, n * sizeof *x), *d = dalloc(dev, sizeof init);
    upload(dx, x, n * sizeof *x);
    upload(d, init, sizeof init);
    KT_OK(KEEL_LAUNCH(k64, dim3((n + bd - 1) / bd, 1, 1), dim3(bd, 1, 1), 0, s, n, (const long long *)dx, d,
                      (int64_t *)(d + 1), (int64_t *)(d + 2), (uint64_t *)(d + 3), (unsigned long long *)(d + 4)));
    KT_OK(keel_stream_synchronize(s));
    long long got[5];
    download(got, d, sizeof got);
    static const char *what64[5] = {"add", "min_i64", "max (int64_t)", "add_u64", "max (unsigned long long)"};
    for (int j = 0; j < 5; j++)
        ck_assert_msg(got[j] == ref[j], "%s64-bit atomic %s: %lld (%#llx), expected %lld (%#llx)", kt_where(),
                      what64[j], got[j], (unsigned long long)got[j], ref[j], (unsigned long long)ref[j]);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(d));
    free(x);

    /* 32 bits, signed and unsigned. */
    int *xi = malloc(n * sizeof *xi);
    for (int i = 0; i < n; i++)
        xi[i] = (int)(uint32_t)kt_rand64();
    int i0[5] = {rand_int(0, 1 << 30), rand_int(-(1 << 30), 0), (int)0xF0000000u, 0x10000000,
                 (int)(uint32_t)kt_rand64()};
    int ri[5] = {i0[0], i0[1], i0[2], i0[3], i0[4]};
    for (int i = 0; i < n; i++) {
        ri[0] = xi[i] < ri[0] ? xi[i] : ri[0];
        ri[1] = xi[i] > ri[1] ? xi[i] : ri[1];
        ri[2] = (unsigned)xi[i] < (unsigned)ri[2] ? xi[i] : ri[2];
        ri[3] = (unsigned)xi[i] > (unsigned)ri[3] ? xi[i] : ri[3];
        ri[4] = (int)((unsigned)ri[4] + (unsigned)xi[i]); /* the atomic add wraps */
    }
    int *dxi = dalloc(dev, n * sizeof *xi), *di = dalloc(dev, sizeof i0);
    upload(dxi, xi, n * sizeof *xi);
    upload(di, i0, sizeof i0);
    KT_OK(KEEL_LAUNCH(k32, dim3((n + bd - 1) / bd, 1, 1), dim3(bd, 1, 1), 0, s, n, (const int *)dxi, di, di + 1,
                      (unsigned *)(di + 2), (unsigned *)(di + 3), di + 4));
    KT_OK(keel_stream_synchronize(s));
    int goti[5];
    download(goti, di, sizeof goti);
    static const char *what32[5] = {"min (int)", "max_i32", "min_u32", "max (unsigned)", "add_i32"};
    for (int j = 0; j < 5; j++)
        ck_assert_msg(goti[j] == ri[j], "%s32-bit atomic %s: %d (%#x), expected %d (%#x)", kt_where(), what32[j],
                      goti[j], (unsigned)goti[j], ri[j], (unsigned)ri[j]);
    KT_OK(keel_free(dxi));
    KT_OK(keel_free(di));
    free(xi);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

KT_DEVICE_TEST(atomic_cas_claims_each_slot_once_and_xchg_loses_nothing)
{
    keel_module_t *m = build_ok(dev, atomics_src, "atomics.kc", NULL, 0);
    keel_kernel_t *kc = kernel_of(m, "claim"), *kx = kernel_of(m, "exchange");
    keel_stream_t *s = stream_new(dev);
    const int bd = 64;
    /* As many slots as threads (every slot ends claimed) and more (some stay free). */
    const int cases[][2] = {{3001, 3001}, {2000, 5003}, {1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = cases[c][0], nslots = cases[c][1];
        int *slots = malloc(nslots * sizeof *slots), *won = malloc(n * sizeof *won);
        for (int i = 0; i < nslots; i++)
            slots[i] = -1;
        int *dslots = dalloc(dev, nslots * sizeof *slots), *dwon = dalloc(dev, n * sizeof *won);
        upload(dslots, slots, nslots * sizeof *slots);
        poison_bytes(dwon, n * sizeof *won);
        KT_OK(KEEL_LAUNCH(kc, dim3((n + bd - 1) / bd, 1, 1), dim3(bd, 1, 1), 0, s, n, nslots, dslots, dwon));
        KT_OK(keel_stream_synchronize(s));
        download(slots, dslots, nslots * sizeof *slots);
        download(won, dwon, n * sizeof *won);
        int claimed = 0;
        for (int i = 0; i < n; i++) {
            ck_assert_msg(won[i] >= 0 && won[i] < nslots, "%sn %d slots %d: thread %d claimed slot %d", kt_where(), n,
                          nslots, i, won[i]);
            ck_assert_msg(slots[won[i]] == i, "%sn %d slots %d: thread %d claimed slot %d, which holds %d", kt_where(),
                          n, nslots, i, won[i], slots[won[i]]);
        }
        for (int j = 0; j < nslots; j++) {
            ck_assert_msg(slots[j] >= -1 && slots[j] < n, "%sslot %d holds %d", kt_where(), j, slots[j]);
            if (slots[j] >= 0) {
                ck_assert_msg(won[slots[j]] == j, "%sslot %d holds thread %d, which claimed slot %d", kt_where(), j,
                              slots[j], won[slots[j]]);
                claimed++;
            }
        }
        ck_assert_msg(claimed == n, "%s%d slots claimed by %d threads", kt_where(), claimed, n);
        KT_OK(keel_free(dslots));
        KT_OK(keel_free(dwon));
        free(slots);
        free(won);
    }

    /* xchg: the values found, with the one left in the cell, are the values put, with the first. */
    const int n = 20011;
    float *x = malloc(n * sizeof *x), *fgot = malloc(n * sizeof *fgot);
    int *got = malloc(n * sizeof *got);
    char *seen = calloc(n + 1, 1);
    kt_fill_random_f32(x, n);
    int cell0 = -7;
    float fcell0 = 5.5f;
    float *dx = dalloc(dev, n * sizeof *x), *dfgot = dalloc(dev, n * sizeof *fgot),
          *dfcell = dalloc(dev, sizeof(float));
    int *dgot = dalloc(dev, n * sizeof *got), *dcell = dalloc(dev, sizeof(int));
    upload(dx, x, n * sizeof *x);
    upload(dcell, &cell0, sizeof cell0);
    upload(dfcell, &fcell0, sizeof fcell0);
    poison_bytes(dgot, n * sizeof *got);
    poison_nan_f32(dfgot, n);
    KT_OK(KEEL_LAUNCH(kx, dim3((n + bd - 1) / bd, 1, 1), dim3(bd, 1, 1), 0, s, n, (const float *)dx, dcell, dgot,
                      dfcell, dfgot));
    KT_OK(keel_stream_synchronize(s));
    int cell = 0;
    float fcell = 0;
    download(got, dgot, n * sizeof *got);
    download(fgot, dfgot, n * sizeof *fgot);
    download(&cell, dcell, sizeof cell);
    download(&fcell, dfcell, sizeof fcell);
    /* ints: {got} + {cell} == {-7} + {0..n-1}, each once */
    int found_init = 0;
    for (int i = 0; i <= n; i++) {
        int v = i < n ? got[i] : cell;
        if (v == cell0) {
            ck_assert_msg(!found_init, "%sxchg: the first value came back twice", kt_where());
            found_init = 1;
            continue;
        }
        ck_assert_msg(v >= 0 && v < n, "%sxchg: found %d (%#x), which no thread put", kt_where(), v, (unsigned)v);
        ck_assert_msg(!seen[v], "%sxchg: thread %d's value came back twice", kt_where(), v);
        seen[v] = 1;
    }
    ck_assert_msg(found_init, "%sxchg: the first value was lost", kt_where());
    /* floats: the same multiset, compared sorted */
    float *all = malloc((n + 1) * sizeof *all), *put = malloc((n + 1) * sizeof *put);
    memcpy(all, fgot, n * sizeof *fgot);
    all[n] = fcell;
    memcpy(put, x, n * sizeof *x);
    put[n] = fcell0;
    qsort(all, n + 1, sizeof *all, cmpf);
    qsort(put, n + 1, sizeof *put, cmpf);
    for (int i = 0; i <= n; i++)
        ck_assert_msg(memcmp(&all[i], &put[i], sizeof(float)) == 0,
                      "%sxchg_f32: the values found differ from the values put at sorted index %d: %.9g vs %.9g",
                      kt_where(), i, all[i], put[i]);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dfgot));
    KT_OK(keel_free(dfcell));
    KT_OK(keel_free(dgot));
    KT_OK(keel_free(dcell));
    free(x);
    free(fgot);
    free(got);
    free(seen);
    free(all);
    free(put);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== dynamic shared memory ==== */

static const char dyn_src[] =
    "/* Reverses each block's chunk through dynamic shared memory, and sums it in double\n"
    " * in the same allocation, past the floats. */\n"
    "keel_block_kernel void dyn_reverse(int n, const float *x, float *y, double *sums)\n"
    "{\n"
    "    float *sh = keel_dynamic_shared(float);\n"
    "    keel_threads {\n"
    "        int i = keel_global_x();\n"
    "        sh[keel_thread_x()] = i < n ? x[i] : 0.0f;\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        int i = keel_global_x(), bd = keel_block_dim_x();\n"
    "        if (i < n)\n"
    "            y[i] = sh[bd - 1 - keel_thread_x()];\n"
    "        if (keel_thread_x() == 0) {\n"
    "            double *d = (double *)(sh + ((bd + 1) / 2) * 2);\n"
    "            d[0] = 0.0;\n"
    "            for (int t = 0; t < bd; t++)\n"
    "                d[0] += sh[t];\n"
    "        }\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        if (keel_thread_x() == 0)\n"
    "            sums[keel_block_x()] = ((double *)(sh + ((keel_block_dim_x() + 1) / 2) * 2))[0];\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(dynamic_shared_memory_sized_at_launch)
{
    keel_module_t *m = build_ok(dev, dyn_src, "dyn.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "dyn_reverse");
    keel_stream_t *s = stream_new(dev);
    const int n = 5000, bds[] = {64, 192, 33, 512};
    for (size_t c = 0; c < sizeof bds / sizeof bds[0]; c++) {
        int bd = bds[c], nb = (n + bd - 1) / bd;
        size_t shared = ((bd + 1) / 2) * 2 * sizeof(float) + sizeof(double);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        double *sums = malloc(nb * sizeof *sums);
        kt_fill_random_f32(x, n);
        float *dx = dalloc(dev, n * sizeof *x), *dy = dalloc(dev, n * sizeof *y);
        double *dsums = dalloc(dev, nb * sizeof *sums);
        upload(dx, x, n * sizeof *x);
        poison_nan_f32(dy, n);
        poison_nan_f64(dsums, nb);
        KT_OK(KEEL_LAUNCH(k, dim3(nb, 1, 1), dim3(bd, 1, 1), shared, s, n, (const float *)dx, dy, dsums));
        KT_OK(keel_stream_synchronize(s));
        download(y, dy, n * sizeof *y);
        download(sums, dsums, nb * sizeof *sums);
        for (int b = 0; b < nb; b++) {
            double ref = 0.0;
            for (int t = 0; t < bd; t++) {
                long i = (long)b * bd + t, j = (long)b * bd + (bd - 1 - t);
                if (i < n)
                    ck_assert_msg(memcmp(&y[i], j < n ? &x[j] : &(float){0.0f}, sizeof(float)) == 0,
                                  "%sblock %d: y[%ld] = %.9g, expected %.9g", kt_where(), bd, i, y[i],
                                  j < n ? x[j] : 0.0f);
                ref += i < n ? x[i] : 0.0;
            }
            ck_assert_msg(fabs(sums[b] - ref) <= 1e-12 * (1 + fabs(ref)),
                          "%sblock %d: block %d's sum %.17g, expected %.17g", kt_where(), bd, b, sums[b], ref);
        }
        KT_OK(keel_free(dx));
        KT_OK(keel_free(dy));
        KT_OK(keel_free(dsums));
        free(x);
        free(y);
        free(sums);
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== private arrays across barriers ==== */

static const char private_src[] =
    "#define PN 4\n"
    "/* Each thread keeps PN values and its index in private memory through three\n"
    " * barriers, exchanging sums with its neighbours through shared memory. */\n"
    "keel_block_kernel void private_values(int n, const float *x, float *y)\n"
    "{\n"
    "    keel_shared float sh[128];\n"
    "    keel_private_array(float, v, PN);\n"
    "    keel_private(int, gi);\n"
    "    keel_threads {\n"
    "        int i = keel_global_x();\n"
    "        float s = 0.0f;\n"
    "        keel_priv(gi) = i;\n"
    "        for (int j = 0; j < PN; j++) {\n"
    "            keel_priv(v)[j] = i < n ? x[i * PN + j] : 0.0f;\n"
    "            s += keel_priv(v)[j];\n"
    "        }\n"
    "        sh[keel_thread_x()] = s;\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        float right = sh[(keel_thread_x() + 1) % keel_block_dim_x()];\n"
    "        for (int j = 0; j < PN; j++)\n"
    "            keel_priv(v)[j] = keel_priv(v)[j] * right + (float)j;\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        sh[keel_thread_x()] = keel_priv(v)[PN - 1];\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        float mirror = sh[keel_block_dim_x() - 1 - keel_thread_x()];\n"
    "        if (keel_priv(gi) < n)\n"
    "            for (int j = 0; j < PN; j++)\n"
    "                y[keel_priv(gi) * PN + j] = keel_priv(v)[j] - mirror;\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(private_array_values_live_across_barriers)
{
    keel_module_t *m = build_ok(dev, private_src, "private.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "private_values");
    keel_stream_t *s = stream_new(dev);
    enum { PN = 4 };
    const int cases[][2] = {{1000, 128}, {77, 32}, {128, 128}, {5, 7}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int n = cases[c][0], bd = cases[c][1], nb = (n + bd - 1) / bd;
        float *x = malloc((size_t)n * PN * sizeof *x), *y = malloc((size_t)n * PN * sizeof *y);
        double *ref = malloc((size_t)n * PN * sizeof *ref);
        kt_fill_random_f32(x, (size_t)n * PN);
        /* The reference, thread by thread, in double. */
        double *sum = calloc((size_t)nb * bd, sizeof *sum), *last = calloc((size_t)nb * bd, sizeof *last);
        double (*v)[PN] = calloc((size_t)nb * bd, sizeof *v);
        for (int g = 0; g < nb * bd; g++)
            for (int j = 0; j < PN; j++) {
                v[g][j] = g < n ? x[g * PN + j] : 0.0;
                sum[g] += v[g][j];
            }
        for (int g = 0; g < nb * bd; g++) {
            int b = g / bd, t = g % bd;
            double right = sum[b * bd + (t + 1) % bd];
            for (int j = 0; j < PN; j++)
                v[g][j] = v[g][j] * right + j;
            last[g] = v[g][PN - 1];
        }
        for (int g = 0; g < n; g++) {
            int b = g / bd, t = g % bd;
            for (int j = 0; j < PN; j++)
                ref[g * PN + j] = v[g][j] - last[b * bd + bd - 1 - t];
        }
        float *dx = dalloc(dev, (size_t)n * PN * sizeof *x), *dy = dalloc(dev, (size_t)n * PN * sizeof *y);
        upload(dx, x, (size_t)n * PN * sizeof *x);
        poison_nan_f32(dy, (size_t)n * PN);
        KT_OK(KEEL_LAUNCH(k, dim3(nb, 1, 1), dim3(bd, 1, 1), 0, s, n, (const float *)dx, dy));
        KT_OK(keel_stream_synchronize(s));
        download(y, dy, (size_t)n * PN * sizeof *y);
        /* Values of magnitude up to ~16 after a few float operations. */
        long bad = kt_check_f32(y, ref, (size_t)n * PN, 1e-5, 1e-5);
        ck_assert_msg(bad < 0, "%sn %d block %d: y[%ld] (thread %ld, value %ld) = %.9g, expected %.9g", kt_where(), n,
                      bd, bad, bad / PN, bad % PN, bad < 0 ? 0 : y[bad], bad < 0 ? 0 : ref[bad]);
        KT_OK(keel_free(dx));
        KT_OK(keel_free(dy));
        free(x);
        free(y);
        free(ref);
        free(sum);
        free(last);
        free(v);
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== sub-groups ==== */

static const char subgroup_src[] =
    "/* out holds, per thread at its global linear index: the sub-group sum, max and min,\n"
    " * the value of lane ^ (size / 2), the value of lane (lane + 3) % size, and the lane. */\n"
    "keel_kernel void subgroup_ops(const float *x, const int *xi, int *width, float *fout, int *iout)\n"
    "{\n"
    "    int bl = (keel_block_z() * keel_grid_dim_y() + keel_block_y()) * keel_grid_dim_x() + keel_block_x();\n"
    "    int nt = keel_block_dim_x() * keel_block_dim_y() * keel_block_dim_z();\n"
    "    int i = bl * nt + keel_thread_linear();\n"
    "    int n = nt * keel_grid_dim_x() * keel_grid_dim_y() * keel_grid_dim_z();\n"
    "    int w = keel_subgroup_size();\n"
    "    float v = x[i];\n"
    "    int vi = xi[i];\n"
    "    fout[i] = keel_subgroup_add(v);\n"
    "    fout[n + i] = keel_subgroup_max(v);\n"
    "    iout[i] = keel_subgroup_min(vi);\n"
    "    fout[2 * n + i] = keel_shfl_xor(v, w / 2);\n"
    "    iout[n + i] = keel_shfl(vi, (keel_subgroup_lane() + 3) % w);\n"
    "    iout[2 * n + i] = keel_subgroup_lane();\n"
    "    if (i == 0)\n"
    "        *width = w;\n"
    "}\n";

KT_DEVICE_TEST(subgroup_reductions_and_shuffles_follow_the_subgroup_width)
{
    keel_module_t *m = build_ok(dev, subgroup_src, "subgroup.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "subgroup_ops");
    keel_stream_t *s = stream_new(dev);
    const keel_dim3_t grids[] = {{7, 1, 1}, {2, 3, 1}};
    const keel_dim3_t blocks[] = {{256, 1, 1}, {16, 8, 2}};
    for (size_t c = 0; c < sizeof grids / sizeof grids[0]; c++) {
        keel_dim3_t g = grids[c], b = blocks[c];
        int nt = b.x * b.y * b.z, n = nt * g.x * g.y * g.z;
        float *x = malloc(n * sizeof *x), *fout = malloc(3 * n * sizeof *fout);
        int *xi = malloc(n * sizeof *xi), *iout = malloc(3 * n * sizeof *iout);
        kt_fill_random_f32(x, n);
        for (int i = 0; i < n; i++)
            xi[i] = (int)(uint32_t)kt_rand64();
        float *dx = dalloc(dev, n * sizeof *x), *dfout = dalloc(dev, 3 * n * sizeof *fout);
        int *dxi = dalloc(dev, n * sizeof *xi), *diout = dalloc(dev, 3 * n * sizeof *iout),
            *dw = dalloc(dev, sizeof(int));
        upload(dx, x, n * sizeof *x);
        upload(dxi, xi, n * sizeof *xi);
        poison_nan_f32(dfout, 3 * n);
        poison_bytes(diout, 3 * n * sizeof *iout);
        poison_bytes(dw, sizeof(int));
        KT_OK(KEEL_LAUNCH(k, g, b, 0, s, (const float *)dx, (const int *)dxi, dw, dfout, diout));
        KT_OK(keel_stream_synchronize(s));
        int w = 0;
        download(&w, dw, sizeof w);
        download(fout, dfout, 3 * n * sizeof *fout);
        download(iout, diout, 3 * n * sizeof *iout);
        ck_assert_msg(w >= 1 && w <= 128 && (w & (w - 1)) == 0, "%ssub-group size %d", kt_where(), w);
        if (kt_is_cpu(dev))
            ck_assert_msg(w == 1, "%sthe CPU's sub-group size is %d, expected 1", kt_where(), w);
        if (strcmp(backend_name(dev), "cuda") == 0)
            ck_assert_msg(w == 32, "%sa CUDA sub-group size of %d, expected 32", kt_where(), w);
        if (nt % w != 0) {
            printf("%sblock of %d threads is no multiple of the sub-group size %d: sub-group checks skipped\n",
                   kt_where(), nt, w);
        } else {
            for (int base = 0; base < n; base += w) {
                double sum = 0.0, mag = 0.0;
                float mx = -INFINITY;
                int mn = INT32_MAX;
                for (int l = 0; l < w; l++) {
                    sum += x[base + l];
                    mag += fabs(x[base + l]);
                    mx = x[base + l] > mx ? x[base + l] : mx;
                    mn = xi[base + l] < mn ? xi[base + l] : mn;
                }
                for (int l = 0; l < w; l++) {
                    int i = base + l;
                    ck_assert_msg(fabs(fout[i] - sum) <= 8 * 0x1p-24 * mag + 1e-30,
                                  "%sthread %d (lane %d of %d): sub-group sum %.9g, expected %.9g", kt_where(), i, l, w,
                                  fout[i], sum);
                    ck_assert_msg(fout[n + i] == mx, "%sthread %d (lane %d of %d): sub-group max %.9g, expected %.9g",
                                  kt_where(), i, l, w, fout[n + i], mx);
                    ck_assert_msg(iout[i] == mn, "%sthread %d (lane %d of %d): sub-group min %d, expected %d",
                                  kt_where(), i, l, w, iout[i], mn);
                    float xr = x[base + (l ^ (w / 2))];
                    ck_assert_msg(memcmp(&fout[2 * n + i], &xr, sizeof xr) == 0,
                                  "%sthread %d (lane %d of %d): shfl_xor(%d) gave %.9g, expected lane %d's %.9g",
                                  kt_where(), i, l, w, w / 2, fout[2 * n + i], l ^ (w / 2), xr);
                    int src = (l + 3) % w;
                    ck_assert_msg(iout[n + i] == xi[base + src],
                                  "%sthread %d (lane %d of %d): shfl(%d) gave %d, expected %d", kt_where(), i, l, w,
                                  src, iout[n + i], xi[base + src]);
                    ck_assert_msg(iout[2 * n + i] == l, "%sthread %d: lane %d, expected %d", kt_where(), i,
                                  iout[2 * n + i], l);
                }
            }
        }
        KT_OK(keel_free(dx));
        KT_OK(keel_free(dfout));
        KT_OK(keel_free(dxi));
        KT_OK(keel_free(diout));
        KT_OK(keel_free(dw));
        free(x);
        free(fout);
        free(xi);
        free(iout);
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== 16-bit floats ==== */

/* @p x rounded to nearest, ties to even, to @p p significant bits, with
 * exponents below @p emin (the format's smallest normal) giving subnormals:
 * exact in double for both formats. */
static double round_to_bits(double x, int p, int emin)
{
    if (x == 0.0 || !isfinite(x))
        return x;
    int e;
    (void)frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    int ex = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, ex - (p - 1));
    return nearbyint(x / q) * q; /* the default rounding mode: to nearest, ties to even */
}

/* The IEEE binary16 encoding of @p x rounded to nearest even. */
static uint16_t ref_half(double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (isnan(x))
        return sign | 0x7e00;
    double a = fabs(round_to_bits(x, 11, -14));
    if (a > 65504.0)
        return sign | 0x7c00; /* including everything from 65520 on */
    if (a < 0x1p-14)
        return sign | (uint16_t)(a * 0x1p24);
    int e;
    (void)frexp(a, &e);
    int E = e - 1;
    return sign | (uint16_t)((E + 15) << 10) | (uint16_t)(a / ldexp(1.0, E - 10) - 1024.0);
}

static double half_value(uint16_t h)
{
    double sign = h & 0x8000 ? -1.0 : 1.0;
    int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (e == 31)
        return mant ? NAN : sign * INFINITY;
    if (e == 0)
        return sign * mant * 0x1p-24;
    return sign * (1024 + mant) * ldexp(1.0, e - 25);
}

static uint16_t ref_bf16(double x)
{
    if (isnan(x))
        return (signbit(x) ? 0x8000 : 0) | 0x7fc0;
    double r = round_to_bits(x, 8, -126);
    if (fabs(r) > 0x1.fep127)
        r = copysign(INFINITY, r);
    float f = (float)r; /* exact: a bf16 value is a float */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static double bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float float_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Distance in representable steps between two 16-bit encodings of one sign-magnitude format. */
static int steps_apart(uint16_t a, uint16_t b)
{
    int oa = a & 0x8000 ? -(a & 0x7fff) : (a & 0x7fff), ob = b & 0x8000 ? -(b & 0x7fff) : (b & 0x7fff);
    return abs(oa - ob);
}

static const char f16_src[] =
    "keel_kernel void half_ops(int n, const float *xf, keel_half *to_half, const keel_half *xh, float *from_half,\n"
    "                          const keel_half *ha, const keel_half *hb, float a, keel_half *out)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        keel_store_half(to_half + i, xf[i]);\n"
    "        from_half[i] = keel_load_half(xh + i);\n"
    "        keel_store_half(out + i, keel_load_half(ha + i) * a + keel_load_half(hb + i));\n"
    "    }\n"
    "}\n"
    "keel_kernel void bf16_ops(int n, const float *xf, keel_bf16 *to_bf16, const keel_bf16 *xb, float *from_bf16,\n"
    "                          const keel_bf16 *ba, const keel_bf16 *bb, float a, keel_bf16 *out)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        to_bf16[i] = keel_float_to_bf16(xf[i]);\n"
    "        from_bf16[i] = keel_bf16_to_float(xb[i]);\n"
    "        keel_store_bf16(out + i, keel_load_bf16(ba + i) * a + keel_load_bf16(bb + i));\n"
    "    }\n"
    "}\n";

/* Runs half_ops or bf16_ops on @p n inputs: xf to 16 bits, xh from 16 bits,
 * and (ha * a + hb) computed in float. */
static void run_16bit(keel_device_t *dev, keel_kernel_t *k, int n, const float *xf, const uint16_t *xh,
                      const uint16_t *ha, const uint16_t *hb, float a, uint16_t *to16, float *from16, uint16_t *out)
{
    keel_stream_t *s = stream_new(dev);
    float *dxf = dalloc(dev, n * sizeof(float)), *dfrom = dalloc(dev, n * sizeof(float));
    uint16_t *dto = dalloc(dev, n * 2), *dxh = dalloc(dev, n * 2), *dha = dalloc(dev, n * 2), *dhb = dalloc(dev, n * 2),
             *dout = dalloc(dev, n * 2);
    upload(dxf, xf, n * sizeof(float));
    upload(dxh, xh, n * 2);
    upload(dha, ha, n * 2);
    upload(dhb, hb, n * 2);
    poison_bytes(dto, n * 2);
    poison_bytes(dout, n * 2);
    poison_nan_f32(dfrom, n);
    KT_OK(KEEL_LAUNCH(k, dim3((n + 127) / 128, 1, 1), dim3(128, 1, 1), 0, s, n, (const float *)dxf, dto,
                      (const uint16_t *)dxh, dfrom, (const uint16_t *)dha, (const uint16_t *)dhb, a, dout));
    KT_OK(keel_stream_synchronize(s));
    download(to16, dto, n * 2);
    download(from16, dfrom, n * sizeof(float));
    download(out, dout, n * 2);
    KT_OK(keel_free(dxf));
    KT_OK(keel_free(dfrom));
    KT_OK(keel_free(dto));
    KT_OK(keel_free(dxh));
    KT_OK(keel_free(dha));
    KT_OK(keel_free(dhb));
    KT_OK(keel_free(dout));
    KT_OK(keel_stream_destroy(s));
}

static void check_half(keel_device_t *dev, const char *const *opts, int nopts, const char *what)
{
    keel_module_t *m = build_ok(dev, f16_src, "f16.kc", opts, nopts);
    keel_kernel_t *k = kernel_of(m, "half_ops");
    /* Edges: the largest half and what rounds to it or past it, subnormal
     * halves and their ties, the smallest normal, zeros, infinities, NaNs. */
    static const float edges[] = {65504.0f, -65504.0f, 65519.996f, 65520.0f, -65520.0f, 65505.0f, 65535.0f, 65536.0f,
                                  0x1p-24f, -0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1.4p-23f, 0x1.8p-23f,
                                  0x1p-14f, 0x1.ff8p-15f, 0x1.ffcp-15f, 0x1.ffep-15f, 0x1p-26f, 1e-10f, 0.0f, -0.0f,
                                  1.0f, 1.00048828125f, 1.00146484375f, 2049.0f, 2051.0f, 1e10f, -1e10f, INFINITY,
                                  -INFINITY, NAN};
    static const uint16_t hedges[] = {0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7d00,
                                      0xfe01, 0x0000, 0x8000, 0x3c00, 0x0200};
    const int ne = sizeof edges / sizeof edges[0], nhe = sizeof hedges / sizeof hedges[0], n = 30011;
    float *xf = malloc(n * sizeof *xf), *from = malloc(n * sizeof *from);
    uint16_t *xh = malloc(n * 2), *ha = malloc(n * 2), *hb = malloc(n * 2), *to = malloc(n * 2), *out = malloc(n * 2);
    for (int i = 0; i < n; i++) {
        if (i < ne) {
            xf[i] = edges[i];
        } else if (i % 3 == 0) {
            /* a float of any exponent near half's range, with a random mantissa */
            uint32_t e = 127 - 27 + (uint32_t)(kt_rand64() % 45), mant = (uint32_t)kt_rand64() & 0x7fffff;
            xf[i] = float_of_bits((uint32_t)(kt_rand64() & 1) << 31 | e << 23 | mant);
        } else if (i % 3 == 1) {
            /* a float with 13 bits of mantissa: many exact ties for the half */
            uint32_t e = 127 - 26 + (uint32_t)(kt_rand64() % 43),
                     mant = ((uint32_t)kt_rand64() & 0x7ff) << 12 | 1u << 12;
            xf[i] = float_of_bits((uint32_t)(kt_rand64() & 1) << 31 | e << 23 | (mant & 0x7fffff));
        } else {
            xf[i] = float_of_bits((uint32_t)kt_rand64()); /* anything */
        }
        xh[i] = i < nhe ? hedges[i] : (uint16_t)kt_rand64();
        /* finite operands for the arithmetic */
        do
            ha[i] = (uint16_t)kt_rand64();
        while ((ha[i] & 0x7c00) == 0x7c00);
        do
            hb[i] = (uint16_t)kt_rand64();
        while ((hb[i] & 0x7c00) == 0x7c00);
    }
    float a;
    kt_fill_random_f32(&a, 1);
    a = 1.0f + a / 4.0f;
    run_16bit(dev, k, n, xf, xh, ha, hb, a, to, from, out);
    for (int i = 0; i < n; i++) {
        uint16_t want = ref_half(xf[i]);
        if (isnan(xf[i]))
            ck_assert_msg((to[i] & 0x7c00) == 0x7c00 && (to[i] & 0x3ff) != 0,
                          "%s%sfloat %#x (NaN) to half gave %#06x, no NaN", kt_where(), what, bits_of_float(xf[i]),
                          to[i]);
        else
            ck_assert_msg(to[i] == want, "%s%sfloat %.9g (%#x) to half gave %#06x (%.9g), expected %#06x (%.9g)",
                          kt_where(), what, xf[i], bits_of_float(xf[i]), to[i], half_value(to[i]), want,
                          half_value(want));
        double v = half_value(xh[i]);
        if (isnan(v))
            ck_assert_msg(isnan(from[i]), "%s%shalf %#06x (NaN) to float gave %.9g", kt_where(), what, xh[i], from[i]);
        else
            ck_assert_msg(from[i] == v && !signbit(from[i]) == !signbit(v),
                          "%s%shalf %#06x to float gave %.9g (%a), expected %.9g (%a)", kt_where(), what, xh[i],
                          from[i], from[i], v, v);
        /* computed in float (perhaps fused), then rounded: within one step of
         * the halves that the exact value, give or take the float error,
         * rounds to (the error can span several halves when the sum cancels) */
        double exact = half_value(ha[i]) * a + half_value(hb[i]);
        double ferr = 2 * 0x1p-24 * (fabs(half_value(ha[i]) * a) + fabs(half_value(hb[i])));
        uint16_t r = ref_half(exact), lo = ref_half(exact - ferr), hi = ref_half(exact + ferr);
        int span = steps_apart(lo, hi);
        ck_assert_msg(steps_apart(out[i], lo) <= span + 1 && steps_apart(out[i], hi) <= span + 1,
                      "%s%shalf %.9g * %.9g + %.9g gave %#06x (%.9g), expected %#06x (%.9g)", kt_where(), what,
                      half_value(ha[i]), a, half_value(hb[i]), out[i], half_value(out[i]), r, half_value(r));
    }
    free(xf);
    free(from);
    free(xh);
    free(ha);
    free(hb);
    free(to);
    free(out);
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(half_conversions_round_to_nearest_even)
{
    check_half(dev, NULL, 0, "");
    /* The CPU header's own conversions, for C compilers without _Float16. */
    static const char *const no_float16[] = {"-U__FLT16_MANT_DIG__"};
    if (kt_is_cpu(dev))
        check_half(dev, no_float16, 1, "without _Float16: ");
}

KT_DEVICE_TEST(bf16_conversions_round_to_nearest_even)
{
    keel_module_t *m = build_ok(dev, f16_src, "f16.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "bf16_ops");
    /* NaNs whose payload lies only in the low 16 bits (truncation would make
     * them infinities), ties both ways, the largest float (rounds to
     * infinity), float subnormals. */
    static const uint32_t edges[] = {0x7f800001, 0xff800001, 0x7fc00000, 0x7f800000, 0xff800000, 0x7f7fffff,
                                     0x7f7f7fff, 0x7f7f8000, 0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f807fff,
                                     0x00008000, 0x00018000, 0x00000001, 0x807fffff, 0x00800000, 0x00000000,
                                     0x80000000, 0x3f800000};
    static const uint16_t bedges[] = {0x7f81, 0xff81, 0x7fc0, 0x7f80, 0xff80, 0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f};
    const int ne = sizeof edges / sizeof edges[0], nbe = sizeof bedges / sizeof bedges[0], n = 30011;
    float *xf = malloc(n * sizeof *xf), *from = malloc(n * sizeof *from);
    uint16_t *xb = malloc(n * 2), *ba = malloc(n * 2), *bb = malloc(n * 2), *to = malloc(n * 2), *out = malloc(n * 2);
    for (int i = 0; i < n; i++) {
        if (i < ne)
            xf[i] = float_of_bits(edges[i]);
        else if (i % 2)
            xf[i] = float_of_bits((uint32_t)kt_rand64()); /* any float, NaNs included */
        else /* many exact ties: 9 bits of mantissa and the half bit */
            xf[i] = float_of_bits(((uint32_t)kt_rand64() & 0xffff0000u) | 0x8000u);
        xb[i] = i < nbe ? bedges[i] : (uint16_t)kt_rand64();
        /* finite operands of moderate exponent for the arithmetic */
        ba[i] = (uint16_t)((ba[i] & 0x807f) | ((0x60 + kt_rand64() % 0x40) << 7));
        bb[i] = (uint16_t)(((uint16_t)kt_rand64() & 0x807f) | ((0x60 + kt_rand64() % 0x40) << 7));
    }
    float a;
    kt_fill_random_f32(&a, 1);
    a = 1.0f + a / 4.0f;
    run_16bit(dev, k, n, xf, xb, ba, bb, a, to, from, out);
    for (int i = 0; i < n; i++) {
        if (isnan(xf[i])) {
            ck_assert_msg((to[i] & 0x7f80) == 0x7f80 && (to[i] & 0x7f) != 0,
                          "%sfloat %#x (NaN) to bf16 gave %#06x, no NaN", kt_where(), bits_of_float(xf[i]), to[i]);
        } else {
            uint16_t want = ref_bf16(xf[i]);
            ck_assert_msg(to[i] == want, "%sfloat %.9g (%#x) to bf16 gave %#06x (%.9g), expected %#06x (%.9g)",
                          kt_where(), xf[i], bits_of_float(xf[i]), to[i], bf16_value(to[i]), want, bf16_value(want));
        }
        double v = bf16_value(xb[i]);
        if (isnan(v))
            ck_assert_msg(isnan(from[i]), "%sbf16 %#06x (NaN) to float gave %.9g", kt_where(), xb[i], from[i]);
        else
            ck_assert_msg(bits_of_float(from[i]) == (uint32_t)xb[i] << 16,
                          "%sbf16 %#06x to float gave %.9g (%#x), expected %.9g", kt_where(), xb[i], from[i],
                          bits_of_float(from[i]), v);
        /* as for halves: within one step of what the exact value, give or
         * take the float error, rounds to */
        double exact = bf16_value(ba[i]) * a + bf16_value(bb[i]);
        double ferr = 2 * 0x1p-24 * (fabs(bf16_value(ba[i]) * a) + fabs(bf16_value(bb[i])));
        uint16_t r = ref_bf16(exact), lo = ref_bf16(exact - ferr), hi = ref_bf16(exact + ferr);
        int span = steps_apart(lo, hi);
        ck_assert_msg(steps_apart(out[i], lo) <= span + 1 && steps_apart(out[i], hi) <= span + 1,
                      "%sbf16 %.9g * %.9g + %.9g gave %#06x (%.9g), expected %#06x (%.9g)",
                      kt_where(), bf16_value(ba[i]), a, bf16_value(bb[i]), out[i], bf16_value(out[i]), r,
                      bf16_value(r));
    }
    free(xf);
    free(from);
    free(xb);
    free(ba);
    free(bb);
    free(to);
    free(out);
    KT_OK(keel_module_unload(m));
}

/* ==== math ==== */

static const char math_src[] =
    "/* x in [-1, 1); each function gets its argument scaled by a power of two (exact). */\n"
    "#define NF 16\n"
    "keel_kernel void math(int n, const float *x, const float *y, float *out)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        float v = x[i], w = y[i], pos = fabsf(v) * 16.0f + 0.0625f;\n"
    "        out[0 * n + i] = expf(v * 8.0f);\n"
    "        out[1 * n + i] = sinf(v * 4.0f);\n"
    "        out[2 * n + i] = sqrtf(fabsf(v) * 16.0f);\n"
    "        out[3 * n + i] = tanhf(v * 4.0f);\n"
    "        out[4 * n + i] = logf(pos);\n"
    "        out[5 * n + i] = cosf(v * 4.0f);\n"
    "        out[6 * n + i] = keel_fast_expf(v * 8.0f);\n"
    "        out[7 * n + i] = keel_fast_exp2f(v * 8.0f);\n"
    "        out[8 * n + i] = keel_fast_logf(pos);\n"
    "        out[9 * n + i] = keel_fast_log2f(pos);\n"
    "        out[10 * n + i] = keel_fast_sinf(v * 2.0f);\n"
    "        out[11 * n + i] = keel_fast_cosf(v * 2.0f);\n"
    "        out[12 * n + i] = keel_fast_powf(pos, w * 2.0f);\n"
    "        out[13 * n + i] = keel_fast_tanhf(v * 4.0f);\n"
    "        out[14 * n + i] = keel_fast_divf(v, 1.0f + fabsf(w));\n"
    "        out[15 * n + i] = keel_fast_rsqrtf(pos);\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(math_functions_match_libm_in_double)
{
    enum { NF = 16 };
    /* name, relative and absolute tolerance. The precise functions: a few
     * ulp (CUDA documents 2 for expf, sinf, tanhf; glibc's vector versions
     * 4). The fast ones: CUDA's intrinsics (__expf's error grows with |x|,
     * __sinf's is absolute, 2^-21.4 on [-pi, pi]; tanh.approx.f32 is good to
     * 2^-11 relative). */
    static const struct {
        const char *name;
        double rtol, atol;
    } f[NF] = {
        {"expf(8x)", 0x1p-20, 0},       {"sinf(4x)", 0, 0x1p-21},          {"sqrtf(16|x|)", 0x1p-22, 0},
        {"tanhf(4x)", 0x1p-20, 0x1p-24}, {"logf(16|x|+1/16)", 0x1p-21, 0x1p-22}, {"cosf(4x)", 0, 0x1p-21},
        {"keel_fast_expf(8x)", 0x1p-16, 0}, {"keel_fast_exp2f(8x)", 0x1p-18, 0}, {"keel_fast_logf", 0x1p-19, 0x1p-19},
        {"keel_fast_log2f", 0x1p-19, 0x1p-19}, {"keel_fast_sinf(2x)", 0, 0x1p-19}, {"keel_fast_cosf(2x)", 0, 0x1p-19},
        {"keel_fast_powf", 0x1p-14, 0},   {"keel_fast_tanhf(4x)", 0x1p-10, 0x1p-20}, {"keel_fast_divf", 0x1p-20, 0},
        {"keel_fast_rsqrtf", 0x1p-20, 0},
    };
    keel_module_t *m = build_ok(dev, math_src, "math.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "math");
    keel_stream_t *s = stream_new(dev);
    const int n = 20000;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *out = malloc((size_t)NF * n * sizeof *out);
    kt_fill_random_f32(x, n);
    kt_fill_random_f32(y, n);
    x[0] = 0.0f, x[1] = -1.0f, x[2] = 0x1.fffffep-1f, x[3] = -0x1p-20f, x[4] = 0.5f;
    float *dx = dalloc(dev, n * sizeof *x), *dy = dalloc(dev, n * sizeof *y),
          *dout = dalloc(dev, (size_t)NF * n * sizeof *out);
    upload(dx, x, n * sizeof *x);
    upload(dy, y, n * sizeof *y);
    poison_nan_f32(dout, (size_t)NF * n);
    KT_OK(KEEL_LAUNCH(k, dim3((n + 255) / 256, 1, 1), dim3(256, 1, 1), 0, s, n, (const float *)dx, (const float *)dy,
                      dout));
    KT_OK(keel_stream_synchronize(s));
    download(out, dout, (size_t)NF * n * sizeof *out);
    for (int i = 0; i < n; i++) {
        double v = x[i], w = y[i], pos = (double)(fabsf(x[i]) * 16.0f + 0.0625f);
        const double ref[NF] = {exp(v * 8), sin(v * 4), sqrt(fabs(v) * 16), tanh(v * 4), log(pos), cos(v * 4),
                                exp(v * 8), exp2(v * 8), log(pos), log2(pos), sin(v * 2), cos(v * 2),
                                pow(pos, w * 2), tanh(v * 4), v / (1 + fabs(w)), 1 / sqrt(pos)};
        for (int j = 0; j < NF; j++) {
            double got = out[(size_t)j * n + i];
            double tol = f[j].atol + f[j].rtol * fabs(ref[j]);
            ck_assert_msg(fabs(got - ref[j]) <= tol,
                          "%s%s at x = %.9g (y = %.9g): %.9g, expected %.9g (error %.3g, tolerance %.3g)", kt_where(),
                          f[j].name, v, w, got, ref[j], fabs(got - ref[j]), tol);
        }
    }
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    KT_OK(keel_free(dout));
    free(x);
    free(y);
    free(out);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== many arguments of mixed sizes ==== */

static const char args_src[] =
    "/* Sixteen parameters of every size, pointers between small ones. */\n"
    "keel_kernel void mixed(char c, const int *p, short s, unsigned char uc, long long ll, float f,\n"
    "                       unsigned short us, double d, int8_t i8, unsigned u, keel_half h, int i,\n"
    "                       unsigned long long ull, uint16_t w, double *dout, long long *iout)\n"
    "{\n"
    "    if (keel_global_x() != 0)\n"
    "        return;\n"
    "    iout[0] = c; iout[1] = p[0]; iout[2] = s; iout[3] = uc; iout[4] = ll; iout[5] = us;\n"
    "    iout[6] = i8; iout[7] = u; iout[8] = h; iout[9] = i; iout[10] = (long long)ull; iout[11] = w;\n"
    "    dout[0] = f; dout[1] = d;\n"
    "    unsigned long long sum = 0;\n"
    "    for (int k = 0; k < 12; k++)\n"
    "        sum = sum * 1000003ull + (unsigned long long)iout[k];\n"
    "    iout[12] = (long long)sum;\n"
    "    dout[2] = (double)f * 3.0 + d;\n"
    "}\n";

KT_DEVICE_TEST(many_arguments_of_mixed_sizes_arrive_intact)
{
    keel_module_t *m = build_ok(dev, args_src, "args.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "mixed");
    keel_stream_t *s = stream_new(dev);
    for (int round = 0; round < 2; round++) {
        char c = (char)rand_int(1, 127);
        int pv = (int)(uint32_t)kt_rand64();
        short sh = (short)rand_int(-32768, 32767);
        unsigned char uc = (unsigned char)rand_int(128, 255);
        long long ll = (long long)kt_rand64();
        float f;
        kt_fill_random_f32(&f, 1);
        f *= 1000.0f;
        unsigned short us = (unsigned short)rand_int(32768, 65535);
        double d = (double)(int64_t)kt_rand64() / 3.0;
        int8_t i8 = (int8_t)rand_int(-128, -1);
        unsigned u = (unsigned)kt_rand64() | 0x80000000u;
        uint16_t h = (uint16_t)kt_rand64();
        int i = (int)(uint32_t)kt_rand64();
        unsigned long long ull = kt_rand64() | (1ull << 63);
        uint16_t w = (uint16_t)kt_rand64();
        int *dp = dalloc(dev, sizeof pv);
        double *dd = dalloc(dev, 3 * sizeof(double));
        long long *di = dalloc(dev, 13 * sizeof(long long));
        upload(dp, &pv, sizeof pv);
        poison_nan_f64(dd, 3);
        poison_bytes(di, 13 * sizeof(long long));
        const int *cdp = dp;
        if (round == 0) {
            KT_OK(KEEL_LAUNCH(k, dim3(1, 1, 1), dim3(32, 1, 1), 0, s, c, cdp, sh, uc, ll, f, us, d, i8, u, h,
                              i, ull, w, dd, di));
        } else {
            /* The same through keel_launch with the arrays written out. */
            void *args[16] = {&c, &cdp, &sh, &uc, &ll, &f, &us, &d, &i8, &u, &h, &i, &ull, &w, &dd, &di};
            size_t sizes[16] = {1, sizeof cdp, 2, 1, 8, 4, 2, 8, 1, 4, 2, 4, 8, 2, sizeof dd, sizeof di};
            KT_OK(keel_launch(k, dim3(1, 1, 1), dim3(32, 1, 1), 0, s, 16, args, sizes));
        }
        KT_OK(keel_stream_synchronize(s));
        long long got[13];
        double dgot[3];
        download(got, di, sizeof got);
        download(dgot, dd, sizeof dgot);
        const long long want[12] = {c, pv, sh, uc, ll, us, i8, u, h, i, (long long)ull, w};
        static const char *names[12] = {"char", "*const int *", "short", "unsigned char", "long long",
                                        "unsigned short", "int8_t", "unsigned", "keel_half", "int",
                                        "unsigned long long", "uint16_t"};
        unsigned long long sum = 0;
        for (int j = 0; j < 12; j++) {
            ck_assert_msg(got[j] == want[j], "%sround %d: the %s argument arrived as %lld, expected %lld", kt_where(),
                          round, names[j], got[j], want[j]);
            sum = sum * 1000003ull + (unsigned long long)want[j];
        }
        ck_assert_msg(got[12] == (long long)sum, "%sround %d: checksum %#llx, expected %#llx", kt_where(), round,
                      (unsigned long long)got[12], sum);
        ck_assert_msg(dgot[0] == f && dgot[1] == d, "%sround %d: float %.9g and double %.17g arrived as %.9g and %.17g",
                      kt_where(), round, f, d, dgot[0], dgot[1]);
        ck_assert_msg(fabs(dgot[2] - ((double)f * 3.0 + d)) <= 1e-15 * fabs((double)f * 3.0 + d) + 1e-300,
                      "%sround %d: f * 3 + d = %.17g, expected %.17g", kt_where(), round, dgot[2], (double)f * 3.0 + d);
        KT_OK(keel_free(dp));
        KT_OK(keel_free(dd));
        KT_OK(keel_free(di));
    }
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== the target macros ==== */

static const char target_src[] =
    "keel_kernel void target(int *out)\n"
    "{\n"
    "    out[0] = KEEL_TARGET_CPU;\n"
    "    out[1] = KEEL_TARGET_CUDA;\n"
    "    out[2] = KEEL_TARGET_HIP;\n"
    "    out[3] = KEEL_TARGET_GPU;\n"
    "#if KEEL_TARGET_CPU\n"
    "    out[4] = 100;\n"
    "#elif KEEL_TARGET_CUDA\n"
    "    out[4] = 200;\n"
    "#elif KEEL_TARGET_HIP\n"
    "    out[4] = 300;\n"
    "#endif\n"
    "    out[5] = KEEL_KERNEL_LANG_VERSION;\n"
    "}\n";

KT_DEVICE_TEST(target_macros_name_the_device_backend)
{
    keel_module_t *m = build_ok(dev, target_src, "target.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "target");
    keel_stream_t *s = stream_new(dev);
    int out[6], *d = dalloc(dev, sizeof out);
    poison_bytes(d, sizeof out);
    KT_OK(KEEL_LAUNCH(k, dim3(1, 1, 1), dim3(1, 1, 1), 0, s, d));
    KT_OK(keel_stream_synchronize(s));
    download(out, d, sizeof out);
    const char *b = backend_name(dev);
    int cpu = strcmp(b, "cpu") == 0, cuda = strcmp(b, "cuda") == 0, hip = strcmp(b, "hip") == 0;
    /* The hip backend on HIP's NVIDIA platform compiles with NVRTC: CUDA code. */
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    if (hip && strcmp(p.vendor, "NVIDIA") == 0)
        cuda = 1, hip = 0;
    const int want[6] = {cpu, cuda, hip, cuda || hip, cpu ? 100 : cuda ? 200 : hip ? 300 : -1, 1};
    static const char *names[6] = {"KEEL_TARGET_CPU", "KEEL_TARGET_CUDA", "KEEL_TARGET_HIP", "KEEL_TARGET_GPU",
                                   "the #if branch", "KEEL_KERNEL_LANG_VERSION"};
    for (int j = 0; j < 6; j++)
        ck_assert_msg(out[j] == want[j], "%son the %s backend %s is %d, expected %d", kt_where(), b, names[j], out[j],
                      want[j]);
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== what the translator must see through ==== */

/* Comments and strings that mention keel_kernel or hold braces, a helper
 * function, a macro, parameters split over lines with comments among them,
 * keel_restrict, a kernel of no parameters, and a block kernel after all of
 * them: every kernel is found with its parameters, and runs. */
static const char tricky_src[] =
    "/* keel_kernel void not_a_kernel(int x) { */\n"
    "// keel_block_kernel void nor_this(void)\n"
    "#define SCALE(v) ((v) * 2.0f) /* keel_kernel void in_a_macro(int) */\n"
    "keel_device float twice(float v) { return SCALE(v); }\n"
    "keel_device int count_braces(const char *s)\n"
    "{ int n = 0; for (; *s; s++) n += *s == '{' || *s == '}'; return n; }\n"
    "keel_kernel void nothing(void)\n"
    "{\n"
    "}\n"
    "keel_kernel void tricky(int n, /* the count, } */\n"
    "                        const float *keel_restrict x, // input {\n"
    "                        float *keel_restrict y,\n"
    "                        int *braces)\n"
    "{\n"
    "    const char *text = \"} keel_kernel void fake(int q) {\";\n"
    "    char open = '{';\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = twice(x[i]);\n"
    "    if (i == 0)\n"
    "        *braces = count_braces(text) * 10 + (open == '{');\n"
    "}\n"
    "keel_block_kernel void after(int n, float *y)\n"
    "{\n"
    "    keel_threads {\n"
    "        if (keel_global_x() < n)\n"
    "            y[keel_global_x()] += 1.0f;\n"
    "    }\n"
    "}\n";

KT_DEVICE_TEST(translator_sees_through_comments_strings_and_helpers)
{
    keel_module_t *m = build_ok(dev, tricky_src, "tricky.kc", NULL, 0);
    static const char *absent[] = {"not_a_kernel", "nor_this", "in_a_macro", "fake", "twice", "count_braces"};
    for (size_t j = 0; j < sizeof absent / sizeof absent[0]; j++) {
        keel_kernel_t *k = KT_SENTINEL;
        KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_kernel(m, absent[j], &k));
        ck_assert_ptr_eq(k, KT_SENTINEL);
    }
    keel_kernel_t *kn = kernel_of(m, "nothing"), *kt = kernel_of(m, "tricky"), *ka = kernel_of(m, "after");
    keel_stream_t *s = stream_new(dev);
    const int n = 300;
    float x[300], y[300];
    kt_fill_random_f32(x, n);
    float *dx = dalloc(dev, sizeof x), *dy = dalloc(dev, sizeof y);
    int *db = dalloc(dev, sizeof(int)), braces = -1;
    upload(dx, x, sizeof x);
    poison_nan_f32(dy, n);
    poison_bytes(db, sizeof(int));
    KT_OK(keel_launch(kn, dim3(2, 1, 1), dim3(3, 1, 1), 0, s, 0, NULL, NULL));
    int one = 1;
    void *extra[1] = {&one};
    size_t extra_size[1] = {sizeof one};
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch(kn, dim3(1, 1, 1), dim3(1, 1, 1), 0, s, 1, extra, extra_size));
    KT_DETAIL_HAS("nothing");
    KT_OK(KEEL_LAUNCH(kt, dim3((n + 63) / 64, 1, 1), dim3(64, 1, 1), 0, s, n, (const float *)dx, dy, db));
    KT_OK(KEEL_LAUNCH(ka, dim3((n + 127) / 128, 1, 1), dim3(128, 1, 1), 0, s, n, dy));
    KT_OK(keel_stream_synchronize(s));
    download(y, dy, sizeof y);
    download(&braces, db, sizeof braces);
    for (int i = 0; i < n; i++)
        ck_assert_msg(y[i] == x[i] * 2.0f + 1.0f, "%sy[%d] = %.9g, expected %.9g", kt_where(), i, y[i],
                      x[i] * 2.0f + 1.0f);
    ck_assert_msg(braces == 21, "%sthe string and character literals read %d, expected 21", kt_where(), braces);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    KT_OK(keel_free(db));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== compile errors ==== */

/* The error is on line 7 of the source. */
static const char bad_src[] =
    "/* bad.kc */\n"                                    /* 1 */
    "keel_kernel void fine(int n, float *y)\n"          /* 2 */
    "{\n"                                               /* 3 */
    "    int i = keel_global_x();\n"                    /* 4 */
    "    if (i < n)\n"                                  /* 5 */
    "        y[i] = 1.0f;\n"                            /* 6 */
    "    y[0] = ;\n"                                    /* 7 */
    "}\n";                                              /* 8 */

/* A second kernel after a translated one, with its parameters on several
 * lines: the error is on line 12. */
static const char bad2_src[] =
    "keel_block_kernel void first(int n,\n"             /* 1 */
    "                             float *y)\n"          /* 2 */
    "{\n"                                               /* 3 */
    "    keel_shared float t[4];\n"                     /* 4 */
    "    keel_threads { t[keel_thread_x() % 4] = 1.0f; y[0] = t[0] + n; }\n" /* 5 */
    "}\n"                                               /* 6 */
    "keel_kernel void second(int n,\n"                  /* 7 */
    "                        const float *x,\n"         /* 8 */
    "                        float *y)\n"               /* 9 */
    "{\n"                                               /* 10 */
    "    int i = keel_global_x();\n"                    /* 11 */
    "    if (i < n) y[i] = x[i] + undeclared_thing;\n"  /* 12 */
    "}\n";                                              /* 13 */

KT_DEVICE_TEST(compile_errors_name_the_source_and_line)
{
    keel_module_t *m = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build(dev, bad_src, "bad.kc", NULL, 0, &m));
    ck_assert_ptr_eq(m, KT_SENTINEL);
    ck_assert_msg(log_names_line(keel_last_error(), "bad.kc", 7), "%sthe log does not name bad.kc line 7:\n%s",
                  kt_where(), keel_last_error());
    KT_DETAIL_HAS("keel_module_build");
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build(dev, bad2_src, "two kernels.kc", NULL, 0, &m));
    ck_assert_ptr_eq(m, KT_SENTINEL);
    ck_assert_msg(log_names_line(keel_last_error(), "two kernels.kc", 12),
                  "%sthe log does not name \"two kernels.kc\" line 12:\n%s", kt_where(), keel_last_error());
    KT_DETAIL_HAS("undeclared_thing");
    /* Without a name, the log says kernel.kc. */
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build(dev, bad_src, NULL, NULL, 0, &m));
    ck_assert_msg(log_names_line(keel_last_error(), "kernel.kc", 7), "%sthe log does not name kernel.kc line 7:\n%s",
                  kt_where(), keel_last_error());
    ck_assert_ptr_eq(m, KT_SENTINEL);
    /* The same from a file: the log names the path. */
    char dir[] = "/tmp/keel-klt-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/bad.kc", dir);
    FILE *fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs(bad_src, fp);
    fclose(fp);
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build_file(dev, path, NULL, 0, &m));
    ck_assert_msg(log_names_line(keel_last_error(), path, 7), "%sthe log does not name %s line 7:\n%s", kt_where(),
                  path, keel_last_error());
    ck_assert_ptr_eq(m, KT_SENTINEL);
    /* And a good file builds and runs. */
    fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fputs(vadd_src, fp);
    fclose(fp);
    KT_OK(keel_module_build_file(dev, path, NULL, 0, &m));
    keel_kernel_t *k = kernel_of(m, "vadd");
    keel_stream_t *s = stream_new(dev);
    float a[3], b[3], c[3];
    kt_fill_random_f32(a, 3);
    kt_fill_random_f32(b, 3);
    float *d = dalloc(dev, 9 * sizeof(float));
    upload(d, a, sizeof a);
    upload(d + 3, b, sizeof b);
    poison_nan_f32(d + 6, 3);
    KT_OK(KEEL_LAUNCH(k, dim3(1, 1, 1), dim3(4, 1, 1), 0, s, 3, (const float *)d, (const float *)(d + 3), d + 6));
    KT_OK(keel_stream_synchronize(s));
    download(c, d + 6, sizeof c);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(c[i] == a[i] + b[i], "%sthe kernel built from %s: c[%d] = %g, expected %g", kt_where(), path, i,
                      c[i], a[i] + b[i]);
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
    unlink(path);
    rmdir(dir);
}

/* The language's rules, each refused at compile time with its message and the user's line. */
KT_DEVICE_TEST(language_rules_are_enforced_at_compile_time)
{
    static const struct {
        const char *what, *src, *message;
        unsigned line;
    } cases[] = {
        {"keel_barrier() inside keel_threads",
         "keel_block_kernel void f(float *y)\n"
         "{\n"
         "    keel_threads {\n"
         "        y[keel_thread_x()] = 1.0f;\n"
         "        keel_barrier();\n"
         "    }\n"
         "}\n",
         "keel_barrier() belongs at block level of a keel_block_kernel, outside keel_threads", 5},
        {"keel_barrier() in a thread kernel",
         "keel_kernel void f(float *y)\n"
         "{\n"
         "    y[keel_global_x()] = 1.0f;\n"
         "    keel_barrier();\n"
         "}\n",
         "keel_barrier() belongs at block level of a keel_block_kernel, outside keel_threads", 4},
        {"keel_shared in a thread kernel",
         "keel_kernel void f(float *y)\n"
         "{\n"
         "    keel_shared float t[32];\n"
         "    t[0] = 1.0f;\n"
         "    y[keel_global_x()] = t[0];\n"
         "}\n",
         "keel_shared belongs at block level of a keel_block_kernel, outside keel_threads", 3},
        {"keel_shared inside keel_threads",
         "keel_block_kernel void f(float *y)\n"
         "{\n"
         "    keel_threads {\n"
         "        keel_shared float t[32];\n"
         "        t[0] = 1.0f;\n"
         "        y[keel_global_x()] = t[0];\n"
         "    }\n"
         "}\n",
         "keel_shared belongs at block level of a keel_block_kernel, outside keel_threads", 4},
        {"keel_private in a thread kernel",
         "keel_kernel void f(float *y)\n"
         "{\n"
         "\n"
         "    keel_private(float, acc);\n"
         "    y[keel_global_x()] = 1.0f;\n"
         "}\n",
         "keel_private belongs at block level of a keel_block_kernel, outside keel_threads", 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        keel_module_t *m = KT_SENTINEL;
        keel_clear_error();
        keel_status_t st = keel_module_build(dev, cases[c].src, "rule.kc", NULL, 0, &m);
        ck_assert_msg(st == KEEL_ERROR_COMPILE_FAILED, "%s%s: %s, expected KEEL_ERROR_COMPILE_FAILED (%s)", kt_where(),
                      cases[c].what, keel_status_name(st), keel_last_error());
        ck_assert_ptr_eq(m, KT_SENTINEL);
        ck_assert_msg(strstr(keel_last_error(), cases[c].message) != NULL, "%s%s: the log lacks \"%s\":\n%s",
                      kt_where(), cases[c].what, cases[c].message, keel_last_error());
        ck_assert_msg(log_names_line(keel_last_error(), "rule.kc", cases[c].line),
                      "%s%s: the log does not name rule.kc line %u:\n%s", kt_where(), cases[c].what, cases[c].line,
                      keel_last_error());
    }
}

/* ==== bad arguments ==== */

KT_DEVICE_TEST(build_rejects_bad_arguments)
{
    keel_module_t *m = KT_SENTINEL;
    const char *opts[2] = {"-DX=1", NULL};
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build(dev, NULL, "null.kc", NULL, 0, &m));
    KT_DETAIL_HAS("source is NULL");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build(dev, vadd_src, "vadd.kc", NULL, 0, NULL));
    KT_DETAIL_HAS("output pointer module is NULL");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build(dev, vadd_src, "vadd.kc", opts, -1, &m));
    KT_DETAIL_HAS("-1 options");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build(dev, vadd_src, "vadd.kc", NULL, 1, &m));
    KT_DETAIL_HAS("1 options");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build(dev, vadd_src, "vadd.kc", opts, 2, &m));
    KT_DETAIL_HAS("options[1] is NULL");
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_build(NULL, vadd_src, "vadd.kc", NULL, 0, &m));
    /* No kernel: an empty source, and one of a device function only. */
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build(dev, "", "empty.kc", NULL, 0, &m));
    KT_DETAIL_HAS("no kernel");
    KT_DETAIL_HAS("empty.kc");
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED,
            keel_module_build(dev, "keel_device float twice(float x) { return 2 * x; }\n", "helper.kc", NULL, 0, &m));
    KT_DETAIL_HAS("no kernel");
    ck_assert_ptr_eq(m, KT_SENTINEL);
    /* keel_module_build_file */
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_build_file(dev, "/nonexistent/keel/no-such-kernel.kc", NULL, 0, &m));
    KT_DETAIL_HAS("/nonexistent/keel/no-such-kernel.kc");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build_file(dev, NULL, NULL, 0, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build_file(dev, "x.kc", NULL, 0, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_build_file(dev, "x.kc", opts, -3, &m));
    ck_assert_ptr_eq(m, KT_SENTINEL);
    /* A built module knows its kernels and no others. */
    m = build_ok(dev, vadd_src, "vadd.kc", NULL, 0);
    keel_kernel_t *k = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_kernel(m, "vsub", &k));
    KT_DETAIL_HAS("vsub");
    ck_assert_ptr_eq(k, KT_SENTINEL);
    k = kernel_of(m, "vadd");
    keel_kernel_t *again = NULL;
    KT_OK(keel_module_get_kernel(m, "vadd", &again));
    ck_assert_ptr_eq(k, again);
    ck_assert_str_eq(keel_kernel_name(k), "vadd");
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(checked_launches_refuse_wrong_arguments)
{
    keel_module_t *m = build_ok(dev, vadd_src, "vadd.kc", NULL, 0);
    keel_kernel_t *k = kernel_of(m, "vadd");
    keel_stream_t *s = stream_new(dev);
    float *d = dalloc(dev, 64 * sizeof(float));
    poison_nan_f32(d, 64);
    int n = 16;
    const float *a = d, *b = d + 16;
    float *c = d + 32;
    const keel_dim3_t one = {1, 1, 1}, blk = {16, 1, 1};
    /* A count short and a count long. */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, one, blk, 0, s, n, a, b));
    KT_DETAIL_HAS("vadd");
    KT_DETAIL_HAS("takes 4 arguments");
    KT_DETAIL_HAS("passes 3");
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, one, blk, 0, s, n, a, b, c, c));
    KT_DETAIL_HAS("vadd");
    KT_DETAIL_HAS("passes 5");
    /* A size_t where an int is declared, a double where a pointer... */
    size_t big_n = 16;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, one, blk, 0, s, big_n, a, b, c));
    KT_DETAIL_HAS("vadd");
    KT_DETAIL_HAS("argument 1 (n) is 4 bytes; the launch passes 8");
    short tiny = 1;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, KEEL_LAUNCH(k, one, blk, 0, s, n, a, tiny, c));
    KT_DETAIL_HAS("argument 3 (b) is 8 bytes; the launch passes 2");
    /* The same through keel_launch. */
    void *args[4] = {&n, &a, &b, &c};
    size_t sizes[4] = {sizeof n, sizeof a, sizeof b, sizeof c};
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch(k, one, blk, 0, s, 2, args, sizes));
    KT_DETAIL_HAS("vadd");
    KT_DETAIL_HAS("passes 2");
    sizes[3] = 4;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch(k, one, blk, 0, s, 4, args, sizes));
    KT_DETAIL_HAS("vadd");
    KT_DETAIL_HAS("argument 4 (c)");
    sizes[3] = sizeof c;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch(k, one, blk, 0, s, 4, args, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch(k, one, blk, 0, s, 4, NULL, sizes));
    void *holes[4] = {&n, NULL, &b, &c};
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch(k, one, blk, 0, s, 4, holes, sizes));
    KT_DETAIL_HAS("args[1] is NULL");
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch(NULL, one, blk, 0, s, 4, args, sizes));
    /* Nothing ran: c is still poisoned. A correct launch then runs. */
    KT_OK(keel_stream_synchronize(s));
    float h[64];
    download(h, d, sizeof h);
    for (int i = 32; i < 48; i++)
        ck_assert_msg(isnan(h[i]), "%sa refused launch wrote c[%d]", kt_where(), i - 32);
    KT_OK(keel_launch(k, one, blk, 0, s, 4, args, sizes));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

/* ==== the CPU backend's compiler and cache ==== */

/* Saves and restores the variables the CPU compiler reads at each compile. */
static struct saved_env {
    int saved;
    char *cc, *cache, *cflags;
} saved_env;

static char *dup_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static void save_env(void)
{
    saved_env.cc = dup_env("KEEL_CPU_CC");
    saved_env.cache = dup_env("KEEL_CACHE_DIR");
    saved_env.cflags = dup_env("KEEL_CPU_CFLAGS");
    saved_env.saved = 1;
}

static void restore_one(const char *name, char **v)
{
    if (*v)
        setenv(name, *v, 1);
    else
        unsetenv(name);
    free(*v);
    *v = NULL;
}

/* Also the teardown of the test case: a failed test leaves the environment as it found it. */
static void restore_env(void)
{
    if (!saved_env.saved)
        return;
    restore_one("KEEL_CPU_CC", &saved_env.cc);
    restore_one("KEEL_CACHE_DIR", &saved_env.cache);
    restore_one("KEEL_CPU_CFLAGS", &saved_env.cflags);
    saved_env.saved = 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_tree(const char *dir)
{
    (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

/* Builds vadd and runs it on 5 elements: a module from the cache must work too. */
static void build_and_run(keel_device_t *dev, const char *const *opts, int nopts, const char *what)
{
    keel_module_t *m = NULL;
    keel_status_t st = keel_module_build(dev, vadd_src, "cached.kc", opts, nopts, &m);
    ck_assert_msg(st == KEEL_OK, "%s%s: %s (%s)", kt_where(), what, keel_status_name(st), keel_last_error());
    keel_kernel_t *k = kernel_of(m, "vadd");
    keel_stream_t *s = stream_new(dev);
    float a[5], b[5], c[5];
    kt_fill_random_f32(a, 5);
    kt_fill_random_f32(b, 5);
    float *d = dalloc(dev, 15 * sizeof(float));
    upload(d, a, sizeof a);
    upload(d + 5, b, sizeof b);
    poison_nan_f32(d + 10, 5);
    KT_OK(KEEL_LAUNCH(k, dim3(1, 1, 1), dim3(8, 1, 1), 0, s, 5, (const float *)d, (const float *)(d + 5), d + 10));
    KT_OK(keel_stream_synchronize(s));
    download(c, d + 10, sizeof c);
    for (int i = 0; i < 5; i++)
        ck_assert_msg(c[i] == a[i] + b[i], "%s%s: c[%d] = %g, expected %g", kt_where(), what, i, c[i], a[i] + b[i]);
    KT_OK(keel_free(d));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_module_unload(m));
}

KT_DEVICE_TEST(cpu_cache_runs_the_compiler_once_per_source_and_options)
{
    if (!kt_is_cpu(dev)) {
        printf("%sSKIP cpu_cache_runs_the_compiler_once_per_source_and_options: the compiler cache counted here is "
               "the CPU backend's\n",
               kt_where());
        return;
    }
    char dir[] = "/tmp/keel-klt-cache-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char wrapper[256], logfile[256], cache[256];
    snprintf(wrapper, sizeof wrapper, "%s/cc-wrapper", dir);
    snprintf(logfile, sizeof logfile, "%s/cc.log", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    FILE *f = fopen(wrapper, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\necho \"$*\" >> '%s'\nexec cc \"$@\"\n", logfile);
    fclose(f);
    ck_assert_int_eq(chmod(wrapper, 0755), 0);
    save_env();
    setenv("KEEL_CPU_CC", wrapper, 1);
    setenv("KEEL_CACHE_DIR", cache, 1);

    build_and_run(dev, NULL, 0, "first build");
    ck_assert_msg(count_lines(logfile) == 1, "%sthe compiler ran %d times for the first build", kt_where(),
                  count_lines(logfile));
    build_and_run(dev, NULL, 0, "the same source again");
    ck_assert_msg(count_lines(logfile) == 1, "%sthe compiler ran again for a cached source (%d runs)", kt_where(),
                  count_lines(logfile));
    const char *foo1[] = {"-DFOO=1"}, *foo2[] = {"-DFOO=2"};
    build_and_run(dev, foo1, 1, "with -DFOO=1");
    ck_assert_msg(count_lines(logfile) == 2, "%sa changed option: %d compiler runs, expected 2", kt_where(),
                  count_lines(logfile));
    build_and_run(dev, foo1, 1, "with -DFOO=1 again");
    ck_assert_msg(count_lines(logfile) == 2, "%sthe same option again: %d compiler runs, expected 2", kt_where(),
                  count_lines(logfile));
    build_and_run(dev, foo2, 1, "with -DFOO=2");
    ck_assert_msg(count_lines(logfile) == 3, "%s-DFOO=2: %d compiler runs, expected 3", kt_where(),
                  count_lines(logfile));
    /* KEEL_CPU_CFLAGS is part of the key too. */
    setenv("KEEL_CPU_CFLAGS", saved_env.cflags && strcmp(saved_env.cflags, "-O1") == 0 ? "-O2" : "-O1", 1);
    build_and_run(dev, NULL, 0, "with other KEEL_CPU_CFLAGS");
    ck_assert_msg(count_lines(logfile) == 4, "%sother KEEL_CPU_CFLAGS: %d compiler runs, expected 4", kt_where(),
                  count_lines(logfile));
    if (saved_env.cflags)
        setenv("KEEL_CPU_CFLAGS", saved_env.cflags, 1);
    else
        unsetenv("KEEL_CPU_CFLAGS");
    build_and_run(dev, NULL, 0, "the first build's flags again");
    ck_assert_msg(count_lines(logfile) == 4, "%sback to the default flags: %d compiler runs, expected 4", kt_where(),
                  count_lines(logfile));
    /* An empty KEEL_CACHE_DIR turns the cache off: the compiler runs every time. */
    setenv("KEEL_CACHE_DIR", "", 1);
    build_and_run(dev, NULL, 0, "without a cache");
    build_and_run(dev, NULL, 0, "without a cache, again");
    ck_assert_msg(count_lines(logfile) == 6, "%swithout a cache: %d compiler runs, expected 6", kt_where(),
                  count_lines(logfile));
    restore_env();
    remove_tree(dir);
}

KT_DEVICE_TEST(cpu_without_a_c_compiler_says_to_set_keel_cpu_cc)
{
    if (!kt_is_cpu(dev)) {
        printf("%sSKIP cpu_without_a_c_compiler_says_to_set_keel_cpu_cc: only the CPU backend runs a C compiler\n",
               kt_where());
        return;
    }
    save_env();
    setenv("KEEL_CPU_CC", "/nonexistent/cc", 1);
    keel_module_t *m = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build(dev, vadd_src, "vadd.kc", NULL, 0, &m));
    KT_DETAIL_HAS("KEEL_CPU_CC");
    KT_DETAIL_HAS("/nonexistent/cc");
    ck_assert_ptr_eq(m, KT_SENTINEL);
    /* A name that is not on PATH, too. */
    setenv("KEEL_CPU_CC", "keel-no-such-compiler-cc", 1);
    KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_build(dev, vadd_src, "vadd.kc", NULL, 0, &m));
    KT_DETAIL_HAS("KEEL_CPU_CC");
    ck_assert_ptr_eq(m, KT_SENTINEL);
    restore_env();
    /* With the compiler back, the same source builds. */
    m = build_ok(dev, vadd_src, "vadd.kc", NULL, 0);
    KT_OK(keel_module_unload(m));
}

static Suite *suite(void)
{
    Suite *s = suite_create("kernel-lang");
    TCase *tc = kt_tcase_create("kernels", 300);
    kt_add_device_test(tc, vector_add_guards_the_last_block);
    kt_add_device_test(tc, kernel_parameters_are_listed);
    kt_add_device_test(tc, grids_and_blocks_in_two_and_three_dimensions);
    kt_add_device_test(tc, tiled_matmul_matches_a_double_reference);
    kt_add_device_test(tc, block_reduction_writes_per_block_partial_sums);
    kt_add_device_test(tc, declared_block_size_is_the_only_launch);
    kt_add_device_test(tc, atomic_histogram_counts_every_key);
    kt_add_device_test(tc, atomic_float_and_double_sums_min_and_max);
    kt_add_device_test(tc, atomic_integer_add_min_max_of_32_and_64_bits);
    kt_add_device_test(tc, atomic_cas_claims_each_slot_once_and_xchg_loses_nothing);
    kt_add_device_test(tc, dynamic_shared_memory_sized_at_launch);
    kt_add_device_test(tc, private_array_values_live_across_barriers);
    kt_add_device_test(tc, subgroup_reductions_and_shuffles_follow_the_subgroup_width);
    kt_add_device_test(tc, half_conversions_round_to_nearest_even);
    kt_add_device_test(tc, bf16_conversions_round_to_nearest_even);
    kt_add_device_test(tc, math_functions_match_libm_in_double);
    kt_add_device_test(tc, many_arguments_of_mixed_sizes_arrive_intact);
    kt_add_device_test(tc, target_macros_name_the_device_backend);
    kt_add_device_test(tc, translator_sees_through_comments_strings_and_helpers);
    suite_add_tcase(s, tc);
    TCase *te = kt_tcase_create("errors", 300);
    tcase_add_checked_fixture(te, NULL, restore_env);
    kt_add_device_test(te, compile_errors_name_the_source_and_line);
    kt_add_device_test(te, language_rules_are_enforced_at_compile_time);
    kt_add_device_test(te, build_rejects_bad_arguments);
    kt_add_device_test(te, checked_launches_refuse_wrong_arguments);
    kt_add_device_test(te, cpu_cache_runs_the_compiler_once_per_source_and_options);
    kt_add_device_test(te, cpu_without_a_c_compiler_says_to_set_keel_cpu_cc);
    suite_add_tcase(s, te);
    return s;
}

#if defined(__SANITIZE_ADDRESS__)
#define KLT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KLT_ASAN 1
#endif
#endif

int main(int argc, char **argv)
{
#ifdef KLT_ASAN
    /* In an AddressSanitizer build the CPU kernels are instrumented too (the
     * runtime is in this process already), so that a kernel reading or
     * writing past a buffer fails the run instead of passing by luck. */
    if (getenv("KEEL_CPU_CFLAGS") == NULL)
        setenv("KEEL_CPU_CFLAGS",
               "-O2 -march=native -fno-math-errno -fno-trapping-math -fsanitize=address -fno-omit-frame-pointer", 1);
#endif
    /* A cache of this run's own (the multi-device rerun, a child, inherits it). */
    char dir[] = "/tmp/keel-klt-run-XXXXXX";
    int own_cache = getenv("KEEL_CACHE_DIR") == NULL && mkdtemp(dir) != NULL;
    if (own_cache)
        setenv("KEEL_CACHE_DIR", dir, 1);
    int rc = kt_main(argc, argv, suite(), 1, 1);
    if (own_cache)
        remove_tree(dir);
    return rc;
}
