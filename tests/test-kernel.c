/* SPDX-License-Identifier: MIT */
/* test-kernel: modules, kernel lookup, launches (grid, block, shared memory,
 * arguments), CPU kernels from a shared object and registered by pointer, and
 * the error paths of every function of keel/kernel.h.
 *
 * Each test runs on every device and every source of kernels the device
 * offers: on the CPU backend the module tests/kernels/keel-test-kernels.so and
 * the same descriptors registered by pointer; on a GPU backend the GPU twins
 * below, compiled at run time. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "fixture.h"
/* The CPU kernels, compiled in a second time so they can be registered by pointer. */
#include "kernels/cpu_kernels.c"

#define MODULE_PATH KT_BUILDDIR "/tests/kernels/.libs/keel-test-kernels.so"

static const char gpu_source[] =
    "struct kt_params { double scale; int offset; char tag[3]; };\n"
    "extern \"C\" __global__ void saxpy(int n, float a, const float *x, float *y)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }\n"
    "extern \"C\" __global__ void write_indices(unsigned *out)\n"
    "{\n"
    "  unsigned long bl = blockIdx.x + (unsigned long)gridDim.x * (blockIdx.y + (unsigned long)gridDim.y * blockIdx.z);\n"
    "  unsigned long nt = (unsigned long)blockDim.x * blockDim.y * blockDim.z;\n"
    "  unsigned long tl = threadIdx.x + (unsigned long)blockDim.x * (threadIdx.y + (unsigned long)blockDim.y * threadIdx.z);\n"
    "  unsigned *o = out + (bl * nt + tl) * 12;\n"
    "  o[0] = blockIdx.x; o[1] = blockIdx.y; o[2] = blockIdx.z;\n"
    "  o[3] = threadIdx.x; o[4] = threadIdx.y; o[5] = threadIdx.z;\n"
    "  o[6] = gridDim.x; o[7] = gridDim.y; o[8] = gridDim.z;\n"
    "  o[9] = blockDim.x; o[10] = blockDim.y; o[11] = blockDim.z;\n"
    "}\n"
    "extern \"C\" __global__ void reverse_and_sum(int n, const float *x, float *y, double *sums)\n"
    "{\n"
    "  extern __shared__ float sh[];\n"
    "  unsigned bd = blockDim.x; long base = (long)blockIdx.x * bd; unsigned t = threadIdx.x;\n"
    "  sh[t] = base + t < n ? x[base + t] : 0.0f;\n"
    "  __syncthreads();\n"
    "  if (base + t < n) y[base + t] = sh[bd - 1 - t];\n"
    "  if (t == 0) { double s = 0.0; for (unsigned k = 0; k < bd; k++) s += sh[k]; sums[blockIdx.x] = s; }\n"
    "}\n"
    "extern \"C\" __global__ void struct_arg(kt_params p, int n, double *y)\n"
    "{ long i = (long)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = p.scale * (double)i + p.offset + p.tag[1]; }\n"
    "__device__ unsigned long long kt_count;\n"
    "extern \"C\" __global__ void count_threads(void) { atomicAdd(&kt_count, 1ull); }\n"
    "extern \"C\" __global__ void read_count(unsigned long long *out) { *out = atomicExch(&kt_count, 0ull); }\n";

enum { SRC_MODULE, SRC_POINTER, SRC_COMPILED, NSRC };
static const char *src_names[NSRC] = {"module file", "registered by pointer", "compiled at run time"};

enum { K_SAXPY, K_INDICES, K_REVERSE, K_STRUCT, K_COUNT, K_READ, NK };
static const char *kernel_names[NK] = {"saxpy", "write_indices", "reverse_and_sum", "struct_arg", "count_threads",
                                       "read_count"};
static const keel_cpu_kernel_desc_t *descs[NK] = {&keel_cpu_kernel_saxpy, &keel_cpu_kernel_write_indices,
                                                  &keel_cpu_kernel_reverse_and_sum, &keel_cpu_kernel_struct_arg,
                                                  &keel_cpu_kernel_count_threads, &keel_cpu_kernel_read_count};

struct kset {
    int src;
    keel_module_t *module;
    keel_kernel_t *k[NK];
};

/* Loads the kernels of one source; returns 0 when the device does not offer it. */
static int kset_get(keel_device_t *dev, int src, struct kset *ks)
{
    memset(ks, 0, sizeof *ks);
    ks->src = src;
    int cpu = kt_is_cpu(dev);
    if ((src == SRC_COMPILED) == cpu)
        return 0;
    if (src == SRC_POINTER) {
        for (int i = 0; i < NK; i++)
            KT_OK(keel_kernel_register_cpu(dev, descs[i], &ks->k[i]));
        return 1;
    }
    if (src == SRC_MODULE) {
        KT_OK(keel_module_load_file(dev, MODULE_PATH, &ks->module));
    } else {
        keel_status_t s = keel_module_compile(dev, gpu_source, "test_kernels.cu", NULL, 0, &ks->module);
        if (kt_unsupported(dev, KT_RUNTIME_COMPILE, s))
            return 0;
        ck_assert_msg(s == KEEL_OK, "%scompiling the test kernels: %s (%s)", kt_where(), keel_status_name(s),
                      keel_last_error());
    }
    for (int i = 0; i < NK; i++)
        KT_OK(keel_module_get_kernel(ks->module, kernel_names[i], &ks->k[i]));
    return 1;
}

static void kset_put(struct kset *ks)
{
    if (ks->module) {
        KT_OK(keel_module_unload(ks->module));
    } else {
        for (int i = 0; i < NK; i++)
            if (ks->k[i])
                KT_OK(keel_kernel_release(ks->k[i]));
    }
}

#define FOR_EACH_SOURCE(dev, ks)                                                                        \
    for (int src_ = 0; src_ < NSRC; src_++)                                                            \
        for (struct kset ks, *once_ = (kset_get((dev), src_, &ks) ? &ks : NULL); once_; kset_put(once_), once_ = NULL)

static keel_dim3_t dim3(unsigned x, unsigned y, unsigned z)
{
    keel_dim3_t d = {x, y, z};
    return d;
}

static void run_saxpy(keel_device_t *dev, keel_kernel_t *k, int n, const char *what)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    const int guard = 64;
    float *x = malloc(n * sizeof(float)), *y = malloc((n + guard) * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    kt_fill_random_f32(x, n);
    kt_fill_random_f32(y, n);
    kt_poison(y + n, guard * sizeof(float));
    float a;
    kt_fill_random_f32(&a, 1);
    a *= 3.0f;
    for (int i = 0; i < n; i++)
        ref[i] = (double)a * x[i] + y[i];
    float *dx = NULL, *dy = NULL;
    KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dx));
    KT_OK(keel_malloc(dev, (n + guard) * sizeof(float), (void **)&dy));
    KT_OK(keel_memcpy_async(dx, x, n * sizeof(float), s));
    KT_OK(keel_memcpy_async(dy, y, (n + guard) * sizeof(float), s));
    KT_OK(kt_launch_saxpy(k, s, n, a, dx, dy));
    KT_OK(keel_memcpy_async(y, dy, (n + guard) * sizeof(float), s));
    KT_OK(keel_stream_synchronize(s));
    long bad = kt_check_f32(y, ref, n, 1e-6, 1e-6);
    ck_assert_msg(bad < 0, "%s%s: y[%ld] = %.9g, expected %.9g (n %d)", kt_where(), what, bad, bad < 0 ? 0 : y[bad],
                  bad < 0 ? 0 : ref[bad], n);
    const unsigned char *tail = (const unsigned char *)(y + n);
    for (int i = 0; i < guard * (int)sizeof(float); i++)
        ck_assert_msg(tail[i] == KT_POISON_BYTE, "%s%s: wrote past n at byte %d", kt_where(), what, i);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    KT_OK(keel_stream_destroy(s));
    free(x);
    free(y);
    free(ref);
}

KT_DEVICE_TEST(saxpy_matches_a_float64_reference)
{
    FOR_EACH_SOURCE(dev, ks)
    {
        const int sizes[] = {1, 63, 64, 65, 10007};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            run_saxpy(dev, ks.k[K_SAXPY], sizes[i], src_names[ks.src]);
    }
    /* The fixture's kernel (the one other suites use) too. */
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    run_saxpy(dev, k, 4099, "fixture saxpy");
    kt_kernel_put(k);
}

KT_DEVICE_TEST(every_thread_sees_its_block_and_thread_indices)
{
    const keel_dim3_t grids[] = {{3, 2, 2}, {1, 1, 1}, {7, 1, 1}, {1, 5, 3}};
    const keel_dim3_t blocks[] = {{4, 3, 2}, {1, 1, 1}, {33, 1, 1}, {2, 1, 4}};
    FOR_EACH_SOURCE(dev, ks)
    {
        for (size_t c = 0; c < sizeof grids / sizeof grids[0]; c++) {
            keel_dim3_t g = grids[c], b = blocks[c];
            size_t nthreads = (size_t)g.x * g.y * g.z * b.x * b.y * b.z;
            size_t bytes = nthreads * 12 * sizeof(unsigned);
            unsigned *out = malloc(bytes), *d = NULL;
            KT_OK(keel_malloc(dev, bytes, (void **)&d));
            KT_OK(keel_memset(d, KT_POISON_BYTE, bytes));
            keel_stream_t *s = NULL;
            KT_OK(keel_device_default_stream(dev, &s));
            void *args[] = {&d};
            KT_OK(keel_launch_kernel(ks.k[K_INDICES], g, b, 0, s, args));
            KT_OK(keel_stream_synchronize(s));
            KT_OK(keel_memcpy(out, d, bytes));
            size_t gid = 0;
            for (unsigned bz = 0; bz < g.z; bz++)
                for (unsigned by = 0; by < g.y; by++)
                    for (unsigned bx = 0; bx < g.x; bx++)
                        for (unsigned tz = 0; tz < b.z; tz++)
                            for (unsigned ty = 0; ty < b.y; ty++)
                                for (unsigned tx = 0; tx < b.x; tx++, gid++) {
                                    const unsigned want[12] = {bx, by, bz, tx, ty, tz, g.x, g.y, g.z, b.x, b.y, b.z};
                                    for (int f = 0; f < 12; f++)
                                        ck_assert_msg(out[gid * 12 + f] == want[f],
                                                      "%s%s: grid %ux%ux%u block %ux%ux%u: thread %zu field %d is %#x, "
                                                      "expected %u",
                                                      kt_where(), src_names[ks.src], g.x, g.y, g.z, b.x, b.y, b.z, gid,
                                                      f, out[gid * 12 + f], want[f]);
                                }
            KT_OK(keel_free(d));
            free(out);
        }
    }
}

KT_DEVICE_TEST(dynamic_shared_memory_is_per_block)
{
    const int n = 1000;
    const unsigned bd = 64;
    const unsigned nb = (n + bd - 1) / bd;
    FOR_EACH_SOURCE(dev, ks)
    {
        float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        double *sums = malloc(nb * sizeof(double));
        kt_fill_random_f32(x, n);
        float *dx = NULL, *dy = NULL;
        double *dsums = NULL;
        KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dx));
        KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dy));
        KT_OK(keel_malloc(dev, nb * sizeof(double), (void **)&dsums));
        KT_OK(keel_memcpy(dx, x, n * sizeof(float)));
        KT_OK(keel_memset(dy, KT_POISON_BYTE, n * sizeof(float)));
        KT_OK(keel_memset(dsums, KT_POISON_BYTE, nb * sizeof(double)));
        keel_stream_t *s = NULL;
        KT_OK(keel_stream_create(dev, 0, 0, &s));
        int nn = n;
        void *args[] = {&nn, &dx, &dy, &dsums};
        KT_OK(keel_launch_kernel(ks.k[K_REVERSE], dim3(nb, 1, 1), dim3(bd, 1, 1), bd * sizeof(float), s, args));
        KT_OK(keel_memcpy_async(y, dy, n * sizeof(float), s));
        KT_OK(keel_memcpy_async(sums, dsums, nb * sizeof(double), s));
        KT_OK(keel_stream_synchronize(s));
        for (unsigned b = 0; b < nb; b++) {
            double ref = 0.0;
            for (unsigned t = 0; t < bd; t++) {
                long i = (long)b * bd + t, j = (long)b * bd + (bd - 1 - t);
                if (i < n)
                    ck_assert_msg(y[i] == (j < n ? x[j] : 0.0f), "%s%s: y[%ld] = %g, expected %g", kt_where(),
                                  src_names[ks.src], i, y[i], j < n ? x[j] : 0.0f);
                ref += i < n ? x[i] : 0.0;
            }
            ck_assert_msg(fabs(sums[b] - ref) <= 1e-9 * (1 + fabs(ref)), "%s%s: block %u sum %.17g, expected %.17g",
                          kt_where(), src_names[ks.src], b, sums[b], ref);
        }
        KT_OK(keel_stream_destroy(s));
        KT_OK(keel_free(dx));
        KT_OK(keel_free(dy));
        KT_OK(keel_free(dsums));
        free(x);
        free(y);
        free(sums);
    }
}

/* The launch copies the argument values: changing (or reusing) the caller's
 * variables before the kernel runs must not change what it computes. A gate
 * holds the stream so the kernel cannot have run before the change. Under a
 * tool that makes launches synchronous (compute-sanitizer) the launch would
 * wait for the gate forever, so a timer opens it after 2 s; if it had to,
 * the kernel ran before the change and the run says the property was not
 * observed. */
KT_DEVICE_TEST(argument_values_are_copied_at_launch)
{
    const int n = 777;
    FOR_EACH_SOURCE(dev, ks)
    {
        float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        double *ref = malloc(n * sizeof(double));
        kt_fill_random_f32(x, n);
        kt_fill_random_f32(y, n);
        float *dx = NULL, *dy = NULL, *decoy = NULL;
        KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dx));
        KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dy));
        KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&decoy));
        KT_OK(keel_memcpy(dx, x, n * sizeof(float)));
        KT_OK(keel_memcpy(dy, y, n * sizeof(float)));
        KT_OK(keel_memset(decoy, 0, n * sizeof(float)));
        keel_stream_t *s = NULL;
        KT_OK(keel_stream_create(dev, 0, 0, &s));
        kt_gate_t *g = kt_gate_new();
        KT_OK(kt_gate_enqueue(g, s));
        ck_assert_msg(kt_gate_open_later(g, 2000) == 0, "%scannot start the gate's timer", kt_where());
        int nn = n;
        float a = 1.5f;
        float *px = dx, *py = dy;
        void *args[] = {&nn, &a, &px, &py};
        KT_OK(keel_launch_kernel(ks.k[K_SAXPY], dim3((n + 31) / 32, 1, 1), dim3(32, 1, 1), 0, s, args));
        if (kt_gate_is_open(g))
            printf("%s%s: the launch returned only after the gate's timer opened it (launches are synchronous "
                   "here, as under compute-sanitizer): argument copying was not observed\n",
                   kt_where(), src_names[ks.src]);
        /* Reuse every variable, and the array of pointers, for something else. */
        nn = 3;
        a = -100.0f;
        px = decoy;
        py = decoy;
        int other_n = 1;
        args[0] = &other_n;
        kt_gate_open(g);
        KT_OK(keel_stream_synchronize(s));
        for (int i = 0; i < n; i++)
            ref[i] = 1.5 * x[i] + y[i];
        KT_OK(keel_memcpy(y, dy, n * sizeof(float)));
        long bad = kt_check_f32(y, ref, n, 1e-6, 1e-6);
        ck_assert_msg(bad < 0, "%s%s: y[%ld] = %g, expected %g: the kernel saw changed arguments", kt_where(),
                      src_names[ks.src], bad, bad < 0 ? 0 : y[bad], bad < 0 ? 0 : ref[bad]);
        float d0 = -1;
        KT_OK(keel_memcpy(&d0, decoy, sizeof d0));
        ck_assert_msg(d0 == 0.0f, "%s%s: the kernel wrote through a pointer changed after launch", kt_where(),
                      src_names[ks.src]);
        KT_OK(keel_stream_destroy(s));
        kt_gate_free(g);
        KT_OK(keel_free(dx));
        KT_OK(keel_free(dy));
        KT_OK(keel_free(decoy));
        free(x);
        free(y);
        free(ref);
    }
}

KT_DEVICE_TEST(struct_argument_passes_by_value)
{
    const int n = 100;
    FOR_EACH_SOURCE(dev, ks)
    {
        kt_params_t p;
        memset(&p, 0, sizeof p);
        p.scale = 0.25 + (kt_rand64() % 1000) / 7.0;
        p.offset = (int)(kt_rand64() % 2001) - 1000;
        p.tag[0] = 'k', p.tag[1] = (char)(1 + kt_rand64() % 100), p.tag[2] = 'l';
        double *dy = NULL, y[100];
        KT_OK(keel_malloc(dev, sizeof y, (void **)&dy));
        KT_OK(keel_memset(dy, KT_POISON_BYTE, sizeof y));
        int nn = n;
        void *args[] = {&p, &nn, &dy};
        keel_stream_t *s = NULL;
        KT_OK(keel_device_default_stream(dev, &s));
        KT_OK(keel_launch_kernel(ks.k[K_STRUCT], dim3(4, 1, 1), dim3(32, 1, 1), 0, s, args));
        KT_OK(keel_stream_synchronize(s));
        KT_OK(keel_memcpy(y, dy, sizeof y));
        for (int i = 0; i < n; i++) {
            double want = p.scale * i + p.offset + p.tag[1];
            /* A GPU may fuse the multiply-add: allow its one rounding less. */
            ck_assert_msg(fabs(y[i] - want) <= 1e-13 * fabs(want), "%s%s: y[%d] = %.17g, expected %.17g", kt_where(),
                          src_names[ks.src], i, y[i], want);
        }
        KT_OK(keel_free(dy));
    }
}

KT_DEVICE_TEST(kernel_without_arguments_runs_every_thread)
{
    FOR_EACH_SOURCE(dev, ks)
    {
        keel_stream_t *s = NULL;
        KT_OK(keel_stream_create(dev, 0, 0, &s));
        unsigned long long *dcount = NULL, count = 0;
        KT_OK(keel_malloc(dev, sizeof count, (void **)&dcount));
        void *rargs[] = {&dcount};
        /* Reset the counter, then 5 blocks of 7x2 threads, twice (once with args NULL). */
        KT_OK(keel_launch_kernel(ks.k[K_READ], dim3(1, 1, 1), dim3(1, 1, 1), 0, s, rargs));
        KT_OK(keel_launch_kernel(ks.k[K_COUNT], dim3(5, 1, 1), dim3(7, 2, 1), 0, s, NULL));
        void *none[1] = {NULL};
        KT_OK(keel_launch_kernel(ks.k[K_COUNT], dim3(1, 2, 1), dim3(3, 1, 1), 0, s, none));
        KT_OK(keel_launch_kernel(ks.k[K_READ], dim3(1, 1, 1), dim3(1, 1, 1), 0, s, rargs));
        KT_OK(keel_memcpy_async(&count, dcount, sizeof count, s));
        KT_OK(keel_stream_synchronize(s));
        ck_assert_msg(count == 5 * 14 + 6, "%s%s: %llu threads ran, expected 76", kt_where(), src_names[ks.src],
                      count);
        KT_OK(keel_free(dcount));
        KT_OK(keel_stream_destroy(s));
    }
}

KT_DEVICE_TEST(launches_on_one_stream_run_in_order)
{
    const int n = 5000, reps = 40;
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    kt_fill_random_f32(x, n);
    kt_fill_random_f32(y, n);
    for (int i = 0; i < n; i++)
        ref[i] = y[i];
    float *dx = NULL, *dy = NULL;
    KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dx));
    KT_OK(keel_malloc(dev, n * sizeof(float), (void **)&dy));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_memcpy_async(dx, x, n * sizeof(float), s));
    KT_OK(keel_memcpy_async(dy, y, n * sizeof(float), s));
    for (int r = 0; r < reps; r++) {
        float a = (float)(r % 5) - 2.0f; /* y = a*x + y: the order of the steps changes float rounding only */
        KT_OK(kt_launch_saxpy(k, s, n, a, dx, dy));
        /* every 8th step doubles y through a copy: out-of-order work would show */
        if (r % 8 == 7) {
            KT_OK(kt_launch_saxpy(k, s, n, 1.0f, dy, dy));
        }
    }
    KT_OK(keel_memcpy_async(y, dy, n * sizeof(float), s));
    KT_OK(keel_stream_synchronize(s));
    for (int r = 0; r < reps; r++) {
        double a = (double)(r % 5) - 2.0;
        for (int i = 0; i < n; i++) {
            ref[i] = (double)(float)(a * x[i] + ref[i]); /* a * x is exact: one float rounding, as the kernel */
            if (r % 8 == 7)
                ref[i] = 2.0 * ref[i];
        }
    }
    long bad = kt_check_f32(y, ref, n, 1e-5, 1e-5);
    ck_assert_msg(bad < 0, "%sy[%ld] = %g, expected %g", kt_where(), bad, bad < 0 ? 0 : y[bad], bad < 0 ? 0 : ref[bad]);
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    kt_kernel_put(k);
    free(x);
    free(y);
    free(ref);
}

/* Managed memory is written and read by the host directly, and by kernels. */
KT_DEVICE_TEST(kernels_and_host_share_managed_memory)
{
    const int n = 3000;
    float *x = NULL, *y = NULL;
    keel_status_t st = keel_malloc_managed(dev, n * sizeof(float), (void **)&x);
    if (kt_unsupported(dev, KT_MANAGED_MEMORY, st))
        return;
    ck_assert_msg(st == KEEL_OK, "%skeel_malloc_managed -> %s (%s)", kt_where(), keel_status_name(st), keel_last_error());
    KT_OK(keel_malloc_managed(dev, n * sizeof(float), (void **)&y));
    double *ref = malloc(n * sizeof(double));
    kt_fill_random_f32(x, n);
    kt_fill_random_f32(y, n);
    for (int i = 0; i < n; i++)
        ref[i] = 0.5 * x[i] + y[i];
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(kt_launch_saxpy(k, s, n, 0.5f, x, y));
    KT_OK(keel_stream_synchronize(s));
    long bad = kt_check_f32(y, ref, n, 1e-6, 1e-6);
    ck_assert_msg(bad < 0, "%sy[%ld] = %g, expected %g", kt_where(), bad, bad < 0 ? 0 : y[bad], bad < 0 ? 0 : ref[bad]);
    KT_OK(keel_stream_destroy(s));
    kt_kernel_put(k);
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
    free(ref);
}

KT_DEVICE_TEST(module_lookup_names_and_attributes)
{
    FOR_EACH_SOURCE(dev, ks)
    {
        for (int i = 0; i < NK; i++) {
            const char *name = keel_kernel_name(ks.k[i]);
            ck_assert_ptr_nonnull(name);
            ck_assert_str_eq(name, kernel_names[i]);
            if (ks.module) {
                keel_kernel_t *again = NULL;
                KT_OK(keel_module_get_kernel(ks.module, kernel_names[i], &again));
                ck_assert_ptr_eq(again, ks.k[i]);
            }
        }
        if (ks.module) {
            keel_kernel_t *k = KT_SENTINEL;
            KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_kernel(ks.module, "no_such_kernel", &k));
            KT_DETAIL_HAS("no_such_kernel");
            KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_get_kernel(ks.module, "", &k));
            KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_get_kernel(ks.module, NULL, &k));
            KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_get_kernel(ks.module, "saxpy", NULL));
            KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_get_kernel(NULL, "saxpy", &k));
            ck_assert_ptr_eq(k, KT_SENTINEL);
            /* A kernel of a module is the module's: releasing it is refused. */
            keel_clear_error();
            ck_assert_int_ne(keel_kernel_release(ks.k[K_SAXPY]), KEEL_OK);
            ck_assert_msg(keel_last_error()[0] != '\0', "refused release left no detail");
        }
        keel_device_properties_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        KT_OK(keel_device_get_properties(dev, &p));
        int v = -1;
        KT_OK(keel_kernel_get_attribute(ks.k[K_SAXPY], KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, &v));
        ck_assert_msg(v >= 1 && v <= p.max_threads_per_block, "%smax threads %d (device %d)", kt_where(), v,
                      p.max_threads_per_block);
        keel_status_t nst = keel_kernel_get_attribute(ks.k[K_SAXPY], KEEL_KERNEL_ATTR_NUM_ARGS, &v);
        if (!kt_unsupported(dev, KT_KERNEL_PARAM_COUNT, nst)) {
            ck_assert_msg(nst == KEEL_OK, "%sNUM_ARGS -> %s (%s)", kt_where(), keel_status_name(nst),
                          keel_last_error());
            ck_assert_int_eq(v, 4);
            KT_OK(keel_kernel_get_attribute(ks.k[K_COUNT], KEEL_KERNEL_ATTR_NUM_ARGS, &v));
            ck_assert_int_eq(v, 0);
        }
        v = 4242;
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_get_attribute(ks.k[K_SAXPY], (keel_kernel_attribute_t)99, &v));
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
                keel_kernel_get_attribute(ks.k[K_SAXPY], KEEL_KERNEL_ATTR_NUM_REGS, NULL));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_get_attribute(NULL, KEEL_KERNEL_ATTR_NUM_REGS, &v));
        ck_assert_int_eq(v, 4242);
        int blocks = -1;
        keel_status_t st = keel_kernel_max_active_blocks(ks.k[K_SAXPY], 64, 0, &blocks);
        if (!kt_unsupported(dev, KT_OCCUPANCY, st)) {
            ck_assert_msg(st == KEEL_OK, "%smax_active_blocks -> %s", kt_where(), keel_status_name(st));
            ck_assert_int_ge(blocks, 1);
        }
        blocks = 4242;
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_max_active_blocks(ks.k[K_SAXPY], 0, 0, &blocks));
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_max_active_blocks(ks.k[K_SAXPY], 64, 0, NULL));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_max_active_blocks(NULL, 64, 0, &blocks));
        ck_assert_int_eq(blocks, 4242);
        st = keel_kernel_set_max_dynamic_shared(ks.k[K_REVERSE], 1024);
        if (!kt_unsupported(dev, KT_DYNAMIC_SHARED, st))
            ck_assert_msg(st == KEEL_OK, "%sset_max_dynamic_shared -> %s", kt_where(), keel_status_name(st));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_set_max_dynamic_shared(NULL, 1024));
    }
}

KT_DEVICE_TEST(launch_rejects_bad_configurations)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    float *dy = NULL;
    KT_OK(keel_malloc(dev, 64 * sizeof(float), (void **)&dy));
    int n = 64;
    float a = 2.0f;
    void *args[] = {&n, &a, &dy, &dy};
    const keel_dim3_t one = {1, 1, 1};
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch_kernel(NULL, one, one, 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch_kernel(k, one, one, 0, NULL, args));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch_kernel((keel_kernel_t *)(void *)s, one, one, 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, dim3(0, 1, 1), one, 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, dim3(1, 0, 1), one, 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, dim3(1, 1, 0), one, 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, one, dim3(0, 1, 1), 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, one, dim3(1, 1, 0), 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_launch_kernel(k, one, dim3(1, 1, 1), p.shared_memory_per_block + 1, s, args));
    if (kt_is_cpu(dev)) /* only the CPU backend knows how many arguments a kernel takes */
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, one, one, 0, s, NULL));
    keel_stream_t *dead = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &dead));
    KT_OK(keel_stream_destroy(dead));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch_kernel(k, one, one, 0, dead, args));
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_stream_t *os = NULL;
        KT_OK(keel_device_default_stream(other, &os));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_launch_kernel(k, one, one, 0, os, args));
    } else {
        ck_assert_msg(!(kt_cpu_devices_env() && kt_is_cpu(dev)), "KEEL_CPU_DEVICES is set, yet one CPU device");
    }
    KT_OK(keel_stream_synchronize(s));
    kt_kernel_put(k);
    /* A released kernel is a stale handle. */
    if (kt_is_cpu(dev)) {
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch_kernel(k, one, one, 0, s, args));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_release(k));
        int v = 0;
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_NUM_ARGS, &v));
    }
    KT_OK(keel_free(dy));
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(launch_rejects_blocks_past_the_device_limits)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    int n = 0; /* the kernel would write nothing if it ran */
    float a = 2.0f, *y = NULL;
    void *args[] = {&n, &a, &y, &y};
    const keel_dim3_t one = {1, 1, 1};
    /* Each dimension within its limit, but the product past max_threads_per_block. */
    unsigned bx = (unsigned)p.max_block_dim[0], by = (unsigned)p.max_block_dim[1];
    if ((unsigned long)bx * by > (unsigned long)p.max_threads_per_block)
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, one, dim3(bx, by, 1), 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_launch_kernel(k, one, dim3((unsigned)p.max_threads_per_block + 1, 1, 1), 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_launch_kernel(k, one, dim3(1, 1, (unsigned)p.max_block_dim[2] + 1), 0, s, args));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_launch_kernel(k, dim3((unsigned)p.max_grid_dim[0] + 1u > 0 ? (unsigned)p.max_grid_dim[0] + 1u : 0,
                                       1, 1), one, 0, s, args));
    KT_OK(keel_stream_synchronize(s));
    kt_kernel_put(k);
}

/* Occupancy of a launch the device would refuse is 0 blocks, as CUDA
 * answers: a block past the kernel's threads-per-block limit, or dynamic
 * shared memory past the kernel's limit or the device's per-block size. */
KT_DEVICE_TEST(occupancy_of_a_refused_launch_is_zero)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    int blocks = -1;
    keel_status_t st = keel_kernel_max_active_blocks(k, 64, 0, &blocks);
    if (kt_unsupported(dev, KT_OCCUPANCY, st)) {
        kt_kernel_put(k);
        return;
    }
    ck_assert_msg(st == KEEL_OK && blocks >= 1, "%s64 threads: %s, %d blocks", kt_where(), keel_status_name(st), blocks);
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    int n = 0; /* the kernel would write nothing if it ran */
    float a = 2.0f, *y = NULL;
    void *args[] = {&n, &a, &y, &y};
    const keel_dim3_t one = {1, 1, 1};
    int max_threads = 0, max_shared = 0;
    KT_OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, &max_threads));
    KT_OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, &max_shared));
    const struct {
        int threads;
        size_t shared;
    } refused[] = {{max_threads + 1, 0},
                   {INT_MAX, 0},
                   {64, (size_t)max_shared + 1},
                   {64, p.shared_memory_per_block + 1},
                   {64, (size_t)UINT_MAX + 1},
                   {64, SIZE_MAX}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        blocks = -1;
        KT_OK(keel_kernel_max_active_blocks(k, refused[i].threads, refused[i].shared, &blocks));
        ck_assert_msg(blocks == 0, "%s%d threads, %zu bytes of shared memory: %d blocks, expected 0", kt_where(),
                      refused[i].threads, refused[i].shared, blocks);
        keel_clear_error();
        st = keel_launch_kernel(k, one, dim3((unsigned)refused[i].threads, 1, 1), refused[i].shared, s, args);
        ck_assert_msg(st != KEEL_OK, "%sa launch of %d threads with %zu bytes of shared memory succeeded", kt_where(),
                      refused[i].threads, refused[i].shared);
    }
    /* Within the limits: at least one block, and the launch works. */
    KT_OK(keel_kernel_max_active_blocks(k, max_threads, (size_t)max_shared, &blocks));
    ck_assert_msg(blocks >= 1, "%s%d threads, %d bytes: %d blocks", kt_where(), max_threads, max_shared, blocks);
    KT_OK(keel_launch_kernel(k, one, dim3((unsigned)max_threads, 1, 1), (size_t)max_shared, s, args));
    /* A kernel whose limit was lowered (where the backend lowers it): past
     * it is refused, so 0 blocks. */
    int lowered = 0;
    if (keel_kernel_set_max_dynamic_shared(k, 1000) == KEEL_OK)
        KT_OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, &lowered));
    if (lowered == 1000) {
        KT_OK(keel_kernel_max_active_blocks(k, 64, 1000, &blocks));
        ck_assert_msg(blocks >= 1, "%s1000 bytes under a 1000-byte limit: %d blocks", kt_where(), blocks);
        KT_OK(keel_kernel_max_active_blocks(k, 64, 1001, &blocks));
        ck_assert_msg(blocks == 0, "%s1001 bytes under a 1000-byte limit: %d blocks, expected 0", kt_where(), blocks);
        keel_clear_error();
        ck_assert_msg(keel_launch_kernel(k, one, dim3(64, 1, 1), 1001, s, args) != KEEL_OK,
                      "%sa launch with 1001 bytes under a 1000-byte limit succeeded", kt_where());
    }
    KT_OK(keel_stream_synchronize(s));
    kt_kernel_put(k);
}

/* keel_kernel_suggest_block_size picks the block with the most resident
 * threads among the multiples of the warp size, and its grid fills the
 * device; a limit and the shared memory are honoured. */
KT_DEVICE_TEST(suggested_block_size_has_the_best_occupancy)
{
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    int threads = 0, grid = 0;
    keel_status_t st = keel_kernel_suggest_block_size(k, 0, 0, &threads, &grid);
    if (kt_unsupported(dev, KT_OCCUPANCY, st)) {
        kt_kernel_put(k);
        return;
    }
    ck_assert_msg(st == KEEL_OK, "%ssuggest: %s (%s)", kt_where(), keel_status_name(st), keel_last_error());
    keel_device_properties_t p = {.struct_size = sizeof p};
    KT_OK(keel_device_get_properties(dev, &p));
    int max_threads = 0, step = p.warp_size > 0 ? p.warp_size : 1;
    KT_OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, &max_threads));
    ck_assert_msg(threads >= step && threads <= max_threads && threads % step == 0, "%s%d threads (warp %d, max %d)",
                  kt_where(), threads, step, max_threads);
    int best_blocks = 0;
    KT_OK(keel_kernel_max_active_blocks(k, threads, 0, &best_blocks));
    ck_assert_msg(grid == best_blocks * p.compute_units, "%sgrid %d, expected %d blocks x %d units", kt_where(), grid,
                  best_blocks, p.compute_units);
    for (int t = step; t <= max_threads; t += step) {
        int b = 0;
        KT_OK(keel_kernel_max_active_blocks(k, t, 0, &b));
        ck_assert_msg((long)b * t <= (long)best_blocks * threads, "%s%d threads keep %ld resident, the suggested %d "
                      "only %ld", kt_where(), t, (long)b * t, threads, (long)best_blocks * threads);
    }
    /* A limit, and the launch the suggestion gives works. */
    KT_OK(keel_kernel_suggest_block_size(k, 0, 2 * step, &threads, NULL));
    ck_assert_msg(threads >= step && threads <= 2 * step, "%slimit %d: %d threads", kt_where(), 2 * step, threads);
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    int n = 0;
    float a = 2.0f, *y = NULL;
    void *args[] = {&n, &a, &y, &y};
    KT_OK(keel_launch_kernel(k, dim3(1, 1, 1), dim3((unsigned)threads, 1, 1), 0, s, args));
    KT_OK(keel_stream_synchronize(s));
    /* Refusals. */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_suggest_block_size(k, SIZE_MAX, 0, &threads, &grid));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_suggest_block_size(k, 0, -1, &threads, &grid));
    if (step > 1)
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_suggest_block_size(k, 0, step - 1, &threads, &grid));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_suggest_block_size(k, 0, 0, NULL, &grid));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_suggest_block_size(NULL, 0, 0, &threads, &grid));
    kt_kernel_put(k);
}

/* A block may use up to shared_memory_per_block bytes (device.h): raising a
 * kernel's limit to it works, past it is refused, and a launch follows the limit. */
KT_DEVICE_TEST(dynamic_shared_limit_follows_the_device_property)
{
    keel_device_properties_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    KT_OK(keel_device_get_properties(dev, &p));
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    keel_stream_t *s = NULL;
    KT_OK(keel_device_default_stream(dev, &s));
    int n = 0;
    float a = 1.0f, *y = NULL;
    void *args[] = {&n, &a, &y, &y};
    const keel_dim3_t one = {1, 1, 1};
    keel_status_t st = keel_kernel_set_max_dynamic_shared(k, p.shared_memory_per_block);
    if (kt_unsupported(dev, KT_DYNAMIC_SHARED, st)) {
        kt_kernel_put(k);
        return;
    }
    ck_assert_msg(st == KEEL_OK, "%sraising to %zu: %s (%s)", kt_where(), p.shared_memory_per_block,
                  keel_status_name(st), keel_last_error());
    int v = 0;
    KT_OK(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, &v));
    ck_assert_msg((size_t)v <= p.shared_memory_per_block && (size_t)v + 65536 >= p.shared_memory_per_block,
                  "%smax dynamic shared %d after raising to %zu", kt_where(), v, p.shared_memory_per_block);
    KT_OK(keel_launch_kernel(k, one, one, (size_t)v, s, args));
    KT_OK(keel_stream_synchronize(s));
    /* An args array with a NULL entry is refused where the backend knows the arguments. */
    if (kt_is_cpu(dev)) {
        void *holes[] = {&n, NULL, &y, &y};
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, one, one, 0, s, holes));
    }
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_launch_kernel(k, one, one, p.shared_memory_per_block + 1, s, args));
    keel_clear_error();
    st = keel_kernel_set_max_dynamic_shared(k, p.shared_memory_per_block + 1);
    kt_kernel_put(k);
    ck_assert_msg(st != KEEL_OK, "%sraising a kernel's shared memory past the device's %zu bytes per block succeeded",
                  kt_where(), p.shared_memory_per_block);
}

KT_DEVICE_TEST(module_loading_errors)
{
    keel_module_t *m = KT_SENTINEL;
    if (kt_is_cpu(dev)) {
        KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_load_file(dev, "/nonexistent/keel-no-such-module.so", &m));
        KT_DETAIL_HAS("/nonexistent/keel-no-such-module.so");
        /* A file that is no shared object: the loader's message comes back. */
        char path[] = "/tmp/keel-test-notso-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "not an ELF file\n", 16), 16);
        close(fd);
        KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_load_file(dev, path, &m));
        unlink(path);
        /* The first page of a real module: dlopen would map its segments past
         * the end of the file (SIGBUS); the file is refused as truncated. */
        char cut[] = "/tmp/keel-test-cut-XXXXXX";
        fd = mkstemp(cut);
        ck_assert_int_ge(fd, 0);
        FILE *f = fopen(MODULE_PATH, "rb");
        ck_assert_ptr_nonnull(f);
        char page[4096];
        ck_assert_uint_eq(fread(page, 1, sizeof page, f), sizeof page);
        fclose(f);
        ck_assert_int_eq(write(fd, page, sizeof page), (ssize_t)sizeof page);
        close(fd);
        KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_load_file(dev, cut, &m));
        KT_DETAIL_HAS("truncated");
        KT_DETAIL_HAS(cut);
        unlink(cut);
        /* A shared object that is no Keel module loads; its kernels are just not found. */
        KT_OK(keel_module_load_file(dev, KT_BUILDDIR "/tests/plugins/.libs/keel-fakeok.so", &m));
        keel_kernel_t *k = KT_SENTINEL;
        KT_FAIL(KEEL_ERROR_NOT_FOUND, keel_module_get_kernel(m, "saxpy", &k));
        ck_assert_ptr_eq(k, KT_SENTINEL);
        KT_OK(keel_module_unload(m));
        m = KT_SENTINEL;
        static const char image[] = "\x7f" "ELF";
        KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_module_load_data(dev, image, sizeof image, &m));
        keel_status_t st = keel_module_compile(dev, "void f(void) {}", "f.c", NULL, 0, &m);
        if (st == KEEL_OK) {
            KT_OK(keel_module_unload(m));
            m = KT_SENTINEL;
        } else {
            ck_assert_msg(kt_unsupported(dev, KT_RUNTIME_COMPILE, st), "%skeel_module_compile -> %s", kt_where(),
                          keel_status_name(st));
        }
    } else {
        static const char garbage[] = "this is not PTX";
        KT_FAIL(KEEL_ERROR_COMPILE_FAILED, keel_module_load_data(dev, garbage, sizeof garbage, &m));
        keel_status_t st = keel_module_compile(dev, "extern \"C\" __global__ void f( { }", "bad.cu", NULL, 0, &m);
        if (!kt_unsupported(dev, KT_RUNTIME_COMPILE, st))
            ck_assert_msg(st == KEEL_ERROR_COMPILE_FAILED, "%scompiling bad source -> %s", kt_where(),
                          keel_status_name(st));
    }
    ck_assert_ptr_eq(m, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_load_file(NULL, MODULE_PATH, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_load_file(dev, NULL, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_load_file(dev, MODULE_PATH, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_load_data(NULL, "x", 1, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_load_data(dev, NULL, 1, &m));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_compile(NULL, "x", "x", NULL, 0, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_compile(dev, NULL, "x", NULL, 0, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_compile(dev, "x", "x", NULL, 2, &m));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_module_compile(dev, "x", "x", NULL, -1, &m));
    ck_assert_ptr_eq(m, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_unload(NULL));
}

KT_DEVICE_TEST(unloaded_module_and_its_kernels_are_stale)
{
    FOR_EACH_SOURCE(dev, ks)
    {
        if (!ks.module)
            continue;
        keel_module_t *m = NULL;
        keel_kernel_t *k = NULL;
        if (ks.src == SRC_MODULE)
            KT_OK(keel_module_load_file(dev, MODULE_PATH, &m));
        else
            KT_OK(keel_module_compile(dev, gpu_source, "again.cu", NULL, 0, &m));
        KT_OK(keel_module_get_kernel(m, "saxpy", &k));
        KT_OK(keel_module_unload(m));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_unload(m));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_get_kernel(m, "saxpy", &k));
        keel_stream_t *s = NULL;
        KT_OK(keel_device_default_stream(dev, &s));
        int n = 1;
        float a = 1, *p = NULL;
        void *args[] = {&n, &a, &p, &p};
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_launch_kernel(k, dim3(1, 1, 1), dim3(1, 1, 1), 0, s, args));
    }
}

/* keel_module_unload waits for the launches of its kernels that are still
 * queued, as keel_free waits for work on the memory: a launch held behind a
 * host function has run, with the right result, by the time the unload
 * returns. On the CPU a second load of the same shared object keeps it
 * mapped, so an unload that does not wait shows up as a launch still
 * pending instead of a jump into unmapped code. */
KT_DEVICE_TEST(module_unload_waits_for_pending_launches)
{
    enum { N = 1000 };
    keel_module_t *m = NULL, *keep = NULL;
    if (kt_is_cpu(dev)) {
        KT_OK(keel_module_load_file(dev, MODULE_PATH, &keep));
        KT_OK(keel_module_load_file(dev, MODULE_PATH, &m));
    } else {
        keel_status_t st = keel_module_compile(dev, gpu_source, "unload.cu", NULL, 0, &m);
        if (kt_unsupported(dev, KT_RUNTIME_COMPILE, st))
            return;
        ck_assert_msg(st == KEEL_OK, "%scompiling the test kernels: %s (%s)", kt_where(), keel_status_name(st),
                      keel_last_error());
    }
    keel_kernel_t *k = NULL;
    KT_OK(keel_module_get_kernel(m, "saxpy", &k));
    /* The wait is for the whole device, which a capture on its default
     * stream forbids: refused, and the module stays usable. */
    keel_stream_t *ds = NULL;
    KT_OK(keel_device_default_stream(dev, &ds));
    if (keel_stream_begin_capture(ds) == KEEL_OK) {
        KT_FAIL(KEEL_ERROR_BUSY, keel_module_unload(m));
        KT_DETAIL_HAS("keel_module_unload");
        keel_graph_t *graph = NULL;
        KT_OK(keel_stream_end_capture(ds, &graph));
        KT_OK(keel_graph_destroy(graph));
    }
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    double *ref = malloc(N * sizeof(double));
    kt_fill_random_f32(x, N);
    kt_fill_random_f32(y, N);
    const float a = 1.75f;
    for (int i = 0; i < N; i++)
        ref[i] = (double)a * x[i] + y[i];
    float *dx = NULL, *dy = NULL;
    KT_OK(keel_malloc(dev, N * sizeof(float), (void **)&dx));
    KT_OK(keel_malloc(dev, N * sizeof(float), (void **)&dy));
    KT_OK(keel_memcpy(dx, x, N * sizeof(float)));
    KT_OK(keel_memcpy(dy, y, N * sizeof(float)));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    KT_OK(kt_launch_saxpy(k, s, N, a, dx, dy));
    ck_assert_int_eq(kt_gate_open_later(g, 200), 0);
    KT_OK(keel_module_unload(m));
    ck_assert_msg(keel_stream_query(s) == KEEL_OK,
                  "%skeel_module_unload returned while a launch of its kernel was still queued", kt_where());
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_memcpy(y, dy, N * sizeof(float)));
    long bad = kt_check_f32(y, ref, N, 1e-6, 1e-6);
    ck_assert_msg(bad < 0, "%sy[%ld] = %.9g, expected %.9g", kt_where(), bad, bad < 0 ? 0 : y[bad],
                  bad < 0 ? 0 : ref[bad]);
    /* The module is gone, the stream lives on. */
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_module_get_kernel(m, "saxpy", &k));
    if (keep)
        KT_OK(keel_module_unload(keep));
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    free(x);
    free(y);
    free(ref);
}

static void never_called(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    (void)ctx;
    (void)args;
}

KT_DEVICE_TEST(register_cpu_rejects_bad_descriptors)
{
    keel_kernel_t *k = KT_SENTINEL;
    keel_cpu_kernel_desc_t d = {KEEL_CPU_KERNEL_ABI, "bad", never_called, 1, {sizeof(int)}};
    if (!kt_is_cpu(dev)) {
        KT_FAIL(KEEL_ERROR_NOT_SUPPORTED, keel_kernel_register_cpu(dev, &d, &k));
        ck_assert_ptr_eq(k, KT_SENTINEL);
        return;
    }
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_register_cpu(NULL, &d, &k));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_register_cpu(dev, NULL, &k));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_register_cpu(dev, &d, NULL));
    d.abi_version = KEEL_CPU_KERNEL_ABI + 1;
    KT_FAIL(KEEL_ERROR_ABI_MISMATCH, keel_kernel_register_cpu(dev, &d, &k));
    d.abi_version = KEEL_CPU_KERNEL_ABI;
    d.fn = NULL;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_register_cpu(dev, &d, &k));
    d.fn = never_called;
    d.num_args = KEEL_MAX_KERNEL_ARGS + 1;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_register_cpu(dev, &d, &k));
    /* Argument bytes past the launch limit. */
    d.num_args = 2;
    d.arg_sizes[0] = KEEL_MAX_KERNEL_ARG_BYTES;
    d.arg_sizes[1] = 8;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_register_cpu(dev, &d, &k));
    d.num_args = 1;
    d.arg_sizes[0] = 0;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_kernel_register_cpu(dev, &d, &k));
    ck_assert_ptr_eq(k, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_release(NULL));
    /* The descriptor is copied: registering from a temporary is fine. */
    d.arg_sizes[0] = sizeof(int);
    KT_OK(keel_kernel_register_cpu(dev, &d, &k));
    memset(&d, 0, sizeof d);
    ck_assert_str_eq(keel_kernel_name(k), "bad");
    KT_OK(keel_kernel_release(k));
}

/* The same computation on every device under test (every backend at once,
 * in one process) agrees with the reference and so with each other. */
START_TEST(every_device_computes_the_same_saxpy)
{
    const int n = 5003, ndev = kt_device_count();
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    double *ref = malloc(n * sizeof(double));
    kt_fill_random_f32(x, n);
    kt_fill_random_f32(y, n);
    for (int i = 0; i < n; i++)
        ref[i] = -1.25 * x[i] + y[i];
    keel_stream_t *st[64];
    float *dx[64], *dy[64];
    keel_kernel_t *k[64];
    /* Enqueue on every device first, then wait: the backends run side by side. */
    for (int d = 0; d < ndev && d < 64; d++) {
        kt_dev = kt_device(d);
        KT_OK(kt_saxpy_kernel(kt_dev, &k[d]));
        KT_OK(keel_stream_create(kt_dev, 0, 0, &st[d]));
        KT_OK(keel_malloc(kt_dev, n * sizeof(float), (void **)&dx[d]));
        KT_OK(keel_malloc(kt_dev, n * sizeof(float), (void **)&dy[d]));
        KT_OK(keel_memcpy_async(dx[d], x, n * sizeof(float), st[d]));
        KT_OK(keel_memcpy_async(dy[d], y, n * sizeof(float), st[d]));
        KT_OK(kt_launch_saxpy(k[d], st[d], n, -1.25f, dx[d], dy[d]));
    }
    for (int d = 0; d < ndev && d < 64; d++) {
        kt_dev = kt_device(d);
        kt_poison(out, n * sizeof(float));
        KT_OK(keel_memcpy_async(out, dy[d], n * sizeof(float), st[d]));
        KT_OK(keel_stream_synchronize(st[d]));
        long bad = kt_check_f32(out, ref, n, 1e-6, 1e-6);
        ck_assert_msg(bad < 0, "%sy[%ld] = %g, expected %g", kt_where(), bad, bad < 0 ? 0 : out[bad],
                      bad < 0 ? 0 : ref[bad]);
        KT_OK(keel_stream_destroy(st[d]));
        KT_OK(keel_free(dx[d]));
        KT_OK(keel_free(dy[d]));
        kt_kernel_put(k[d]);
    }
    kt_dev = NULL;
    free(x);
    free(y);
    free(out);
    free(ref);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kernel");
    TCase *tc = kt_tcase_create("kernel", 60);
    kt_add_device_test(tc, saxpy_matches_a_float64_reference);
    kt_add_device_test(tc, every_thread_sees_its_block_and_thread_indices);
    kt_add_device_test(tc, dynamic_shared_memory_is_per_block);
    kt_add_device_test(tc, argument_values_are_copied_at_launch);
    kt_add_device_test(tc, struct_argument_passes_by_value);
    kt_add_device_test(tc, kernel_without_arguments_runs_every_thread);
    kt_add_device_test(tc, launches_on_one_stream_run_in_order);
    kt_add_device_test(tc, kernels_and_host_share_managed_memory);
    kt_add_device_test(tc, module_lookup_names_and_attributes);
    kt_add_device_test(tc, launch_rejects_bad_configurations);
    kt_add_device_test(tc, launch_rejects_blocks_past_the_device_limits);
    kt_add_device_test(tc, dynamic_shared_limit_follows_the_device_property);
    kt_add_device_test(tc, occupancy_of_a_refused_launch_is_zero);
    kt_add_device_test(tc, module_loading_errors);
    kt_add_device_test(tc, unloaded_module_and_its_kernels_are_stale);
    kt_add_device_test(tc, module_unload_waits_for_pending_launches);
    kt_add_device_test(tc, register_cpu_rejects_bad_descriptors);
    kt_add_device_test(tc, suggested_block_size_has_the_best_occupancy);
    suite_add_tcase(s, tc);
    TCase *ta = kt_tcase_create("all-devices", 60);
    tcase_add_test(ta, every_device_computes_the_same_saxpy);
    suite_add_tcase(s, ta);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
