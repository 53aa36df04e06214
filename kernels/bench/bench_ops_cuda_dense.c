/* SPDX-License-Identifier: MIT */
/* keel-bench-ops-cuda's dense rows: keel_dense (Y = act(op(W) X + bias) in
 * one call) against the strongest thing a user can call instead, cuBLASLt's
 * fused epilogue called directly: cublasLtMatmul with the same layouts and
 * types (torch's linear: column-major, W transposed, bias per output
 * feature), CUBLASLT_EPILOGUE_RELU_BIAS or GELU_BIAS, the bias pointer
 * attribute, a workspace as large as Keel's (32 MiB), and the fastest of the
 * heuristic's first 8 candidates, timed once before the row, as a user who
 * tunes would. Both sides promise the same numerics: f32 accumulation, and
 * for f16 and bf16 outputs no split-K reduction in the 16-bit output type
 * (the reduction-scheme preference Keel's plans use).
 *
 * Before timing, both outputs (poisoned with NaN first) are checked against
 * a float64 reference at sampled points and against each other at every
 * element; a row whose outputs disagree is WRONG, not timed. */
#include <math.h>
#include <string.h>
#include <cublasLt.h>
#include "kernels/bench/bench_ops_cuda.h"

#define LT_WORKSPACE ((size_t)32 << 20)
#define LT_CANDIDATES 8
#define DENSE_TARGET 0.98

static cublasLtHandle_t lt;
static void *lt_ws;

typedef struct {
    size_t m, n, k;
    keel_dtype_t dt;
    int tf32;
    keel_activation_t act;
    void *w, *x, *bias, *yk, *yl;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} dn_t;

static void k_dense(void *c)
{
    dn_t *d = c;
    keel_dense_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.transw = KEEL_TRANS;
    p.m = d->m, p.n = d->n, p.k = d->k;
    p.dtype = d->dt;
    p.compute = d->tf32 ? KEEL_COMPUTE_TF32 : KEEL_COMPUTE_DEFAULT;
    p.act = d->act;
    p.w = d->w, p.ldw = d->k, p.x = d->x, p.ldx = d->k, p.bias = d->bias, p.y = d->yk, p.ldy = d->m;
    CHECK(keel_dense(bo_ks, &p));
}

static cublasStatus_t lt_run(dn_t *d, const cublasLtMatmulAlgo_t *algo)
{
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(lt, d->desc, &one, d->w, d->la, d->x, d->lb, &zero, d->yl, d->lc, d->yl, d->lc, algo, lt_ws,
                          LT_WORKSPACE, bo_cs);
}

static void lt_dense(void *c)
{
    dn_t *d = c;
    cublasStatus_t st = lt_run(d, &d->algo);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLtMatmul: %s\n", cublasGetStatusString(st));
        exit(3);
    }
}

static cudaDataType_t cuda_type(keel_dtype_t dt)
{
    return dt == KEEL_BF16 ? CUDA_R_16BF : dt == KEEL_F16 ? CUDA_R_16F : CUDA_R_32F;
}

#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)

/* The descriptors of the direct cuBLASLt call: D (m x n, ld m) = act(op(A)
 * B + bias) with A the k x m W (ld k) transposed and B the k x n X (ld k),
 * all column-major, as keel_dense's call above is. Returns 0 if cuBLASLt
 * refuses one of them. */
static int lt_describe(dn_t *d)
{
    cudaDataType_t ty = cuda_type(d->dt);
    cublasComputeType_t ct = d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t epi = d->act == KEEL_ACT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    return LT_OK(cublasLtMatmulDescCreate(&d->desc, ct, CUDA_R_32F)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d->bias,
                                                sizeof d->bias)) &&
           LT_OK(cublasLtMatmulDescSetAttribute(d->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &ty, sizeof ty)) &&
           LT_OK(cublasLtMatrixLayoutCreate(&d->la, ty, d->k, d->m, (int64_t)d->k)) &&
           LT_OK(cublasLtMatrixLayoutCreate(&d->lb, ty, d->k, d->n, (int64_t)d->k)) &&
           LT_OK(cublasLtMatrixLayoutCreate(&d->lc, ty, d->m, d->n, (int64_t)d->m));
}

static void lt_release(dn_t *d)
{
    if (d->desc)
        cublasLtMatmulDescDestroy(d->desc);
    if (d->la)
        cublasLtMatrixLayoutDestroy(d->la);
    if (d->lb)
        cublasLtMatrixLayoutDestroy(d->lb);
    if (d->lc)
        cublasLtMatrixLayoutDestroy(d->lc);
}

/* Milliseconds per run of one candidate: a warm-up, a run that sizes the
 * timed batch (about 5 ms, 2 to 50 runs), then that batch between events.
 * 0 when the candidate fails. */
static float time_candidate(dn_t *d, const cublasLtMatmulAlgo_t *algo, cudaEvent_t e0, cudaEvent_t e1)
{
    float ms = 0;
    if (!LT_OK(lt_run(d, algo)) || cudaEventRecord(e0, bo_cs) != cudaSuccess || !LT_OK(lt_run(d, algo)) ||
        cudaEventRecord(e1, bo_cs) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    int runs = ms > 0 ? (int)(5.0f / ms) : 50;
    runs = runs < 2 ? 2 : runs > 50 ? 50 : runs;
    int ok = cudaEventRecord(e0, bo_cs) == cudaSuccess;
    for (int r = 0; ok && r < runs; r++)
        ok = LT_OK(lt_run(d, algo));
    if (!ok || cudaEventRecord(e1, bo_cs) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return ms / (float)runs;
}

/* The heuristic's first LT_CANDIDATES algorithms, each timed; the fastest
 * goes into d->algo. Returns how many could run (0: none). */
static int lt_pick(dn_t *d, const char *name)
{
    uint32_t mask = d->dt == KEEL_F16 || d->dt == KEEL_BF16 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                                                            : CUBLASLT_REDUCTION_SCHEME_MASK;
    size_t wsb = LT_WORKSPACE;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
    int nres = 0;
    int ok = LT_OK(cublasLtMatmulPreferenceCreate(&pref)) &&
             LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                        sizeof wsb)) &&
             LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                        sizeof mask)) &&
             LT_OK(cublasLtMatmulAlgoGetHeuristic(lt, d->desc, d->la, d->lb, d->lc, d->lc, pref, LT_CANDIDATES, res,
                                                  &nres));
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (!ok || nres <= 0)
        return 0;
    cudaEvent_t e0, e1;
    CK_CUDA(cudaEventCreate(&e0));
    CK_CUDA(cudaEventCreate(&e1));
    int usable = 0, best = -1;
    float best_ms = 0;
    for (int i = 0; i < nres; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > LT_WORKSPACE)
            continue;
        float ms = time_candidate(d, &res[i].algo, e0, e1);
        if (ms <= 0)
            continue;
        usable++;
        if (best < 0 || ms < best_ms)
            best = i, best_ms = ms;
    }
    CK_CUDA(cudaEventDestroy(e0));
    CK_CUDA(cudaEventDestroy(e1));
    if (best >= 0) {
        d->algo = res[best].algo;
        printf("%-44s cuBLASLt: candidate %d of %d is the fastest, %.2f us\n", name, best, nres, best_ms * 1e3);
    }
    return usable;
}

/* Every element of Keel's output against cuBLASLt's: within twice the
 * tolerance of one element (each side may be off by it), with the sum of
 * the magnitudes and the activation's input bounded for these inputs
 * (uniform in [-1, 1): the sum k/4 on average with a spread of about
 * sqrt(k)/4; the input is within 6 of its spread, sqrt(k/9 + 1/3), of 0). */
static int outputs_agree(const char *name, const dn_t *d)
{
    size_t count = d->m * d->n, es = keel_dtype_size(d->dt);
    void *a = malloc(count * es), *b = malloc(count * es);
    if (!a || !b) {
        fprintf(stderr, "keel-bench-ops-cuda: no host memory for a check\n");
        exit(3);
    }
    bo_download(a, d->yk, es, count, 1);
    bo_download(b, d->yl, es, count, 1);
    bo_product_t p = {.out_dt = d->dt, .tf32 = d->tf32, .act = d->act};
    double sum_bound = (double)d->k / 4 + 3 * sqrt((double)d->k) + 1;
    double pre_bound = 6 * sqrt((double)d->k / 9 + 1.0 / 3);
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double x = bo_value(a, d->dt, i), y = bo_value(b, d->dt, i);
        double big = fmax(fabs(x), fabs(y));
        double tol = 2 * bo_product_tol(&p, big, fmax(big, pre_bound), sum_bound), err = fabs(x - y);
        if (!(err <= tol)) {
            if (!bad++)
                first = i;
        } else if (err / tol > worst) {
            worst = err / tol;
        }
    }
    if (bad)
        printf("check %s: Keel and cuBLASLt differ at %zu of %zu elements (first: element %zu, %.9g against %.9g): "
               "WRONG\n",
               name, bad, count, first, bo_value(a, d->dt, first), bo_value(b, d->dt, first));
    else
        printf("check %s: Keel and cuBLASLt agree at all %zu elements (worst: %.2f of the tolerance)\n", name, count,
               worst);
    free(a);
    free(b);
    return bad == 0;
}

static int check_side(const char *label, const dn_t *d, const void *y)
{
    bo_product_t p = {.a = d->w, .b = d->x, .bias = d->bias, .c = y, .m = d->m, .n = d->n, .k = d->k,
                      .a_si = d->k, .a_sp = 1, .b_sp = 1, .b_sj = d->k, .c_si = 1, .c_sj = d->m,
                      .in_dt = d->dt, .out_dt = d->dt, .tf32 = d->tf32, .act = d->act};
    return bo_check_product(label, &p, 16);
}

static void dense_row(dn_t *d, const char *type_name)
{
    char name[96], label[120];
    snprintf(name, sizeof name, "dense %s %s %zux%zux%zu", type_name, d->act == KEEL_ACT_RELU ? "bias+relu" : "bias+gelu",
             d->m, d->n, d->k);
    if (!bo_wanted(name))
        return;
    d->desc = NULL, d->la = d->lb = d->lc = NULL;
    if (!lt_describe(d) || !lt_pick(d, name)) {
        printf("%-44s cuBLASLt offers no algorithm that runs for this call\n", name);
        lt_release(d);
        bo_wrong(name, DENSE_TARGET);
        return;
    }
    size_t ybytes = d->m * d->n * keel_dtype_size(d->dt);
    CHECK(keel_memset(d->yk, 0xff, ybytes)); /* NaN in every dtype: an element left unwritten shows */
    CHECK(keel_memset(d->yl, 0xff, ybytes));
    k_dense(d);
    CHECK(keel_stream_synchronize(bo_ks));
    lt_dense(d);
    CK_CUDA(cudaStreamSynchronize(bo_cs));
    snprintf(label, sizeof label, "%s, Keel", name);
    int ok = check_side(label, d, d->yk);
    snprintf(label, sizeof label, "%s, cuBLASLt", name);
    ok &= check_side(label, d, d->yl);
    ok = ok && outputs_agree(name, d);
    if (ok)
        bo_compare(name, "cuBLASLt", 2.0 * (double)d->m * (double)d->n * (double)d->k, "GFLOP/s", k_dense, lt_dense,
                   d, 0, DENSE_TARGET);
    else
        bo_wrong(name, DENSE_TARGET);
    lt_release(d);
}

void bo_dense_rows(void)
{
    /* m (output features) x n (batch) x k (input features): square layers,
     * a small batch, and an MLP's up and down projections (4096 -> 11008
     * -> 4096) for 64 and 512 tokens. */
    static const size_t full[][3] = {{4096, 4096, 4096}, {8192, 8192, 8192},  {4096, 64, 4096}, {11008, 64, 4096},
                                     {4096, 64, 11008},  {11008, 512, 4096}, {4096, 512, 11008}};
    static const size_t quick[][3] = {{4096, 4096, 4096}, {4096, 64, 4096}, {11008, 64, 4096}, {4096, 64, 11008}};
    const size_t(*shapes)[3] = bo_quick ? quick : full;
    size_t nshapes = bo_quick ? sizeof quick / sizeof quick[0] : sizeof full / sizeof full[0];
    static const struct {
        keel_dtype_t dt;
        int tf32;
        const char *name;
    } types[] = {{KEEL_BF16, 0, "bf16"}, {KEEL_F16, 0, "f16"}, {KEEL_F32, 1, "tf32"}, {KEEL_F32, 0, "f32"}};

    size_t wmax = 0, xmax = 0, ymax = 0, bmax = 0;
    for (size_t s = 0; s < nshapes; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        wmax = m * k > wmax ? m * k : wmax;
        xmax = k * n > xmax ? k * n : xmax;
        ymax = m * n > ymax ? m * n : ymax;
        bmax = m > bmax ? m : bmax;
    }
    int any = 0; /* nothing to set up when the filters leave out every dense row */
    for (size_t t = 0; t < 4; t++)
        for (size_t s = 0; s < nshapes; s++)
            for (int a = 0; a < 2; a++) {
                char name[96];
                snprintf(name, sizeof name, "dense %s %s %zux%zux%zu", types[t].name, a ? "bias+gelu" : "bias+relu",
                         shapes[s][0], shapes[s][1], shapes[s][2]);
                any |= bo_selected(name);
            }
    if (!any)
        return;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasLtCreate failed\n");
        exit(3);
    }
    CK_CUDA(cudaMalloc(&lt_ws, LT_WORKSPACE));
    dn_t d;
    memset(&d, 0, sizeof d);
    CHECK(keel_malloc(bo_dev, wmax * 4, &d.w));
    CHECK(keel_malloc(bo_dev, xmax * 4, &d.x));
    CHECK(keel_malloc(bo_dev, bmax * 4, &d.bias));
    CHECK(keel_malloc(bo_dev, ymax * 4, &d.yk));
    CHECK(keel_malloc(bo_dev, ymax * 4, &d.yl));
    keel_dtype_t loaded = (keel_dtype_t)0;
    for (size_t t = 0; t < 4; t++) {
        if (types[t].dt != loaded) { /* fresh random inputs in this dtype */
            bo_upload_random(d.w, types[t].dt, wmax, bo_seed(), 1.0f);
            bo_upload_random(d.x, types[t].dt, xmax, bo_seed(), 1.0f);
            bo_upload_random(d.bias, types[t].dt, bmax, bo_seed(), 1.0f);
            loaded = types[t].dt;
        }
        for (size_t s = 0; s < nshapes; s++)
            for (int a = 0; a < 2; a++) {
                d.m = shapes[s][0], d.n = shapes[s][1], d.k = shapes[s][2];
                d.dt = types[t].dt, d.tf32 = types[t].tf32;
                d.act = a ? KEEL_ACT_GELU_TANH : KEEL_ACT_RELU;
                dense_row(&d, types[t].name);
            }
    }
    CHECK(keel_free(d.w));
    CHECK(keel_free(d.x));
    CHECK(keel_free(d.bias));
    CHECK(keel_free(d.yk));
    CHECK(keel_free(d.yl));
    CK_CUDA(cudaFree(lt_ws));
    cublasLtDestroy(lt);
}
