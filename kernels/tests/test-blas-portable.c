/* SPDX-License-Identifier: MIT */
/* Keel's portable BLAS kernels (kernels/portable/blas.kc), forced with
 * KEEL_BLAS=fallback on every usable backend: GEMM, GEMV and the dense
 * layer against a float64 reference computed here from the inputs as
 * rounded to their dtype, on fresh random data, for the sizes where tiled
 * kernels go wrong (1, 7, 33, 129: below, at and past a tile's edge, and
 * not multiples of the vector width), every transpose and layout, leading
 * dimensions past the rows, operands that start off the vector alignment,
 * alpha and beta, beta 0 over a C full of NaN, batches (a shared A, and
 * more matrices than one launch's grid holds). Every element outside the
 * result keeps its value. test-ops runs the whole operations suite under
 * KEEL_BLAS=fallback too (kernels/tests/test-ops-fallback.sh). */
#include <math.h>
#include <stdlib.h>
#include "tests/fixture.h"
#include "keel/ops.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/tests/gemm_ref.h"

#define EXPECT(cond, ...)                  \
    do {                                   \
        if (!(cond))                       \
            ck_assert_msg(0, __VA_ARGS__); \
    } while (0)

/* ---- data ---- */

static double urand(void)
{
    return (double)(kt_rand64() >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static double to_dtype(keel_dtype_t dt, double v)
{
    switch (dt) {
    case KEEL_F32: return (float)v;
    case KEEL_F16: return keel__f16_to_f32(keel__f64_to_f16(v));
    case KEEL_BF16: return keel__bf16_to_f32(keel__f64_to_bf16(v));
    default: return v;
    }
}

static double *rand_vals(keel_dtype_t dt, size_t n)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = to_dtype(dt, urand());
    return v;
}

static void encode(keel_dtype_t dt, const double *v, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++)
        switch (dt) {
        case KEEL_F32: ((float *)out)[i] = (float)v[i]; break;
        case KEEL_F64: ((double *)out)[i] = v[i]; break;
        case KEEL_F16: ((uint16_t *)out)[i] = keel__f64_to_f16(v[i]); break;
        case KEEL_BF16: ((uint16_t *)out)[i] = keel__f64_to_bf16(v[i]); break;
        }
}

static double decode1(keel_dtype_t dt, const void *in, size_t i)
{
    switch (dt) {
    case KEEL_F32: return ((const float *)in)[i];
    case KEEL_F64: return ((const double *)in)[i];
    case KEEL_F16: return keel__f16_to_f32(((const uint16_t *)in)[i]);
    default: return keel__bf16_to_f32(((const uint16_t *)in)[i]);
    }
}

/* A device buffer of @p off + n elements holding v from element off on
 * (off shifts the operand off its vector alignment). */
static void *upload(keel_device_t *dev, keel_dtype_t dt, const double *v, size_t n, size_t off, void **base)
{
    size_t es = keel_dtype_size(dt), bytes = (n + off) * es;
    void *h = calloc(1, bytes + 1), *d;
    KT_OK(keel_malloc(dev, bytes ? bytes : 1, &d));
    encode(dt, v, n, (char *)h + off * es);
    if (bytes)
        KT_OK(keel_memcpy(d, h, bytes));
    free(h);
    *base = d;
    return (char *)d + off * es;
}

static double *download(keel_device_t *dev, keel_dtype_t dt, const void *d, size_t n)
{
    KT_OK(keel_device_synchronize(dev));
    size_t es = keel_dtype_size(dt);
    void *h = malloc(n * es + 1);
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (n)
        KT_OK(keel_memcpy(h, d, n * es));
    for (size_t i = 0; i < n; i++)
        v[i] = decode1(dt, h, i);
    free(h);
    return v;
}

static double ulp_of(keel_dtype_t dt)
{
    return dt == KEEL_F32 ? 0x1p-24 : dt == KEEL_F64 ? 0x1p-53 : dt == KEEL_F16 ? 0x1p-11 : 0x1p-8;
}

/* The compute precision: f64 for f64 data, f32 for the others. */
static double ceps(keel_dtype_t dt)
{
    return dt == KEEL_F64 ? 0x1p-52 : 0x1p-23;
}


/* ---- which BLAS runs ---- */

KT_DEVICE_TEST(test_blas_info)
{
    keel_blas_kind_t kind = KEEL_BLAS_VENDOR;
    char text[256];
    KT_OK(keel_device_get_blas_info(dev, &kind, text, sizeof text));
    ck_assert_msg(kind == KEEL_BLAS_PORTABLE, "%s: KEEL_BLAS=fallback, but the kind is %d (%s)",
                  keel_device_name(dev), (int)kind, text);
    ck_assert_msg(strstr(text, "portable") && strstr(text, "KEEL_BLAS=fallback"), "%s: blas info \"%s\"",
                  keel_device_name(dev), text);
    char small[8];
    KT_OK(keel_device_get_blas_info(dev, NULL, small, sizeof small));
    ck_assert_msg(strlen(small) == sizeof small - 1, "a cut text \"%s\" is not 7 characters", small);
    KT_OK(keel_device_get_blas_info(dev, NULL, NULL, 0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_get_blas_info(dev, &kind, NULL, 16));
    KT_DETAIL_HAS("keel_device_get_blas_info");
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_get_blas_info(NULL, &kind, text, sizeof text));
}

/* ---- GEMM ---- */

typedef struct {
    keel_dtype_t in, out;
} types_t;

static const types_t gemm_types[] = {{KEEL_F32, KEEL_F32}, {KEEL_F64, KEEL_F64},  {KEEL_F16, KEEL_F16},
                                     {KEEL_BF16, KEEL_BF16}, {KEEL_F16, KEEL_F32}, {KEEL_BF16, KEEL_F32}};
#define NTYPES (sizeof gemm_types / sizeof gemm_types[0])

typedef struct {
    size_t m, n, k, batch;
    size_t pad;           /* leading dimensions past the rows by this much */
    size_t off;           /* operands start this many elements into their buffers */
    size_t stride_a_zero; /* every matrix of the batch uses one A */
    double alpha, beta;
} gemm_case_t;

static void run_gemm(keel_device_t *dev, types_t ty, keel_layout_t layout, int ta, int tb, const gemm_case_t *c)
{
    keel_stream_t *s;
    KT_OK(keel_device_default_stream(dev, &s));
    size_t m = c->m, n = c->n, k = c->k, batch = c->batch ? c->batch : 1;
    size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int row = layout == KEEL_ROW_MAJOR;
    size_t lda = (row ? ac : ar) + c->pad, ldb = (row ? bc : br) + c->pad, ldc = (row ? n : m) + c->pad;
    lda = lda ? lda : 1;
    ldb = ldb ? ldb : 1;
    size_t ea = gemm_ref_extent(layout, ar, ac, lda), eb = gemm_ref_extent(layout, br, bc, ldb), ec = gemm_ref_extent(layout, m, n, ldc);
    size_t sa = c->stride_a_zero ? 0 : ea + 4, sb = eb + 8, sc = ec + 3;
    size_t na = (batch - 1) * sa + ea, nb = (batch - 1) * sb + eb, nc = (batch - 1) * sc + ec;
    double *va = rand_vals(ty.in, na), *vb = rand_vals(ty.in, nb), *vc = rand_vals(ty.out, nc);
    if (c->beta == 0)
        for (size_t i = 0; i < nc; i++)
            if (i % 3 == 0)
                vc[i] = NAN; /* beta 0: C is not read, its NaN must not come through */
    void *ba, *bb, *bc_;
    void *a = upload(dev, ty.in, va, na, c->off, &ba), *b = upload(dev, ty.in, vb, nb, c->off, &bb);
    void *cc = upload(dev, ty.out, vc, nc, c->off, &bc_);
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = layout;
    p.transa = ta ? KEEL_TRANS : KEEL_NO_TRANS;
    p.transb = tb ? KEEL_TRANS : KEEL_NO_TRANS;
    p.m = m, p.n = n, p.k = k;
    p.alpha = c->alpha, p.beta = c->beta;
    p.a_type = p.b_type = ty.in;
    p.c_type = ty.out;
    p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = cc, p.ldc = ldc;
    p.batch_count = batch, p.stride_a = sa, p.stride_b = sb, p.stride_c = sc;
    KT_OK(keel_gemm(s, &p));
    double *got = download(dev, ty.out, cc, nc);
    char *written = calloc(nc ? nc : 1, 1);
    for (size_t bi = 0; bi < batch; bi++) {
        const double *A = va + bi * sa, *B = vb + bi * sb, *C0 = vc + bi * sc;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double mag, acc = gemm_ref_entry(A, lda, ta, B, ldb, tb, layout, k, i, j, &mag);
                size_t e = bi * sc + gemm_ref_idx(layout, ldc, i, j);
                double cv = C0[gemm_ref_idx(layout, ldc, i, j)];
                double ref = to_dtype(ty.out, c->alpha * acc + (c->beta != 0 ? c->beta * cv : 0));
                double tol = (2.0 * k + 4) * ceps(ty.in) * fabs(c->alpha) * mag +
                             (c->beta != 0 ? 4 * ceps(ty.out) * fabs(c->beta * cv) : 0) + 2 * ulp_of(ty.out) * fabs(ref);
                written[e] = 1;
                EXPECT(fabs(got[e] - ref) <= tol,
                       "%sgemm %s->%s %s ta %d tb %d %zux%zux%zu batch %zu pad %zu off %zu alpha %g beta %g: "
                       "C[%zu](%zu,%zu) = %.10g, expected %.10g (tolerance %.3g, seed %lu)",
                       kt_where(), keel_dtype_name(ty.in), keel_dtype_name(ty.out), row ? "row" : "col", ta, tb, m,
                       n, k, batch, c->pad, c->off, c->alpha, c->beta, bi, i, j, got[e], ref, tol, kt_seed());
            }
    }
    for (size_t e = 0; e < nc; e++)
        EXPECT(written[e] || (isnan(got[e]) ? isnan(vc[e]) : got[e] == vc[e]),
               "%sgemm %s %zux%zux%zu pad %zu: element %zu outside C changed from %g to %g", kt_where(),
               keel_dtype_name(ty.in), m, n, k, c->pad, e, vc[e], got[e]);
    free(written);
    free(va);
    free(vb);
    free(vc);
    free(got);
    KT_OK(keel_free(ba));
    KT_OK(keel_free(bb));
    KT_OK(keel_free(bc_));
}

/* Every dtype pair, layout and transpose, at sizes around a tile's edges. */
KT_DEVICE_TEST(test_gemm_sizes)
{
    static const size_t shapes[][3] = {{1, 1, 1},   {7, 7, 7},     {33, 33, 33},  {129, 7, 33},
                                       {7, 129, 1}, {33, 1, 129},  {130, 131, 9}, {1, 257, 40}};
    for (size_t t = 0; t < NTYPES; t++)
        for (int layout = 0; layout <= 1; layout++)
            for (int tr = 0; tr < 4; tr++)
                for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
                    gemm_case_t c = {shapes[q][0], shapes[q][1], shapes[q][2], 1, q % 3 == 1 ? 3 : 0, 0, 0,
                                     q % 2 ? -0.75 : 1.0, q % 4 == 3 ? 0.0 : 0.5};
                    run_gemm(dev, gemm_types[t], (keel_layout_t)layout, tr & 1, tr >> 1, &c);
                }
}

/* Multiples of four (the vector path where the operands are aligned) next
 * to operands that start one element off and leading dimensions of odd
 * size (the element-wise path), over several tiles and steps of k. */
KT_DEVICE_TEST(test_gemm_alignment)
{
    for (size_t t = 0; t < NTYPES; t++)
        for (int tr = 0; tr < 4; tr++)
            for (int v = 0; v < 3; v++) {
                gemm_case_t c = {256, 132, 72, 1, v == 2 ? 1 : 0, v == 1 ? 1 : 0, 0, 1.0, v == 0 ? 0.0 : -1.25};
                run_gemm(dev, gemm_types[t], KEEL_COL_MAJOR, tr & 1, tr >> 1, &c);
            }
}

KT_DEVICE_TEST(test_gemm_batched)
{
    for (size_t t = 0; t < NTYPES; t++)
        for (int layout = 0; layout <= 1; layout++) {
            gemm_case_t c = {33, 7, 20, 3, 1, 0, 0, 1.5, 0.25};
            run_gemm(dev, gemm_types[t], (keel_layout_t)layout, 0, 1, &c);
            gemm_case_t shared = {17, 40, 9, 4, 0, 0, 1, -1.0, 0.0};
            run_gemm(dev, gemm_types[t], (keel_layout_t)layout, 1, 0, &shared);
        }
    /* more matrices than a grid's second dimension (65535) holds */
    gemm_case_t many = {2, 3, 2, 70000, 0, 0, 0, 1.0, 0.5};
    run_gemm(dev, gemm_types[0], KEEL_COL_MAJOR, 0, 0, &many);
}

/* k = 0: A and B may be NULL; C becomes beta C (0 for beta 0, over a NaN). */
KT_DEVICE_TEST(test_gemm_k0)
{
    keel_stream_t *s;
    KT_OK(keel_device_default_stream(dev, &s));
    for (size_t t = 0; t < NTYPES; t++)
        for (int bz = 0; bz <= 1; bz++) {
            types_t ty = gemm_types[t];
            size_t m = 9, n = 5, nc = m * n * 2;
            double *vc = rand_vals(ty.out, nc);
            vc[4] = bz ? NAN : vc[4];
            void *base, *c = upload(dev, ty.out, vc, nc, 0, &base);
            keel_gemm_params_t p;
            memset(&p, 0, sizeof p);
            p.struct_size = sizeof p;
            p.m = m, p.n = n, p.k = 0, p.alpha = 2.0, p.beta = bz ? 0.0 : -0.5;
            p.a_type = p.b_type = ty.in;
            p.c_type = ty.out;
            p.lda = 1, p.ldb = n, p.c = c, p.ldc = n, p.batch_count = 2, p.stride_c = m * n;
            KT_OK(keel_gemm(s, &p));
            double *got = download(dev, ty.out, c, nc);
            for (size_t i = 0; i < nc; i++) {
                double ref = p.beta == 0 ? 0.0 : to_dtype(ty.out, p.beta * vc[i]);
                EXPECT(got[i] == ref, "%sgemm k=0 %s beta %g: C[%zu] = %g, expected %g", kt_where(),
                       keel_dtype_name(ty.out), p.beta, i, got[i], ref);
            }
            free(vc);
            free(got);
            KT_OK(keel_free(base));
        }
}

/* ---- GEMV ---- */

static const keel_dtype_t dtypes[] = {KEEL_F32, KEEL_F64, KEEL_F16, KEEL_BF16};

KT_DEVICE_TEST(test_gemv)
{
    keel_stream_t *s;
    KT_OK(keel_device_default_stream(dev, &s));
    static const size_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {129, 1}, {1, 129}, {300, 257}, {5, 0}};
    for (size_t d = 0; d < 4; d++)
        for (int layout = 0; layout <= 1; layout++)
            for (int t = 0; t <= 1; t++)
                for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
                    keel_dtype_t dt = dtypes[d];
                    size_t m = shapes[q][0], n = shapes[q][1];
                    size_t lda = (layout == KEEL_ROW_MAJOR ? n : m) + (q % 2 ? 2 : 0), incx = q % 3 ? 1 : 3,
                           incy = q % 2 ? 2 : 1;
                    lda = lda ? lda : 1;
                    size_t xl = t ? m : n, yl = t ? n : m;
                    size_t na = gemm_ref_extent((keel_layout_t)layout, m, n, lda), nx = xl ? (xl - 1) * incx + 1 : 0,
                           ny = yl ? (yl - 1) * incy + 1 : 0;
                    double alpha = q % 2 ? 1.0 : -0.5, beta = q % 3 == 1 ? 0.0 : 0.75;
                    double *va = rand_vals(dt, na), *vx = rand_vals(dt, nx), *vy = rand_vals(dt, ny);
                    if (beta == 0)
                        for (size_t i = 0; i < ny; i++)
                            vy[i] = NAN;
                    void *ba, *bx, *by;
                    void *a = upload(dev, dt, va, na, 0, &ba), *x = upload(dev, dt, vx, nx, 0, &bx),
                         *y = upload(dev, dt, vy, ny, 0, &by);
                    KT_OK(keel_gemv(s, dt, (keel_layout_t)layout, t ? KEEL_TRANS : KEEL_NO_TRANS, m, n, alpha, a, lda,
                                    x, incx, beta, y, incy));
                    double *got = download(dev, dt, y, ny);
                    for (size_t i = 0; i < ny; i++) {
                        if (i % incy) {
                            EXPECT(isnan(got[i]) ? isnan(vy[i]) : got[i] == vy[i],
                                   "%sgemv: y[%zu] between the increments changed", kt_where(), i);
                            continue;
                        }
                        size_t r = i / incy;
                        double acc = 0, mag = 0;
                        for (size_t l = 0; l < xl; l++) {
                            double e = t ? va[gemm_ref_idx((keel_layout_t)layout, lda, l, r)]
                                         : va[gemm_ref_idx((keel_layout_t)layout, lda, r, l)];
                            acc += e * vx[l * incx];
                            mag += fabs(e * vx[l * incx]);
                        }
                        double ref = to_dtype(dt, alpha * acc + (beta != 0 ? beta * vy[i] : 0));
                        double tol = (2.0 * xl + 4) * ceps(dt) * (fabs(alpha) * mag + fabs(beta * (beta ? vy[i] : 0))) +
                                     2 * ulp_of(dt) * fabs(ref);
                        EXPECT(fabs(got[i] - ref) <= tol,
                               "%sgemv %s %s trans %d %zux%zu incx %zu incy %zu beta %g: y[%zu] = %.10g, expected "
                               "%.10g (seed %lu)",
                               kt_where(), keel_dtype_name(dt), layout ? "col" : "row", t, m, n, incx, incy, beta, r,
                               got[i], ref, kt_seed());
                    }
                    free(va);
                    free(vx);
                    free(vy);
                    free(got);
                    KT_OK(keel_free(ba));
                    KT_OK(keel_free(bx));
                    KT_OK(keel_free(by));
                }
}

/* ---- dense ---- */

static double ref_act(keel_activation_t act, double v)
{
    switch (act) {
    case KEEL_ACT_RELU: return v < 0 ? 0 : v;
    case KEEL_ACT_GELU: return 0.5 * v * (1 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
    case KEEL_ACT_GELU_ERF: return 0.5 * v * (1 + erf(v * 0.70710678118654752440));
    default: return v;
    }
}

KT_DEVICE_TEST(test_dense)
{
    keel_stream_t *s;
    KT_OK(keel_device_default_stream(dev, &s));
    static const size_t shapes[][3] = {{1, 1, 1}, {7, 33, 129}, {129, 7, 33}, {33, 129, 7}, {9, 4, 0}};
    for (size_t d = 0; d < 4; d++)
        for (int layout = 0; layout <= 1; layout++)
            for (int tw = 0; tw <= 1; tw++)
                for (int act = KEEL_ACT_NONE; act <= KEEL_ACT_GELU_ERF; act++)
                    for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
                        keel_dtype_t dt = dtypes[d];
                        keel_layout_t lay = (keel_layout_t)layout;
                        size_t m = shapes[q][0], n = shapes[q][1], kk = shapes[q][2];
                        size_t wr = tw ? kk : m, wc = tw ? m : kk, pad = (act + q) % 2 ? 3 : 0;
                        size_t ldw = (lay == KEEL_ROW_MAJOR ? wc : wr) + pad,
                               ldx = (lay == KEEL_ROW_MAJOR ? n : kk) + pad, ldy = (lay == KEEL_ROW_MAJOR ? n : m) + pad;
                        ldw = ldw ? ldw : 1;
                        ldx = ldx ? ldx : 1;
                        size_t nw = gemm_ref_extent(lay, wr, wc, ldw), nx = gemm_ref_extent(lay, kk, n, ldx), ny = gemm_ref_extent(lay, m, n, ldy);
                        int with_bias = (act + q) % 3 != 0;
                        double *vw = rand_vals(dt, nw), *vx = rand_vals(dt, nx), *vb = rand_vals(dt, m),
                               *vy = rand_vals(dt, ny);
                        for (size_t i = 0; i < ny; i += 2)
                            vy[i] = NAN; /* Y is not read */
                        void *bw, *bx, *bb, *by;
                        void *w = upload(dev, dt, vw, nw, 0, &bw), *x = upload(dev, dt, vx, nx, 0, &bx),
                             *b = upload(dev, dt, vb, m, 0, &bb), *y = upload(dev, dt, vy, ny, 0, &by);
                        keel_dense_params_t p;
                        memset(&p, 0, sizeof p);
                        p.struct_size = sizeof p;
                        p.layout = lay;
                        p.transw = tw ? KEEL_TRANS : KEEL_NO_TRANS;
                        p.m = m, p.n = n, p.k = kk;
                        p.dtype = dt;
                        p.act = (keel_activation_t)act;
                        p.w = w, p.ldw = ldw, p.x = x, p.ldx = ldx, p.bias = with_bias ? b : NULL, p.y = y, p.ldy = ldy;
                        KT_OK(keel_dense(s, &p));
                        double *got = download(dev, dt, y, ny);
                        char *written = calloc(ny ? ny : 1, 1);
                        for (size_t i = 0; i < m; i++)
                            for (size_t j = 0; j < n; j++) {
                                double acc = 0, mag = 0;
                                for (size_t l = 0; l < kk; l++) {
                                    double e = tw ? vw[gemm_ref_idx(lay, ldw, l, i)] : vw[gemm_ref_idx(lay, ldw, i, l)];
                                    acc += e * vx[gemm_ref_idx(lay, ldx, l, j)];
                                    mag += fabs(e * vx[gemm_ref_idx(lay, ldx, l, j)]);
                                }
                                double pre = acc + (with_bias ? vb[i] : 0);
                                double ref = to_dtype(dt, ref_act((keel_activation_t)act, pre));
                                /* the activation's slope is at most 1.13 (GELU) */
                                double tol = 1.13 * ((2.0 * kk + 8) * ceps(dt) * (mag + fabs(pre))) +
                                             2 * ulp_of(dt) * fabs(ref) + (dt == KEEL_F64 ? 0 : 1e-6);
                                size_t e = gemm_ref_idx(lay, ldy, i, j);
                                written[e] = 1;
                                EXPECT(fabs(got[e] - ref) <= tol,
                                       "%sdense %s %s tw %d act %d bias %d %zux%zux%zu: Y(%zu,%zu) = %.10g, expected "
                                       "%.10g (seed %lu)",
                                       kt_where(), keel_dtype_name(dt), layout ? "col" : "row", tw, act, with_bias, m,
                                       n, kk, i, j, got[e], ref, kt_seed());
                            }
                        for (size_t e = 0; e < ny; e++)
                            EXPECT(written[e] || (isnan(got[e]) ? isnan(vy[e]) : got[e] == vy[e]),
                                   "%sdense: element %zu outside Y changed", kt_where(), e);
                        free(written);
                        free(vw);
                        free(vx);
                        free(vb);
                        free(vy);
                        free(got);
                        KT_OK(keel_free(bw));
                        KT_OK(keel_free(bx));
                        KT_OK(keel_free(bb));
                        KT_OK(keel_free(by));
                    }
}

static Suite *blas_suite(void)
{
    Suite *s = suite_create("blas-portable");
    TCase *tc = tcase_create("portable");
    tcase_set_timeout(tc, 300);
    kt_add_device_test(tc, test_blas_info);
    kt_add_device_test(tc, test_gemm_sizes);
    kt_add_device_test(tc, test_gemm_alignment);
    kt_add_device_test(tc, test_gemm_batched);
    kt_add_device_test(tc, test_gemm_k0);
    kt_add_device_test(tc, test_gemv);
    kt_add_device_test(tc, test_dense);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    /* before Keel reads its environment: every device runs Keel's own kernels */
    setenv("KEEL_BLAS", "fallback", 1);
    /* one pass: the kernels do not depend on how many devices there are
     * (test-ops-fallback.sh runs the operations suite on three) */
    return kt_main(argc, argv, blas_suite(), 1, 0);
}
