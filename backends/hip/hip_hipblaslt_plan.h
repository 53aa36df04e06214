/* SPDX-License-Identifier: MIT */
/* The dense layer through hipBLASLt's fused epilogues (hip_hipblaslt_plan.c):
 * which calls hipBLASLt may take, the plan of a shape (the matmul
 * descriptor with its epilogue, the layouts, the heuristic's algorithm),
 * built once and kept in a lock-free cache, and the call. Plain C on the
 * table of hip_hipblaslt.h, no HIP headers: test-hipblaslt runs it against
 * a fake library. Internal to keel-hip. */
#ifndef KEEL_HIP_HIPBLASLT_PLAN_H
#define KEEL_HIP_HIPBLASLT_PLAN_H

#include <pthread.h>
#include <stdatomic.h>
#include "keel/ops.h"
#include "hip_hipblaslt.h"

/* What a plan depends on: one dense call's shape. Zeroed before it is
 * filled (it is hashed and compared as bytes). */
typedef struct {
    int device, dtype, act, has_bias, transw, row_major;
    uint64_t m, n, k, ldw, ldx, ldy;
} keel__hlt_key_t;

typedef struct keel__hlt_plan {
    keel__hlt_key_t key;
    int ok;                             /* 0: hipBLASLt does not take it; why says why */
    char why[128];
    keel__hlt_desc_t desc;
    keel__hlt_layout_t la, lb, lc;      /* A, B, and C = D */
    keel__hlt_heuristic_t algo;         /* the heuristic's first answer */
    pthread_mutex_t lock;               /* the bias pointer is set in the shared descriptor */
} keel__hlt_plan_t;

enum { KEEL_HLT_PLAN_SLOTS = 1024 };

/* Plans by key; zero-initialise it, with insert_lock PTHREAD_MUTEX_INITIALIZER. */
typedef struct {
    _Atomic(keel__hlt_plan_t *) slot[KEEL_HLT_PLAN_SLOTS];
    pthread_mutex_t insert_lock;
} keel__hlt_cache_t;

/* Whether hipBLASLt may take the dense call @p p on device @p device: 0
 * with the plan's key in *key; -1 with the reason in *why (a static
 * string) for what keel-hip does not hand it: f64, the erf GELU (hipBLASLt's
 * is the tanh form), k = 0, a bias on row-major data (hipBLASLt's bias runs
 * along the rows of column-major D only), a size above 2^31-1, and
 * operands off 16-byte alignment. */
KEEL_HLT_HIDDEN int keel__hlt_dense_key(const keel_dense_params_t *p, int device, keel__hlt_key_t *key,
                                        const char **why);

/* The plan for @p key, built on first use with @p handle (of the key's
 * device) for a workspace of @p ws_bytes; an entry with ok = 0 records that
 * hipBLASLt has no algorithm for it (or could not build it). *owned = 1
 * when the cache is full: the caller frees the plan after its call. NULL:
 * out of host memory. Thread-safe. */
KEEL_HLT_HIDDEN keel__hlt_plan_t *keel__hlt_plan_get(keel__hlt_cache_t *cache, const keel__hipblaslt_api_t *api,
                                                     keel__hipblaslt_handle_t handle, const keel__hlt_key_t *key,
                                                     size_t ws_bytes, int *owned);

/* Runs @p p through @p plan (built for its key, ok = 1) on @p stream: Y =
 * epilogue(op(W) X) with the bias pointer set in the plan's descriptor,
 * alpha 1 and beta 0 as f32. Returns the hipblasStatus_t, with the call
 * that failed in *call. A workspace smaller than the algorithm needs is
 * HIPBLAS_STATUS_NOT_SUPPORTED before any call. */
KEEL_HLT_HIDDEN int keel__hlt_plan_run(const keel__hipblaslt_api_t *api, keel__hipblaslt_handle_t handle,
                                       keel__hlt_plan_t *plan, const keel_dense_params_t *p, void *workspace,
                                       size_t ws_bytes, void *stream, const char **call);

/* What keel__hlt_dense_run did. */
typedef enum {
    KEEL_HLT_RAN = 0,       /* the matmul is enqueued */
    KEEL_HLT_REFUSED,       /* hipBLASLt does not take the call (why says why): take the other path */
    KEEL_HLT_FAILED,        /* a call failed otherwise (*status, and why names the call) */
    KEEL_HLT_NO_MEMORY      /* no host memory for the plan */
} keel__hlt_outcome_t;

/* The dense call @p p (whose key keel__hlt_dense_key made) through its
 * plan in @p cache: built on first use, run with @p handle, @p workspace
 * and @p stream. What the library refuses is KEEL_HLT_REFUSED: no
 * algorithm for the shape (remembered in the plan), or a matmul answering
 * HIPBLAS_STATUS_NOT_SUPPORTED, INVALID_VALUE or ARCH_MISMATCH (before it
 * enqueued anything); any other failure of the matmul is KEEL_HLT_FAILED,
 * with its hipblasStatus_t in *status. @p why (of @p why_size bytes) is
 * always terminated. Thread-safe. */
KEEL_HLT_HIDDEN keel__hlt_outcome_t keel__hlt_dense_run(keel__hlt_cache_t *cache, const keel__hipblaslt_api_t *api,
                                                        keel__hipblaslt_handle_t handle, const keel__hlt_key_t *key,
                                                        const keel_dense_params_t *p, void *workspace,
                                                        size_t ws_bytes, void *stream, int *status, char *why,
                                                        size_t why_size);

/* Destroys a plan's descriptors and frees it. */
KEEL_HLT_HIDDEN void keel__hlt_plan_free(const keel__hipblaslt_api_t *api, keel__hlt_plan_t *plan);

/* Frees every plan of @p cache (none may be in use). */
KEEL_HLT_HIDDEN void keel__hlt_cache_clear(keel__hlt_cache_t *cache, const keel__hipblaslt_api_t *api);

#endif /* KEEL_HIP_HIPBLASLT_PLAN_H */
