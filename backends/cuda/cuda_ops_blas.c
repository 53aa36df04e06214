/* SPDX-License-Identifier: MIT */
/* The CUDA plugin's BLAS-backed operations (the hooks of
 * backends/gpu/gpu_ops.h): cuBLASLt for GEMM and the dense layer, cuBLAS for
 * GEMV and as the fallback, and the stream's BLAS workspace as the
 * reductions' scratch.
 *
 * GEMM and the dense layer go through a cached cuBLASLt plan per shape
 * (cuda_lt_plan.c), so a call is one cublasLtMatmul where cublasGemmEx runs
 * its heuristic on every call; the dense layer fuses bias and activation
 * into cuBLASLt's epilogue where its plan timed that faster than GEMM plus
 * the separate pass. What a plan cannot take (no algorithm for the layout;
 * for the dense layer f64, erf GELU, misaligned pointers, k = 0) goes to
 * cublasGemmEx, plus one bias/activation pass for the dense layer. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "cuda_lt_plan.h"
#include "backends/gpu/gpu_ops.h"

static keel_status_t blas_fail(cublasStatus_t st, const char *fn, const char *call)
{
    keel_status_t ks = st == CUBLAS_STATUS_ALLOC_FAILED ? KEEL_ERROR_OUT_OF_MEMORY
                       : st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH
                           ? KEEL_ERROR_NOT_SUPPORTED
                       : st == CUBLAS_STATUS_EXECUTION_FAILED ? KEEL_ERROR_LAUNCH_FAILED
                                                              : KEEL_ERROR_BACKEND;
    return keel__gpu_host->set_error(ks, "%s: %s: %s: %s", fn, call, cublasGetStatusName(st),
                                     cublasGetStatusString(st));
}

static keel_status_t too_big(const char *fn)
{
    return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                     "%s: a dimension, leading dimension or increment above 2^31-1 is not "
                                     "supported by the CUDA backend",
                                     fn);
}

#define FITS_INT(v) ((v) <= (size_t)INT_MAX)

/* Partial results of the reductions go to the stream's BLAS workspace: it
 * is ordered with everything else on the stream. */
keel_status_t keel__gpu_ops_scratch(void *ctx, void **work, size_t *work_bytes)
{
    cublasLtHandle_t lt;
    return keel__cuda_cublaslt(ctx, &lt, work, work_bytes);
}

/* ======================================================================== */
/* GEMM and GEMV through cuBLAS                                              */
/* ======================================================================== */

/* One column-major cublasGemmEx-shaped call; scalars in the compute type. */
static keel_status_t gemm_ex(void *ctx, const char *fn, int ta, int tb, size_t m, size_t n, size_t k, double alpha,
                             const void *A, keel_dtype_t at, size_t lda, const void *B, size_t ldb, double beta,
                             void *C, keel_dtype_t ct, size_t ldc, keel_compute_t compute, size_t batch,
                             size_t sa, size_t sb, size_t sc)
{
    if (!FITS_INT(m) || !FITS_INT(n) || !FITS_INT(k) || !FITS_INT(lda) || !FITS_INT(ldb) || !FITS_INT(ldc) ||
        !FITS_INT(batch))
        return too_big(fn);
    cublasHandle_t h;
    keel_status_t st = keel__cuda_cublas(ctx, &h);
    if (st != KEEL_OK)
        return st;
    (void)keel__gpu_op_stream(ctx);
    cublasComputeType_t cty = compute_type(at, compute);
    float fa = (float)alpha, fb = (float)beta;
    const void *pa = at == KEEL_F64 ? (const void *)&alpha : (const void *)&fa;
    const void *pb = at == KEEL_F64 ? (const void *)&beta : (const void *)&fb;
    cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t cs;
    if (batch > 1)
        cs = cublasGemmStridedBatchedEx(h, oa, ob, (int)m, (int)n, (int)k, pa, A, cuda_type(at), (int)lda,
                                        (long long)sa, B, cuda_type(at), (int)ldb, (long long)sb, pb, C,
                                        cuda_type(ct), (int)ldc, (long long)sc, (int)batch, cty, CUBLAS_GEMM_DEFAULT);
    else
        cs = cublasGemmEx(h, oa, ob, (int)m, (int)n, (int)k, pa, A, cuda_type(at), (int)lda, B, cuda_type(at),
                          (int)ldb, pb, C, cuda_type(ct), (int)ldc, cty, CUBLAS_GEMM_DEFAULT);
    if (cs != CUBLAS_STATUS_SUCCESS)
        return blas_fail(cs, fn, batch > 1 ? "cublasGemmStridedBatchedEx" : "cublasGemmEx");
    return KEEL_OK;
}

static keel_status_t gemm_lt(void *ctx, const keel_gemm_params_t *p);

keel_status_t keel__gpu_blas_gemm(void *ctx, const keel_gemm_params_t *p)
{
    keel_status_t st = gemm_lt(ctx, p);
    if (st != KEEL_ERROR_NOT_SUPPORTED)
        return st;
    return gemm_ex(ctx, "keel_gemm", p->transa == KEEL_TRANS, p->transb == KEEL_TRANS, p->m, p->n, p->k, p->alpha,
                   p->a, p->a_type, p->lda, p->b, p->ldb, p->beta, p->c, p->c_type, p->ldc, p->compute,
                   p->batch_count, p->stride_a, p->stride_b, p->stride_c);
}

keel_status_t keel__gpu_blas_gemv(void *ctx, const keel_gemv_args_t *g)
{
    static const char fn[] = "keel_gemv";
    int t = g->trans == KEEL_TRANS;
    size_t xlen = t ? g->m : g->n, ylen = t ? g->n : g->m;
    if (!FITS_INT(g->m) || !FITS_INT(g->n) || !FITS_INT(g->lda) || !FITS_INT(g->incx) || !FITS_INT(g->incy))
        return too_big(fn);
    if (g->dtype == KEEL_F32 || g->dtype == KEEL_F64) {
        cublasHandle_t h;
        keel_status_t st = keel__cuda_cublas(ctx, &h);
        if (st != KEEL_OK)
            return st;
        (void)keel__gpu_op_stream(ctx);
        cublasStatus_t cs;
        cublasOperation_t op = t ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (g->dtype == KEEL_F32) {
            float a = (float)g->alpha, b = (float)g->beta;
            cs = cublasSgemv(h, op, (int)g->m, (int)g->n, &a, g->a, (int)g->lda, g->x, (int)g->incx, &b, g->y,
                             (int)g->incy);
        } else {
            cs = cublasDgemv(h, op, (int)g->m, (int)g->n, &g->alpha, g->a, (int)g->lda, g->x, (int)g->incx,
                             &g->beta, g->y, (int)g->incy);
        }
        return cs == CUBLAS_STATUS_SUCCESS ? KEEL_OK : blas_fail(cs, fn, g->dtype == KEEL_F32 ? "cublasSgemv" : "cublasDgemv");
    }
    /* 16-bit: y^T (1 x ylen, ld incy) = x^T (1 x xlen, ld incx) op(A)^T, one GEMM with f32 accumulation. */
    return gemm_ex(ctx, fn, 0, !t, 1, ylen, xlen, g->alpha, g->x, g->dtype, g->incx, g->a, g->lda, g->beta, g->y,
                   g->dtype, g->incy, KEEL_COMPUTE_DEFAULT, 1, 0, 0, 0);
}

static int aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* The stream's cuBLASLt handle and workspace, and a zeroed plan key for its device. */
static keel_status_t lt_start(void *ctx, cublasLtHandle_t *lt, void **ws, size_t *wsb, lt_key_t *key)
{
    keel_status_t st = keel__cuda_cublaslt(ctx, lt, ws, wsb);
    memset(key, 0, sizeof *key);
    key->device = ((keel__gpu_stream_t *)ctx)->dev->ordinal;
    return st;
}

/* The largest power of two (at most 256) that divides every address. */
static int alignment_of(const void *a, const void *b, const void *c)
{
    uintptr_t v = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | 256u;
    return (int)(v & (~v + 1));
}

/* GEMM through a cached cuBLASLt plan: the descriptors, layouts and
 * algorithm are made once per shape, so a call is one cublasLtMatmul, where
 * cublasGemmEx runs its heuristic on every call. NOT_SUPPORTED (no error
 * set): cublasGemmEx instead. */
static keel_status_t gemm_lt(void *ctx, const keel_gemm_params_t *p)
{
    if (p->a_type == KEEL_F64 || p->c_type == KEEL_F64 || p->batch_count > INT32_MAX)
        return KEEL_ERROR_NOT_SUPPORTED;
    cublasLtHandle_t lt;
    void *ws;
    size_t wsb;
    lt_key_t key;
    keel_status_t st = lt_start(ctx, &lt, &ws, &wsb, &key);
    if (st != KEEL_OK)
        return st;
    keel__gpu_stream_t *s = ctx;
    key.op = 1;
    key.dtype = (int)p->a_type;
    key.ctype = (int)p->c_type;
    key.compute = p->compute == KEEL_COMPUTE_TF32 && p->a_type == KEEL_F32 ? KEEL_COMPUTE_TF32 : 0;
    key.transw = p->transa == KEEL_TRANS;
    key.transx = p->transb == KEEL_TRANS;
    key.m = p->m, key.n = p->n, key.k = p->k;
    key.ldw = p->lda, key.ldx = p->ldb, key.ldy = p->ldc;
    key.batch = p->batch_count;
    if (p->batch_count > 1)
        key.sw = p->stride_a, key.sx = p->stride_b, key.sy = p->stride_c;
    key.align = alignment_of(p->a, p->b, p->c);
    int owned;
    gemm_tune_t tune = {p, s, ws, NULL, NULL};
    lt_entry_t *e = keel__cuda_lt_lookup(&key, lt, wsb, &owned, &tune);
    if (!e)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_gemm: no host memory for a cuBLASLt plan");
    cublasStatus_t cs = CUBLAS_STATUS_NOT_SUPPORTED;
    if (e->ok) {
        float fa = (float)p->alpha, fb = (float)p->beta;
        (void)keel__gpu_op_stream(ctx);
        cs = cublasLtMatmul(lt, e->desc, &fa, p->a, e->la, p->b, e->lb, &fb, p->c, e->lc, p->c, e->lc, lt_algo(e), ws,
                            wsb, s->stream);
    }
    if (owned)
        keel__cuda_lt_entry_free(e);
    if (cs == CUBLAS_STATUS_NOT_SUPPORTED)
        return KEEL_ERROR_NOT_SUPPORTED;
    return cs == CUBLAS_STATUS_SUCCESS ? KEEL_OK : blas_fail(cs, "keel_gemm", "cublasLtMatmul");
}

static keel_status_t dense_unfused(void *ctx, const keel_dense_params_t *p);

/* Returns KEEL_OK when it ran the fused path, NOT_SUPPORTED (without an
 * error set) when the other path must run: cuBLASLt has no epilogue for the
 * call, or the plan timed GEMM plus the pass faster for this shape. */
static keel_status_t dense_lt(void *ctx, const keel_dense_params_t *p)
{
    if (p->dtype == KEEL_F64 || p->act == KEEL_ACT_GELU_ERF || p->k == 0 ||
        !aligned16(p->w) || !aligned16(p->x) || !aligned16(p->y) || (p->bias && !aligned16(p->bias)))
        return KEEL_ERROR_NOT_SUPPORTED;
    cublasLtHandle_t lt;
    void *ws;
    size_t wsb;
    lt_key_t key;
    keel_status_t st = lt_start(ctx, &lt, &ws, &wsb, &key);
    if (st != KEEL_OK)
        return st;
    keel__gpu_stream_t *s = ctx;
    key.dtype = (int)p->dtype;
    key.compute = p->dtype == KEEL_F32 && p->compute == KEEL_COMPUTE_TF32;
    key.act = (int)p->act;
    key.has_bias = p->bias != NULL;
    key.transw = p->transw == KEEL_TRANS;
    key.row_major = p->layout == KEEL_ROW_MAJOR;
    key.m = p->m, key.n = p->n, key.k = p->k;
    key.ldw = p->ldw, key.ldx = p->ldx, key.ldy = p->ldy;
    if (key.compute)
        key.compute = KEEL_COMPUTE_TF32;
    int owned;
    gemm_tune_t tune = {NULL, s, ws, p, dense_unfused};
    lt_entry_t *e = keel__cuda_lt_lookup(&key, lt, wsb, &owned, &tune);
    if (!e)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_dense: no host memory for a cuBLASLt plan");
    if (!e->ok || atomic_load_explicit(&e->unfused, memory_order_relaxed)) {
        if (owned)
            keel__cuda_lt_entry_free(e);
        return KEEL_ERROR_NOT_SUPPORTED;
    }
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
    (void)keel__gpu_op_stream(ctx);
    pthread_mutex_lock(&e->lock);
    if (p->bias)
        cs = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias, sizeof p->bias);
    if (cs == CUBLAS_STATUS_SUCCESS)
        cs = cublasLtMatmul(lt, e->desc, &one, p->w, e->la, p->x, e->lb, &zero, p->y, e->lc, p->y, e->lc, lt_algo(e),
                            ws, wsb, s->stream);
    pthread_mutex_unlock(&e->lock);
    if (owned)
        keel__cuda_lt_entry_free(e);
    return cs == CUBLAS_STATUS_SUCCESS ? KEEL_OK : blas_fail(cs, "keel_dense", "cublasLtMatmul");
}

/* GEMM, then bias and activation in one pass over Y. */
static keel_status_t dense_unfused(void *ctx, const keel_dense_params_t *p)
{
    keel_status_t st;
    int col = p->layout == KEEL_COL_MAJOR, tw = p->transw == KEEL_TRANS;
    gpuStream_t s = keel__gpu_op_stream(ctx);
    if (p->k == 0)
        st = keel__gpu_launched(keel__gpu_scale(s, (int)p->dtype, col ? p->m : p->n, col ? p->n : p->m, p->y, p->ldy, 1, 0, 0.0),
                      "keel_dense");
    else if (col)
        st = gemm_ex(ctx, "keel_dense", tw, 0, p->m, p->n, p->k, 1.0, p->w, p->dtype, p->ldw, p->x, p->ldx, 0.0,
                     p->y, p->dtype, p->ldy, p->compute, 1, 0, 0, 0);
    else /* row-major Y is column-major Y^T = X^T op(W)^T */
        st = gemm_ex(ctx, "keel_dense", 0, tw, p->n, p->m, p->k, 1.0, p->x, p->dtype, p->ldx, p->w, p->ldw, 0.0,
                     p->y, p->dtype, p->ldy, p->compute, 1, 0, 0, 0);
    if (st != KEEL_OK)
        return st;
    if (!p->bias && p->act == KEEL_ACT_NONE)
        return KEEL_OK;
    return keel__gpu_launched(keel__gpu_bias_act(s, (int)p->dtype, col, p->m, p->n, p->y, p->ldy, p->bias, (int)p->act),
                    "keel_dense");
}

keel_status_t keel__gpu_blas_dense(void *ctx, const keel_dense_params_t *p)
{
    keel_status_t st = dense_lt(ctx, p);
    return st != KEEL_ERROR_NOT_SUPPORTED ? st : dense_unfused(ctx, p);
}

/* cuBLAS and cuBLASLt are linked: usable wherever the plugin loaded. */
int keel__gpu_blas_info(void *device_ctx, char *text, size_t size)
{
    int v[3] = {0, 0, 0};
    (void)device_ctx;
    (void)cublasGetProperty(MAJOR_VERSION, &v[0]);
    (void)cublasGetProperty(MINOR_VERSION, &v[1]);
    (void)cublasGetProperty(PATCH_LEVEL, &v[2]);
    snprintf(text, size, "cuBLAS and cuBLASLt %d.%d.%d", v[0], v[1], v[2]);
    return 1;
}
