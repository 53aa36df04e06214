/* SPDX-License-Identifier: MIT */
/* keel_gemm, keel_gemv and keel_dense on HIP (the hooks of
 * backends/gpu/gpu_ops.h), through rocBLAS and, for the dense layer,
 * hipBLASLt (both opened by hip_blas.c at first use; without rocBLAS GEMM
 * and GEMV answer NOT_SUPPORTED).
 *
 * GEMM: rocblas_gemm_ex, or rocblas_gemm_strided_batched_ex for a batch,
 * column-major as the core hands it over (a row-major call arrives with its
 * operands swapped), C passed as both C and D. f32 and f64; f16 and bf16
 * inputs with an output of the same type or f32, computed in f32. A tf32
 * request computes in f32: rocBLAS 5.x's gemm_ex has no tf32 setting, and
 * tf32 is a permission, not a demand (keel/ops.h).
 * GEMV: rocblas_sgemv / rocblas_dgemv; f16 and bf16 as a one-row GEMM.
 * Dense: hipBLASLt with bias and activation in its epilogue, through a plan
 * cached per shape (hip_hipblaslt_plan.c), where hipBLASLt is usable and
 * takes the call; otherwise (no hipBLASLt, f64, erf GELU, k = 0, a bias on
 * row-major data, misaligned operands, no algorithm for the shape) GEMM,
 * then one bias and activation pass (kernels/gpu).
 * k = 0 and an empty x make the output beta times itself, by the scale
 * kernel. Scalars are host values in the compute type. With beta = 0
 * rocBLAS does not read C, so the dense layer's Y need not be initialised. */
#include <limits.h>
#include <stdio.h>
#include "hip_internal.h"
#include "backends/gpu/gpu_ops.h"

static int rb_type(keel_dtype_t dt)
{
    switch (dt) {
    case KEEL_F64: return KEEL_RB_F64;
    case KEEL_F16: return KEEL_RB_F16;
    case KEEL_BF16: return KEEL_RB_BF16;
    default: return KEEL_RB_F32;
    }
}

static int rb_op(int trans)
{
    return trans ? KEEL_RB_OP_TRANSPOSE : KEEL_RB_OP_NONE;
}

/* rocBLAS takes 32-bit sizes, leading dimensions, increments and batch counts. */
static int fits(size_t v)
{
    return v <= (size_t)INT32_MAX;
}

static keel_status_t too_big(const char *keel_fn)
{
    return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                     "%s: a dimension, leading dimension, increment or batch count above 2^31-1 "
                                     "is not supported by the hip backend (rocBLAS takes 32-bit sizes)",
                                     keel_fn);
}

/* One column-major product C = alpha op(A) op(B) + beta C (a strided batch
 * when batch > 1); A and B of type at, C of type ct. */
typedef struct {
    int ta, tb;
    size_t m, n, k;
    double alpha, beta;
    const void *a, *b;
    void *c;
    keel_dtype_t at, ct;
    size_t lda, ldb, ldc;
    size_t batch, sa, sb, sc;
} product_t;

static keel_status_t run_product(void *ctx, const char *keel_fn, const product_t *q)
{
    if (!fits(q->m) || !fits(q->n) || !fits(q->k) || !fits(q->lda) || !fits(q->ldb) || !fits(q->ldc) ||
        !fits(q->batch))
        return too_big(keel_fn);
    const keel__rocblas_api_t *rb;
    keel__rocblas_handle_t h;
    keel_status_t st = keel__hip_rocblas(ctx, keel_fn, &rb, &h);
    if (st != KEEL_OK)
        return st;
    /* f64 computes in f64; everything else in f32, with f32 scalars. */
    int f64 = q->at == KEEL_F64, compute = f64 ? KEEL_RB_F64 : KEEL_RB_F32;
    float fa = (float)q->alpha, fb = (float)q->beta;
    const void *pa = f64 ? (const void *)&q->alpha : (const void *)&fa;
    const void *pb = f64 ? (const void *)&q->beta : (const void *)&fb;
    int ab = rb_type(q->at), c = rb_type(q->ct);
    int32_t m = (int32_t)q->m, n = (int32_t)q->n, k = (int32_t)q->k;
    int32_t lda = (int32_t)q->lda, ldb = (int32_t)q->ldb, ldc = (int32_t)q->ldc;
    int rs;
    if (q->batch > 1)
        rs = rb->gemm_strided_batched_ex(h, rb_op(q->ta), rb_op(q->tb), m, n, k, pa, q->a, ab, lda, (int64_t)q->sa,
                                         q->b, ab, ldb, (int64_t)q->sb, pb, q->c, c, ldc, (int64_t)q->sc, q->c, c,
                                         ldc, (int64_t)q->sc, (int32_t)q->batch, compute,
                                         KEEL_RB_GEMM_ALGO_STANDARD, 0, 0);
    else
        rs = rb->gemm_ex(h, rb_op(q->ta), rb_op(q->tb), m, n, k, pa, q->a, ab, lda, q->b, ab, ldb, pb, q->c, c, ldc,
                         q->c, c, ldc, compute, KEEL_RB_GEMM_ALGO_STANDARD, 0, 0);
    if (rs != KEEL_RB_STATUS_SUCCESS)
        return keel__hip_rocblas_error(rs, keel_fn,
                                       q->batch > 1 ? "rocblas_gemm_strided_batched_ex" : "rocblas_gemm_ex");
    return KEEL_OK;
}

keel_status_t keel__gpu_blas_gemm(void *ctx, const keel_gemm_params_t *p)
{
    product_t q = {
        .ta = p->transa == KEEL_TRANS, .tb = p->transb == KEEL_TRANS,
        .m = p->m, .n = p->n, .k = p->k, .alpha = p->alpha, .beta = p->beta,
        .a = p->a, .b = p->b, .c = p->c, .at = p->a_type, .ct = p->c_type,
        .lda = p->lda, .ldb = p->ldb, .ldc = p->ldc,
        .batch = p->batch_count, .sa = p->stride_a, .sb = p->stride_b, .sc = p->stride_c,
    };
    return run_product(ctx, "keel_gemm", &q);
}

/* rocblas_sgemv / rocblas_dgemv, column-major A (m x n). */
static keel_status_t gemv_blas(void *ctx, const keel_gemv_args_t *g, int t)
{
    static const char fn[] = "keel_gemv";
    const keel__rocblas_api_t *rb;
    keel__rocblas_handle_t h;
    keel_status_t st = keel__hip_rocblas(ctx, fn, &rb, &h);
    if (st != KEEL_OK)
        return st;
    int32_t m = (int32_t)g->m, n = (int32_t)g->n, lda = (int32_t)g->lda;
    int32_t incx = (int32_t)g->incx, incy = (int32_t)g->incy;
    int rs;
    if (g->dtype == KEEL_F32) {
        float a = (float)g->alpha, b = (float)g->beta;
        rs = rb->sgemv(h, rb_op(t), m, n, &a, g->a, lda, g->x, incx, &b, g->y, incy);
    } else {
        rs = rb->dgemv(h, rb_op(t), m, n, &g->alpha, g->a, lda, g->x, incx, &g->beta, g->y, incy);
    }
    if (rs != KEEL_RB_STATUS_SUCCESS)
        return keel__hip_rocblas_error(rs, fn, g->dtype == KEEL_F32 ? "rocblas_sgemv" : "rocblas_dgemv");
    return KEEL_OK;
}

keel_status_t keel__gpu_blas_gemv(void *ctx, const keel_gemv_args_t *g)
{
    static const char fn[] = "keel_gemv";
    int t = g->trans == KEEL_TRANS;
    size_t xlen = t ? g->m : g->n, ylen = t ? g->n : g->m;
    if (!fits(g->m) || !fits(g->n) || !fits(g->lda) || !fits(g->incx) || !fits(g->incy))
        return too_big(fn);
    if (g->dtype == KEEL_F32 || g->dtype == KEEL_F64)
        return gemv_blas(ctx, g, t);
    /* 16-bit: y^T (1 x ylen, ld incy) = x^T (1 x xlen, ld incx) op(A)^T, one
     * product accumulated in f32. */
    product_t q = {
        .ta = 0, .tb = !t, .m = 1, .n = ylen, .k = xlen, .alpha = g->alpha, .beta = g->beta,
        .a = g->x, .b = g->a, .c = g->y, .at = g->dtype, .ct = g->dtype,
        .lda = g->incx, .ldb = g->lda, .ldc = g->incy, .batch = 1,
    };
    return run_product(ctx, fn, &q);
}

/* The dense layer's plans, for every device and stream. */
static keel__hlt_cache_t hlt_plans = {.insert_lock = PTHREAD_MUTEX_INITIALIZER};

/* NOT_SUPPORTED, without an error set: the rocBLAS path runs @p p. */
static keel_status_t lt_refused(const keel__gpu_stream_t *s, const keel_dense_params_t *p, const char *why)
{
    if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG))
        keel__gpu_host->log(KEEL_LOG_DEBUG,
                            "keel_dense: %zux%zux%zu on hip:%d: hipBLASLt does not take it (%s); rocBLAS and a "
                            "separate bias/activation pass run it",
                            p->m, p->n, p->k, s->dev->ordinal, why);
    return KEEL_ERROR_NOT_SUPPORTED;
}

/* Runs @p p on hipBLASLt's epilogue: KEEL_OK, an error, or NOT_SUPPORTED
 * without an error set when hipBLASLt does not take the call and the other
 * path must run. */
static keel_status_t dense_lt(void *ctx, const keel_dense_params_t *p)
{
    keel__gpu_stream_t *s = ctx;
    keel__hlt_key_t key;
    const char *why = NULL;
    if (keel__hlt_dense_key(p, s->dev->ordinal, &key, &why) != 0)
        return lt_refused(s, p, why);
    const keel__hipblaslt_api_t *api;
    keel__hipblaslt_handle_t h;
    void *ws;
    size_t wsb;
    keel_status_t st = keel__hip_hipblaslt(ctx, &api, &h, &ws, &wsb);
    if (st != KEEL_OK)
        return st; /* NOT_SUPPORTED: not usable here, and hip_blas.c said why */
    char detail[192];
    int rs = 0;
    switch (keel__hlt_dense_run(&hlt_plans, api, h, &key, p, ws, wsb, s->stream, &rs, detail, sizeof detail)) {
    case KEEL_HLT_RAN: return KEEL_OK;
    case KEEL_HLT_REFUSED: return lt_refused(s, p, detail);
    case KEEL_HLT_NO_MEMORY: return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_dense: %s", detail);
    default:
        return keel__gpu_host->set_error(rs == KEEL_HLT_STATUS_ALLOC_FAILED       ? KEEL_ERROR_OUT_OF_MEMORY
                                         : rs == KEEL_HLT_STATUS_EXECUTION_FAILED ? KEEL_ERROR_LAUNCH_FAILED
                                                                                  : KEEL_ERROR_BACKEND,
                                         "keel_dense: %s", detail);
    }
}

/* GEMM through rocBLAS, then bias and activation in one pass over Y. */
static keel_status_t dense_unfused(void *ctx, const keel_dense_params_t *p)
{
    static const char fn[] = "keel_dense";
    int col = p->layout == KEEL_COL_MAJOR, tw = p->transw == KEEL_TRANS;
    keel_status_t st;
    if (p->k == 0) { /* Y = 0 before the bias and activation */
        st = keel__gpu_launched(keel__gpu_scale(keel__gpu_op_stream(ctx), (int)p->dtype, col ? p->m : p->n,
                                                col ? p->n : p->m, p->y, p->ldy, 1, 0, 0.0),
                                fn);
    } else {
        /* Column-major Y = op(W) X; row-major Y is column-major Y^T = X^T op(W)^T. */
        product_t q = {
            .ta = col ? tw : 0, .tb = col ? 0 : tw,
            .m = col ? p->m : p->n, .n = col ? p->n : p->m, .k = p->k, .alpha = 1.0, .beta = 0.0,
            .a = col ? p->w : p->x, .b = col ? p->x : p->w, .c = p->y, .at = p->dtype, .ct = p->dtype,
            .lda = col ? p->ldw : p->ldx, .ldb = col ? p->ldx : p->ldw, .ldc = p->ldy, .batch = 1,
        };
        st = run_product(ctx, fn, &q);
    }
    if (st != KEEL_OK || (p->bias == NULL && p->act == KEEL_ACT_NONE))
        return st;
    return keel__gpu_launched(
        keel__gpu_bias_act(keel__gpu_op_stream(ctx), (int)p->dtype, col, p->m, p->n, p->y, p->ldy, p->bias, (int)p->act),
        fn);
}

keel_status_t keel__gpu_blas_dense(void *ctx, const keel_dense_params_t *p)
{
    keel_status_t st = dense_lt(ctx, p);
    return st != KEEL_ERROR_NOT_SUPPORTED ? st : dense_unfused(ctx, p);
}
