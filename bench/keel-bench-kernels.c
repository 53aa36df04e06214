/* SPDX-License-Identifier: MIT */
/* keel-bench-kernels: portable kernels (keel/kernel_lang.h, built with
 * keel_module_build, launched with KEEL_LAUNCH) against the same algorithms
 * written by hand, side by side in one process, on the device Keel selects
 * (KEEL_BACKEND=cpu or cuda).
 *
 *  CPU:  against the same algorithm in plain C in this file, parallelized
 *        with OpenMP over as many threads as Keel's CPU device has, and,
 *        where a built-in operation does the same, against it (keel_binary
 *        for saxpy and add, keel_unary for the tanh GELU).
 *  CUDA: against the same kernels written in CUDA C, compiled by NVRTC
 *        through keel_module_compile and launched the same way, so the
 *        source is the only difference.
 *  Both: the first build of the module (a compiler run) and a build found
 *        in the cache, in a fresh KEEL_CACHE_DIR of the benchmark's own.
 *
 * Method. Every row gets fresh random inputs, the same for both sides. Each
 * side runs once on outputs poisoned with NaN and its result is checked
 * against a float64 reference (a side that computes garbage fails the row,
 * however fast it is). Then each side is warmed up and the two alternate in
 * batches of about KEEL_BENCH_BATCH_MS (the order swaps every pair), on the
 * same inputs and the same output buffer; a batch of Keel work is enqueued
 * back to back and synchronized once, as a stream is used. On the CPU each
 * batch starts only once the previous side's threads have stopped spinning
 * (KEEL_BENCH_GAP_MS), so that neither side runs on cores the other still
 * holds. ratio = the other side's time / the portable kernel's time
 * (above 1: the portable kernel is faster), the median over the pairs, with
 * its smallest and largest value; the times are medians too.
 *
 * Targets (ratio at least): CPU: saxpy and add 0.90 of the OpenMP loop and
 * of the built-in op; tanh GELU 0.90 of the OpenMP loop (the built-in GELU
 * computes x sigmoid(2z) with its own exp: shown, no target); the 16x16
 * tiled matmul 0.80 of the same tiles in OpenMP; block_sum 0.80 of the same
 * block tree in OpenMP (a plain OpenMP sum is shown, no target). CUDA: 0.98
 * of the CUDA C kernel, every row. Both: a build found in the cache under
 * 2 ms.
 *
 * Usage: keel-bench-kernels [--quick] [SUBSTRING...]
 *   --quick            fewer pairs, shorter batches, smaller vectors
 *   SUBSTRING          run only the rows whose name contains one of them
 * Environment:
 *   KEEL_BACKEND       cpu or cuda (Keel's usual selection otherwise)
 *   KEEL_BENCH_QUICK=1 the same as --quick
 *   KEEL_BENCH_PAIRS   pairs of batches per row (default 15, quick 5)
 *   KEEL_BENCH_BATCH_MS  length of a batch (default 20, quick 10)
 *   KEEL_BENCH_N       elements of the vector rows (default CPU 2^24, CUDA 2^28)
 *   KEEL_BENCH_BUDGET  seconds: rows that would start after it are skipped
 *   KEEL_BENCH_GAP_MS  idle time before each batch (default CPU: measured, how long
 *                      the threads of either side keep spinning after a call;
 *                      CUDA: 0)
 *   KEEL_BENCH_KEEP_CACHE=1  keep the benchmark's cache directory (the
 *                      generated sources and modules) instead of removing it
 *   KEEL_CPU_THREADS   threads of Keel's CPU device; OpenMP gets the same
 *                      unless OMP_NUM_THREADS says otherwise
 * Exit status: 0 every row met its target; 1 a target was missed or a
 * result was wrong; 2 none missed but rows were skipped for the budget;
 * 3 an error stopped it; 77 no CPU or CUDA device. The last lines are one summary line per row:
 * name, measured, target, PASS / FAIL / WRONG / INFO (no target) / SKIP. */
#include "config.h"
#include <errno.h>
#include <float.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "keel.h"

#include "bench/bench_util.h"
#include "keel/ops.h"

/* The hand-written side at -O3, as the CPU backend compiles kernels: the
 * build's CFLAGS (-O2 by default) come after a program's own flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

/* The hand-written GELU calls glibc's vector tanhf, as the portable kernel
 * does on the CPU backend (keel/kernel_lang.h): the same algorithm,
 * vectorized the same way. HAVE_LIBMVEC comes from configure. */
#if defined(HAVE_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__FAST_MATH__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 35)
__attribute__((simd("notinbranch"))) float tanhf(float);
#define HAND_TANHF_VECTOR 1
#endif
#endif
#ifndef HAND_TANHF_VECTOR
#define HAND_TANHF_VECTOR 0
#endif


/* ======================================================================== */
/* The kernels                                                              */
/* ======================================================================== */

/* The portable kernels: one source for every backend. */
static const char portable_src[] =
    "#define TILE 16\n"
    "\n"
    "keel_kernel void saxpy(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i];\n"
    "}\n"
    "\n"
    "keel_kernel void vadd(int n, const float *a, const float *b, float *c)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        c[i] = a[i] + b[i];\n"
    "}\n"
    "\n"
    "keel_kernel void gelu_tanh(int n, const float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n) {\n"
    "        float v = x[i];\n"
    "        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));\n"
    "    }\n"
    "}\n"
    "\n"
    "/* C = A B, n x n row-major, n a multiple of TILE; blocks of TILE x TILE threads. */\n"
    "keel_block_kernel keel_block_size(16, 16, 1) void matmul(int n, const float *a, const float *b, float *c)\n"
    "{\n"
    "    keel_shared float as[TILE][TILE];\n"
    "    keel_shared float bs[TILE][TILE];\n"
    "    keel_private(float, acc);\n"
    "    keel_threads {\n"
    "        keel_priv(acc) = 0.0f;\n"
    "    }\n"
    "    for (int k0 = 0; k0 < n; k0 += TILE) {\n"
    "        keel_threads {\n"
    "            int tx = keel_thread_x(), ty = keel_thread_y();\n"
    "            as[ty][tx] = a[(keel_block_y() * TILE + ty) * n + k0 + tx];\n"
    "            bs[ty][tx] = b[(k0 + ty) * n + keel_block_x() * TILE + tx];\n"
    "        }\n"
    "        keel_barrier();\n"
    "        keel_threads {\n"
    "            int tx = keel_thread_x(), ty = keel_thread_y();\n"
    "            float s = keel_priv(acc);\n"
    "            for (int k = 0; k < TILE; k++)\n"
    "                s += as[ty][k] * bs[k][tx];\n"
    "            keel_priv(acc) = s;\n"
    "        }\n"
    "        keel_barrier();\n"
    "    }\n"
    "    keel_threads {\n"
    "        c[(keel_block_y() * TILE + keel_thread_y()) * n + keel_block_x() * TILE + keel_thread_x()] =\n"
    "            keel_priv(acc);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* One partial sum per block of 256 threads, two elements per thread, a\n"
    " * tree in shared memory; the partials are summed on the host. */\n"
    "keel_block_kernel keel_block_size(256, 1, 1) void block_sum(int n, const float *x, float *partial)\n"
    "{\n"
    "    keel_shared float s[256];\n"
    "    keel_threads {\n"
    "        int t = keel_thread_x();\n"
    "        int i = keel_block_x() * (2 * keel_block_dim_x()) + t;\n"
    "        float v = i < n ? x[i] : 0.0f;\n"
    "        if (i + keel_block_dim_x() < n)\n"
    "            v += x[i + keel_block_dim_x()];\n"
    "        s[t] = v;\n"
    "    }\n"
    "    for (int stride = keel_block_dim_x() / 2; stride > 0; stride /= 2) {\n"
    "        keel_barrier();\n"
    "        keel_threads_first(stride) {\n"
    "            int t = keel_thread_x();\n"
    "            s[t] += s[t + stride];\n"
    "        }\n"
    "    }\n"
    "    keel_barrier();\n"
    "    keel_threads {\n"
    "        if (keel_thread_x() == 0)\n"
    "            partial[keel_block_x()] = s[0];\n"
    "    }\n"
    "}\n";

/* The same kernels in CUDA C, statement for statement: the index
 * expressions are the ones keel/kernel_lang.h expands to on a GPU. */
static const char cuda_src[] =
    "#define TILE 16\n"
    "\n"
    "extern \"C\" __global__ void saxpy(int n, float a, const float *x, float *y)\n"
    "{\n"
    "    int i = (int)(blockIdx.x * blockDim.x) + (int)threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void vadd(int n, const float *a, const float *b, float *c)\n"
    "{\n"
    "    int i = (int)(blockIdx.x * blockDim.x) + (int)threadIdx.x;\n"
    "    if (i < n)\n"
    "        c[i] = a[i] + b[i];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void gelu_tanh(int n, const float *x, float *y)\n"
    "{\n"
    "    int i = (int)(blockIdx.x * blockDim.x) + (int)threadIdx.x;\n"
    "    if (i < n) {\n"
    "        float v = x[i];\n"
    "        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));\n"
    "    }\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ __launch_bounds__(TILE * TILE) void matmul(int n, const float *a, const float *b, float *c)\n"
    "{\n"
    "    __shared__ float as[TILE][TILE];\n"
    "    __shared__ float bs[TILE][TILE];\n"
    "    int tx = (int)threadIdx.x, ty = (int)threadIdx.y;\n"
    "    int bx = (int)blockIdx.x, by = (int)blockIdx.y;\n"
    "    float acc = 0.0f;\n"
    "    for (int k0 = 0; k0 < n; k0 += TILE) {\n"
    "        as[ty][tx] = a[(by * TILE + ty) * n + k0 + tx];\n"
    "        bs[ty][tx] = b[(k0 + ty) * n + bx * TILE + tx];\n"
    "        __syncthreads();\n"
    "        float s = acc;\n"
    "        for (int k = 0; k < TILE; k++)\n"
    "            s += as[ty][k] * bs[k][tx];\n"
    "        acc = s;\n"
    "        __syncthreads();\n"
    "    }\n"
    "    c[(by * TILE + ty) * n + bx * TILE + tx] = acc;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ __launch_bounds__(256) void block_sum(int n, const float *x, float *partial)\n"
    "{\n"
    "    __shared__ float s[256];\n"
    "    int t = (int)threadIdx.x;\n"
    "    int i = (int)blockIdx.x * (2 * (int)blockDim.x) + t;\n"
    "    float v = i < n ? x[i] : 0.0f;\n"
    "    if (i + (int)blockDim.x < n)\n"
    "        v += x[i + (int)blockDim.x];\n"
    "    s[t] = v;\n"
    "    for (int stride = (int)blockDim.x / 2; stride > 0; stride /= 2) {\n"
    "        __syncthreads();\n"
    "        if (t < stride)\n"
    "            s[t] += s[t + stride];\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (t == 0)\n"
    "        partial[blockIdx.x] = s[0];\n"
    "}\n";

#define TILE 16
#define RBLOCK 256        /* threads of a reduction block */
#define VBLOCK 256        /* threads of an elementwise block */

/* ======================================================================== */
/* Timing and the table                                                     */
/* ======================================================================== */

static keel_device_t *dev;
static keel_stream_t *stream;
static int is_cpu;
static int quick;
static int pairs = 15;
static double batch_s = 0.020;
static double gap_s;       /* idle time before each batch (settle_time) */
static double budget_s;
static double t_start;
static int nfilters;
static char **filters;

/* One side of a comparison: fn does one call; on_stream says that it only
 * enqueues work on the stream, which a batch then synchronizes. */
typedef void (*call_fn)(void *ctx);
typedef struct side {
    const char *label;
    call_fn fn;
    int on_stream;
} side_t;

static void idle(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static double time_batch(const side_t *s, void *ctx, int reps)
{
    idle(gap_s);
    double t0 = now();
    for (int i = 0; i < reps; i++)
        s->fn(ctx);
    if (s->on_stream)
        CHECK(keel_stream_synchronize(stream));
    return (now() - t0) / reps;
}

/* Calls per batch so that a batch lasts about batch_s, after a warm-up. */
static int batch_reps(const side_t *s, void *ctx)
{
    time_batch(s, ctx, 1);
    double one = time_batch(s, ctx, 1);
    if (one < batch_s / 20)
        one = time_batch(s, ctx, (int)(batch_s / 20 / (one > 1e-7 ? one : 1e-7)) + 1);
    int reps = (int)(batch_s / (one > 1e-9 ? one : 1e-9));
    return reps < 1 ? 1 : reps > 1000000 ? 1000000 : reps;
}

/* How long the threads of one side keep the cores busy after a call ends:
 * libgomp's threads spin before they sleep (300000 pauses by default:
 * milliseconds), Keel's for 20 us, and a batch of the other side started
 * meanwhile would share its cores with them. Measured as the CPU time the
 * process burns while the calling thread sleeps, per spinning thread. */
static double settle_time(const side_t *s, void *ctx, int spinners)
{
    double worst = 0;
    for (int trial = 0; trial < 3; trial++) {
        time_batch(s, ctx, 1);
        struct timespec c;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
        double c0 = (double)c.tv_sec + 1e-9 * (double)c.tv_nsec;
        idle(0.3);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
        double used = (double)c.tv_sec + 1e-9 * (double)c.tv_nsec - c0;
        if (used / spinners > worst)
            worst = used / spinners;
    }
    return worst;
}

/* ---- the summary ---- */

enum { ST_PASS, ST_FAIL, ST_WRONG, ST_INFO, ST_SKIP };
static const char *const st_name[] = {"PASS", "FAIL", "WRONG", "INFO", "SKIP"};

typedef struct summary {
    char name[80];
    double measured;
    char target[24];
    int status;
} summary_t;

#define MAX_ROWS 64
static summary_t rows[MAX_ROWS];
static int nrows;

static void summarize(const char *name, double measured, int higher_better, double target, int status)
{
    if (nrows == MAX_ROWS)
        return;
    summary_t *r = &rows[nrows++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->measured = measured;
    if (target > 0)
        snprintf(r->target, sizeof r->target, "%s %.2f", higher_better ? ">=" : "<", target);
    else
        snprintf(r->target, sizeof r->target, "-");
    r->status = status;
}

/* Whether a row called name is to run: the filters, then the budget (a
 * row past it is recorded as skipped). */
static int wanted(const char *name)
{
    if (nfilters) {
        int hit = 0;
        for (int i = 0; i < nfilters; i++)
            hit |= strstr(name, filters[i]) != NULL;
        if (!hit)
            return 0;
    }
    if (budget_s > 0 && now() - t_start > budget_s) {
        printf("%-44s skipped: KEEL_BENCH_BUDGET=%g s is spent\n", name, budget_s);
        summarize(name, NAN, 1, 0, ST_SKIP);
        return 0;
    }
    return 1;
}

/* The portable side p against the other side o, alternating; work / time
 * is printed in unit (GB/s, GFLOP/s). target: the lowest ratio allowed,
 * 0 for none. ok: whether both results were checked right. */
static void compare(const char *name, double work, const char *unit, const side_t *p, const side_t *o, void *ctx,
                    double target, int ok)
{
    if (!ok) {
        printf("%-44s not timed: a result is wrong (above)\n", name);
        summarize(name, NAN, 1, target, ST_WRONG);
        return;
    }
    enum { MAXP = 63 };
    int np = pairs < MAXP ? pairs : MAXP;
    int rp = batch_reps(p, ctx), ro = batch_reps(o, ctx);
    double tp[MAXP], to[MAXP], ratio[MAXP];
    for (int r = 0; r < np; r++) {
        if (r % 2) {
            tp[r] = time_batch(p, ctx, rp);
            to[r] = time_batch(o, ctx, ro);
        } else {
            to[r] = time_batch(o, ctx, ro);
            tp[r] = time_batch(p, ctx, rp);
        }
        ratio[r] = to[r] / tp[r];
    }
    double mp = median(tp, np), mo = median(to, np), mr = median(ratio, np);
    double lo = ratio[0], hi = ratio[np - 1]; /* median() sorted them */
    int st = target > 0 ? (mr >= target ? ST_PASS : ST_FAIL) : ST_INFO;
    char tgt[24] = "-";
    if (target > 0)
        snprintf(tgt, sizeof tgt, ">= %.2f", target);
    printf("%-44s portable %10.1f us %8.1f %-7s | %-14s %10.1f us %8.1f %-7s | ratio %.3f [%.3f..%.3f] %-8s %s\n",
           name, mp * 1e6, work / mp * 1e-9, unit, o->label, mo * 1e6, work / mo * 1e-9, unit, mr, lo, hi, tgt,
           st_name[st]);
    fflush(stdout);
    summarize(name, mr, 1, target, st);
}

/* ======================================================================== */
/* Data and checks                                                          */
/* ======================================================================== */

/* xorshift64*, uniform in [lo, hi) */
static float next_uniform(unsigned long long *state, float lo, float hi)
{
    unsigned long long x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return lo + (hi - lo) * (float)((double)((x * 0x2545f4914f6cdd1dull) >> 40) / (double)(1ull << 24));
}

static unsigned long long seed_of(unsigned long long s)
{
    return s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
}

static unsigned long long rng_state;

static void seed(unsigned long long s)
{
    rng_state = seed_of(s);
}

static float uniform(float lo, float hi)
{
    return next_uniform(&rng_state, lo, hi);
}

/* n random floats in [lo, hi): chunks of their own seeds, so the values do
 * not depend on the number of threads that make them. */
static float *host_random(size_t n, float lo, float hi, unsigned long long s)
{
    float *h = malloc(n * sizeof *h);
    if (!h) {
        fprintf(stderr, "out of host memory (%zu floats)\n", n);
        exit(3);
    }
    const size_t chunk = 1 << 16;
    long chunks = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        unsigned long long st = seed_of(s * 1000003u + (unsigned long long)c);
        size_t e = (size_t)(c + 1) * chunk < n ? (size_t)(c + 1) * chunk : n;
        for (size_t i = (size_t)c * chunk; i < e; i++)
            h[i] = next_uniform(&st, lo, hi);
    }
    return h;
}

static float *host_alloc(size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (!h) {
        fprintf(stderr, "out of host memory (%zu floats)\n", n);
        exit(3);
    }
    return h;
}

static float *dev_alloc(size_t n)
{
    void *p;
    CHECK(keel_malloc(dev, n * sizeof(float), &p));
    return p;
}

static void upload(float *d, const float *h, size_t n)
{
    CHECK(keel_memcpy(d, h, n * sizeof(float)));
}

static void download(float *h, const float *d, size_t n)
{
    CHECK(keel_stream_synchronize(stream));
    CHECK(keel_memcpy(h, d, n * sizeof(float)));
}

/* NaN in every element, so an element a side does not write shows. */
static void poison(float *d, size_t n)
{
    CHECK(keel_stream_synchronize(stream));
    CHECK(keel_memset(d, 0xff, n * sizeof(float)));
}

/* Compares got[i] with ref[i] within tol[i]; says how many miss and where
 * the first one is. Returns 1 when every element is within. */
static int check_close(const char *what, const char *side, const float *got, const double *ref, const double *tol,
                       size_t n)
{
    long bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (long i = 0; i < (long)n; i++)
        bad += !(fabs((double)got[i] - ref[i]) <= tol[i]);
    if (bad) {
        size_t first = 0;
        while (fabs((double)got[first] - ref[first]) <= tol[first])
            first++;
        printf("WRONG: %s, %s: %ld of %zu elements off (first [%zu] = %.9g, expected %.9g within %.3g)\n", what, side,
               bad, n, first, (double)got[first], ref[first], tol[first]);
        return 0;
    }
    return 1;
}

/* ======================================================================== */
/* Elementwise: saxpy, add, tanh GELU                                       */
/* ======================================================================== */

typedef struct vec {
    int n;
    float a;
    const float *x, *y0;      /* inputs: x (and a for add), y0 the starting y */
    const float *b;           /* second input of add */
    float *yp, *yo, *yb;      /* outputs: portable, hand-written or CUDA C, built-in */
    keel_kernel_t *kp, *ko;   /* portable kernel; CUDA C kernel (GPU only) */
} vec_t;

static keel_dim3_t vgrid(int n)
{
    keel_dim3_t g = {(unsigned)((n + VBLOCK - 1) / VBLOCK), 1, 1};
    return g;
}
static const keel_dim3_t vblock = {VBLOCK, 1, 1};

/* saxpy: y = a x + y, in place */
static void p_saxpy(void *c)
{
    vec_t *v = c;
    CHECK(KEEL_LAUNCH(v->kp, vgrid(v->n), vblock, 0, stream, v->n, v->a, v->x, v->yp));
}
static void g_saxpy(void *c)
{
    vec_t *v = c;
    CHECK(KEEL_LAUNCH(v->ko, vgrid(v->n), vblock, 0, stream, v->n, v->a, v->x, v->yo));
}
static void h_saxpy(void *c)
{
    vec_t *v = c;
    const int n = v->n;
    const float a = v->a;
    const float *restrict x = v->x;
    float *restrict y = v->yo;
#pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}
static void b_saxpy(void *c)
{
    vec_t *v = c;
    CHECK(keel_binary(stream, KEEL_BINARY_ADD, KEEL_F32, 1, (size_t)v->n, v->a, v->x, (size_t)v->n, 1.0, v->yb,
                      (size_t)v->n, KEEL_BROADCAST_NONE, v->yb, (size_t)v->n));
}

/* add: c = a + b (x is a, y0 is b, the outputs are c) */
static void p_vadd(void *c)
{
    vec_t *v = c;
    CHECK(KEEL_LAUNCH(v->kp, vgrid(v->n), vblock, 0, stream, v->n, v->x, v->b, v->yp));
}
static void g_vadd(void *c)
{
    vec_t *v = c;
    CHECK(KEEL_LAUNCH(v->ko, vgrid(v->n), vblock, 0, stream, v->n, v->x, v->b, v->yo));
}
static void h_vadd(void *c)
{
    vec_t *v = c;
    const int n = v->n;
    const float *restrict a = v->x, *restrict b = v->b;
    float *restrict y = v->yo;
#pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}
static void b_vadd(void *c)
{
    vec_t *v = c;
    CHECK(keel_binary(stream, KEEL_BINARY_ADD, KEEL_F32, 1, (size_t)v->n, 1.0, v->x, (size_t)v->n, 1.0, v->b,
                      (size_t)v->n, KEEL_BROADCAST_NONE, v->yb, (size_t)v->n));
}

/* GELU, tanh form */
static void p_gelu(void *c)
{
    vec_t *v = c;
    CHECK(KEEL_LAUNCH(v->kp, vgrid(v->n), vblock, 0, stream, v->n, v->x, v->yp));
}
static void g_gelu(void *c)
{
    vec_t *v = c;
    CHECK(KEEL_LAUNCH(v->ko, vgrid(v->n), vblock, 0, stream, v->n, v->x, v->yo));
}
static void h_gelu(void *c)
{
    vec_t *v = c;
    const int n = v->n;
    const float *restrict x = v->x;
    float *restrict y = v->yo;
#pragma omp parallel for simd schedule(static)
    for (int i = 0; i < n; i++) {
        float t = x[i];
        y[i] = 0.5f * t * (1.0f + tanhf(0.7978845608028654f * (t + 0.044715f * t * t * t)));
    }
}
static void b_gelu(void *c)
{
    vec_t *v = c;
    CHECK(keel_unary(stream, KEEL_UNARY_GELU_TANH, KEEL_F32, (size_t)v->n, v->x, v->yb));
}

enum { OP_SAXPY, OP_VADD, OP_GELU };

/* Runs each side once on poisoned (or, for saxpy, fresh) outputs and checks
 * it against the float64 reference; bit s of the result is set when side s
 * is right. */
static int check_vec(int op, vec_t *v, const char *name, const float *hx, const float *hb, const float *hy0,
                     const side_t *sides, float **outs, int nsides)
{
    size_t n = (size_t)v->n;
    double *ref = malloc(n * sizeof *ref), *tol = malloc(n * sizeof *tol);
    if (!ref || !tol) {
        fprintf(stderr, "out of host memory (2 x %zu doubles)\n", n);
        exit(3);
    }
    float *got = host_alloc(n);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++) {
        double x = hx[i];
        if (op == OP_SAXPY) {
            ref[i] = (double)v->a * x + hy0[i];
            tol[i] = 4 * FLT_EPSILON * (fabs((double)v->a * x) + fabs(hy0[i])) + 1e-37;
        } else if (op == OP_VADD) {
            ref[i] = x + hb[i];
            tol[i] = 2 * FLT_EPSILON * (fabs(x) + fabs(hb[i])) + 1e-37;
        } else {
            ref[i] = 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
            /* float rounding of the polynomial and a few ulp of tanhf,
             * whose error near -1 becomes absolute in 1 + tanh */
            tol[i] = 4e-6 * (1.0 + fabs(x)) * fabs(x) + 1e-30;
        }
    }
    int ok = 0;
    for (int s = 0; s < nsides; s++) {
        if (op == OP_SAXPY)
            upload(outs[s], hy0, n);
        else
            poison(outs[s], n);
        sides[s].fn(v);
        download(got, outs[s], n);
        ok |= check_close(name, sides[s].label, got, ref, tol, n) << s;
    }
    /* saxpy accumulates in y: the timed runs start from y0 again */
    if (op == OP_SAXPY)
        for (int s = 0; s < nsides; s++)
            upload(outs[s], hy0, n);
    free(ref);
    free(tol);
    free(got);
    return ok;
}

static void vec_rows(keel_module_t *pm, keel_module_t *gm, int n)
{
    static const struct {
        int op;
        const char *kernel, *label;
        call_fn p, g, h, b;
        double bytes_per_elem;
        float lo, hi;
    } ops[] = {
        {OP_SAXPY, "saxpy", "saxpy", p_saxpy, g_saxpy, h_saxpy, b_saxpy, 12, -1, 1},
        {OP_VADD, "vadd", "add", p_vadd, g_vadd, h_vadd, b_vadd, 12, -1, 1},
        {OP_GELU, "gelu_tanh", "gelu_tanh", p_gelu, g_gelu, h_gelu, b_gelu, 8, -5, 5},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        char base[64], name[96], name2[96];
        snprintf(base, sizeof base, "%s n=%d", ops[k].label, n);
        if (is_cpu) {
            snprintf(name, sizeof name, "%s vs OpenMP loop", base);
            snprintf(name2, sizeof name2, "%s vs built-in op", base);
        } else {
            snprintf(name, sizeof name, "%s vs CUDA C", base);
            name2[0] = '\0';
        }
        int want1 = wanted(name), want2 = is_cpu && wanted(name2);
        if (!want1 && !want2)
            continue;
        /* fresh inputs for every row */
        float *hx = host_random((size_t)n, ops[k].lo, ops[k].hi, 11 + k);
        float *hb = host_random((size_t)n, -1, 1, 101 + k);
        vec_t v = {n, 0.75f, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
        float *x = dev_alloc((size_t)n), *y0 = dev_alloc((size_t)n);
        upload(x, hx, (size_t)n);
        upload(y0, hb, (size_t)n);
        v.x = x;
        v.y0 = y0;
        v.b = y0;
        v.yp = dev_alloc((size_t)n);
        v.yo = dev_alloc((size_t)n);
        v.yb = is_cpu ? dev_alloc((size_t)n) : NULL;
        CHECK(keel_module_get_kernel(pm, ops[k].kernel, &v.kp));
        if (gm)
            CHECK(keel_module_get_kernel(gm, ops[k].kernel, &v.ko));
        side_t p = {"portable", ops[k].p, 1};
        side_t o = is_cpu ? (side_t){"OpenMP loop", ops[k].h, 0} : (side_t){"CUDA C", ops[k].g, 1};
        side_t b = {"built-in op", ops[k].b, 1};
        side_t all[3] = {p, o, b};
        float *outs[3] = {v.yp, v.yo, v.yb};
        int ok = check_vec(ops[k].op, &v, base, hx, hb, hb, all, outs, is_cpu ? 3 : 2);
        /* Timed on one output for all sides, so where its pages lie favours none. */
        v.yo = v.yp;
        v.yb = v.yp;
        double work = ops[k].bytes_per_elem * n;
        if (want1) {
            double target = is_cpu ? 0.90 : 0.98;
            if (ops[k].op == OP_GELU && is_cpu && !HAND_TANHF_VECTOR)
                printf("note: the hand-written GELU calls the scalar tanhf (no libmvec at build time)\n");
            compare(name, work, "GB/s", &p, &o, &v, target, (ok & 3) == 3);
        }
        if (want2) {
            /* The built-in GELU is x sigmoid(2z) through its own exp, not
             * tanhf: a different formula, so the ratio has no target. */
            compare(name2, work, "GB/s", &p, &b, &v, ops[k].op == OP_GELU ? 0 : 0.90, (ok & 5) == 5);
        }
        CHECK(keel_stream_synchronize(stream));
        CHECK(keel_free(x));
        CHECK(keel_free(y0));
        for (int s = 0; s < 3; s++)
            if (outs[s])
                CHECK(keel_free(outs[s]));
        free(hx);
        free(hb);
    }
}

/* ======================================================================== */
/* Tiled matrix product                                                     */
/* ======================================================================== */

typedef struct mm {
    int n;
    const float *a, *b;
    float *cp, *co;
    keel_kernel_t *kp, *ko;
} mm_t;

static void p_matmul(void *c)
{
    mm_t *m = c;
    keel_dim3_t grid = {(unsigned)(m->n / TILE), (unsigned)(m->n / TILE), 1}, block = {TILE, TILE, 1};
    CHECK(KEEL_LAUNCH(m->kp, grid, block, 0, stream, m->n, m->a, m->b, m->cp));
}
static void g_matmul(void *c)
{
    mm_t *m = c;
    keel_dim3_t grid = {(unsigned)(m->n / TILE), (unsigned)(m->n / TILE), 1}, block = {TILE, TILE, 1};
    CHECK(KEEL_LAUNCH(m->ko, grid, block, 0, stream, m->n, m->a, m->b, m->co));
}

/* The same algorithm by hand: a block of TILE x TILE "threads" per
 * iteration, the two tiles loaded, then each thread's dot product over the
 * tile, as the portable kernel's regions do on the CPU. */
static void h_matmul(void *c)
{
    mm_t *m = c;
    const int n = m->n, nb = n / TILE;
    const float *restrict a = m->a, *restrict b = m->b;
    float *restrict cc = m->co;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nb * nb; blk++) {
        const int by = blk / nb, bx = blk % nb;
        float as[TILE][TILE] __attribute__((aligned(64)));
        float bs[TILE][TILE] __attribute__((aligned(64)));
        float acc[TILE][TILE] __attribute__((aligned(64)));
        for (int ty = 0; ty < TILE; ty++)
            for (int tx = 0; tx < TILE; tx++)
                acc[ty][tx] = 0.0f;
        for (int k0 = 0; k0 < n; k0 += TILE) {
            for (int ty = 0; ty < TILE; ty++)
                for (int tx = 0; tx < TILE; tx++) {
                    as[ty][tx] = a[(by * TILE + ty) * n + k0 + tx];
                    bs[ty][tx] = b[(k0 + ty) * n + bx * TILE + tx];
                }
            for (int ty = 0; ty < TILE; ty++)
                for (int tx = 0; tx < TILE; tx++) {
                    float s = acc[ty][tx];
                    for (int k = 0; k < TILE; k++)
                        s += as[ty][k] * bs[k][tx];
                    acc[ty][tx] = s;
                }
        }
        for (int ty = 0; ty < TILE; ty++)
            for (int tx = 0; tx < TILE; tx++)
                cc[(by * TILE + ty) * n + bx * TILE + tx] = acc[ty][tx];
    }
}

/* Checks c against float64 on a sample of entries (every entry of the
 * first and last rows and columns, and 4096 at random), and every entry
 * against the other side's within the same bound. */
static int check_matmul(const char *name, int n, const float *ha, const float *hb, const float *c, const char *side,
                        const float *other)
{
    int ok = 1;
    const double eps = FLT_EPSILON;
    size_t nn = (size_t)n * n;
    int samples = 4 * n + 4096;
    seed(7);
    for (int s = 0; s < samples && ok; s++) {
        int i, j;
        if (s < 4 * n) {
            int e = s % n, which = s / n;
            i = which == 0 ? 0 : which == 1 ? n - 1 : e;
            j = which == 0 || which == 1 ? e : which == 2 ? 0 : n - 1;
        } else {
            i = (int)(uniform(0, 1) * n) % n;
            j = (int)(uniform(0, 1) * n) % n;
        }
        double ref = 0, mag = 0;
        for (int k = 0; k < n; k++) {
            ref += (double)ha[(size_t)i * n + k] * hb[(size_t)k * n + j];
            mag += fabs((double)ha[(size_t)i * n + k] * hb[(size_t)k * n + j]);
        }
        /* float accumulation in order: its error grows about as sqrt(n) */
        double tol = 16 * sqrt((double)n) * eps * mag + 1e-30, got = c[(size_t)i * n + j];
        if (!(fabs(got - ref) <= tol)) {
            printf("WRONG: %s, %s: c[%d][%d] = %.9g, expected %.9g within %.3g\n", name, side, i, j, got, ref, tol);
            ok = 0;
        }
    }
    if (ok && other) {
        /* |a||b| summed over a row is about n/4 for inputs in [-1, 1) */
        double tol = 2 * 16 * sqrt((double)n) * eps * (n / 4.0);
        for (size_t e = 0; e < nn; e++)
            if (!(fabs((double)c[e] - other[e]) <= tol)) {
                printf("WRONG: %s: the two sides differ at c[%zu][%zu]: %.9g and %.9g (within %.3g expected)\n",
                       name, e / (size_t)n, e % (size_t)n, (double)c[e], (double)other[e], tol);
                ok = 0;
                break;
            }
    }
    return ok;
}

static void matmul_row(keel_module_t *pm, keel_module_t *gm, int n)
{
    char name[96];
    snprintf(name, sizeof name, "matmul 16x16 tiles N=%d vs %s", n, is_cpu ? "OpenMP tiles" : "CUDA C");
    if (!wanted(name))
        return;
    size_t nn = (size_t)n * n;
    float *ha = host_random(nn, -1, 1, 1000 + (unsigned)n), *hb = host_random(nn, -1, 1, 2000 + (unsigned)n);
    float *a = dev_alloc(nn), *b = dev_alloc(nn);
    upload(a, ha, nn);
    upload(b, hb, nn);
    mm_t m = {n, a, b, dev_alloc(nn), dev_alloc(nn), NULL, NULL};
    CHECK(keel_module_get_kernel(pm, "matmul", &m.kp));
    if (gm)
        CHECK(keel_module_get_kernel(gm, "matmul", &m.ko));
    side_t p = {"portable", p_matmul, 1};
    side_t o = is_cpu ? (side_t){"OpenMP tiles", h_matmul, 0} : (side_t){"CUDA C", g_matmul, 1};
    poison(m.cp, nn);
    poison(m.co, nn);
    p.fn(&m);
    o.fn(&m);
    float *cp = host_alloc(nn), *co = host_alloc(nn);
    download(cp, m.cp, nn);
    download(co, m.co, nn);
    int ok = check_matmul(name, n, ha, hb, cp, "portable", co);
    ok &= check_matmul(name, n, ha, hb, co, o.label, NULL);
    free(cp);
    free(co);
    float *co_own = m.co;
    m.co = m.cp; /* timed on one output */
    compare(name, 2.0 * n * (double)n * n, "GFLOP/s", &p, &o, &m, is_cpu ? 0.80 : 0.98, ok);
    CHECK(keel_stream_synchronize(stream));
    CHECK(keel_free(a));
    CHECK(keel_free(b));
    CHECK(keel_free(m.cp));
    CHECK(keel_free(co_own));
    free(ha);
    free(hb);
}

/* ======================================================================== */
/* Block reduction                                                          */
/* ======================================================================== */

typedef struct red {
    int n, nblocks;
    const float *x;
    float *pp, *po;          /* partials: portable, other */
    float *hp;               /* the portable partials, read back (GPU) */
    keel_kernel_t *kp, *ko;
    double result;
} red_t;

static double sum_partials(const float *p, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += p[i];
    return s;
}

static void launch_block_sum(red_t *r, keel_kernel_t *k, float *partial)
{
    keel_dim3_t grid = {(unsigned)r->nblocks, 1, 1}, block = {RBLOCK, 1, 1};
    CHECK(KEEL_LAUNCH(k, grid, block, 0, stream, r->n, r->x, partial));
}

/* The CPU sides compute the whole sum per call, the portable one with a
 * synchronize and the host's sum of the partials (CPU memory is the
 * host's); the GPU sides time the kernel alone, the host's part being the
 * same for both. */
static void p_reduce_cpu(void *c)
{
    red_t *r = c;
    launch_block_sum(r, r->kp, r->pp);
    CHECK(keel_stream_synchronize(stream));
    r->result = sum_partials(r->pp, r->nblocks);
}
static void p_reduce_gpu(void *c)
{
    red_t *r = c;
    launch_block_sum(r, r->kp, r->pp);
}
static void g_reduce(void *c)
{
    red_t *r = c;
    launch_block_sum(r, r->ko, r->po);
}

/* The same block tree by hand: a block of RBLOCK "threads" per iteration,
 * two loads each, then the halving steps in a local array. */
static void h_reduce_tree(void *c)
{
    red_t *r = c;
    const int n = r->n, nb = r->nblocks;
    const float *restrict x = r->x;
    float *restrict part = r->po;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nb; blk++) {
        float s[RBLOCK] __attribute__((aligned(64)));
        for (int t = 0; t < RBLOCK; t++) {
            int i = blk * 2 * RBLOCK + t;
            float v = i < n ? x[i] : 0.0f;
            if (i + RBLOCK < n)
                v += x[i + RBLOCK];
            s[t] = v;
        }
        for (int stride = RBLOCK / 2; stride > 0; stride /= 2)
            for (int t = 0; t < stride; t++)
                s[t] += s[t + stride];
        part[blk] = s[0];
    }
    r->result = sum_partials(part, nb);
}

/* What a user would write instead of a block tree. */
static void h_reduce_plain(void *c)
{
    red_t *r = c;
    const int n = r->n;
    const float *restrict x = r->x;
    float sum = 0.0f;
#pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (int i = 0; i < n; i++)
        sum += x[i];
    r->result = sum;
}

static void reduce_rows(keel_module_t *pm, keel_module_t *gm, int n)
{
    char name[96], name2[96];
    snprintf(name, sizeof name, "block_sum n=%d vs %s", n, is_cpu ? "OpenMP block tree" : "CUDA C");
    snprintf(name2, sizeof name2, "block_sum n=%d vs OpenMP sum+=x[i]", n);
    int want1 = wanted(name), want2 = is_cpu && wanted(name2);
    if (!want1 && !want2)
        return;
    /* a mean of 0.25, so the sum is far from 0 and a wrong one shows */
    float *hx = host_random((size_t)n, -0.5f, 1.0f, 31);
    red_t r = {n, (n + 2 * RBLOCK - 1) / (2 * RBLOCK), NULL, NULL, NULL, NULL, NULL, NULL, 0};
    float *x = dev_alloc((size_t)n);
    upload(x, hx, (size_t)n);
    r.x = x;
    r.pp = dev_alloc((size_t)r.nblocks);
    r.po = dev_alloc((size_t)r.nblocks);
    r.hp = host_alloc((size_t)r.nblocks);
    CHECK(keel_module_get_kernel(pm, "block_sum", &r.kp));
    if (gm)
        CHECK(keel_module_get_kernel(gm, "block_sum", &r.ko));
    double ref = 0, mag = 0;
#pragma omp parallel for reduction(+ : ref, mag) schedule(static)
    for (int i = 0; i < n; i++) {
        ref += hx[i];
        mag += fabs(hx[i]);
    }
    /* a tree of 256 and the host's double sum: a few float roundings per
     * element; the plain loop accumulates long runs in float */
    double tol_tree = 1e-5 * mag, tol_plain = 1e-4 * mag;
    side_t p, o, plain = {"OpenMP sum", h_reduce_plain, 0};
    double got_p, got_o;
    poison(r.pp, (size_t)r.nblocks);
    poison(r.po, (size_t)r.nblocks);
    if (is_cpu) {
        p = (side_t){"portable", p_reduce_cpu, 0};
        o = (side_t){"OpenMP tree", h_reduce_tree, 0};
        p.fn(&r);
        got_p = r.result;
        o.fn(&r);
        got_o = r.result;
    } else {
        p = (side_t){"portable", p_reduce_gpu, 1};
        o = (side_t){"CUDA C", g_reduce, 1};
        p.fn(&r);
        o.fn(&r);
        download(r.hp, r.pp, (size_t)r.nblocks);
        got_p = sum_partials(r.hp, r.nblocks);
        download(r.hp, r.po, (size_t)r.nblocks);
        got_o = sum_partials(r.hp, r.nblocks);
    }
    int ok_p = 1, ok_o = 1;
    if (!(fabs(got_p - ref) <= tol_tree)) {
        printf("WRONG: %s, portable: sum %.9g, expected %.9g within %.3g\n", name, got_p, ref, tol_tree);
        ok_p = 0;
    }
    if (!(fabs(got_o - ref) <= tol_tree)) {
        printf("WRONG: %s, %s: sum %.9g, expected %.9g within %.3g\n", name, o.label, got_o, ref, tol_tree);
        ok_o = 0;
    }
    float *po_own = r.po;
    r.po = r.pp; /* timed on one output */
    if (want1)
        compare(name, 4.0 * n, "GB/s", &p, &o, &r, is_cpu ? 0.80 : 0.98, ok_p && ok_o);
    if (want2) {
        h_reduce_plain(&r);
        int ok2 = ok_p;
        if (!(fabs(r.result - ref) <= tol_plain)) {
            printf("WRONG: %s, OpenMP sum: %.9g, expected %.9g within %.3g\n", name2, r.result, ref, tol_plain);
            ok2 = 0;
        }
        /* no target: a different algorithm, shown for honesty */
        compare(name2, 4.0 * n, "GB/s", &p, &plain, &r, 0, ok2);
    }
    CHECK(keel_stream_synchronize(stream));
    CHECK(keel_free(x));
    CHECK(keel_free(r.pp));
    CHECK(keel_free(po_own));
    free(r.hp);
    free(hx);
}

/* ======================================================================== */
/* Build times                                                              */
/* ======================================================================== */

static char cache_dir[4096];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_cache_dir(void)
{
    if (cache_dir[0])
        nftw(cache_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

typedef keel_status_t (*build_fn)(const char *src, const char *name, keel_module_t **m);

static keel_status_t build_portable(const char *src, const char *name, keel_module_t **m)
{
    return keel_module_build(dev, src, name, NULL, 0, m);
}

static keel_status_t build_cuda_c(const char *src, const char *name, keel_module_t **m)
{
    return keel_module_compile(dev, src, name, NULL, 0, m);
}

/* Times the first build of src in the empty cache, then builds found in the
 * cache (the module unloaded in between, so each one opens it again);
 * returns a module built from the cache. */
static keel_module_t *build_times(const char *what, build_fn build, const char *src, const char *src_name,
                                  int with_target)
{
    keel_module_t *m;
    double t0 = now();
    keel_status_t st = build(src, src_name, &m);
    double first = now() - t0;
    if (st != KEEL_OK) {
        fprintf(stderr, "%s: building %s failed: %s\n%s\n", what, src_name, keel_status_name(st), keel_last_error());
        exit(3);
    }
    enum { LOADS = 9 };
    double t[LOADS];
    for (int i = 0; i < LOADS; i++) {
        CHECK(keel_module_unload(m));
        t0 = now();
        CHECK(build(src, src_name, &m));
        t[i] = now() - t0;
    }
    double med = median(t, LOADS);
    char name[96];
    printf("%-44s first build %9.2f ms | from the cache: median %.3f ms [%.3f..%.3f] of %d\n", what, first * 1e3,
           med * 1e3, t[0] * 1e3, t[LOADS - 1] * 1e3, LOADS);
    snprintf(name, sizeof name, "%s, first build (ms)", what);
    summarize(name, first * 1e3, 0, 0, ST_INFO);
    snprintf(name, sizeof name, "%s, cached build (ms)", what);
    summarize(name, med * 1e3, 0, with_target ? 2.0 : 0, with_target ? (med * 1e3 < 2.0 ? ST_PASS : ST_FAIL) : ST_INFO);
    return m;
}

/* ======================================================================== */

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !v[0])
        return dflt;
    char *end;
    long x = strtol(v, &end, 0);
    if (*end || x <= 0 || x > 1 << 30) {
        fprintf(stderr, "%s=%s: a positive integer is expected\n", name, v);
        exit(3);
    }
    return (int)x;
}

int main(int argc, char **argv)
{
    filters = calloc((size_t)argc, sizeof *filters);
    const char *q = getenv("KEEL_BENCH_QUICK");
    quick = q && q[0] && strcmp(q, "0") != 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--quick] [SUBSTRING...] (knobs: see the head of bench/keel-bench-kernels.c)\n",
                    argv[0]);
            return 2;
        } else
            filters[nfilters++] = argv[i];
    }
    pairs = env_int("KEEL_BENCH_PAIRS", quick ? 5 : 15);
    batch_s = env_int("KEEL_BENCH_BATCH_MS", quick ? 10 : 20) * 1e-3;
    const char *b = getenv("KEEL_BENCH_BUDGET");
    budget_s = b && b[0] ? atof(b) : 0;
    t_start = now();

    /* The benchmark's own cache, empty: the first build runs the compiler. */
    const char *tmp = getenv("TMPDIR");
    snprintf(cache_dir, sizeof cache_dir, "%s/keel-bench-cache-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(cache_dir)) {
        fprintf(stderr, "cannot make a cache directory %s: %s\n", cache_dir, strerror(errno));
        return 1;
    }
    setenv("KEEL_CACHE_DIR", cache_dir, 1);
    const char *keep = getenv("KEEL_BENCH_KEEP_CACHE");
    int keep_cache = keep && keep[0] && strcmp(keep, "0") != 0;
    if (!keep_cache)
        atexit(remove_cache_dir);

    keel_status_t st = keel_device_default(&dev);
    if (st != KEEL_OK) {
        printf("SKIP: no device: %s\n", keel_last_error());
        return 77;
    }
    keel_device_properties_t props;
    memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    CHECK(keel_device_get_properties(dev, &props));
    is_cpu = strcmp(props.backend, "cpu") == 0;
    if (!is_cpu && strcmp(props.backend, "cuda") != 0) {
        printf("SKIP: the %s backend: this benchmark compares on the CPU and CUDA backends only\n", props.backend);
        return 77;
    }
    CHECK(keel_device_default_stream(dev, &stream));

    const char *cflags = getenv("KEEL_CPU_CFLAGS");
    printf("# keel-bench-kernels on %s (%s backend, %d %s)\n", props.name, props.backend, props.compute_units,
           is_cpu ? "cores" : "SMs");
    if (is_cpu) {
#ifdef _OPENMP
        const char *kt = getenv("KEEL_CPU_THREADS");
        if (kt && kt[0] && !getenv("OMP_NUM_THREADS"))
            omp_set_num_threads(atoi(kt));
        printf("# other side: C with OpenMP, %d threads (Keel: KEEL_CPU_THREADS=%s); kernels built with %s%s\n",
               omp_get_max_threads(), kt && kt[0] ? kt : "default, one per core",
               cflags && cflags[0] ? cflags : "the default flags", HAND_TANHF_VECTOR ? "; libmvec tanhf by hand" : "");
#else
        printf("# other side: C without OpenMP (the compiler had none): one thread, the comparison is not fair\n");
#endif
        printf("# the machine's other load moves these numbers: run it on an idle machine for figures to keep\n");
    } else {
        printf("# other side: the same kernels in CUDA C through keel_module_compile (NVRTC), same launches\n");
    }
    printf("# ratio = other time / portable time (> 1: portable faster); median of %d alternating pairs of "
           "~%.0f ms batches, [min..max]%s\n",
           pairs, batch_s * 1e3, quick ? "; quick mode" : "");
    printf("# cache: %s (the benchmark's own, %s)\n\n", cache_dir,
           keep_cache ? "kept: KEEL_BENCH_KEEP_CACHE" : "removed at exit");

    /* Build times first, while the cache is empty. */
    keel_module_t *pm = NULL, *gm = NULL;
    pm = build_times("portable module", build_portable, portable_src, "bench-kernels.kc", 1);
    if (!is_cpu)
        gm = build_times("CUDA C module (reference)", build_cuda_c, cuda_src, "bench-kernels.cu", 0);
    printf("\n");

    int n = env_int("KEEL_BENCH_N", is_cpu ? (quick ? 1 << 22 : 1 << 24) : (quick ? 1 << 26 : 1 << 28));
    const char *gap = getenv("KEEL_BENCH_GAP_MS");
    if (gap && gap[0]) {
        gap_s = atof(gap) * 1e-3;
        printf("# each batch starts %.1f ms after the previous one ends (KEEL_BENCH_GAP_MS)\n\n", gap_s * 1e3);
    } else if (is_cpu) {
        /* Both sides' threads on a saxpy of 2^20 elements. */
        int cn = 1 << 20;
        float *cx = dev_alloc((size_t)cn), *cy = dev_alloc((size_t)cn);
        CHECK(keel_memset(cx, 0, (size_t)cn * sizeof(float)));
        CHECK(keel_memset(cy, 0, (size_t)cn * sizeof(float)));
        vec_t cv = {cn, 0.5f, cx, cy, cy, cy, cy, cy, NULL, NULL};
        CHECK(keel_module_get_kernel(pm, "saxpy", &cv.kp));
        side_t cp = {"portable", p_saxpy, 1}, co = {"OpenMP loop", h_saxpy, 0};
        const char *kt = getenv("KEEL_CPU_THREADS");
        int kthreads = kt && kt[0] ? atoi(kt) : props.compute_units, othreads = 1;
#ifdef _OPENMP
        othreads = omp_get_max_threads();
#endif
        double so = settle_time(&co, &cv, othreads > 1 ? othreads - 1 : 1);
        double sk = settle_time(&cp, &cv, kthreads > 0 ? kthreads : 1), m = so > sk ? so : sk;
        gap_s = m > 0.1 ? 0.1 : 1.5 * m + 0.001;
        printf("# after a call, each OpenMP thread spun %.1f ms and each of Keel's %.1f ms: each batch starts %.1f ms "
               "after the previous one ends (KEEL_BENCH_GAP_MS sets it)\n\n",
               so * 1e3, sk * 1e3, gap_s * 1e3);
        CHECK(keel_stream_synchronize(stream));
        CHECK(keel_free(cx));
        CHECK(keel_free(cy));
    }
    vec_rows(pm, gm, n);
    if (is_cpu) {
        matmul_row(pm, gm, 512);
        matmul_row(pm, gm, 1024);
    } else {
        matmul_row(pm, gm, 2048);
        matmul_row(pm, gm, 4096);
    }
    reduce_rows(pm, gm, n);

    CHECK(keel_stream_synchronize(stream));
    CHECK(keel_module_unload(pm));
    if (gm)
        CHECK(keel_module_unload(gm));

    int fails = 0, skips = 0;
    printf("\n# summary: name, measured, target, verdict (ratios: other time / portable time)\n");
    for (int i = 0; i < nrows; i++) {
        printf("%-52s %9.3f  %-8s %s\n", rows[i].name, rows[i].measured, rows[i].target, st_name[rows[i].status]);
        fails += rows[i].status == ST_FAIL || rows[i].status == ST_WRONG;
        skips += rows[i].status == ST_SKIP;
    }
    printf("# %d row(s) failed, %d skipped for the budget, %.0f s in all\n", fails, skips, now() - t_start);
    free(filters);
    return fails ? 1 : skips ? 2 : 0;
}
