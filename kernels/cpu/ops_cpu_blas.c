/* SPDX-License-Identifier: MIT */
/* CPU GEMM, GEMV and the dense layer on OpenBLAS (cblas); built only when
 * configure found it (without it, the core runs Keel's portable kernels,
 * runtime/ops_fallback.c). f16 and bf16 operands are widened to f32 into
 * buffers that each run allocates and frees itself (a call captured in a
 * graph runs many times, possibly on two streams at once), multiplied in
 * f32, and narrowed on the way out. If those buffers cannot be had, the run
 * takes a direct loop that converts element by element: slow, but right, as
 * a worker thread has no caller to report to. The core hands every call over
 * in column-major form (keel/backend_ops.h). */
#include "config.h"
#include <stdlib.h>
#include "runtime/fault.h"
#include "kernels/cpu/cpu_ops.h"
#include "backends/cpu/cpu_enqueue.h"
#include <cblas.h>
#include <stdio.h>
#include <string.h>

/* ---- column-major helpers ---- */

/* Widen a stored column-major matrix (r x c, leading dimension ld) of dt
 * into a packed f32 one (leading dimension r). */
static void widen(keel_dtype_t dt, const void *src, size_t r, size_t c, size_t ld, float *dst)
{
    for (size_t j = 0; j < c; j++)
        keel__load_f32(dt, (const uint16_t *)src + j * ld, r, dst + j * r);
}

static void narrow(keel_dtype_t dt, const float *src, size_t r, size_t c, void *dst, size_t ld)
{
    for (size_t j = 0; j < c; j++)
        keel__store_f32(dt, (uint16_t *)dst + j * ld, r, src + j * r);
}

static inline float load1(keel_dtype_t dt, const void *p, size_t i)
{
    return dt == KEEL_F32 ? ((const float *)p)[i]
           : dt == KEEL_F16 ? keel__f16_to_f32(((const uint16_t *)p)[i])
                            : keel__bf16_to_f32(((const uint16_t *)p)[i]);
}

static inline void store1(keel_dtype_t dt, void *p, size_t i, float v)
{
    if (dt == KEEL_F32)
        ((float *)p)[i] = v;
    else if (dt == KEEL_F16)
        ((uint16_t *)p)[i] = keel__f32_to_f16(v);
    else
        ((uint16_t *)p)[i] = keel__f32_to_bf16(v);
}

/* f32 buffer of r x c, or NULL (also for an empty one). */
static float *alloc_f32(size_t r, size_t c)
{
    size_t bytes;
    if (r == 0 || c == 0 || __builtin_mul_overflow(r * c, sizeof(float), &bytes))
        return NULL;
    return keel__malloc(bytes);
}

static void sgemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *A, size_t lda,
                  const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

static void dgemm(int ta, int tb, size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                  const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/* C = beta C for k == 0 (BLAS libraries differ on whether they accept it). */
#define DEFINE_SCALE(T)                                                                   \
    static void scale_##T(size_t m, size_t n, T beta, T *C, size_t ldc)                   \
    {                                                                                     \
        for (size_t j = 0; j < n; j++)                                                    \
            for (size_t i = 0; i < m; i++)                                                \
                C[i + j * ldc] = beta == 0 ? (T)0 : beta * C[i + j * ldc];                \
    }
DEFINE_SCALE(float)
DEFINE_SCALE(double)

/* ======================================================================== */
/* GEMM                                                                      */
/* ======================================================================== */

typedef struct {
    float *wa, *wb, *wc; /* f32 work buffers for 16-bit operands */
} gemm_work_t;

/* 16-bit GEMM without buffers, for when they could not be allocated. */
static void gemm_direct_half(const keel_gemm_params_t *p, const char *A, const char *B, char *C)
{
    int ta = p->transa == KEEL_TRANS, tb = p->transb == KEEL_TRANS;
    for (size_t j = 0; j < p->n; j++)
        for (size_t i = 0; i < p->m; i++) {
            float acc = 0;
            for (size_t l = 0; l < p->k; l++)
                acc += load1(p->a_type, A, ta ? l + i * p->lda : i + l * p->lda) *
                       load1(p->b_type, B, tb ? j + l * p->ldb : l + j * p->ldb);
            float v = (float)p->alpha * acc;
            if (p->beta != 0)
                v += (float)p->beta * load1(p->c_type, C, i + j * p->ldc);
            store1(p->c_type, C, i + j * p->ldc, v);
        }
}

/* Matrix bi of a batch at base. A and B may be NULL when k is 0 (they are
 * not read), and even NULL + 0 is undefined in C. */
static const char *batch_matrix(const void *base, size_t bi, size_t stride, size_t es)
{
    return base ? (const char *)base + bi * stride * es : NULL;
}

/* One product of the batch, column-major. */
static void gemm_one(const keel_gemm_params_t *p, const gemm_work_t *r, size_t bi)
{
    size_t m = p->m, n = p->n, k = p->k;
    int ta = p->transa == KEEL_TRANS, tb = p->transb == KEEL_TRANS;
    size_t ces = keel__dtype_size(p->c_type), ies = keel__dtype_size(p->a_type);
    const char *A = batch_matrix(p->a, bi, p->stride_a, ies);
    const char *B = batch_matrix(p->b, bi, p->stride_b, ies);
    char *C = (char *)p->c + bi * p->stride_c * ces;

    if (p->a_type == KEEL_F64) {
        if (k == 0)
            scale_double(m, n, p->beta, (double *)C, p->ldc);
        else
            dgemm(ta, tb, m, n, k, p->alpha, (const double *)A, p->lda, (const double *)B, p->ldb, p->beta,
                  (double *)C, p->ldc);
        return;
    }
    if (p->a_type != KEEL_F32 && ((k && (!r->wa || !r->wb)) || (p->c_type != KEEL_F32 && !r->wc))) {
        gemm_direct_half(p, A, B, C);
        return;
    }
    const float *fa = (const float *)A, *fb = (const float *)B;
    size_t lda = p->lda, ldb = p->ldb;
    if (p->a_type != KEEL_F32 && k) {
        size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        widen(p->a_type, A, ar, ac, lda, r->wa);
        widen(p->b_type, B, br, bc, ldb, r->wb);
        fa = r->wa;
        fb = r->wb;
        lda = ar;
        ldb = br;
    }
    float *fc = (float *)C;
    size_t ldc = p->ldc;
    if (p->c_type != KEEL_F32) {
        fc = r->wc;
        ldc = m;
        if (p->beta != 0)
            widen(p->c_type, C, m, n, p->ldc, fc);
    }
    if (k == 0)
        scale_float(m, n, (float)p->beta, fc, ldc);
    else
        sgemm(ta, tb, m, n, k, (float)p->alpha, fa, lda, fb, ldb, p->c_type != KEEL_F32 && p->beta == 0 ? 0.0f
              : (float)p->beta, fc, ldc);
    if (p->c_type != KEEL_F32)
        narrow(p->c_type, fc, m, n, C, p->ldc);
}

static void gemm_run(void *payload)
{
    const keel_gemm_params_t *p = payload;
    gemm_work_t w = {NULL, NULL, NULL};
    if (p->a_type == KEEL_F16 || p->a_type == KEEL_BF16) {
        if (p->k) {
            w.wa = alloc_f32(p->m, p->k);
            w.wb = alloc_f32(p->k, p->n);
        }
        if (p->c_type != KEEL_F32)
            w.wc = alloc_f32(p->m, p->n);
    }
    for (size_t b = 0; b < p->batch_count; b++)
        gemm_one(p, &w, b);
    free(w.wa);
    free(w.wb);
    free(w.wc);
}

/* Up to this many multiply-adds (64^3) a product costs too little for the
 * hand-off to the stream's worker to be worth it: on an idle stream it runs
 * on the calling thread (keel__cpu_enqueue_small). */
#define SMALL_MACS ((size_t)1 << 18)

/* m * n * k * batch without overflow: SMALL_MACS + 1 when over. */
static size_t macs(size_t m, size_t n, size_t k, size_t batch)
{
    size_t r = 1, f[4] = {m, n, k, batch ? batch : 1};
    for (int i = 0; i < 4; i++) {
        if (f[i] && r > SMALL_MACS / f[i])
            return SMALL_MACS + 1;
        r *= f[i];
    }
    return r;
}

keel_status_t keel__cpu_gemm(void *s, const keel_gemm_params_t *p)
{
    if (macs(p->m, p->n, p->k, p->batch_count) <= SMALL_MACS) {
        keel_gemm_params_t c = *p;   /* the runner gets a mutable payload; the caller's stays untouched */
        return keel__cpu_enqueue_small(s, gemm_run, &c, sizeof c);
    }
    return keel__cpu_enqueue(s, gemm_run, p, sizeof(*p));
}

/* ======================================================================== */
/* GEMV                                                                      */
/* ======================================================================== */

static void gemv_direct_half(const keel_gemv_args_t *g)
{
    int t = g->trans == KEEL_TRANS;
    size_t xlen = t ? g->m : g->n, ylen = t ? g->n : g->m;
    for (size_t i = 0; i < ylen; i++) {
        float acc = 0;
        for (size_t l = 0; l < xlen; l++)
            acc += load1(g->dtype, g->a, t ? l + i * g->lda : i + l * g->lda) * load1(g->dtype, g->x, l * g->incx);
        float v = (float)g->alpha * acc;
        if (g->beta != 0)
            v += (float)g->beta * load1(g->dtype, g->y, i * g->incy);
        store1(g->dtype, g->y, i * g->incy, v);
    }
}

static void gemv_run(void *payload)
{
    const keel_gemv_args_t *g = payload;
    int t = g->trans == KEEL_TRANS;
    size_t xlen = t ? g->m : g->n, ylen = t ? g->n : g->m;
    if (g->dtype == KEEL_F64) {
        double *yd = g->y;
        /* BLAS skips the beta scaling when A is empty, and some versions let
         * 0 * NaN through when beta is 0: do both here. */
        if (g->beta == 0 || g->m == 0 || g->n == 0) {
            for (size_t i = 0; i < ylen; i++)
                yd[i * g->incy] = g->beta == 0 ? 0.0 : g->beta * yd[i * g->incy];
            if (g->m == 0 || g->n == 0)
                return;
        }
        cblas_dgemv(CblasColMajor, t ? CblasTrans : CblasNoTrans, (blasint)g->m, (blasint)g->n, g->alpha, g->a,
                    (blasint)g->lda, g->x, (blasint)g->incx, g->beta, g->y, (blasint)g->incy);
        return;
    }
    const float *A = g->a, *x = g->x;
    float *y = g->y;
    float *wa = NULL, *wx = NULL, *wy = NULL;
    size_t lda = g->lda, incx = g->incx, incy = g->incy;
    if (g->dtype != KEEL_F32) {
        int used = g->m && g->n;
        if (used) {
            wa = alloc_f32(g->m, g->n);
            wx = alloc_f32(1, xlen);
        }
        wy = alloc_f32(1, ylen);
        if (!wy || (used && (!wa || !wx))) {
            free(wa);
            free(wx);
            free(wy);
            gemv_direct_half(g);
            return;
        }
        if (used) {
            widen(g->dtype, g->a, g->m, g->n, g->lda, wa);
            widen(g->dtype, g->x, 1, xlen, g->incx, wx);
        }
        if (g->beta != 0)
            widen(g->dtype, g->y, 1, ylen, g->incy, wy);
        A = wa;
        x = wx;
        y = wy;
        lda = g->m ? g->m : 1;
        incx = incy = 1;
    }
    float beta = (float)g->beta;
    if (beta == 0)
        for (size_t i = 0; i < ylen; i++)
            y[i * incy] = 0.0f;
    if (g->m == 0 || g->n == 0) {
        for (size_t i = 0; i < ylen; i++)
            y[i * incy] = beta == 0 ? 0.0f : beta * y[i * incy];
    } else {
        cblas_sgemv(CblasColMajor, t ? CblasTrans : CblasNoTrans, (blasint)g->m, (blasint)g->n, (float)g->alpha, A,
                    (blasint)lda, x, (blasint)incx, beta, y, (blasint)incy);
    }
    if (g->dtype != KEEL_F32)
        narrow(g->dtype, wy, 1, ylen, g->y, g->incy);
    free(wa);
    free(wx);
    free(wy);
}

keel_status_t keel__cpu_gemv(void *s, const keel_gemv_args_t *g)
{
    /* A GEMV does one multiply-add per matrix element. */
    if (macs(g->m, g->n, 1, 1) <= SMALL_MACS / 8) {
        keel_gemv_args_t c = *g;
        return keel__cpu_enqueue_small(s, gemv_run, &c, sizeof c);
    }
    return keel__cpu_enqueue(s, gemv_run, g, sizeof(*g));
}

/* ======================================================================== */
/* dense: Y = act(op(W) X + bias)                                            */
/* ======================================================================== */

typedef struct {
    keel_dense_params_t p;
    float *ww, *wx, *wy; /* f32 copies for 16-bit data, owned by one run */
} dense_run_t;

/* The unary operation that computes a transcendental activation, or 0 for
 * none and relu. */
static keel_unary_op_t act_math(keel_activation_t act)
{
    switch (act) {
    case KEEL_ACT_GELU_TANH: return KEEL_UNARY_GELU_TANH;
    case KEEL_ACT_GELU_ERF: return KEEL_UNARY_GELU_ERF;
    default: return (keel_unary_op_t)0;
    }
}

/* One element, as the vector loops compute it (the fallback without
 * buffers). */
static inline float act_f(keel_activation_t act, float v)
{
    if (act == KEEL_ACT_RELU)
        return v < 0 ? 0.0f : v;
    if (act_math(act))
        keel__cpu_math_f32(act_math(act), &v, &v, 1);
    return v;
}

/* The epilogue over "lines" of Y: for column-major Y a line is a column
 * (m elements, bias[i] per element); for row-major Y it is a row (n
 * elements, one bias value). Reads the f32 or f64 product, writes Y. In an
 * AVX2 build too, as the elementwise loops (the bias and ReLU over 256 x
 * 256 took 27 us in the SSE2 build, 17 in the AVX2 one). */
static KEEL_CPU_VEC void dense_epilogue(void *arg, size_t b, size_t e)
{
    const dense_run_t *r = arg;
    const keel_dense_params_t *p = &r->p;
    int col = p->layout == KEEL_COL_MAJOR;
    size_t len = col ? p->m : p->n;
    float bt[KEEL_CPU_TILE], t[KEEL_CPU_TILE];
    for (size_t line = b; line < e; line++) {
        if (p->dtype == KEEL_F64) {
            double *y = (double *)p->y + line * p->ldy;
            const double *bias = p->bias;
            for (size_t i = 0; i < len; i++) {
                double v = y[i] + (bias ? bias[col ? i : line] : 0.0);
                y[i] = p->act == KEEL_ACT_RELU && v < 0 ? 0.0 : v;
            }
            if (act_math(p->act))
                keel__cpu_math_f64(act_math(p->act), y, y, len);
            continue;
        }
        /* f32 product: in Y itself for f32, in the work buffer (packed) otherwise */
        float *src = p->dtype == KEEL_F32 ? (float *)p->y + line * p->ldy : r->wy + line * len;
        for (size_t off = 0; off < len; off += KEEL_CPU_TILE) {
            size_t c = len - off < KEEL_CPU_TILE ? len - off : KEEL_CPU_TILE;
            if (p->bias) {
                if (col)
                    keel__load_f32(p->dtype, (const char *)p->bias + off * keel__dtype_size(p->dtype), c, bt);
                else {
                    float bv;
                    keel__load_f32(p->dtype, (const char *)p->bias + line * keel__dtype_size(p->dtype), 1, &bv);
                    for (size_t i = 0; i < c; i++)
                        bt[i] = bv;
                }
            } else {
                for (size_t i = 0; i < c; i++)
                    bt[i] = 0.0f;
            }
            float *o = p->dtype == KEEL_F32 ? src + off : t;
            switch (p->act) {
            case KEEL_ACT_NONE:
                for (size_t i = 0; i < c; i++)
                    o[i] = src[off + i] + bt[i];
                break;
            case KEEL_ACT_RELU:
                for (size_t i = 0; i < c; i++) {
                    float v = src[off + i] + bt[i];
                    o[i] = v < 0 ? 0.0f : v;
                }
                break;
            default: /* the GELUs: the bias, then the unary operation's loop over the tile */
                for (size_t i = 0; i < c; i++)
                    o[i] = src[off + i] + bt[i];
                keel__cpu_math_f32(act_math(p->act), o, o, c);
                break;
            }
            if (p->dtype != KEEL_F32)
                keel__store_f32(p->dtype, (uint16_t *)p->y + line * p->ldy + off, c, t);
        }
    }
}

static inline float dense_at(const keel_dense_params_t *p, const void *m, size_t ld, size_t i, size_t j)
{
    return load1(p->dtype, m, p->layout == KEEL_COL_MAJOR ? i + j * ld : i * ld + j);
}

/* 16-bit dense without buffers, for when they could not be allocated. */
static void dense_direct_half(const keel_dense_params_t *p)
{
    int tw = p->transw == KEEL_TRANS;
    for (size_t i = 0; i < p->m; i++)
        for (size_t j = 0; j < p->n; j++) {
            float acc = 0;
            for (size_t l = 0; l < p->k; l++)
                acc += (tw ? dense_at(p, p->w, p->ldw, l, i) : dense_at(p, p->w, p->ldw, i, l)) *
                       dense_at(p, p->x, p->ldx, l, j);
            if (p->bias)
                acc += load1(p->dtype, p->bias, i);
            store1(p->dtype, p->y, p->layout == KEEL_COL_MAJOR ? i + j * p->ldy : i * p->ldy + j,
                   act_f(p->act, acc));
        }
}

static void dense_run(void *payload)
{
    dense_run_t run = {*(const keel_dense_params_t *)payload, NULL, NULL, NULL}, *r = &run;
    const keel_dense_params_t *p = &r->p;
    if (p->dtype == KEEL_F16 || p->dtype == KEEL_BF16) {
        if (p->k) {
            r->ww = alloc_f32(p->m, p->k);
            r->wx = alloc_f32(p->k, p->n);
        }
        r->wy = alloc_f32(p->m, p->n);
        if (!r->wy || (p->k && (!r->ww || !r->wx))) {
            free(r->ww);
            free(r->wx);
            free(r->wy);
            dense_direct_half(p);
            return;
        }
    }
    int col = p->layout == KEEL_COL_MAJOR, tw = p->transw == KEEL_TRANS;
    size_t m = p->m, n = p->n, k = p->k;
    size_t lines = col ? n : m, len = col ? m : n;
    /* In column-major terms: Y (m x n) = op(W) X; a row-major call is the
     * transposed product Y^T = X^T op(W)^T. */
    if (p->dtype == KEEL_F64) {
        if (k == 0)
            scale_double(len, lines, 0.0, p->y, p->ldy);
        else if (col)
            dgemm(tw, 0, m, n, k, 1.0, p->w, p->ldw, p->x, p->ldx, 0.0, p->y, p->ldy);
        else
            dgemm(0, tw, n, m, k, 1.0, p->x, p->ldx, p->w, p->ldw, 0.0, p->y, p->ldy);
    } else {
        const float *W = p->w, *X = p->x;
        size_t ldw = p->ldw, ldx = p->ldx;
        float *Y = p->y;
        size_t ldy = p->ldy;
        if (p->dtype != KEEL_F32) {
            /* widen in the stored orientation: stored r x c column-major, or
             * row-major seen as its column-major transpose */
            size_t wr = tw ? k : m, wc = tw ? m : k;
            if (col) {
                if (k) {
                    widen(p->dtype, p->w, wr, wc, p->ldw, r->ww);
                    widen(p->dtype, p->x, k, n, p->ldx, r->wx);
                }
                ldw = wr;
                ldx = k;
            } else {
                if (k) {
                    widen(p->dtype, p->w, wc, wr, p->ldw, r->ww);
                    widen(p->dtype, p->x, n, k, p->ldx, r->wx);
                }
                ldw = wc;
                ldx = n;
            }
            W = r->ww;
            X = r->wx;
            Y = r->wy;
            ldy = len;
        }
        if (k == 0)
            scale_float(len, lines, 0.0f, Y, ldy);
        else if (col)
            sgemm(tw, 0, m, n, k, 1.0f, W, ldw, X, ldx, 0.0f, Y, ldy);
        else
            sgemm(0, tw, n, m, k, 1.0f, X, ldx, W, ldw, 0.0f, Y, ldy);
    }
    /* Up to 2^20 elements the pass runs on this thread: right after the
     * GEMM, OpenBLAS's own threads still spin on the other cores, and
     * waking Keel's pool to share the pass cost more than it saved (256^3:
     * 47 -> 27 us over the GEMM alone on the 2-core development machine,
     * 512^3: 78 -> 58 us; 1024^3 the same either way). */
    if (lines * len <= ((size_t)1 << 20))
        dense_epilogue(r, 0, lines);
    else
        keel__cpu_parallel_for(lines, len >= KEEL_CPU_GRAIN ? 1 : KEEL_CPU_GRAIN / len, dense_epilogue, r);
    free(r->ww);
    free(r->wx);
    free(r->wy);
}

keel_status_t keel__cpu_dense(void *s, const keel_dense_params_t *p)
{
    if (macs(p->m, p->n, p->k, 1) <= SMALL_MACS) {
        keel_dense_params_t c = *p;
        return keel__cpu_enqueue_small(s, dense_run, &c, sizeof c);
    }
    return keel__cpu_enqueue(s, dense_run, p, sizeof(*p));
}

void keel__cpu_blas_name(char *text, size_t size)
{
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64": its
     * first two words, the library and its version */
    const char *config = openblas_get_config();
    if (!config || !config[0]) {
        snprintf(text, size, "OpenBLAS");
        return;
    }
    const char *space = strchr(config, ' ');
    const char *end = space ? strchr(space + 1, ' ') : NULL;
    snprintf(text, size, "%.*s", end ? (int)(end - config) : (int)strlen(config), config);
}
