/* SPDX-License-Identifier: MIT */
/* The cuBLASLt plan cache of the CUDA operations (cuda_lt_plan.c), shared
 * by GEMM and the dense layer (cuda_ops_blas.c): per shape, the matmul
 * descriptor, the layouts and the algorithm, built once and kept in a
 * lock-free table, so that a call is one cublasLtMatmul; and the small
 * helpers both files use. Internal to the CUDA plugin. */
#ifndef KEEL_CUDA_LT_PLAN_H
#define KEEL_CUDA_LT_PLAN_H

#include "cuda_internal.h"
#include "backends/gpu/gpu_ops.h"

static inline cudaDataType_t cuda_type(keel_dtype_t dt)
{
    switch (dt) {
    case KEEL_F64: return CUDA_R_64F;
    case KEEL_F16: return CUDA_R_16F;
    case KEEL_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

static inline cublasComputeType_t compute_type(keel_dtype_t in, keel_compute_t c)
{
    if (in == KEEL_F64)
        return CUBLAS_COMPUTE_64F;
    return c == KEEL_COMPUTE_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/* One key type for both users of the plan cache: dense (op 0; w, x, y)
 * and GEMM (op 1; w = A, x = B, y = C, transx, the C type, the batch and the
 * alignment class of the pointers). Keys are zeroed before they are filled. */
typedef struct {
    int device, dtype, compute, act, has_bias, transw, row_major;
    int op, transx, ctype, align;
    uint64_t m, n, k, ldw, ldx, ldy, batch, sw, sx, sy;
} lt_key_t;

enum { LT_CANDIDATES = KEEL_CUDA_LT_ALGO_MAX + 1 };

typedef struct {
    lt_key_t key;
    int ok; /* 0: cuBLASLt has no algorithm for it; take the other path */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    /* The heuristic's candidates (fixed once built) and the one calls use:
     * the first, until the plan's candidates have been timed. */
    cublasLtMatmulHeuristicResult_t cand[LT_CANDIDATES];
    int ncand;
    _Atomic int pick;
    /* > 0: not timed yet because the stream had work queued; that many
     * later calls may still time them, when they find the stream idle. */
    _Atomic int tune_tries;
    /* dense only: 1 when GEMM plus the separate pass timed faster than the
     * fastest epilogue; calls then take that path */
    _Atomic int unfused;
    pthread_mutex_t lock; /* the bias pointer lives in the shared descriptor; held while timing */
} lt_entry_t;

/* The algorithm a call of the plan runs. */
static inline const cublasLtMatmulAlgo_t *lt_algo(lt_entry_t *e)
{
    return &e->cand[atomic_load_explicit(&e->pick, memory_order_acquire)].algo;
}

/* What a plan may time its candidates with: the call that asked for it. */
typedef struct {
    const keel_gemm_params_t *p;      /* a GEMM's call, or */
    keel__gpu_stream_t *s;
    void *ws;
    const keel_dense_params_t *dense; /* a dense layer's, and its other path: */
    keel_status_t (*unfused)(void *stream_ctx, const keel_dense_params_t *p); /* GEMM, then the pass */
} gemm_tune_t;

/* The plan for @p key, built on first use. Its candidates are timed on
 * @p tune's call (NULL: never; the heuristic's first) when the stream is
 * idle; a plan built on a busy stream times them on a later call that finds
 * it idle. *owned = 1 when the table is full and the caller must free the
 * entry after its call. NULL: out of host memory. */
KEEL_GPU_HIDDEN lt_entry_t *keel__cuda_lt_lookup(const lt_key_t *key, cublasLtHandle_t lt, size_t ws_bytes,
                                                 int *owned, const gemm_tune_t *tune);
KEEL_GPU_HIDDEN void keel__cuda_lt_entry_free(lt_entry_t *e);

#endif /* KEEL_CUDA_LT_PLAN_H */
