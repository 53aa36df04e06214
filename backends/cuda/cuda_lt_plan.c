/* SPDX-License-Identifier: MIT */
/* The cuBLASLt plan cache (cuda_lt_plan.h): building a plan (the dense
 * layer's epilogue descriptors, or a GEMM's layouts), timing the heuristic's
 * candidates on an idle stream (and, for a dense layer, the fastest
 * epilogue against GEMM plus the separate pass), and the lock-free table
 * that keeps the plans. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_lt_plan.h"
#include "kernels/gpu/ops_gpu.h"

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

void keel__cuda_lt_entry_free(lt_entry_t *e)
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

/* Plans are tuned only where timing the candidates costs little:
 * 2 m n k batch up to 2^37 floating-point operations. */
#define LT_TUNE_MAX_FLOP 137438953472.0
/* Calls of a plan built on a busy stream that may still time its
 * candidates (each try costs a stream query while the stream is busy). */
#define LT_TUNE_TRIES 64

static void lt_build_gemm(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes);
static void lt_tune(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune);

/* The preference both plans ask the heuristic with: the workspace there
 * is, and for f16 and bf16 outputs no split-K reduction in the output type
 * (INPLACE and OUTPUT_TYPE sum the partial products rounded to 16 bits;
 * Keel promises f32 accumulation). */
static int lt_pref(cublasLtMatmulPreference_t *pref, size_t ws_bytes, keel_dtype_t out)
{
    uint32_t mask = out == KEEL_F16 || out == KEEL_BF16 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                                        : CUBLASLT_REDUCTION_SCHEME_MASK;
    return cublasLtMatmulPreferenceCreate(pref) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulPreferenceSetAttribute(*pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                sizeof ws_bytes) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulPreferenceSetAttribute(*pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                sizeof mask) == CUBLAS_STATUS_SUCCESS;
}

/* KEEL_CUDA_LT_ALGO as a candidate number, -1 for "tune" (checked at probe). */
static int lt_forced_algo(void)
{
    static _Atomic int cached = -2;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v == -2) {
        const char *s = keel__gpu_env("KEEL_CUDA_LT_ALGO");
        v = s && s[0] >= '0' && s[0] <= '9' ? atoi(s) : -1;
        if (v > KEEL_CUDA_LT_ALGO_MAX)
            v = KEEL_CUDA_LT_ALGO_MAX;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* Keeps the heuristic's answer in the entry: ok, with the first candidate
 * picked (or the one KEEL_CUDA_LT_ALGO names); timing them is lt_tune's. */
static void lt_keep(lt_entry_t *e, const cublasLtMatmulHeuristicResult_t *res, int nres)
{
    int forced = lt_forced_algo();
    memcpy(e->cand, res, (size_t)nres * sizeof *res);
    e->ncand = nres;
    int pick = forced < 0 ? 0 : forced < nres ? forced : nres - 1;
    atomic_init(&e->pick, res[pick].state == CUBLAS_STATUS_SUCCESS ? pick : 0);
    atomic_init(&e->tune_tries, forced < 0 ? LT_TUNE_TRIES : 0); /* lt_tune drops plans with nothing to time */
    atomic_init(&e->unfused, 0);
    e->ok = 1;
}

/* A dense plan: the epilogue's descriptor and the layouts, the heuristic
 * asked once. ok stays 0 when cuBLASLt cannot fuse the call. */
static void lt_build_dense(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes)
{
    const lt_key_t *key = &e->key;
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
    cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
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
        lt_pref(&pref, ws_bytes, dt) &&
        cublasLtMatmulAlgoGetHeuristic(lt, e->desc, e->la, e->lb, e->lc, e->lc, pref, LT_CANDIDATES, res, &nres) ==
            CUBLAS_STATUS_SUCCESS &&
        nres > 0 && res[0].state == CUBLAS_STATUS_SUCCESS)
        lt_keep(e, res, nres);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
}

/* Builds the plan's descriptors, asks the heuristic once and times the
 * candidates where it may. Returns NULL only when host memory ran out; an
 * entry with ok = 0 records "no plan": the call takes the other path. */
static lt_entry_t *lt_build(const lt_key_t *key, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune)
{
    lt_entry_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = *key;
    pthread_mutex_init(&e->lock, NULL);
    if (key->op == 1)
        lt_build_gemm(e, lt, ws_bytes);
    else
        lt_build_dense(e, lt, ws_bytes);
    if (e->ok && tune)
        lt_tune(e, lt, ws_bytes, tune);
    return e;
}

/* The cached entry for @p key, built on first use. NULL: out of host memory. */
lt_entry_t *keel__cuda_lt_lookup(const lt_key_t *key, cublasLtHandle_t lt, size_t ws_bytes, int *owned,
                                  const gemm_tune_t *tune)
{
    uint64_t h = lt_hash(key);
    *owned = 0;
    for (size_t i = 0; i < LT_SLOTS; i++) {
        lt_entry_t *e = atomic_load_explicit(&lt_table[(h + i) % LT_SLOTS], memory_order_acquire);
        if (!e)
            break;
        if (memcmp(&e->key, key, sizeof *key) == 0) {
            if (tune && atomic_load_explicit(&e->tune_tries, memory_order_relaxed) > 0)
                lt_tune(e, lt, ws_bytes, tune);
            return e;
        }
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
            keel__cuda_lt_entry_free(e);
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


/* Timing. A small product runs faster on the GPU than the host enqueues
 * it, so the timed runs wait behind a short hold of the stream and then run
 * back to back: the events time the GPU. A warm-up run first, then 2 to 16
 * timed runs by size. */
typedef int (*lt_run_fn)(void *ctx, const cublasLtMatmulAlgo_t *algo, cudaStream_t st);

typedef struct {
    cudaStream_t st;
    cudaEvent_t t0, t1;
    int runs;
} lt_timer_t;

static int timer_start(lt_timer_t *t, cudaStream_t st, double flop)
{
    t->st = st;
    t->runs = flop <= 1e9 ? 16 : flop <= 2e10 ? 6 : 2;
    t->t0 = t->t1 = NULL;
    return cudaEventCreate(&t->t0) == cudaSuccess && cudaEventCreate(&t->t1) == cudaSuccess;
}

static void timer_end(lt_timer_t *t)
{
    (void)cudaGetLastError();
    if (t->t0)
        cudaEventDestroy(t->t0);
    if (t->t1)
        cudaEventDestroy(t->t1);
}

/* Milliseconds of the timed runs of @p run with @p algo; 0 when a run or
 * the events failed. */
static float time_runs(lt_timer_t *t, lt_run_fn run, void *ctx, const cublasLtMatmulAlgo_t *algo)
{
    int ok = 1;
    for (int r = 0; ok && r <= t->runs; r++) /* a warm-up, the hold and t0, then the timed runs */
        ok = (r != 1 || (keel__gpu_hold(t->st, 20000u + 10000u * (unsigned)t->runs) == cudaSuccess &&
                         cudaEventRecord(t->t0, t->st) == cudaSuccess)) &&
             run(ctx, algo, t->st);
    float ms = 0;
    if (!ok || cudaEventRecord(t->t1, t->st) != cudaSuccess || cudaEventSynchronize(t->t1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, t->t0, t->t1) != cudaSuccess)
        return 0;
    return ms;
}

/* Each candidate is timed once per round, the rounds interleaved, and
 * keeps its fastest round: a clock still rising when timing starts (a GPU
 * just out of idle) or a pause of the host then weighs on one round of
 * every candidate instead of on whichever candidate came first. */
enum { LT_TIMING_ROUNDS = 3 };

/* A later candidate in the heuristic's order replaces an earlier pick only
 * when it timed faster by more than this fraction: a few runs of each
 * cannot tell apart candidates closer than that, and the heuristic's order
 * is cuBLASLt's own estimate. */
#define LT_PICK_MARGIN 0.01f

/* A candidate's fastest round so far (0: none timed yet, -1: a round
 * failed) with one more round's time m (0 or less: it failed) folded in. */
static float fastest_round(float best, float m)
{
    return m <= 0 || best < 0 ? -1.0f : best == 0 || m < best ? m : best;
}

/* The index of the fastest of the plan's candidates (0, the heuristic's
 * first, when timing fails), and its time in *best_ms (0 then). A
 * candidate that fails in any round is left out. */
static int time_candidates(lt_timer_t *t, const lt_entry_t *e, lt_run_fn run, void *ctx, float *best_ms)
{
    float ms[LT_CANDIDATES];
    for (int i = 0; i < e->ncand; i++)
        ms[i] = e->cand[i].state == CUBLAS_STATUS_SUCCESS ? 0.0f : -1.0f; /* -1: failed, left out */
    for (int round = 0; round < LT_TIMING_ROUNDS; round++)
        for (int i = 0; i < e->ncand; i++) {
            if (ms[i] < 0)
                continue;
            ms[i] = fastest_round(ms[i], time_runs(t, run, ctx, &e->cand[i].algo));
        }
    int best = 0;
    *best_ms = 0;
    for (int i = 0; i < e->ncand; i++)
        if (ms[i] > 0 && (*best_ms == 0 || ms[i] < *best_ms * (1.0f - LT_PICK_MARGIN))) {
            best = i;
            *best_ms = ms[i];
        }
    return best;
}

/* Whether a plan may time its candidates on this stream now: it is not
 * capturing a graph (the runs would be captured) and it is idle. Timing
 * waits for its own runs; on a stream with work still queued it would also
 * wait for that work, and a call that is asynchronous must not: the queued
 * work may wait for something the caller does only after this call returns
 * (a host function, an event recorded later). */
static int stream_idle(cudaStream_t st)
{
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return 0;
    }
    cudaError_t idle = cudaStreamQuery(st);
    (void)cudaGetLastError(); /* cudaErrorNotReady is an answer, not an error to keep */
    return idle == cudaSuccess;
}

typedef struct {
    const lt_entry_t *e;
    cublasLtHandle_t lt;
    const void *a, *b, *c;
    void *d, *ws;
    size_t ws_bytes;
    float alpha, beta;
} lt_run_t;

static int run_matmul(void *ctx, const cublasLtMatmulAlgo_t *algo, cudaStream_t st)
{
    const lt_run_t *r = ctx;
    return cublasLtMatmul(r->lt, r->e->desc, &r->alpha, r->a, r->e->la, r->b, r->e->lb, &r->beta, r->c, r->e->lc,
                          r->d, r->e->lc, algo, r->ws, r->ws_bytes, st) == CUBLAS_STATUS_SUCCESS;
}

/* The fastest of a GEMM's candidates for this call, timed into a scratch
 * output, so that C is only read. */
static int gemm_pick(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune, lt_timer_t *t)
{
    const keel_gemm_params_t *p = tune->p;
    cudaStream_t st = t->st;
    size_t extent = (p->batch_count - 1) * p->stride_c + (p->n - 1) * p->ldc + p->m;
    void *d = NULL;
    if (cudaMallocAsync(&d, extent * keel__dtype_size(p->c_type), st) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    lt_run_t r = {e, lt, p->a, p->b, p->c, d, tune->ws, ws_bytes, (float)p->alpha, (float)p->beta};
    float ms;
    int best = time_candidates(t, e, run_matmul, &r, &ms);
    cudaFreeAsync(d, st);
    if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG))
        keel__gpu_host->log(KEEL_LOG_DEBUG, "cuda: GEMM plan %llux%llux%llu (batch %llu): candidate %d of %d, %.2f us",
                            (unsigned long long)p->m, (unsigned long long)p->n, (unsigned long long)p->k,
                            (unsigned long long)p->batch_count, best, e->ncand, 1e3 * ms / t->runs);
    return best;
}

static int run_unfused(void *ctx, const cublasLtMatmulAlgo_t *algo, cudaStream_t st)
{
    (void)algo;
    (void)st;
    const gemm_tune_t *tune = ctx;
    return tune->unfused(tune->s, tune->dense) == KEEL_OK;
}

/* The same for a dense layer: Y is output only (never read, never
 * overlapping W, X or the bias), so the candidates write it directly; the
 * call that timed them writes it again. The fastest epilogue is then timed
 * against GEMM plus the separate bias/activation pass (tune->unfused), and
 * the plan takes whichever was faster for this shape (e->unfused). The
 * caller holds e->lock (the bias pointer is set in the shared descriptor). */
static int dense_pick(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune, lt_timer_t *t)
{
    const keel_dense_params_t *p = tune->dense;
    if (p->bias && cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p->bias,
                                                  sizeof p->bias) != CUBLAS_STATUS_SUCCESS)
        return 0;
    lt_run_t r = {e, lt, p->w, p->x, p->y, p->y, tune->ws, ws_bytes, 1.0f, 0.0f};
    float fused = 0, split = 0;
    int best = time_candidates(t, e, run_matmul, &r, &fused);
    if (fused > 0 && tune->unfused) {
        for (int round = 0; round < LT_TIMING_ROUNDS && split >= 0; round++) /* its fastest round, as the epilogue's */
            split = fastest_round(split, time_runs(t, run_unfused, (void *)tune, NULL));
        atomic_store_explicit(&e->unfused, split > 0 && split < fused, memory_order_relaxed);
    }
    if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG))
        keel__gpu_host->log(KEEL_LOG_DEBUG,
                            "cuda: dense plan %llux%llux%llu: epilogue candidate %d of %d %.2f us, "
                            "GEMM + pass %.2f us: %s",
                            (unsigned long long)p->m, (unsigned long long)p->n, (unsigned long long)p->k, best,
                            e->ncand, 1e3 * fused / t->runs, 1e3 * (split > 0 ? split : 0) / t->runs,
                            atomic_load_explicit(&e->unfused, memory_order_relaxed) ? "GEMM + pass" : "epilogue");
    return best;
}

static double plan_flop(const lt_key_t *k)
{
    return 2.0 * (double)k->m * (double)k->n * (double)k->k * (double)(k->batch ? k->batch : 1);
}

/* Times the plan's candidates on this call when its stream is idle, and
 * picks the fastest; on a busy stream, counts a try (the plan keeps its
 * pick, the heuristic's first, and a later call may try again). One thread
 * times a plan at a time; the others run with its current pick. */
static void lt_tune(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes, const gemm_tune_t *tune)
{
    /* a GEMM plan with one candidate has nothing to pick; a dense plan still
     * has its epilogue to time against GEMM plus the pass */
    int worth = e->key.op == 1 ? e->ncand > 1 && tune->p : tune->dense != NULL;
    if (!worth || plan_flop(&e->key) > LT_TUNE_MAX_FLOP) {
        atomic_store_explicit(&e->tune_tries, 0, memory_order_relaxed);
        return;
    }
    if (pthread_mutex_trylock(&e->lock) != 0)
        return;
    if (atomic_load_explicit(&e->tune_tries, memory_order_relaxed) > 0) {
        cudaStream_t st = keel__gpu_op_stream(tune->s);
        if (stream_idle(st)) {
            lt_timer_t t;
            int best = 0;
            if (timer_start(&t, st, plan_flop(&e->key)))
                best = e->key.op == 1 ? gemm_pick(e, lt, ws_bytes, tune, &t) : dense_pick(e, lt, ws_bytes, tune, &t);
            timer_end(&t);
            atomic_store_explicit(&e->pick, best, memory_order_release);
            atomic_store_explicit(&e->tune_tries, 0, memory_order_relaxed);
        } else {
            atomic_fetch_sub_explicit(&e->tune_tries, 1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&e->lock);
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
static void lt_build_gemm(lt_entry_t *e, cublasLtHandle_t lt, size_t ws_bytes)
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
    ok = ok && lt_pref(&pref, ws_bytes, ct);
    static const cublasLtMatmulPreferenceAttributes_t min_align[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; ok && i < sizeof min_align / sizeof min_align[0]; i++)
        ok = LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, min_align[i], &align, sizeof align));
    ok = ok && LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, e->desc, e->la, e->lb, e->lc, e->lc, pref, LT_CANDIDATES, res,
                                              &nres)) &&
         nres > 0 && res[0].state == CUBLAS_STATUS_SUCCESS;
#undef LT_OK
    if (ok)
        lt_keep(e, res, nres);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
}
