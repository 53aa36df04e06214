/* SPDX-License-Identifier: MIT */
/* The CUDA operations table (keel/backend_ops.h): hand-written kernels for
 * the memory-bound operations (kernels/gpu/), cuBLASLt for GEMM and the
 * dense layer, cuBLAS for GEMV and as the fallback.
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
#include "cuda_shared.h"
#include "keel/backend_ops.h"
#include "kernels/gpu/ops_gpu.h"

static keel_status_t launched(cudaError_t err, const char *fn)
{
    if (KEEL_CUDA_UNLIKELY(err != cudaSuccess))
        return keel__cuda_error(err, fn, "kernel launch");
    return KEEL_OK;
}

static keel_status_t blas_fail(cublasStatus_t st, const char *fn, const char *call)
{
    keel_status_t ks = st == CUBLAS_STATUS_ALLOC_FAILED ? KEEL_ERROR_OUT_OF_MEMORY
                       : st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH
                           ? KEEL_ERROR_NOT_SUPPORTED
                       : st == CUBLAS_STATUS_EXECUTION_FAILED ? KEEL_ERROR_LAUNCH_FAILED
                                                              : KEEL_ERROR_BACKEND;
    return keel__cuda_host->set_error(ks, "%s: %s: %s: %s", fn, call, cublasGetStatusName(st),
                                      cublasGetStatusString(st));
}

static keel_status_t too_big(const char *fn)
{
    return keel__cuda_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                      "%s: a dimension, leading dimension or increment above 2^31-1 is not "
                                      "supported by the CUDA backend",
                                      fn);
}

#define FITS_INT(v) ((v) <= (size_t)INT_MAX)

/* ======================================================================== */
/* memory-bound operations                                                   */
/* ======================================================================== */

static keel_status_t cu_fill(void *ctx, keel_dtype_t dt, void *ptr, size_t n, double value)
{
    cudaStream_t s = on_device(ctx);
    if (value == 0.0 && !signbit(value)) /* +0.0 is all zero bits in every dtype */
        return launched(cudaMemsetAsync(ptr, 0, n * esize(dt), s), "keel_fill");
    return launched(keel__gpu_fill(s, (int)dt, ptr, n, value), "keel_fill");
}

static keel_status_t cu_cast(void *ctx, keel_dtype_t sdt, const void *src, keel_dtype_t ddt, void *dst, size_t n)
{
    cudaStream_t s = on_device(ctx);
    if (sdt == ddt) {
        if (src == dst)
            return KEEL_OK;
        return launched(cudaMemcpyAsync(dst, src, n * esize(sdt), cudaMemcpyDefault, s), "keel_cast");
    }
    return launched(keel__gpu_cast(s, (int)sdt, src, (int)ddt, dst, n), "keel_cast");
}

static keel_status_t cu_copy_2d(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *src, size_t lds,
                                void *dst, size_t ldd)
{
    cudaStream_t s = on_device(ctx);
    size_t es = esize(dt);
    if (rows == 1 || (lds == cols && ldd == cols)) /* one contiguous block (and any ld for one row) */
        return launched(cudaMemcpyAsync(dst, src, rows * cols * es, cudaMemcpyDefault, s), "keel_copy_2d");
    /* the copy engines take strided copies as they are */
    return launched(cudaMemcpy2DAsync(dst, ldd * es, src, lds * es, cols * es, rows, cudaMemcpyDefault, s),
                    "keel_copy_2d");
}

static keel_status_t cu_transpose(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *src, size_t lds,
                                  void *dst, size_t ldd)
{
    return launched(keel__gpu_transpose(on_device(ctx), esize(dt), rows, cols, src, lds, dst, ldd), "keel_transpose");
}

static keel_status_t cu_unary(void *ctx, keel_unary_op_t op, keel_dtype_t dt, size_t n, const void *x, void *y)
{
    return launched(keel__gpu_unary(on_device(ctx), (int)op, (int)dt, n, x, y), "keel_unary");
}

static keel_status_t cu_binary(void *ctx, const keel_binary_args_t *a)
{
    return launched(keel__gpu_binary(on_device(ctx), (int)a->op, (int)a->dtype, (int)a->broadcast, a->rows, a->cols,
                                     a->alpha, a->a, a->lda, a->beta, a->b, a->ldb, a->y, a->ldy),
                    "keel_binary");
}

static keel_status_t cu_reduce(void *ctx, keel_reduce_op_t op, keel_dtype_t dt, size_t rows, size_t cols,
                               const void *x, size_t ld, keel_reduce_axis_t axis, void *out)
{
    /* Partial results go to the stream's BLAS workspace: it is ordered with
     * everything else on the stream, so no allocation is needed here. */
    cublasLtHandle_t lt;
    void *ws = NULL;
    size_t wsb = 0;
    keel_status_t st = keel__cuda_cublaslt(ctx, &lt, &ws, &wsb);
    if (st != KEEL_OK)
        return st;
    return launched(keel__gpu_reduce(on_device(ctx), (int)op, (int)dt, (int)axis, rows, cols, x, ld, out, ws, wsb),
                    "keel_reduce");
}

static keel_status_t cu_argmax_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x, size_t ld,
                                    int64_t *out)
{
    return launched(keel__gpu_argmax_rows(on_device(ctx), (int)dt, rows, cols, x, ld, out), "keel_argmax_rows");
}

static keel_status_t cu_softmax_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                     size_t ldx, void *y, size_t ldy, int lg)
{
    return launched(keel__gpu_softmax_rows(on_device(ctx), (int)dt, rows, cols, x, ldx, y, ldy, lg),
                    "keel_softmax_rows");
}

static keel_status_t cu_layernorm_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                       size_t ldx, const void *gamma, const void *beta, double eps, void *y,
                                       size_t ldy)
{
    return launched(keel__gpu_layernorm_rows(on_device(ctx), (int)dt, rows, cols, x, ldx, gamma, beta, eps, y, ldy),
                    "keel_layernorm_rows");
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
    (void)on_device(ctx);
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

static keel_status_t cu_gemm(void *ctx, const keel_gemm_params_t *p)
{
    if (p->k == 0) /* C = beta C: cuBLAS versions differ on k = 0 */
        return launched(keel__gpu_scale(on_device(ctx), (int)p->c_type, p->m, p->n, p->c, p->ldc, p->batch_count,
                                        p->stride_c, p->beta),
                        "keel_gemm");
    keel_status_t st = gemm_lt(ctx, p);
    if (st != KEEL_ERROR_NOT_SUPPORTED)
        return st;
    return gemm_ex(ctx, "keel_gemm", p->transa == KEEL_TRANS, p->transb == KEEL_TRANS, p->m, p->n, p->k, p->alpha,
                   p->a, p->a_type, p->lda, p->b, p->ldb, p->beta, p->c, p->c_type, p->ldc, p->compute,
                   p->batch_count, p->stride_a, p->stride_b, p->stride_c);
}

static keel_status_t cu_gemv(void *ctx, const keel_gemv_args_t *g)
{
    static const char fn[] = "keel_gemv";
    int t = g->trans == KEEL_TRANS;
    size_t xlen = t ? g->m : g->n, ylen = t ? g->n : g->m;
    if (xlen == 0) /* y = beta y; BLAS would leave y alone */
        return launched(keel__gpu_scale(on_device(ctx), (int)g->dtype, 1, ylen, g->y, g->incy, 1, 0, g->beta), fn);
    if (!FITS_INT(g->m) || !FITS_INT(g->n) || !FITS_INT(g->lda) || !FITS_INT(g->incx) || !FITS_INT(g->incy))
        return too_big(fn);
    if (g->dtype == KEEL_F32 || g->dtype == KEEL_F64) {
        cublasHandle_t h;
        keel_status_t st = keel__cuda_cublas(ctx, &h);
        if (st != KEEL_OK)
            return st;
        (void)on_device(ctx);
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
    key->device = ((keel__cuda_stream_t *)ctx)->dev->ordinal;
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
    keel__cuda_stream_t *s = ctx;
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
        return keel__cuda_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_gemm: no host memory for a cuBLASLt plan");
    cublasStatus_t cs = CUBLAS_STATUS_NOT_SUPPORTED;
    if (e->ok) {
        float fa = (float)p->alpha, fb = (float)p->beta;
        (void)on_device(ctx);
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
    keel__cuda_stream_t *s = ctx;
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
        return keel__cuda_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_dense: no host memory for a cuBLASLt plan");
    if (!e->ok || atomic_load_explicit(&e->unfused, memory_order_relaxed)) {
        if (owned)
            keel__cuda_lt_entry_free(e);
        return KEEL_ERROR_NOT_SUPPORTED;
    }
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
    (void)on_device(ctx);
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
    cudaStream_t s = on_device(ctx);
    if (p->k == 0)
        st = launched(keel__gpu_scale(s, (int)p->dtype, col ? p->m : p->n, col ? p->n : p->m, p->y, p->ldy, 1, 0, 0.0),
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
    return launched(keel__gpu_bias_act(s, (int)p->dtype, col, p->m, p->n, p->y, p->ldy, p->bias, (int)p->act),
                    "keel_dense");
}

static keel_status_t cu_dense(void *ctx, const keel_dense_params_t *p)
{
    keel_status_t st = dense_lt(ctx, p);
    return st != KEEL_ERROR_NOT_SUPPORTED ? st : dense_unfused(ctx, p);
}

/* cuBLAS and cuBLASLt are linked: usable wherever the plugin loaded. */
static int cu_blas(void *device_ctx, char *text, size_t size)
{
    int v[3] = {0, 0, 0};
    (void)device_ctx;
    (void)cublasGetProperty(MAJOR_VERSION, &v[0]);
    (void)cublasGetProperty(MINOR_VERSION, &v[1]);
    (void)cublasGetProperty(PATCH_LEVEL, &v[2]);
    snprintf(text, size, "cuBLAS and cuBLASLt %d.%d.%d", v[0], v[1], v[2]);
    return 1;
}

/* ======================================================================== */

static const keel_ops_vtable_t cuda_ops = {
    .abi_version = KEEL_OPS_ABI_VERSION,
    .struct_size = sizeof(keel_ops_vtable_t),
    .fill = cu_fill,
    .cast = cu_cast,
    .copy_2d = cu_copy_2d,
    .transpose = cu_transpose,
    .unary = cu_unary,
    .binary = cu_binary,
    .reduce = cu_reduce,
    .argmax_rows = cu_argmax_rows,
    .softmax_rows = cu_softmax_rows,
    .layernorm_rows = cu_layernorm_rows,
    .gemm = cu_gemm,
    .gemv = cu_gemv,
    .dense = cu_dense,
    .blas = cu_blas,
};

KEEL_CUDA_HIDDEN const void *keel__cuda_ops_table(void);
const void *keel__cuda_ops_table(void)
{
    return &cuda_ops;
}
