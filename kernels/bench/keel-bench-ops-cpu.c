/* keel-bench-ops-cpu: the built-in operations on the CPU backend against
 * what a user would write instead, in one process, interleaved: direct cblas
 * calls for GEMM/GEMV, plain C loops for the memory-bound operations.
 *
 * Each line prints both times and ratio = alternative / keel (above 1: Keel
 * is faster). Keel calls are enqueued back to back and synchronized once
 * per batch, which is how a stream is used; the alternative runs inline.
 *
 * Usage: keel-bench-ops-cpu [--quick]   (KEEL_BACKEND is forced to cpu) */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keel.h"
#include "keel/ops.h"
#ifdef HAVE_OPENBLAS
#include <cblas.h>
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        keel_status_t s_ = (call);                                                                   \
        if (s_ != KEEL_OK) {                                                                         \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, keel_status_name(s_), keel_last_error()); \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

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

/* Interleaves keel and the alternative three times; keeps each one's best. */
static void compare(const char *name, double work, const char *unit, bench_fn keel, bench_fn alt, void *ctx)
{
    double tk = 1e30, ta = 1e30;
    for (int r = 0; r < 3; r++) {
        double a = time_it(keel, ctx, 1), b = time_it(alt, ctx, 0);
        tk = a < tk ? a : tk;
        ta = b < ta ? b : ta;
    }
    printf("%-34s keel %10.2f us %9.2f %-6s   alt %10.2f us %9.2f %-6s   ratio %.3f\n", name, tk * 1e6,
           work / tk * 1e-9, unit, ta * 1e6, work / ta * 1e-9, unit, ta / tk);
    fflush(stdout);
}

/* ---- operations ---- */

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

static void l_add(void *c)
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

static void l_relu(void *c)
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

static void l_cast(void *c)
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
static void l_sum(void *c)
{
    vec_ctx_t *v = c;
    float s = 0;
    for (size_t i = 0; i < v->n; i++)
        s += v->a[i];
    sink = s;
}

typedef struct {
    size_t rows, cols;
    float *x, *y;
} row_ctx_t;

static void k_softmax(void *c)
{
    row_ctx_t *r = c;
    CHECK(keel_softmax_rows(stream, KEEL_F32, r->rows, r->cols, r->x, r->cols, r->y, r->cols, 0));
}

static void l_softmax(void *c)
{
    row_ctx_t *r = c;
    for (size_t i = 0; i < r->rows; i++) {
        const float *x = r->x + i * r->cols;
        float *y = r->y + i * r->cols, m = x[0], s = 0;
        for (size_t j = 0; j < r->cols; j++)
            m = x[j] > m ? x[j] : m;
        for (size_t j = 0; j < r->cols; j++)
            s += (y[j] = expf(x[j] - m));
        float inv = 1.0f / s;
        for (size_t j = 0; j < r->cols; j++)
            y[j] *= inv;
    }
}

typedef struct {
    size_t m, n, k;
    float *a, *b, *c, *bias;
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

/* dense vs the two-step a user would write: sgemm, then bias + relu. */
static void k_dense(void *c)
{
    mm_ctx_t *g = c;
    keel_dense_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_ROW_MAJOR;
    p.m = g->m, p.n = g->n, p.k = g->k;
    p.dtype = KEEL_F32;
    p.act = KEEL_ACT_RELU;
    p.w = g->a, p.ldw = g->k, p.x = g->b, p.ldx = g->n, p.bias = g->bias, p.y = g->c, p.ldy = g->n;
    CHECK(keel_dense(stream, &p));
}

static void l_dense(void *c)
{
    mm_ctx_t *g = c;
    l_gemm(c);
    for (size_t i = 0; i < g->m; i++)
        for (size_t j = 0; j < g->n; j++) {
            float v = g->c[i * g->n + j] + g->bias[i];
            g->c[i * g->n + j] = v < 0 ? 0.0f : v;
        }
}

static float *buf(keel_device_t *dev, size_t n)
{
    void *p;
    CHECK(keel_malloc(dev, n * sizeof(float), &p));
    float *f = p;
    for (size_t i = 0; i < n; i++)
        f[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    return f;
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (quick)
        min_seconds = 0.03;
    setenv("KEEL_BACKEND", "cpu", 1);
    keel_device_t *dev;
    CHECK(keel_device_default(&dev));
    CHECK(keel_device_default_stream(dev, &stream));
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(dev, &props));
    printf("# keel-bench-ops-cpu on %s (%d cores)%s\n", props.name, props.compute_units,
#ifdef HAVE_OPENBLAS
           ", alternative: OpenBLAS cblas / plain C loops"
#else
           ", alternative: plain C loops (no OpenBLAS)"
#endif
    );
    printf("# ratio = alternative time / keel time (> 1: keel faster)\n");

    const size_t vsizes[] = {1024, 16384, 1 << 20, 1 << 24};
    for (size_t i = 0; i < sizeof vsizes / sizeof vsizes[0]; i++) {
        size_t n = vsizes[i];
        if (quick && n > (1 << 20))
            continue;
        vec_ctx_t v = {n, buf(dev, n), buf(dev, n), buf(dev, n), buf(dev, 1)};
        char name[64];
        snprintf(name, sizeof name, "add f32 n=%zu", n);
        compare(name, 12.0 * n, "GB/s", k_add, l_add, &v);
        snprintf(name, sizeof name, "relu f32 n=%zu", n);
        compare(name, 8.0 * n, "GB/s", k_relu, l_relu, &v);
        snprintf(name, sizeof name, "cast f32->f64 n=%zu", n / 2);
        compare(name, 6.0 * n, "GB/s", k_cast, l_cast, &v);
        snprintf(name, sizeof name, "sum f32 n=%zu", n);
        compare(name, 4.0 * n, "GB/s", k_sum, l_sum, &v);
        keel_free(v.a), keel_free(v.b), keel_free(v.y), keel_free(v.out);
    }
    const size_t rshapes[][2] = {{4096, 128}, {1024, 4096}, {64, 65536}};
    for (size_t i = 0; i < 3; i++) {
        row_ctx_t r = {rshapes[i][0], rshapes[i][1], NULL, NULL};
        r.x = buf(dev, r.rows * r.cols);
        r.y = buf(dev, r.rows * r.cols);
        char name[64];
        snprintf(name, sizeof name, "softmax f32 %zux%zu", r.rows, r.cols);
        compare(name, 8.0 * r.rows * r.cols, "GB/s", k_softmax, l_softmax, &r);
        keel_free(r.x), keel_free(r.y);
    }
    const size_t msizes[] = {64, 256, 512, 1024, 2048};
    for (size_t i = 0; i < sizeof msizes / sizeof msizes[0]; i++) {
        size_t n = msizes[i];
        if (quick && n > 512)
            continue;
        mm_ctx_t g = {n, n, n, buf(dev, n * n), buf(dev, n * n), buf(dev, n * n), buf(dev, n)};
        char name[64];
        snprintf(name, sizeof name, "sgemm %zu^3", n);
        compare(name, 2.0 * n * n * n, "GFLOP/s", k_gemm, l_gemm, &g);
        snprintf(name, sizeof name, "dense relu f32 %zu^3", n);
        compare(name, 2.0 * n * n * n, "GFLOP/s", k_dense, l_dense, &g);
        keel_free(g.a), keel_free(g.b), keel_free(g.c), keel_free(g.bias);
    }
    return 0;
}
