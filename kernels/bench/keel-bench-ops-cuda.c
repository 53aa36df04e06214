/* SPDX-License-Identifier: MIT */
/* keel-bench-ops-cuda: the built-in operations on a CUDA device against the
 * ceilings and the direct alternative, in one process, interleaved:
 *  - memory-bound operations against a device-to-device copy moving the same
 *    bytes (cudaMemcpyAsync): elementwise ops and casts at least 0.97 of the
 *    copy, reductions 0.95, softmax and layer norm rows (f32 and bf16, 128 to
 *    256k columns, 2^26 elements) 0.90;
 *  - GEMM against cublasGemmEx called directly with the same settings, one
 *    row per shape: at least 0.98 of it, 0.90 for the squares 256 and 512
 *    (there a call costs a few microseconds of GPU time, and the row times
 *    the host's cost of enqueueing it);
 *  - the dense layer against cuBLASLt's fused bias + ReLU / GELU epilogue
 *    called directly, with the fastest of its heuristic's candidates
 *    (bench_ops_cuda_dense.c): at least 0.98 of it.
 * ratio = alternative time / Keel time, so higher is better.
 *
 * Method: every input is fresh random data (uniform, from a seed printed at
 * start), the same for both sides. Before a row is timed Keel's result is
 * checked: sampled elements of the memory-bound ops against a float64
 * reference, sampled elements of both GEMMs and both dense outputs against a
 * float64 reference, and the two dense outputs against each other at every
 * element. A row whose result is wrong is WRONG and not timed. Each
 * measurement enqueues a batch of calls (about 10 ms) and synchronizes once;
 * Keel's and the alternative's batches alternate (Keel first in every other
 * pair), 15 pairs (5 with --quick), and the ratio is the median of the pairs'
 * ratios, printed with their smallest and largest (a drift of the clocks
 * moves both sides of a pair alike).
 *
 * Usage: KEEL_BACKEND_PATH=<builddir>/.libs keel-bench-ops-cuda [--quick] [SUBSTRING...]
 *   --quick      2^26-element vectors, GEMM up to 8192, fewer dense shapes, 5 pairs
 *   SUBSTRING    run only the rows whose name contains one of them ("dense", "gemm bf16")
 * Environment: KEEL_BENCH_BUDGET (seconds: rows that would start later are
 * skipped), KEEL_BENCH_SEED (repeat a run's inputs).
 * Exit status: 0 every row met its target, 1 a target was missed or a result
 * was wrong, 2 rows were skipped for the budget, 3 an error, 77 no CUDA
 * device. The last lines are one summary line per row (bench/bench_summary.h).
 * PyTorch comparisons: kernels/bench/torch_ops.py. */
#include <math.h>
#include <string.h>
#include <cublas_v2.h>
#include "kernels/bench/bench_ops_cuda.h"

#define TARGET_ELEMENTWISE 0.97
#define TARGET_REDUCE 0.95
#define TARGET_ROWS 0.90
#define TARGET_GEMM 0.98
#define TARGET_GEMM_SMALL 0.90
#define SCALE_A 4.0f /* inputs a in [-4, 4): softmax rows spread over e^8 */
#define SCALE_B 1.0f

static cublasHandle_t blas;

/* ======================================================================== */
/* memory-bound                                                              */
/* ======================================================================== */

typedef struct {
    size_t n, rows, cols;
    keel_dtype_t dt; /* of the row operations */
    int affine;      /* layer norm with gamma = b[0, cols) and beta = b[cols, 2 cols) (b16 for bf16) */
    void *a, *b, *a16, *b16, *y, *out, *cpy_src, *cpy_dst;
    uint64_t sa, sb; /* a[i] = bo_rand(sa, i, SCALE_A), b[i] = bo_rand(sb, i, SCALE_B); a16, b16: bf16 of them */
    size_t copy_bytes; /* the copy that moves the same bytes */
} mb_t;

static void copy_alt(void *c)
{
    mb_t *m = c;
    CK_CUDA(cudaMemcpyAsync(m->cpy_dst, m->cpy_src, m->copy_bytes, cudaMemcpyDeviceToDevice, bo_cs));
}

static void k_add(void *c)
{
    mb_t *m = c;
    CHECK(keel_binary(bo_ks, KEEL_BINARY_ADD, KEEL_F32, 1, m->n, 1.0, m->a, m->n, 1.0, m->b, m->n, KEEL_BROADCAST_NONE,
                      m->y, m->n));
}
static void k_add_bf16(void *c)
{
    mb_t *m = c;
    CHECK(keel_binary(bo_ks, KEEL_BINARY_ADD, KEEL_BF16, 1, m->n, 1.0, m->a16, m->n, 1.0, m->b16, m->n,
                      KEEL_BROADCAST_NONE, m->y, m->n));
}
static void k_gelu(void *c)
{
    mb_t *m = c;
    CHECK(keel_unary(bo_ks, KEEL_UNARY_GELU_ERF, KEEL_F32, m->n, m->a, m->y));
}
static void k_cast(void *c)
{
    mb_t *m = c;
    CHECK(keel_cast(bo_ks, KEEL_F32, m->a, KEEL_BF16, m->y, m->n));
}
static void k_bias_row(void *c)
{
    mb_t *m = c;
    CHECK(keel_binary(bo_ks, KEEL_BINARY_ADD, KEEL_F32, m->rows, m->cols, 1.0, m->a, m->cols, 1.0, m->b, 0,
                      KEEL_BROADCAST_ROW, m->y, m->cols));
}
static void k_sum(void *c)
{
    mb_t *m = c;
    CHECK(keel_reduce(bo_ks, KEEL_REDUCE_SUM, KEEL_F32, 1, m->n, m->a, m->n, KEEL_AXIS_ALL, m->out));
}
static void k_sum_rows(void *c)
{
    mb_t *m = c;
    CHECK(keel_reduce(bo_ks, KEEL_REDUCE_SUM, KEEL_F32, m->rows, m->cols, m->a, m->cols, KEEL_AXIS_ROWS, m->out));
}
static const void *row_input(const mb_t *m)
{
    return m->dt == KEEL_F32 ? m->a : m->a16;
}
static void k_softmax(void *c)
{
    mb_t *m = c;
    CHECK(keel_softmax_rows(bo_ks, m->dt, m->rows, m->cols, row_input(m), m->cols, m->y, m->cols, 0));
}
static void k_layernorm(void *c)
{
    mb_t *m = c;
    const char *g = NULL, *bt = NULL;
    if (m->affine) {
        g = m->dt == KEEL_F32 ? m->b : m->b16;
        bt = g + m->cols * keel_dtype_size(m->dt);
    }
    CHECK(keel_layernorm_rows(bo_ks, m->dt, m->rows, m->cols, row_input(m), m->cols, g, bt, 1e-5, m->y, m->cols));
}

/* ---- their checks ---- */

static float in_a(const mb_t *m, size_t i)
{
    return bo_rand(m->sa, i, SCALE_A);
}
static float in_b(const mb_t *m, size_t i)
{
    return bo_rand(m->sb, i, SCALE_B);
}

typedef double (*elem_ref_fn)(const mb_t *m, size_t i);

static double ref_add(const mb_t *m, size_t i)
{
    return (float)(in_a(m, i) + in_b(m, i));
}
static double ref_add_bf16(const mb_t *m, size_t i)
{
    return bo_round_to(KEEL_BF16, bo_round_to(KEEL_BF16, in_a(m, i)) + bo_round_to(KEEL_BF16, in_b(m, i)));
}
static double ref_gelu(const mb_t *m, size_t i)
{
    double x = in_a(m, i);
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}
static double ref_cast(const mb_t *m, size_t i)
{
    return bo_round_to(KEEL_BF16, in_a(m, i));
}
static double ref_bias_row(const mb_t *m, size_t i)
{
    return (float)(in_a(m, i) + in_b(m, i % m->cols));
}

/* Three windows of w of count elements: the start, the end and one at a
 * random place. */
static void windows(size_t count, size_t w, size_t off[3], size_t *len)
{
    *len = w < count ? w : count;
    off[0] = 0;
    off[1] = count - *len;
    off[2] = (size_t)((bo_rand(bo_seed(), 0, 0.5f) + 0.5f) * (float)(count - *len + 1)) % (count - *len + 1);
}

static int report(const char *name, size_t bad, size_t checked, size_t at, double got, double want)
{
    if (bad)
        printf("check %s: %zu of %zu sampled elements are off (first: element %zu is %.9g, the float64 reference "
               "%.9g): WRONG\n",
               name, bad, checked, at, got, want);
    else
        printf("check %s: %zu sampled elements match the float64 reference\n", name, checked);
    return bad == 0;
}

/* y of ydt against ref at three windows, within rel * |ref| + abs. */
static int check_elementwise(const char *name, const mb_t *m, keel_dtype_t ydt, size_t count, elem_ref_fn ref,
                             double rel, double abs)
{
    size_t off[3], len, es = keel_dtype_size(ydt), bad = 0, at = 0;
    double got0 = 0, want0 = 0;
    windows(count, 65536, off, &len);
    void *h = malloc(len * es);
    if (!h)
        exit(3);
    for (int w = 0; w < 3; w++) {
        bo_download(h, (const char *)m->y + off[w] * es, es, len, 1);
        for (size_t j = 0; j < len; j++) {
            double got = bo_value(h, ydt, j), want = ref(m, off[w] + j);
            if (!(fabs(got - want) <= rel * fabs(want) + abs) && !bad++)
                at = off[w] + j, got0 = got, want0 = want;
        }
    }
    free(h);
    return report(name, bad, 3 * len, at, got0, want0);
}

static int check_sum(const char *name, const mb_t *m)
{
    float got;
    bo_download(&got, m->out, 4, 1, 1);
    double ref = 0, mag = 0;
    for (size_t i = 0; i < m->n; i++) {
        double v = in_a(m, i);
        ref += v;
        mag += fabs(v);
    }
    /* a blocked f32 sum is off by far less than 1e-7 of the magnitudes; one
     * block of a thousand elements left out is off by more */
    return report(name, !(fabs(got - ref) <= 1e-7 * mag), 1, 0, got, ref);
}

static int check_sum_rows(const char *name, const mb_t *m)
{
    size_t off[3], len, bad = 0, at = 0;
    double got0 = 0, want0 = 0;
    windows(m->rows, 1024, off, &len);
    float *h = malloc(len * sizeof *h);
    if (!h)
        exit(3);
    for (int w = 0; w < 3; w++) {
        bo_download(h, (const float *)m->out + off[w], 4, len, 1);
        for (size_t j = 0; j < len; j++) {
            double ref = 0, mag = 0;
            for (size_t c = 0; c < m->cols; c++) {
                double v = in_a(m, (off[w] + j) * m->cols + c);
                ref += v;
                mag += fabs(v);
            }
            if (!(fabs(h[j] - ref) <= 1e-6 * mag) && !bad++)
                at = off[w] + j, got0 = h[j], want0 = ref;
        }
    }
    free(h);
    return report(name, bad, 3 * len, at, got0, want0);
}

/* Softmax or layer norm of three rows (first, last, random) against float64. */
static int check_rows(const char *name, const mb_t *m, int layernorm)
{
    size_t es = keel_dtype_size(m->dt), bad = 0, at = 0;
    double got0 = 0, want0 = 0;
    void *h = malloc(m->cols * es);
    double *x = malloc(m->cols * sizeof *x);
    if (!h || !x)
        exit(3);
    size_t off[3], len;
    windows(m->rows, 1, off, &len);
    int bf = m->dt == KEEL_BF16;
    double rel = bf ? 0x1p-7 : layernorm ? 1e-4 : 1e-5, abs = bf ? (layernorm ? 1e-3 : 1e-7) : layernorm ? 1e-5 : 1e-9;
    for (int w = 0; w < 3; w++) {
        size_t r = off[w];
        bo_download(h, (const char *)m->y + r * m->cols * es, es, m->cols, 1);
        double mx = -INFINITY, sum = 0, mean = 0, var = 0;
        for (size_t c = 0; c < m->cols; c++) {
            x[c] = bo_round_to(m->dt, in_a(m, r * m->cols + c));
            mx = x[c] > mx ? x[c] : mx;
            mean += x[c];
        }
        mean /= (double)m->cols;
        for (size_t c = 0; c < m->cols; c++) {
            sum += exp(x[c] - mx);
            var += (x[c] - mean) * (x[c] - mean);
        }
        var /= (double)m->cols;
        for (size_t c = 0; c < m->cols; c++) {
            double want = layernorm ? (x[c] - mean) / sqrt(var + 1e-5) : exp(x[c] - mx) / sum;
            if (layernorm && m->affine)
                want = want * bo_round_to(m->dt, in_b(m, c)) + bo_round_to(m->dt, in_b(m, m->cols + c));
            double got = bo_value(h, m->dt, c);
            if (!(fabs(got - want) <= rel * fabs(want) + abs) && !bad++)
                at = r * m->cols + c, got0 = got, want0 = want;
        }
    }
    free(h);
    free(x);
    return report(name, bad, 3 * m->cols, at, got0, want0);
}

typedef int (*check_fn)(const char *name, const mb_t *m);
static int chk_add(const char *n, const mb_t *m) { return check_elementwise(n, m, KEEL_F32, m->n, ref_add, 0, 0); }
static int chk_add_bf16(const char *n, const mb_t *m)
{
    return check_elementwise(n, m, KEEL_BF16, m->n, ref_add_bf16, 0x1p-8, 0);
}
static int chk_gelu(const char *n, const mb_t *m)
{
    /* an absolute term: 1 + erf(x / sqrt 2) cancels for negative x */
    return check_elementwise(n, m, KEEL_F32, m->n, ref_gelu, 1e-5, 4e-6);
}
static int chk_cast(const char *n, const mb_t *m) { return check_elementwise(n, m, KEEL_BF16, m->n, ref_cast, 0, 0); }
static int chk_bias_row(const char *n, const mb_t *m)
{
    return check_elementwise(n, m, KEEL_F32, m->rows * m->cols, ref_bias_row, 0, 0);
}
static int chk_softmax(const char *n, const mb_t *m) { return check_rows(n, m, 0); }
static int chk_layernorm(const char *n, const mb_t *m) { return check_rows(n, m, 1); }

/* One memory-bound row: poison the output, one call, its check, then the
 * comparison with a copy of copy_bytes. */
static int probing, probe_hit; /* a pass over the rows that only asks whether the filters select one */

static void mb_row(const char *name, mb_t *m, size_t copy_bytes, double work, bo_fn kf, check_fn check, double target)
{
    if (probing) {
        probe_hit |= bo_selected(name);
        return;
    }
    if (!bo_wanted(name))
        return;
    CHECK(keel_memset(m->y, 0xff, m->n * 4)); /* NaN in f32 and bf16 */
    CHECK(keel_memset(m->out, 0xff, m->n * 4 / 1024 + 4));
    kf(m);
    CHECK(keel_stream_synchronize(bo_ks));
    if (!check(name, m)) {
        bo_wrong(name, target);
        return;
    }
    m->copy_bytes = copy_bytes;
    bo_compare(name, "copy", work, "GB/s", kf, copy_alt, m, 0, target);
}

static void mb_rows(mb_t *m_)
{
    mb_t m = *m_; /* the rows change rows, cols and dt */
    size_t n = m.n;
    char name[96];
    int lg = (int)log2((double)n);
    /* add reads 8n and writes 4n bytes: a copy of 6n bytes moves 12n */
    snprintf(name, sizeof name, "add f32 n=2^%d", lg);
    mb_row(name, &m, 6 * n, 12.0 * n, k_add, chk_add, TARGET_ELEMENTWISE);
    snprintf(name, sizeof name, "add bf16 n=2^%d", lg);
    mb_row(name, &m, 3 * n, 6.0 * n, k_add_bf16, chk_add_bf16, TARGET_ELEMENTWISE);
    snprintf(name, sizeof name, "gelu (erf) f32 n=2^%d", lg);
    mb_row(name, &m, 4 * n, 8.0 * n, k_gelu, chk_gelu, TARGET_ELEMENTWISE);
    snprintf(name, sizeof name, "cast f32->bf16 n=2^%d", lg);
    mb_row(name, &m, 3 * n, 6.0 * n, k_cast, chk_cast, TARGET_ELEMENTWISE);
    m.rows = n / 4096, m.cols = 4096;
    snprintf(name, sizeof name, "add bias row f32 %zux4096", m.rows);
    mb_row(name, &m, 4 * n, 8.0 * n, k_bias_row, chk_bias_row, TARGET_ELEMENTWISE);
    snprintf(name, sizeof name, "sum f32 n=2^%d", lg);
    mb_row(name, &m, 2 * n, 4.0 * n, k_sum, check_sum, TARGET_REDUCE);
    snprintf(name, sizeof name, "sum rows f32 %zux4096", m.rows);
    mb_row(name, &m, 2 * n, 4.0 * n, k_sum_rows, check_sum_rows, TARGET_REDUCE);

    /* Softmax and layer norm read and write each element once: the copy of
     * the same bytes is their ceiling. A fixed 2^26 elements, 128 to 256k
     * columns. */
    const size_t total = (size_t)1 << 26;
    static const size_t widths[] = {128, 512, 1024, 4096, 16384, 32768, 65536, 262144};
    static const keel_dtype_t dts[] = {KEEL_F32, KEEL_BF16};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
            m.dt = dts[t];
            m.cols = widths[i];
            m.rows = total / m.cols;
            size_t bytes = total * keel_dtype_size(m.dt);
            const char *tn = keel_dtype_name(m.dt);
            snprintf(name, sizeof name, "softmax %s %zux%zu", tn, m.rows, m.cols);
            mb_row(name, &m, bytes, 2.0 * bytes, k_softmax, chk_softmax, TARGET_ROWS);
            snprintf(name, sizeof name, "layernorm %s %zux%zu", tn, m.rows, m.cols);
            mb_row(name, &m, bytes, 2.0 * bytes, k_layernorm, chk_layernorm, TARGET_ROWS);
            if (m.cols == 4096 || m.cols == 32768 || m.cols == 65536) {
                /* the usual form: gamma and beta too (their bytes, read
                 * once per row from cache, are not counted) */
                m.affine = 1;
                snprintf(name, sizeof name, "layernorm gamma+beta %s %zux%zu", tn, m.rows, m.cols);
                mb_row(name, &m, bytes, 2.0 * bytes, k_layernorm, chk_layernorm, TARGET_ROWS);
                m.affine = 0;
            }
        }
}

static void memory_bound_rows(void)
{
    size_t n = bo_quick ? (size_t)1 << 26 : (size_t)1 << 28;
    mb_t m;
    memset(&m, 0, sizeof m);
    m.n = n;
    m.sa = bo_seed();
    m.sb = bo_seed();
    probing = 1;
    mb_rows(&m);
    probing = 0;
    if (!probe_hit)
        return;
    CHECK(keel_malloc(bo_dev, n * 4, &m.a));
    CHECK(keel_malloc(bo_dev, n * 4, &m.b));
    CHECK(keel_malloc(bo_dev, n * 2, &m.a16));
    CHECK(keel_malloc(bo_dev, n * 2, &m.b16));
    CHECK(keel_malloc(bo_dev, n * 4, &m.y));
    CHECK(keel_malloc(bo_dev, n * 4 / 1024 + 4, &m.out)); /* the sums: one per row of 4096 */
    CHECK(keel_malloc(bo_dev, n * 8, &m.cpy_src));
    CHECK(keel_malloc(bo_dev, n * 8, &m.cpy_dst));
    bo_upload_random(m.a, KEEL_F32, n, m.sa, SCALE_A);
    bo_upload_random(m.b, KEEL_F32, n, m.sb, SCALE_B);
    bo_upload_random(m.a16, KEEL_BF16, n, m.sa, SCALE_A);
    bo_upload_random(m.b16, KEEL_BF16, n, m.sb, SCALE_B);
    /* the copy's source holds data too (its speed does not depend on it) */
    CHECK(keel_memcpy(m.cpy_src, m.a, n * 4));
    CHECK(keel_memcpy((char *)m.cpy_src + n * 4, m.b, n * 4));

    mb_rows(&m);
    void *bufs[] = {m.a, m.b, m.a16, m.b16, m.y, m.out, m.cpy_src, m.cpy_dst};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        CHECK(keel_free(bufs[i]));
}

/* ======================================================================== */
/* GEMM                                                                      */
/* ======================================================================== */

typedef struct {
    size_t m, n, k;
    keel_dtype_t in, out;
    keel_compute_t compute;
    const void *a, *b;
    const void *a_host; /* A in host memory, for the checks (its rows are strided) */
    void *c, *c_alt;    /* Keel's output and cuBLAS's */
} mm_t;

static cudaDataType_t cty(keel_dtype_t d)
{
    return d == KEEL_F16 ? CUDA_R_16F : d == KEEL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Column-major C = A B, as the transformer benchmarks usually state it. */
static void k_gemm(void *c)
{
    mm_t *g = c;
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_COL_MAJOR;
    p.m = g->m, p.n = g->n, p.k = g->k, p.alpha = 1.0, p.beta = 0.0;
    p.a_type = p.b_type = g->in;
    p.c_type = g->out;
    p.compute = g->compute;
    p.a = g->a, p.lda = g->m, p.b = g->b, p.ldb = g->k, p.c = g->c, p.ldc = g->m;
    CHECK(keel_gemm(bo_ks, &p));
}

static void cublas_gemm(void *c)
{
    mm_t *g = c;
    float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = g->compute == KEEL_COMPUTE_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t st = cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->m, (int)g->n, (int)g->k, &one, g->a,
                                     cty(g->in), (int)g->m, g->b, cty(g->in), (int)g->k, &zero, g->c_alt, cty(g->out),
                                     (int)g->m, ct, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasGemmEx: %s\n", cublasGetStatusString(st));
        exit(3);
    }
}

static int check_gemm(const char *label, const mm_t *g, const void *c)
{
    bo_product_t p = {.a = g->a, .a_host = g->a_host, .b = g->b, .c = c, .m = g->m, .n = g->n, .k = g->k,
                      .a_si = 1, .a_sp = g->m, .b_sp = 1, .b_sj = g->k, .c_si = 1, .c_sj = g->m,
                      .in_dt = g->in, .out_dt = g->out, .tf32 = g->compute == KEEL_COMPUTE_TF32,
                      .act = KEEL_ACT_NONE};
    return bo_check_product(label, &p, 12);
}

static void gemm_row(const char *name, mm_t *g, double target)
{
    if (!bo_wanted(name))
        return;
    size_t cbytes = g->m * g->n * keel_dtype_size(g->out);
    CHECK(keel_memset(g->c, 0xff, cbytes));
    CK_CUDA(cudaMemset(g->c_alt, 0xff, cbytes));
    k_gemm(g);
    CHECK(keel_stream_synchronize(bo_ks));
    cublas_gemm(g);
    CK_CUDA(cudaStreamSynchronize(bo_cs));
    char label[120];
    snprintf(label, sizeof label, "%s, Keel", name);
    int ok = check_gemm(label, g, g->c);
    snprintf(label, sizeof label, "%s, cuBLAS", name);
    ok &= check_gemm(label, g, g->c_alt);
    if (ok)
        bo_compare(name, "cublasGemmEx", 2.0 * (double)g->m * (double)g->n * (double)g->k, "GFLOP/s", k_gemm,
                   cublas_gemm, g, 0, target);
    else
        bo_wrong(name, target);
}

static void gemm_rows(void)
{
    static const size_t squares[] = {256, 512, 1024, 2048, 4096, 8192, 16384};
    static const size_t shapes[][3] = {
        {4096, 11008, 4096}, {4096, 4096, 11008}, {8192, 1024, 8192}, {4096, 64, 4096}, {16384, 4096, 1024}};
    static const struct {
        keel_dtype_t in, out;
        keel_compute_t c;
        const char *name;
    } types[] = {{KEEL_F32, KEEL_F32, KEEL_COMPUTE_DEFAULT, "f32"},
                 {KEEL_F32, KEEL_F32, KEEL_COMPUTE_TF32, "tf32"},
                 {KEEL_F16, KEEL_F16, KEEL_COMPUTE_DEFAULT, "f16"},
                 {KEEL_BF16, KEEL_BF16, KEEL_COMPUTE_DEFAULT, "bf16"}};
    size_t maxn = bo_quick ? 8192 : 16384, elems = maxn * maxn;
    size_t ns = sizeof squares / sizeof squares[0], nshapes = ns + sizeof shapes / sizeof shapes[0];
    char name[96];
    mm_t rows[4][sizeof squares / sizeof squares[0] + sizeof shapes / sizeof shapes[0]];
    int any = 0;
    for (size_t t = 0; t < 4; t++)
        for (size_t i = 0; i < nshapes; i++) {
            mm_t *g = &rows[t][i];
            memset(g, 0, sizeof *g);
            if (i < ns)
                g->m = g->n = g->k = squares[i];
            else
                g->m = shapes[i - ns][0], g->n = shapes[i - ns][1], g->k = shapes[i - ns][2];
            if (g->m > maxn || g->n > maxn || g->k > maxn || (bo_quick && g->m * g->n * g->k > (size_t)1 << 36) ||
                (types[t].in == KEEL_F32 && types[t].c == KEEL_COMPUTE_DEFAULT && g->m * g->n * g->k > (size_t)1 << 39)) {
                g->m = 0; /* not run (f32 without tensor cores: minutes at 16384^3) */
                continue;
            }
            snprintf(name, sizeof name, "gemm %s %zux%zux%zu", types[t].name, g->m, g->n, g->k);
            any |= bo_selected(name);
        }
    if (!any)
        return;
    void *a32, *b32, *a16, *b16, *c, *c_alt;
    CHECK(keel_malloc(bo_dev, elems * 4, &a32));
    CHECK(keel_malloc(bo_dev, elems * 4, &b32));
    CHECK(keel_malloc(bo_dev, elems * 2, &a16));
    CHECK(keel_malloc(bo_dev, elems * 2, &b16));
    CHECK(keel_malloc(bo_dev, elems * 4, &c));
    CHECK(keel_malloc(bo_dev, elems * 4, &c_alt)); /* a Keel allocation, so that the check can read it */
    bo_upload_random(a32, KEEL_F32, elems, bo_seed(), 1.0f);
    bo_upload_random(b32, KEEL_F32, elems, bo_seed(), 1.0f);
    void *ah = malloc(elems * 4);
    if (!ah) {
        fprintf(stderr, "keel-bench-ops-cuda: no host memory for the GEMM checks\n");
        exit(3);
    }
    for (size_t t = 0; t < 4; t++) {
        const void *a = a32, *b = b32;
        if (types[t].in != KEEL_F32) { /* the same random data, rounded to the 16-bit type */
            CHECK(keel_cast(bo_ks, KEEL_F32, a32, types[t].in, a16, elems));
            CHECK(keel_cast(bo_ks, KEEL_F32, b32, types[t].in, b16, elems));
            CHECK(keel_stream_synchronize(bo_ks));
            a = a16, b = b16;
        }
        bo_download(ah, a, keel_dtype_size(types[t].in), elems, 1);
        for (size_t i = 0; i < nshapes; i++) {
            mm_t g = rows[t][i];
            if (g.m == 0)
                continue;
            g.in = types[t].in, g.out = types[t].out, g.compute = types[t].c;
            g.a = a, g.a_host = ah, g.b = b, g.c = c, g.c_alt = c_alt;
            snprintf(name, sizeof name, "gemm %s %zux%zux%zu", types[t].name, g.m, g.n, g.k);
            gemm_row(name, &g, i < ns && squares[i] <= 512 ? TARGET_GEMM_SMALL : TARGET_GEMM);
        }
    }
    free(ah);
    CHECK(keel_free(a32));
    CHECK(keel_free(b32));
    CHECK(keel_free(a16));
    CHECK(keel_free(b16));
    CHECK(keel_free(c));
    CHECK(keel_free(c_alt));
}

/* ======================================================================== */

int main(int argc, char **argv)
{
    bo_init(argc, argv);
    if (keel_device_get("cuda", 0, &bo_dev) != KEEL_OK) {
        printf("SKIP: no CUDA device: %s\n", keel_last_error());
        return 77;
    }
    CHECK(keel_device_default_stream(bo_dev, &bo_ks));
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(bo_dev, &props));
    CK_CUDA(cudaSetDevice(0));
    CK_CUDA(cudaStreamCreateWithFlags(&bo_cs, cudaStreamNonBlocking));
    /* The numerics Keel promises: f16 outputs never summed in f16 (split-K) */
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(blas, bo_cs) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) !=
            CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuBLAS setup failed\n");
        return 3;
    }
    printf("# keel-bench-ops-cuda on %s (%s)\n", props.name, props.architecture);
    printf("# ratio = alternative time / Keel time (> 1: Keel faster); median of the alternating pairs, "
           "[min..max]\n\n");

    memory_bound_rows();
    gemm_rows();
    bo_dense_rows();

    cublasDestroy(blas);
    CK_CUDA(cudaStreamDestroy(bo_cs));
    return bo_finish();
}
