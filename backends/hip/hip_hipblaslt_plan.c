/* SPDX-License-Identifier: MIT */
/* hipBLASLt plans of the dense layer (hip_hipblaslt_plan.h).
 *
 * A dense call is one column-major product D = op(A) op(B) (M x N, k deep)
 * with the bias and activation in hipBLASLt's epilogue. Column-major Y =
 * op(W) X is A = W, B = X; row-major Y, which is column-major Y^T = X^T
 * op(W)^T, is A = X, B = W with op on B, as the rocBLAS path swaps them
 * (hip_ops_blas.c). hipBLASLt's bias is added along the rows of D, one
 * element per row: Keel's bias (one per row of Y) is that for column-major
 * Y only, so a row-major call with a bias stays with the rocBLAS path.
 * f32, f16 and bf16 accumulate in f32 (HIPBLAS_COMPUTE_32F, f32 scalars);
 * a tf32 request computes in f32 too (tf32 is a permission, keel/ops.h).
 * The bias has Y's type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hip_hipblaslt_plan.h"

static int hlt_type(keel_dtype_t dt)
{
    switch (dt) {
    case KEEL_F16: return KEEL_HLT_R_16F;
    case KEEL_BF16: return KEEL_HLT_R_16BF;
    default: return KEEL_HLT_R_32F;
    }
}

static int epilogue_of(int act, int has_bias)
{
    switch (act) {
    case KEEL_ACT_RELU: return has_bias ? KEEL_HLT_EPILOGUE_RELU_BIAS : KEEL_HLT_EPILOGUE_RELU;
    case KEEL_ACT_GELU_TANH: return has_bias ? KEEL_HLT_EPILOGUE_GELU_BIAS : KEEL_HLT_EPILOGUE_GELU;
    default: return has_bias ? KEEL_HLT_EPILOGUE_BIAS : KEEL_HLT_EPILOGUE_DEFAULT;
    }
}

static int misaligned(const void *ptr)
{
    return ((uintptr_t)ptr & 15u) != 0;
}

int keel__hlt_dense_key(const keel_dense_params_t *p, int device, keel__hlt_key_t *key, const char **why)
{
    const size_t big = (size_t)INT32_MAX;
    if (p->dtype != KEEL_F32 && p->dtype != KEEL_F16 && p->dtype != KEEL_BF16)
        *why = "keel-hip hands hipBLASLt f32, f16 and bf16 only";
    else if (p->act != KEEL_ACT_NONE && p->act != KEEL_ACT_RELU && p->act != KEEL_ACT_GELU_TANH)
        *why = "hipBLASLt's GELU epilogue is the tanh form";
    else if (p->k == 0)
        *why = "k = 0";
    else if (p->layout != KEEL_COL_MAJOR && p->bias != NULL)
        *why = "hipBLASLt adds a bias along the rows of column-major D only";
    else if (p->m > big || p->n > big || p->k > big || p->ldw > big || p->ldx > big || p->ldy > big)
        *why = "a size above 2^31-1";
    else if (misaligned(p->w) || misaligned(p->x) || misaligned(p->y) || misaligned(p->bias))
        *why = "an operand off 16-byte alignment";
    else
        *why = NULL;
    if (*why != NULL)
        return -1;
    memset(key, 0, sizeof *key);
    key->device = device;
    key->dtype = (int)p->dtype;
    key->act = (int)p->act;
    key->has_bias = p->bias != NULL;
    key->transw = p->transw == KEEL_TRANS;
    key->row_major = p->layout != KEEL_COL_MAJOR;
    key->m = p->m, key->n = p->n, key->k = p->k;
    key->ldw = p->ldw, key->ldx = p->ldx, key->ldy = p->ldy;
    return 0;
}

/* The column-major product of a key: D (mc x nc) = op(A) op(B), k deep. */
typedef struct {
    int ta, tb;
    uint64_t mc, nc, lda, ldb;
} product_t;

static product_t product_of(const keel__hlt_key_t *k)
{
    product_t q;
    if (!k->row_major) {
        q = (product_t){k->transw, 0, k->m, k->n, k->ldw, k->ldx};
    } else {
        q = (product_t){0, k->transw, k->n, k->m, k->ldx, k->ldw};
    }
    return q;
}

/* Records a failed build step in the plan: ok stays 0. */
static int failed(keel__hlt_plan_t *e, const char *call, int st)
{
    snprintf(e->why, sizeof e->why, "%s: %s (%d)", call, keel__hipblaslt_status_name(st), st);
    return 0;
}

#define TRY_HLT(e, call, expr)                          \
    do {                                                \
        int st_ = (expr);                               \
        if (st_ != KEEL_HLT_STATUS_SUCCESS)             \
            return failed((e), (call), st_);            \
    } while (0)

/* The descriptor with its epilogue, the layouts, and the heuristic's
 * answer for a workspace of @p ws_bytes; 1 when hipBLASLt has an
 * algorithm. The preference is destroyed by the caller. */
static int build(keel__hlt_plan_t *e, const keel__hipblaslt_api_t *api, keel__hipblaslt_handle_t h, size_t ws_bytes,
                 keel__hlt_pref_t *pref)
{
    const keel__hlt_key_t *k = &e->key;
    product_t q = product_of(k);
    int32_t ta = q.ta ? KEEL_HLT_OP_T : KEEL_HLT_OP_N, tb = q.tb ? KEEL_HLT_OP_T : KEEL_HLT_OP_N;
    int32_t epi = epilogue_of(k->act, k->has_bias), ty = hlt_type((keel_dtype_t)k->dtype);
    uint64_t ws = ws_bytes;
    TRY_HLT(e, "hipblasLtMatmulDescCreate", api->desc_create(&e->desc, KEEL_HLT_COMPUTE_32F, KEEL_HLT_R_32F));
    TRY_HLT(e, "hipblasLtMatmulDescSetAttribute(TRANSA)", api->desc_set(e->desc, KEEL_HLT_DESC_TRANSA, &ta, sizeof ta));
    TRY_HLT(e, "hipblasLtMatmulDescSetAttribute(TRANSB)", api->desc_set(e->desc, KEEL_HLT_DESC_TRANSB, &tb, sizeof tb));
    TRY_HLT(e, "hipblasLtMatmulDescSetAttribute(EPILOGUE)",
            api->desc_set(e->desc, KEEL_HLT_DESC_EPILOGUE, &epi, sizeof epi));
    if (k->has_bias)
        TRY_HLT(e, "hipblasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)",
                api->desc_set(e->desc, KEEL_HLT_DESC_BIAS_DATA_TYPE, &ty, sizeof ty));
    TRY_HLT(e, "hipblasLtMatrixLayoutCreate(A)",
            api->layout_create(&e->la, ty, q.ta ? k->k : q.mc, q.ta ? q.mc : k->k, (int64_t)q.lda));
    TRY_HLT(e, "hipblasLtMatrixLayoutCreate(B)",
            api->layout_create(&e->lb, ty, q.tb ? q.nc : k->k, q.tb ? k->k : q.nc, (int64_t)q.ldb));
    TRY_HLT(e, "hipblasLtMatrixLayoutCreate(D)", api->layout_create(&e->lc, ty, q.mc, q.nc, (int64_t)k->ldy));
    TRY_HLT(e, "hipblasLtMatmulPreferenceCreate", api->pref_create(pref));
    TRY_HLT(e, "hipblasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)",
            api->pref_set(*pref, KEEL_HLT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    int n = 0;
    TRY_HLT(e, "hipblasLtMatmulAlgoGetHeuristic",
            api->heuristic(h, e->desc, e->la, e->lb, e->lc, e->lc, *pref, 1, &e->algo, &n));
    if (n < 1 || e->algo.state != KEEL_HLT_STATUS_SUCCESS) {
        snprintf(e->why, sizeof e->why, "hipblasLtMatmulAlgoGetHeuristic found no algorithm");
        return 0;
    }
    if (e->algo.workspace_size > ws_bytes) {
        snprintf(e->why, sizeof e->why, "its algorithm needs %zu bytes of workspace, more than %zu",
                 e->algo.workspace_size, ws_bytes);
        return 0;
    }
    return 1;
}

#undef TRY_HLT

void keel__hlt_plan_free(const keel__hipblaslt_api_t *api, keel__hlt_plan_t *e)
{
    if (e->desc)
        (void)api->desc_destroy(e->desc);
    if (e->la)
        (void)api->layout_destroy(e->la);
    if (e->lb)
        (void)api->layout_destroy(e->lb);
    if (e->lc)
        (void)api->layout_destroy(e->lc);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

static keel__hlt_plan_t *plan_new(const keel__hipblaslt_api_t *api, keel__hipblaslt_handle_t h,
                                  const keel__hlt_key_t *key, size_t ws_bytes)
{
    keel__hlt_plan_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->key = *key;
    pthread_mutex_init(&e->lock, NULL);
    keel__hlt_pref_t pref = NULL;
    e->ok = build(e, api, h, ws_bytes, &pref);
    if (pref != NULL)
        (void)api->pref_destroy(pref);
    return e;
}

/* A mix of the key's fields (splitmix64's finaliser after each). */
static uint64_t key_hash(const keel__hlt_key_t *k)
{
    const uint64_t v[] = {(uint64_t)k->device, (uint64_t)k->dtype, (uint64_t)k->act, (uint64_t)k->has_bias,
                          (uint64_t)k->transw, (uint64_t)k->row_major, k->m, k->n, k->k, k->ldw, k->ldx, k->ldy};
    uint64_t h = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        h += v[i] + 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

keel__hlt_plan_t *keel__hlt_plan_get(keel__hlt_cache_t *c, const keel__hipblaslt_api_t *api,
                                     keel__hipblaslt_handle_t handle, const keel__hlt_key_t *key, size_t ws_bytes,
                                     int *owned)
{
    size_t home = (size_t)(key_hash(key) % KEEL_HLT_PLAN_SLOTS);
    *owned = 0;
    for (size_t i = 0; i < KEEL_HLT_PLAN_SLOTS; i++) {
        keel__hlt_plan_t *e = atomic_load_explicit(&c->slot[(home + i) % KEEL_HLT_PLAN_SLOTS], memory_order_acquire);
        if (e == NULL)
            break;
        if (memcmp(&e->key, key, sizeof *key) == 0)
            return e;
    }
    /* Built outside the lock: two threads may build the same plan, and the
     * one that loses frees its own. */
    keel__hlt_plan_t *fresh = plan_new(api, handle, key, ws_bytes);
    if (fresh == NULL)
        return NULL;
    pthread_mutex_lock(&c->insert_lock);
    for (size_t i = 0; i < KEEL_HLT_PLAN_SLOTS; i++) {
        _Atomic(keel__hlt_plan_t *) *slot = &c->slot[(home + i) % KEEL_HLT_PLAN_SLOTS];
        keel__hlt_plan_t *cur = atomic_load_explicit(slot, memory_order_acquire);
        if (cur != NULL && memcmp(&cur->key, key, sizeof *key) == 0) {
            pthread_mutex_unlock(&c->insert_lock);
            keel__hlt_plan_free(api, fresh);
            return cur;
        }
        if (cur == NULL) {
            atomic_store_explicit(slot, fresh, memory_order_release);
            pthread_mutex_unlock(&c->insert_lock);
            return fresh;
        }
    }
    pthread_mutex_unlock(&c->insert_lock);
    *owned = 1;
    return fresh;
}

void keel__hlt_cache_clear(keel__hlt_cache_t *c, const keel__hipblaslt_api_t *api)
{
    for (size_t i = 0; i < KEEL_HLT_PLAN_SLOTS; i++) {
        keel__hlt_plan_t *e = atomic_exchange(&c->slot[i], NULL);
        if (e != NULL)
            keel__hlt_plan_free(api, e);
    }
}

int keel__hlt_plan_run(const keel__hipblaslt_api_t *api, keel__hipblaslt_handle_t handle, keel__hlt_plan_t *e,
                       const keel_dense_params_t *p, void *workspace, size_t ws_bytes, void *stream,
                       const char **call)
{
    *call = "hipblasLtMatmul";
    if (e->algo.workspace_size > ws_bytes)
        return KEEL_HLT_STATUS_NOT_SUPPORTED;
    const float one = 1.0f, zero = 0.0f;
    const void *a = e->key.row_major ? p->x : p->w, *b = e->key.row_major ? p->w : p->x;
    int st = KEEL_HLT_STATUS_SUCCESS;
    pthread_mutex_lock(&e->lock);
    if (e->key.has_bias) {
        st = api->desc_set(e->desc, KEEL_HLT_DESC_BIAS_POINTER, &p->bias, sizeof p->bias);
        if (st != KEEL_HLT_STATUS_SUCCESS)
            *call = "hipblasLtMatmulDescSetAttribute(BIAS_POINTER)";
    }
    if (st == KEEL_HLT_STATUS_SUCCESS)
        st = api->matmul(handle, e->desc, &one, a, e->la, b, e->lb, &zero, p->y, e->lc, p->y, e->lc, &e->algo.algo,
                         workspace, ws_bytes, stream);
    pthread_mutex_unlock(&e->lock);
    return st;
}

keel__hlt_outcome_t keel__hlt_dense_run(keel__hlt_cache_t *cache, const keel__hipblaslt_api_t *api,
                                        keel__hipblaslt_handle_t handle, const keel__hlt_key_t *key,
                                        const keel_dense_params_t *p, void *workspace, size_t ws_bytes, void *stream,
                                        int *status, char *why, size_t why_size)
{
    if (why_size > 0)
        why[0] = '\0';
    int owned;
    keel__hlt_plan_t *e = keel__hlt_plan_get(cache, api, handle, key, ws_bytes, &owned);
    if (e == NULL) {
        snprintf(why, why_size, "no host memory for a hipBLASLt plan");
        return KEEL_HLT_NO_MEMORY;
    }
    keel__hlt_outcome_t out = KEEL_HLT_REFUSED;
    if (!e->ok) {
        snprintf(why, why_size, "%s", e->why);
    } else {
        const char *call;
        int st = keel__hlt_plan_run(api, handle, e, p, workspace, ws_bytes, stream, &call);
        *status = st;
        if (st == KEEL_HLT_STATUS_SUCCESS) {
            out = KEEL_HLT_RAN;
        } else {
            out = st == KEEL_HLT_STATUS_NOT_SUPPORTED || st == KEEL_HLT_STATUS_INVALID_VALUE ||
                          st == KEEL_HLT_STATUS_ARCH_MISMATCH
                      ? KEEL_HLT_REFUSED
                      : KEEL_HLT_FAILED;
            snprintf(why, why_size, "%s: %s (%d)", call, keel__hipblaslt_status_name(st), st);
        }
    }
    if (owned)
        keel__hlt_plan_free(api, e);
    return out;
}
