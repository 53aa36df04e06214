/* SPDX-License-Identifier: MIT */
/* keel-bench-ops-cpu: the built-in operations on the CPU backend against
 * what a user would write instead, in one process, interleaved: direct cblas
 * calls for GEMM/GEMV, plain C loops for the memory-bound operations, and
 * hand-written threaded loops for the transcendental, row and dense
 * operations.
 *
 * Each line prints both times and ratio = alternative / keel (above 1: Keel
 * is faster). Keel calls are enqueued back to back and synchronized once
 * per batch, which is how a stream is used; the alternative runs inline, on
 * the same buffers and the same random data (fresh each run; --seed repeats
 * one). Keel and the alternative take turns (the order alternates between
 * rounds) and each keeps its best batch.
 *
 * Two kinds of alternative:
 *   plain    a single-threaded C loop compiled with the flags of Keel's CPU
 *            kernels (add, relu, cast, sum);
 *   hand     a loop spread over as many OpenMP threads as the device has
 *            and built as such code is built for speed, -O3 -march=native
 *            -ffast-math (kernels/bench/bench_ops_cpu_hand.c), so that its
 *            math calls are glibc's vector forms: exp, log, tanh, sigmoid,
 *            silu and both GELUs, softmax, layer norm, and the bias +
 *            activation pass after cblas_sgemm that the dense layer fuses.
 *
 * Each line ends with the target it is held to on the CPU backend and
 * "ok" or "MISS": small operations (up to 16k elements) within 1.1x of the
 * plain loop (ratio >= 0.909); larger elementwise operations and reductions
 * >= 0.9x of the plain memory-bound loop; transcendental operations >= 0.9x
 * of the hand loop; softmax and layer norm >= 1.0x of the hand loop; the
 * dense layer >= 0.95x of sgemm + the hand pass; GEMM >= 0.98x of direct
 * cblas for n >= 512. Lines without a target print "-" (the dense layer
 * against sgemm alone). The last line counts the misses, and the exit status
 * is 1 when there is one (0 when all are met; 3 when an error stopped it).
 *
 * Usage: keel-bench-ops-cpu [--quick] [--rounds N] [--seed S] [SUBSTRING...]
 *   --quick      shorter timing, sizes up to 1M elements and n = 512
 *   --rounds N   rounds of the interleaved comparison (default 3)
 *   --seed S     the random data's seed (default: from the clock; printed)
 *   SUBSTRING    run only the lines whose name contains one of them
 *                (e.g. "n=1024" "n=16384" "n=512" "n=8192" for the small rows,
 *                "gelu" "softmax" "dense")
 * KEEL_BACKEND is forced to cpu. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keel.h"

#include "bench/bench_util.h"
#include "kernels/bench/bench_ops_cpu_hand.h"
#include "keel/ops.h"
#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif


static keel_stream_t *stream;
static double min_seconds = 0.2;

typedef void (*bench_fn)(void *ctx);

/* Seconds per call of fn: batches of calls, the batch size grown until a
 * batch takes a few ms; the best of several batches. */
static double time_it(bench_fn fn, void *ctx, int is_keel)
{
    size_t reps = 1;
    for (;;) {
        double t0 = now();
        for (size_t i = 0; i < reps; i++)
            fn(ctx);
        if (is_keel)
            CHECK(keel_stream_synchronize(stream));
        double dt = now() - t0;
        if (dt > 0.005 || reps > (1u << 24))
            break;
        reps *= 4;
    }
    double best = 1e30, total = 0;
    while (total < min_seconds) {
        double t0 = now();
        for (size_t i = 0; i < reps; i++)
            fn(ctx);
        if (is_keel)
            CHECK(keel_stream_synchronize(stream));
        double dt = now() - t0;
        total += dt;
        if (dt / (double)reps < best)
            best = dt / (double)reps;
    }
    return best;
}

static int rounds = 3;
static int nfilters;
static char **filters;
static int misses, checked;

/* Whether the line called name is to run. */
static int wanted(const char *name)
{
    if (nfilters == 0)
        return 1;
    for (int i = 0; i < nfilters; i++)
        if (strstr(name, filters[i]))
            return 1;
    return 0;
}

/* Interleaves keel and the alternative `rounds` times, alternating which
 * goes first; keeps each one's best. target: the lowest acceptable ratio,
 * 0 for none. */
static void compare(const char *name, double work, const char *unit, bench_fn keel, bench_fn alt, void *ctx,
                    double target)
{
    if (!wanted(name))
        return;
    double tk = 1e30, ta = 1e30;
    for (int r = 0; r < rounds; r++) {
        double a, b;
        if (r % 2 == 0) {
            a = time_it(keel, ctx, 1);
            b = time_it(alt, ctx, 0);
        } else {
            b = time_it(alt, ctx, 0);
            a = time_it(keel, ctx, 1);
        }
        tk = a < tk ? a : tk;
        ta = b < ta ? b : ta;
    }
    double ratio = ta / tk;
    char verdict[32] = "-";
    if (target > 0) {
        int ok = ratio >= target;
        snprintf(verdict, sizeof verdict, ">=%.3f %s", target, ok ? "ok" : "MISS");
        checked++;
        misses += !ok;
    }
    printf("%-34s keel %10.2f us %9.2f %-6s   alt %10.2f us %9.2f %-6s   ratio %.3f   %s\n", name, tk * 1e6,
           work / tk * 1e-9, unit, ta * 1e6, work / ta * 1e-9, unit, ratio, verdict);
    fflush(stdout);
}

/* The CPU backend's targets. */
#define SMALL_ELEMS 16384
#define TARGET_SMALL (1.0 / 1.1)  /* small ops within 1.1x of a plain C loop */
#define TARGET_STREAM 0.9         /* memory-bound ops >= 0.9x of a plain loop */
#define TARGET_GEMM 0.98          /* GEMM >= 0.98x direct cblas for n >= 512 */
#define TARGET_MATH 0.9           /* transcendental ops >= 0.9x of the hand loop */
#define TARGET_ROWS 1.0           /* softmax, layer norm >= the hand loop */
#define TARGET_DENSE 0.95         /* dense >= 0.95x of sgemm + the hand pass */

static double stream_target(size_t elems)
{
    return elems <= SMALL_ELEMS ? TARGET_SMALL : TARGET_STREAM;
}

/* ---- operations ---- */

/* The plain loops start on a cache line and their inner loops on a 32-byte
 * boundary, as Keel's own hot loops do: a loop that happens to straddle a
 * fetch boundary runs up to a third slower at these sizes, and a comparison
 * should not be won or lost on where the linker put the loser. */
#ifdef __clang__
#define LOOP_FN __attribute__((noinline, aligned(64))) /* clang has no optimize attribute */
#else
#define LOOP_FN __attribute__((noinline, aligned(64), optimize("align-loops=32")))
#endif

typedef struct {
    size_t n;
    float *a, *b, *y, *out;
} vec_ctx_t;

static void k_add(void *c)
{
    vec_ctx_t *v = c;
    CHECK(keel_binary(stream, KEEL_BINARY_ADD, KEEL_F32, 1, v->n, 1.0, v->a, v->n, 1.0, v->b, v->n,
                      KEEL_BROADCAST_NONE, v->y, v->n));
}

static LOOP_FN void l_add(void *c)
{
    vec_ctx_t *v = c;
    float *restrict y = v->y;
    const float *restrict a = v->a, *restrict b = v->b;
    for (size_t i = 0; i < v->n; i++)
        y[i] = a[i] + b[i];
}

static void k_relu(void *c)
{
    vec_ctx_t *v = c;
    CHECK(keel_unary(stream, KEEL_UNARY_RELU, KEEL_F32, v->n, v->a, v->y));
}

static LOOP_FN void l_relu(void *c)
{
    vec_ctx_t *v = c;
    float *restrict y = v->y;
    const float *restrict a = v->a;
    for (size_t i = 0; i < v->n; i++)
        y[i] = a[i] < 0 ? 0.0f : a[i];
}

static void k_cast(void *c)
{
    vec_ctx_t *v = c;
    CHECK(keel_cast(stream, KEEL_F32, v->a, KEEL_F64, v->b, v->n / 2));
}

static LOOP_FN void l_cast(void *c)
{
    vec_ctx_t *v = c;
    double *restrict y = (double *)v->b;
    const float *restrict a = v->a;
    for (size_t i = 0; i < v->n / 2; i++)
        y[i] = a[i];
}

static void k_sum(void *c)
{
    vec_ctx_t *v = c;
    CHECK(keel_reduce(stream, KEEL_REDUCE_SUM, KEEL_F32, 1, v->n, v->a, v->n, KEEL_AXIS_ALL, v->out));
}

static volatile float sink;
static LOOP_FN void l_sum(void *c)
{
    vec_ctx_t *v = c;
    float s = 0;
    for (size_t i = 0; i < v->n; i++)
        s += v->a[i];
    sink = s;
}

/* ---- random data: the same for both sides, fresh each run ---- */

static unsigned long long rng_state;

static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

/* n floats of Keel device memory, random in [lo, hi). */
static float *buf_range(keel_device_t *dev, size_t n, double lo, double hi)
{
    void *p;
    CHECK(keel_malloc(dev, n * sizeof(float), &p));
    float *f = p;
    for (size_t i = 0; i < n; i++)
        f[i] = (float)(lo + (hi - lo) * urand());
    return f;
}

static float *buf(keel_device_t *dev, size_t n)
{
    return buf_range(dev, n, -1.0, 1.0);
}

/* ---- transcendental operations against the hand loop ---- */

typedef struct {
    keel_unary_op_t op;
    size_t n;
    float *x, *y;
} math_ctx_t;

static void k_math(void *c)
{
    math_ctx_t *m = c;
    CHECK(keel_unary(stream, m->op, KEEL_F32, m->n, m->x, m->y));
}

static void h_math(void *c)
{
    math_ctx_t *m = c;
    hand_unary(m->op, m->n, m->x, m->y);
}

/* ---- softmax and layer norm against the hand loop ---- */

typedef struct {
    size_t rows, cols;
    float *x, *y, *gamma, *beta;
} row_ctx_t;

static void k_softmax(void *c)
{
    row_ctx_t *r = c;
    CHECK(keel_softmax_rows(stream, KEEL_F32, r->rows, r->cols, r->x, r->cols, r->y, r->cols, 0));
}

static void h_softmax(void *c)
{
    row_ctx_t *r = c;
    hand_softmax(r->rows, r->cols, r->x, r->y);
}

#define LN_EPS 1e-5

static void k_layernorm(void *c)
{
    row_ctx_t *r = c;
    CHECK(keel_layernorm_rows(stream, KEEL_F32, r->rows, r->cols, r->x, r->cols, r->gamma, r->beta, LN_EPS, r->y,
                              r->cols));
}

static void h_layernorm(void *c)
{
    row_ctx_t *r = c;
    hand_layernorm(r->rows, r->cols, r->x, r->gamma, r->beta, (float)LN_EPS, r->y);
}

/* ---- GEMM and the dense layer ---- */

typedef struct {
    size_t m, n, k;
    float *a, *b, *c, *bias;
    keel_activation_t act;
} mm_ctx_t;

static void k_gemm(void *c)
{
    mm_ctx_t *g = c;
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_ROW_MAJOR;
    p.m = g->m, p.n = g->n, p.k = g->k;
    p.alpha = 1.0, p.beta = 0.0;
    p.a_type = p.b_type = p.c_type = KEEL_F32;
    p.a = g->a, p.lda = g->k, p.b = g->b, p.ldb = g->n, p.c = g->c, p.ldc = g->n;
    CHECK(keel_gemm(stream, &p));
}

static void l_gemm(void *c)
{
    mm_ctx_t *g = c;
#ifdef HAVE_OPENBLAS
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)g->m, (blasint)g->n, (blasint)g->k, 1.0f, g->a,
                (blasint)g->k, g->b, (blasint)g->n, 0.0f, g->c, (blasint)g->n);
#else
    for (size_t i = 0; i < g->m; i++)
        for (size_t j = 0; j < g->n; j++) {
            float s = 0;
            for (size_t l = 0; l < g->k; l++)
                s += g->a[i * g->k + l] * g->b[l * g->n + j];
            g->c[i * g->n + j] = s;
        }
#endif
}

/* Y = act(W X + bias), bias per row of Y, row-major. */
static void k_dense(void *c)
{
    mm_ctx_t *g = c;
    keel_dense_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_ROW_MAJOR;
    p.m = g->m, p.n = g->n, p.k = g->k;
    p.dtype = KEEL_F32;
    p.act = g->act;
    p.w = g->a, p.ldw = g->k, p.x = g->b, p.ldx = g->n, p.bias = g->bias, p.y = g->c, p.ldy = g->n;
    CHECK(keel_dense(stream, &p));
}

/* the two steps a user would write: sgemm, then the bias + activation pass */
static void h_dense(void *c)
{
    mm_ctx_t *g = c;
    l_gemm(c);
    hand_bias_act(g->act, g->m, g->n, g->bias, g->c);
}

int main(int argc, char **argv)
{
    int quick = 0;
    unsigned long long seed = 0;
    filters = calloc((size_t)argc, sizeof *filters);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            if (rounds < 1)
                rounds = 1;
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--quick] [--rounds N] [--seed S] [SUBSTRING...]\n", argv[0]);
            return 3;
        } else {
            filters[nfilters++] = argv[i];
        }
    }
    if (quick)
        min_seconds = 0.03;
    if (seed == 0)
        seed = (unsigned long long)time(NULL);
    rng_state = seed * 0x9e3779b97f4a7c15ull | 1;
    setenv("KEEL_BACKEND", "cpu", 1);
    keel_device_t *dev;
    CHECK(keel_device_default(&dev));
    CHECK(keel_device_default_stream(dev, &stream));
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(dev, &props));
    int hand_threads = hand_set_threads(props.compute_units);
    printf("# keel-bench-ops-cpu on %s (%d cores)%s\n", props.name, props.compute_units,
#ifdef HAVE_OPENBLAS
           ", alternative: OpenBLAS cblas / plain C loops / hand loops"
#else
           ", alternative: plain C loops / hand loops (no OpenBLAS)"
#endif
    );
    printf("# hand loops: %d OpenMP threads, %s; random data, seed %llu\n", hand_threads,
           hand_fast_math() ? "-O3 -march=native -ffast-math" : "built without -ffast-math", seed);
    printf("# ratio = alternative time / keel time (> 1: keel faster); best of %d interleaved rounds\n", rounds);
    printf("# targets: <= %d elements >= %.3f (1.1x of a plain loop); larger memory-bound >= %.2f; "
           "transcendental >= %.2f, softmax and layer norm >= %.2f of the hand loop; "
           "dense >= %.2f of sgemm + the hand pass; sgemm n >= 512 >= %.2f\n",
           SMALL_ELEMS, TARGET_SMALL, TARGET_STREAM, TARGET_MATH, TARGET_ROWS, TARGET_DENSE, TARGET_GEMM);

    const size_t vsizes[] = {1024, 16384, 1 << 20, 1 << 24};
    for (size_t i = 0; i < sizeof vsizes / sizeof vsizes[0]; i++) {
        size_t n = vsizes[i];
        if (quick && n > (1 << 20))
            continue;
        char probe[4][64];
        snprintf(probe[0], 64, "add f32 n=%zu", n);
        snprintf(probe[1], 64, "relu f32 n=%zu", n);
        snprintf(probe[2], 64, "cast f32->f64 n=%zu", n / 2);
        snprintf(probe[3], 64, "sum f32 n=%zu", n);
        if (!wanted(probe[0]) && !wanted(probe[1]) && !wanted(probe[2]) && !wanted(probe[3]))
            continue;
        vec_ctx_t v = {n, buf(dev, n), buf(dev, n), buf(dev, n), buf(dev, 1)};
        char name[64];
        snprintf(name, sizeof name, "add f32 n=%zu", n);
        compare(name, 12.0 * n, "GB/s", k_add, l_add, &v, stream_target(n));
        snprintf(name, sizeof name, "relu f32 n=%zu", n);
        compare(name, 8.0 * n, "GB/s", k_relu, l_relu, &v, stream_target(n));
        snprintf(name, sizeof name, "cast f32->f64 n=%zu", n / 2);
        compare(name, 6.0 * n, "GB/s", k_cast, l_cast, &v, stream_target(n));
        snprintf(name, sizeof name, "sum f32 n=%zu", n);
        compare(name, 4.0 * n, "GB/s", k_sum, l_sum, &v, stream_target(n));
        keel_free(v.a), keel_free(v.b), keel_free(v.y), keel_free(v.out);
    }

    /* The transcendental operations over activations-like data (log: over
     * positive values), against the hand loop. */
    static const struct {
        keel_unary_op_t op;
        const char *name;
        double lo, hi;
    } mops[] = {
        {KEEL_UNARY_GELU_TANH, "gelu-tanh", -5, 5}, {KEEL_UNARY_GELU_ERF, "gelu-erf", -5, 5},
        {KEEL_UNARY_SILU, "silu", -5, 5},           {KEEL_UNARY_SIGMOID, "sigmoid", -5, 5},
        {KEEL_UNARY_TANH, "tanh", -5, 5},           {KEEL_UNARY_EXP, "exp", -5, 5},
        {KEEL_UNARY_LOG, "log", 1e-3, 100},
    };
    const size_t msz[] = {1 << 20, 1 << 24};
    for (size_t i = 0; i < sizeof msz / sizeof msz[0]; i++) {
        size_t n = msz[i];
        if (quick && n > (1 << 20))
            continue;
        for (size_t k = 0; k < sizeof mops / sizeof mops[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s f32 n=%zu vs hand", mops[k].name, n);
            if (!wanted(name))
                continue;
            math_ctx_t m = {mops[k].op, n, buf_range(dev, n, mops[k].lo, mops[k].hi), buf(dev, n)};
            compare(name, 8.0 * n, "GB/s", k_math, h_math, &m, TARGET_MATH);
            keel_free(m.x), keel_free(m.y);
        }
    }

    const size_t rshapes[][2] = {{4096, 128}, {1024, 4096}, {64, 65536}, {256, 4096}};
    for (size_t i = 0; i < sizeof rshapes / sizeof rshapes[0]; i++) {
        row_ctx_t r = {rshapes[i][0], rshapes[i][1], NULL, NULL, NULL, NULL};
        if (quick ? r.rows * r.cols > (1 << 20) : r.rows == 256)
            continue;
        char sname[64], lname[64];
        snprintf(sname, sizeof sname, "softmax f32 %zux%zu vs hand", r.rows, r.cols);
        snprintf(lname, sizeof lname, "layernorm f32 %zux%zu vs hand", r.rows, r.cols);
        if (!wanted(sname) && !wanted(lname))
            continue;
        r.x = buf_range(dev, r.rows * r.cols, -4, 4);
        r.y = buf(dev, r.rows * r.cols);
        r.gamma = buf_range(dev, r.cols, 0.5, 1.5);
        r.beta = buf(dev, r.cols);
        compare(sname, 8.0 * r.rows * r.cols, "GB/s", k_softmax, h_softmax, &r, TARGET_ROWS);
        compare(lname, 8.0 * r.rows * r.cols, "GB/s", k_layernorm, h_layernorm, &r, TARGET_ROWS);
        keel_free(r.x), keel_free(r.y), keel_free(r.gamma), keel_free(r.beta);
    }

    static const struct {
        keel_activation_t act;
        const char *name;
    } acts[] = {{KEEL_ACT_RELU, "relu"}, {KEEL_ACT_GELU_TANH, "gelu-tanh"}, {KEEL_ACT_GELU_ERF, "gelu-erf"}};
    const size_t msizes[] = {64, 256, 512, 1024, 2048};
    for (size_t i = 0; i < sizeof msizes / sizeof msizes[0]; i++) {
        size_t n = msizes[i];
        if (quick && n > 512)
            continue;
        char name[80];
        snprintf(name, sizeof name, "sgemm %zu^3", n);
        int any = wanted(name);
        for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
            snprintf(name, sizeof name, "dense %s f32 %zu^3", acts[a].name, n);
            any |= wanted(name);
        }
        if (!any)
            continue;
        /* W scaled by sqrt(3 / k): the products, and so the activations'
         * inputs, are of the order of 1, as in a network */
        double ws = sqrt(3.0 / (double)n);
        mm_ctx_t g = {n, n, n, buf_range(dev, n * n, -ws, ws), buf(dev, n * n), buf(dev, n * n), buf(dev, n),
                      KEEL_ACT_RELU};
        snprintf(name, sizeof name, "sgemm %zu^3", n);
        compare(name, 2.0 * n * n * n, "GFLOP/s", k_gemm, l_gemm, &g, n >= 512 ? TARGET_GEMM : 0);
#ifdef HAVE_OPENBLAS
        if (n >= 256 && n <= 1024) {
            snprintf(name, sizeof name, "dense relu f32 %zu^3 vs sgemm alone", n);
            compare(name, 2.0 * n * n * n, "GFLOP/s", k_dense, l_gemm, &g, 0);
            for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
                g.act = acts[a].act;
                snprintf(name, sizeof name, "dense %s f32 %zu^3 vs sgemm+hand", acts[a].name, n);
                compare(name, 2.0 * n * n * n, "GFLOP/s", k_dense, h_dense, &g, TARGET_DENSE);
            }
        }
#endif
        keel_free(g.a), keel_free(g.b), keel_free(g.c), keel_free(g.bias);
    }
    printf("# %d of %d lines with a target miss it\n", misses, checked);
    free(filters);
    return misses > 0 ? 1 : 0;
}
