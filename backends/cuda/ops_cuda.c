/* The CUDA operations table (keel/backend_ops.h): hand-written kernels for
 * the memory-bound operations (kernels/gpu/ops_kernels.cu), copy engines for
 * copies, cuBLAS for GEMM and GEMV, cuBLASLt with fused epilogues for the
 * dense layer.
 *
 * GEMM goes to cublasGemmEx / cublasGemmStridedBatchedEx: that is what a
 * user calling cuBLAS directly gets, heuristics cache included, and nothing
 * is added on the way. The dense layer's cuBLASLt path builds its
 * descriptors, layouts and algorithm once per shape and keeps them in a
 * lock-free table; what cuBLASLt cannot fuse (f64, erf GELU, misaligned
 * pointers, k = 0, a layout its heuristic has no algorithm for) takes GEMM
 * plus one bias/activation pass. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "cuda_shared.h"
#include "keel/backend_ops.h"
#include "kernels/gpu/ops_gpu.h"

/* The stream of an operation, its device made current. The operation is
 * new work on the stream: a host function enqueued after it must wait for
 * it, not share the wait of one enqueued before (keel__cuda_stream_touch). */
static inline cudaStream_t on_device(void *ctx)
{
    keel__cuda_stream_t *s = ctx;
    (void)keel__cuda_use_device(s->dev);
    keel__cuda_stream_touch(s);
    return s->stream;
}

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

static size_t esize(keel_dtype_t dt)
{
    return dt == KEEL_F64 ? 8 : dt == KEEL_F32 ? 4 : 2;
}

static cudaDataType_t cuda_type(keel_dtype_t dt)
{
    switch (dt) {
    case KEEL_F64: return CUDA_R_64F;
    case KEEL_F16: return CUDA_R_16F;
    case KEEL_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

static cublasComputeType_t compute_type(keel_dtype_t in, keel_compute_t c)
{
    if (in == KEEL_F64)
        return CUBLAS_COMPUTE_64F;
    return c == KEEL_COMPUTE_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
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

/* ======================================================================== */
/* dense: cuBLASLt epilogues, per-shape cache                                */
/* ======================================================================== */

/* One key type for both users of the plan cache: dense (op 0; w, x, y)
 * and GEMM (op 1; w = A, x = B, y = C, transx, the C type, the batch and the
 * alignment class of the pointers). Keys are zeroed before they are filled. */
typedef struct {
    int device, dtype, compute, act, has_bias, transw, row_major;
    int op, transx, ctype, align;
    uint64_t m, n, k, ldw, ldx, ldy, batch, sw, sx, sy;
} lt_key_t;

typedef struct {
    lt_key_t key;
    int ok; /* 0: cuBLASLt has no algorithm for it; take the other path */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    pthread_mutex_t lock; /* the bias pointer lives in the shared descriptor */
} lt_entry_t;

#define LT_SLOTS 1024
static _Atomic(lt_entry_t *) lt_table[LT_SLOTS];
static pthread_mutex_t lt_insert_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a over the key's 8-byte words (the key is zeroed, padding included,
 * and a multiple of 8 bytes): a lookup is on every call's path. */
static uint64_t lt_hash(const lt_key_t *k)
{
    _Static_assert(sizeof(lt_key_t) % 8 == 0, "lt_key_t is hashed by 8-byte words");
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static void lt_entry_free(lt_entry_t *e)
{
    if (e->desc)
        cublasLtMatmulDescDestroy(e->desc);
    if (e->la)
        cublasLtMatrixLayoutDestroy(e->la);
    if (e->lb)
        cublasLtMatrixLayoutDestroy(e->lb);
    if (e->lc)
        cublasLtMatrixLayoutDestroy(e->lc);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* Builds the descriptors and asks the heuristic once. Returns NULL only
 * when host memory ran out; an entry with ok = 0 records "not fusable". */
/* What a GEMM plan may time its candidates with: the call that asked for it. */
typedef struct {
    const keel_gemm_params_t *p;
    keel__cuda_stream_t *s;
    void *ws;
} gemm_tune_t;

static void lt_build_gemm(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune);

static lt_entry_t *lt_build(const lt_key_t *key, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune)
{
    lt_entry_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *key;
    pthread_mutex_init(&e->lock, NULL);
    if (key->op == 1) {
        lt_build_gemm(e, lt, ws_bytes, tune);
        return e;
    }
    keel_dtype_t dt = (keel_dtype_t)key->dtype;
    cudaDataType_t ty = cuda_type(dt);
    cublasComputeType_t cty = compute_type(dt, (keel_compute_t)key->compute);
    cudaDataType_t scale = CUDA_R_32F;
    cublasOperation_t ta = key->transw ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi;
    switch (key->act) {
    case KEEL_ACT_RELU: epi = key->has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case KEEL_ACT_GELU: epi = key->has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    default: epi = key->has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    }
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    uint64_t wr = key->transw ? key->k : key->m, wc = key->transw ? key->m : key->k;
    /* Row-major data keeps its order in cuBLASLt's layouts, so the bias
     * still runs along the rows of D, which the epilogue requires. */
    cublasLtOrder_t order = CUBLASLT_ORDER_ROW;
    if (cublasLtMatmulDescCreate(&e->desc, cty, scale) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ==
            CUBLAS_STATUS_SUCCESS &&
        (!key->has_bias || cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &ty,
                                                          sizeof ty) == CUBLAS_STATUS_SUCCESS) &&
        cublasLtMatrixLayoutCreate(&e->la, ty, wr, wc, (int64_t)key->ldw) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&e->lb, ty, key->k, key->n, (int64_t)key->ldx) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&e->lc, ty, key->m, key->n, (int64_t)key->ldy) == CUBLAS_STATUS_SUCCESS &&
        (!key->row_major ||
         (cublasLtMatrixLayoutSetAttribute(e->la, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order) ==
              CUBLAS_STATUS_SUCCESS &&
          cublasLtMatrixLayoutSetAttribute(e->lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order) ==
              CUBLAS_STATUS_SUCCESS &&
          cublasLtMatrixLayoutSetAttribute(e->lc, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order) ==
              CUBLAS_STATUS_SUCCESS)) &&
        cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                             sizeof ws_bytes) == CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulAlgoGetHeuristic(lt, e->desc, e->la, e->lb, e->lc, e->lc, pref, 1, &res, &nres) ==
            CUBLAS_STATUS_SUCCESS &&
        nres > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
        e->algo = res.algo;
        e->ok = 1;
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    return e;
}

/* The cached entry for @p key, built on first use. NULL: out of host memory. */
static lt_entry_t *lt_lookup(const lt_key_t *key, cublasLtHandle_t lt, size_t ws_bytes, int *owned,
                             const gemm_tune_t *tune)
{
    uint64_t h = lt_hash(key);
    *owned = 0;
    for (size_t i = 0; i < LT_SLOTS; i++) {
        lt_entry_t *e = atomic_load_explicit(&lt_table[(h + i) % LT_SLOTS], memory_order_acquire);
        if (!e)
            break;
        if (memcmp(&e->key, key, sizeof *key) == 0)
            return e;
    }
    lt_entry_t *e = lt_build(key, lt, ws_bytes, tune);
    if (!e)
        return NULL;
    pthread_mutex_lock(&lt_insert_lock);
    for (size_t i = 0; i < LT_SLOTS; i++) {
        _Atomic(lt_entry_t *) *slot = &lt_table[(h + i) % LT_SLOTS];
        lt_entry_t *cur = atomic_load_explicit(slot, memory_order_acquire);
        if (cur && memcmp(&cur->key, key, sizeof *key) == 0) { /* another thread won */
            pthread_mutex_unlock(&lt_insert_lock);
            lt_entry_free(e);
            return cur;
        }
        if (!cur) {
            atomic_store_explicit(slot, e, memory_order_release);
            pthread_mutex_unlock(&lt_insert_lock);
            return e;
        }
    }
    pthread_mutex_unlock(&lt_insert_lock);
    *owned = 1; /* the table is full: use it once */
    return e;
}

static int aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

enum { LT_CANDIDATES = 8 };
/* Plans are tuned only where timing the candidates costs little:
 * 2 m n k batch up to 2^37 floating-point operations. */
#define LT_TUNE_MAX_FLOP 137438953472.0

/* The fastest of the heuristic's candidates for this call, timed once when
 * the plan is made (a warm-up, then 2 to 16 runs by size, into a scratch
 * output so that C is only read). A small product runs faster on the GPU
 * than the host enqueues it, so each candidate's runs wait behind a short
 * hold of the stream and then run back to back: the events time the GPU.
 * 0 (the heuristic's first) when timing is not possible: the stream is
 * capturing a graph, the product is large, or the scratch cannot be had.
 * The first call of a shape pays for it and waits for the stream; later
 * calls reuse the choice. */
static int gemm_pick(lt_entry_t *e, cublasLtHandle_t lt, const cublasLtMatmulHeuristicResult_t *res, int nres,
                     size_t ws_bytes, const gemm_tune_t *tune)
{
    const keel_gemm_params_t *p = tune->p;
    cudaStream_t st = on_device(tune->s);
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (nres < 2 || 2.0 * (double)p->m * (double)p->n * (double)p->k * (double)p->batch_count > LT_TUNE_MAX_FLOP ||
        cudaStreamIsCapturing(st, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone)
        return 0;
    size_t extent = (p->batch_count - 1) * p->stride_c + (p->n - 1) * p->ldc + p->m;
    void *d = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    int best = 0;
    float best_ms = 0;
    if (cudaMallocAsync(&d, extent * esize(p->c_type), st) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    double flop = 2.0 * (double)p->m * (double)p->n * (double)p->k * (double)p->batch_count;
    int runs = flop <= 1e9 ? 16 : flop <= 2e10 ? 6 : 2;
    if (cudaEventCreate(&t0) == cudaSuccess && cudaEventCreate(&t1) == cudaSuccess) {
        float fa = (float)p->alpha, fb = (float)p->beta;
        for (int i = 0; i < nres; i++) {
            if (res[i].state != CUBLAS_STATUS_SUCCESS)
                continue;
            int ok = 1;
            for (int r = 0; ok && r <= runs; r++) /* a warm-up, the hold and t0, then the timed runs */
                ok = (r != 1 || (keel__gpu_hold(st, 20000u + 10000u * (unsigned)runs) == cudaSuccess &&
                                 cudaEventRecord(t0, st) == cudaSuccess)) &&
                     cublasLtMatmul(lt, e->desc, &fa, p->a, e->la, p->b, e->lb, &fb, p->c, e->lc, d, e->lc,
                                    &res[i].algo, tune->ws, ws_bytes, st) == CUBLAS_STATUS_SUCCESS;
            float ms = 0;
            if (ok && cudaEventRecord(t1, st) == cudaSuccess && cudaEventSynchronize(t1) == cudaSuccess &&
                cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && (best_ms == 0 || ms < best_ms)) {
                best = i;
                best_ms = ms;
            }
        }
    }
    (void)cudaGetLastError();
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    cudaFreeAsync(d, st);
    return best;
}

/* A layout as a strided batch of `batch` matrices, `stride` elements apart. */
static int set_batch(cublasLtMatrixLayout_t l, int32_t batch, int64_t stride)
{
    return cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch) ==
               CUBLAS_STATUS_SUCCESS &&
           cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride) ==
               CUBLAS_STATUS_SUCCESS;
}

/* A GEMM plan: column-major layouts (strided batches when batch > 1), the
 * heuristic's first algorithm for the pointers' alignment. ok stays 0 when
 * cuBLASLt has none, and the call goes to cublasGemmEx. */
static void lt_build_gemm(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune)
{
    const lt_key_t *key = &e->key;
    keel_dtype_t at = (keel_dtype_t)key->dtype, ct = (keel_dtype_t)key->ctype;
    cublasComputeType_t cty = compute_type(at, (keel_compute_t)key->compute);
    cublasOperation_t ta = key->transw ? CUBLAS_OP_T : CUBLAS_OP_N, tb = key->transx ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t ar = key->transw ? key->k : key->m, ac = key->transw ? key->m : key->k;
    uint64_t br = key->transx ? key->n : key->k, bc = key->transx ? key->k : key->n;
    int32_t batch = (int32_t)key->batch;
    int64_t sw = (int64_t)key->sw, sx = (int64_t)key->sx, sy = (int64_t)key->sy;
    uint32_t align = (uint32_t)key->align;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
    int nres = 0;
#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)
    int ok = LT_OK(cublasLtMatmulDescCreate(&e->desc, cty, CUDA_R_32F)) &&
             LT_OK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
             LT_OK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
             LT_OK(cublasLtMatrixLayoutCreate(&e->la, cuda_type(at), ar, ac, (int64_t)key->ldw)) &&
             LT_OK(cublasLtMatrixLayoutCreate(&e->lb, cuda_type(at), br, bc, (int64_t)key->ldx)) &&
             LT_OK(cublasLtMatrixLayoutCreate(&e->lc, cuda_type(ct), key->m, key->n, (int64_t)key->ldy));
    if (ok && batch > 1)
        ok = set_batch(e->la, batch, sw) && set_batch(e->lb, batch, sx) && set_batch(e->lc, batch, sy);
    ok = ok && LT_OK(cublasLtMatmulPreferenceCreate(&pref)) &&
         LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                    sizeof ws_bytes));
    static const cublasLtMatmulPreferenceAttributes_t min_align[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; ok && i < sizeof min_align / sizeof min_align[0]; i++)
        ok = LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, min_align[i], &align, sizeof align));
    ok = ok && LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, e->desc, e->la, e->lb, e->lc, e->lc, pref, LT_CANDIDATES, res,
                                              &nres)) &&
         nres > 0 && res[0].state == CUBLAS_STATUS_SUCCESS;
#undef LT_OK
    if (ok) {
        e->algo = res[tune ? gemm_pick(e, lt, res, nres, ws_bytes, tune) : 0].algo;
        e->ok = 1;
    }
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
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
    gemm_tune_t tune = {p, s, ws};
    lt_entry_t *e = lt_lookup(&key, lt, wsb, &owned, &tune);
    if (!e)
        return keel__cuda_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_gemm: no host memory for a cuBLASLt plan");
    cublasStatus_t cs = CUBLAS_STATUS_NOT_SUPPORTED;
    if (e->ok) {
        float fa = (float)p->alpha, fb = (float)p->beta;
        (void)on_device(ctx);
        cs = cublasLtMatmul(lt, e->desc, &fa, p->a, e->la, p->b, e->lb, &fb, p->c, e->lc, p->c, e->lc, &e->algo, ws,
                            wsb, s->stream);
    }
    if (owned)
        lt_entry_free(e);
    if (cs == CUBLAS_STATUS_NOT_SUPPORTED)
        return KEEL_ERROR_NOT_SUPPORTED;
    return cs == CUBLAS_STATUS_SUCCESS ? KEEL_OK : blas_fail(cs, "keel_gemm", "cublasLtMatmul");
}

/* Returns KEEL_OK when it ran the fused path, NOT_SUPPORTED (without an
 * error set) when the other path must run. */
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
    lt_entry_t *e = lt_lookup(&key, lt, wsb, &owned, NULL);
    if (!e)
        return keel__cuda_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_dense: no host memory for a cuBLASLt plan");
    if (!e->ok) {
        if (owned)
            lt_entry_free(e);
        return KEEL_ERROR_NOT_SUPPORTED;
    }
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
    (void)on_device(ctx);
    pthread_mutex_lock(&e->lock);
    if (p->bias)
        cs = cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias, sizeof p->bias);
    if (cs == CUBLAS_STATUS_SUCCESS)
        cs = cublasLtMatmul(lt, e->desc, &one, p->w, e->la, p->x, e->lb, &zero, p->y, e->lc, p->y, e->lc, &e->algo,
                            ws, wsb, s->stream);
    pthread_mutex_unlock(&e->lock);
    if (owned)
        lt_entry_free(e);
    return cs == CUBLAS_STATUS_SUCCESS ? KEEL_OK : blas_fail(cs, "keel_dense", "cublasLtMatmul");
}

static keel_status_t cu_dense(void *ctx, const keel_dense_params_t *p)
{
    keel_status_t st = dense_lt(ctx, p);
    if (st != KEEL_ERROR_NOT_SUPPORTED)
        return st;
    /* GEMM, then bias and activation in one pass over Y. */
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
};

KEEL_CUDA_HIDDEN const void *keel__cuda_ops_table(void);
const void *keel__cuda_ops_table(void)
{
    return &cuda_ops;
}
