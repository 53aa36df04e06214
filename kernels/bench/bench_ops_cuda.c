/* SPDX-License-Identifier: MIT */
/* The shared parts of keel-bench-ops-cuda (bench_ops_cuda.h): timing in
 * alternating batches, the budget and filters, random data, 16-bit
 * conversions and the float64 check of a matrix product. */
#include <math.h>
#include <string.h>
#include <time.h>
#include "kernels/bench/bench_ops_cuda.h"

#include "bench/bench_util.h"

keel_device_t *bo_dev;
keel_stream_t *bo_ks;
cudaStream_t bo_cs;
int bo_quick;

static int pairs = 15;
static double budget_s, t_start;
static int nfilters;
static char **filters;
static uint64_t run_seed, seeds_given;

void bo_init(int argc, char **argv)
{
    t_start = now();
    filters = calloc((size_t)argc + 1, sizeof *filters);
    if (!filters)
        exit(3);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            bo_quick = 1;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--quick] [SUBSTRING...] (see the head of keel-bench-ops-cuda.c)\n", argv[0]);
            exit(3);
        } else {
            filters[nfilters++] = argv[i];
        }
    }
    pairs = bo_quick ? 5 : 15;
    const char *b = getenv("KEEL_BENCH_BUDGET");
    budget_s = b && b[0] ? atof(b) : 0;
    const char *s = getenv("KEEL_BENCH_SEED");
    if (s && s[0]) {
        run_seed = strtoull(s, NULL, 0);
    } else {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        run_seed = (uint64_t)t.tv_sec * 1000000007u ^ (uint64_t)t.tv_nsec;
    }
    printf("# random inputs from seed %llu (KEEL_BENCH_SEED=%llu repeats them); %d alternating pairs per row%s\n",
           (unsigned long long)run_seed, (unsigned long long)run_seed, pairs, bo_quick ? " (quick mode)" : "");
}

double bo_elapsed(void)
{
    return now() - t_start;
}

int bo_selected(const char *name)
{
    int hit = nfilters == 0;
    for (int i = 0; i < nfilters; i++)
        hit |= strstr(name, filters[i]) != NULL;
    return hit;
}

int bo_wanted(const char *name)
{
    if (!bo_selected(name))
        return 0;
    if (budget_s > 0 && bo_elapsed() > budget_s) {
        printf("%-44s skipped: KEEL_BENCH_BUDGET=%g s is spent\n", name, budget_s);
        bench_record(name, NAN, NAN, NAN, 1, 0, BENCH_SKIP);
        return 0;
    }
    return 1;
}

int bo_finish(void)
{
    bench_print_summary("ratio = alternative time / Keel time", bo_elapsed());
    return bench_exit_status();
}

/* ---- timing ---- */

static double time_batch(bo_fn f, void *ctx, int on_keel, int reps)
{
    double t0 = now();
    for (int i = 0; i < reps; i++)
        f(ctx);
    if (on_keel)
        CHECK(keel_stream_synchronize(bo_ks));
    else
        CK_CUDA(cudaStreamSynchronize(bo_cs));
    return (now() - t0) / reps;
}

/* Calls per batch so that a batch takes about 10 ms. The first call is a
 * warm-up (a GEMM shape's first call picks its algorithm, milliseconds):
 * timing it would give a batch of a few calls, each paying a share of the
 * synchronization. */
static int batch_reps(bo_fn f, void *ctx, int on_keel)
{
    time_batch(f, ctx, on_keel, 1);
    double one = time_batch(f, ctx, on_keel, 3);
    int reps = one > 0 ? (int)(0.01 / one) : 100;
    return reps < 1 ? 1 : reps > 10000 ? 10000 : reps;
}

void bo_compare(const char *name, const char *alt_label, double work, const char *unit, bo_fn kf, bo_fn af,
                void *ctx, int alt_on_keel, double target)
{
    enum { MAXP = 15 };
    int np = pairs < MAXP ? pairs : MAXP;
    int rk = batch_reps(kf, ctx, 1), ra = batch_reps(af, ctx, alt_on_keel);
    double tk[MAXP], ta[MAXP], ratio[MAXP];
    for (int r = 0; r < np; r++) {
        if (r % 2) {
            tk[r] = time_batch(kf, ctx, 1, rk);
            ta[r] = time_batch(af, ctx, alt_on_keel, ra);
        } else {
            ta[r] = time_batch(af, ctx, alt_on_keel, ra);
            tk[r] = time_batch(kf, ctx, 1, rk);
        }
        ratio[r] = ta[r] / tk[r];
    }
    double mk = median(tk, np), ma = median(ta, np), mr = median(ratio, np);
    double lo = ratio[0], hi = ratio[np - 1]; /* median() sorted them */
    int v = bench_judge(mr, 1, target);
    char tgt[16] = "-";
    if (target > 0)
        snprintf(tgt, sizeof tgt, ">= %.2f", target);
    printf("%-44s keel %10.2f us %8.1f %-7s | %-12s %10.2f us %8.1f %-7s | ratio %.3f [%.3f..%.3f] %-7s %s\n", name,
           mk * 1e6, work / mk * 1e-9, unit, alt_label, ma * 1e6, work / ma * 1e-9, unit, mr, lo, hi, tgt,
           bench_verdict_name(v));
    fflush(stdout);
    bench_record(name, mr, lo, hi, 1, target, v);
}

void bo_wrong(const char *name, double target)
{
    printf("%-44s not timed: a result is wrong (above)\n", name);
    fflush(stdout);
    bench_record(name, NAN, NAN, NAN, 1, target, BENCH_WRONG);
}

/* ---- random data ---- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float bo_rand(uint64_t seed, size_t i, float scale)
{
    uint64_t r = mix64(seed ^ mix64((uint64_t)i));
    float u = (float)(r >> 40) * (1.0f / 16777216.0f); /* [0, 1), 24 bits */
    return (2.0f * u - 1.0f) * scale;
}

uint64_t bo_seed(void)
{
    return mix64(run_seed + ++seeds_given);
}

uint16_t bo_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u); /* a quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

uint16_t bo_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return sign | 0x7e00u;
    if (ax >= 0x477ff000u) /* 65520 and up round to infinity */
        return sign | 0x7c00u;
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal (or zero); a * 2^24 is exact */
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f);
    }
    uint32_t r = ax - 0x38000000u; /* the exponent rebiased from 127 to 15 */
    return sign | (uint16_t)((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
}

float bo_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

float bo_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    x = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

float bo_round_to(keel_dtype_t dt, float f)
{
    return dt == KEEL_BF16 ? bo_bf16_to_f32(bo_f32_to_bf16(f)) : dt == KEEL_F16 ? bo_f16_to_f32(bo_f32_to_f16(f)) : f;
}

double bo_value(const void *p, keel_dtype_t dt, size_t i)
{
    switch (dt) {
    case KEEL_BF16: return bo_bf16_to_f32(((const uint16_t *)p)[i]);
    case KEEL_F16: return bo_f16_to_f32(((const uint16_t *)p)[i]);
    case KEEL_F64: return ((const double *)p)[i];
    default: return ((const float *)p)[i];
    }
}

void bo_upload_random(void *dst, keel_dtype_t dt, size_t n, uint64_t seed, float scale)
{
    enum { CHUNK = 1 << 22 };
    size_t es = keel_dtype_size(dt);
    void *h = malloc((size_t)CHUNK * es);
    if (!h) {
        fprintf(stderr, "keel-bench-ops-cuda: no host memory for the inputs\n");
        exit(3);
    }
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t len = n - off < CHUNK ? n - off : CHUNK;
        for (size_t i = 0; i < len; i++) {
            float v = bo_rand(seed, off + i, scale);
            if (dt == KEEL_BF16)
                ((uint16_t *)h)[i] = bo_f32_to_bf16(v);
            else if (dt == KEEL_F16)
                ((uint16_t *)h)[i] = bo_f32_to_f16(v);
            else
                ((float *)h)[i] = v;
        }
        CHECK(keel_memcpy((char *)dst + off * es, h, len * es));
    }
    free(h);
}

void bo_download(void *host, const void *dev, size_t es, size_t count, size_t stride)
{
    if (count == 0)
        return;
    if (stride <= 1)
        CHECK(keel_memcpy(host, dev, count * es));
    else
        CHECK(keel_memcpy_2d(host, es, dev, stride * es, es, count));
}

/* ---- the check of a product ---- */

static double act_ref(keel_activation_t act, double x)
{
    switch (act) {
    case KEEL_ACT_RELU: return x > 0 ? x : 0;
    case KEEL_ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case KEEL_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    default: return x;
    }
}

static double out_eps(keel_dtype_t dt)
{
    /* twice the half-ulp of the output: room for a 1-ulp difference */
    return dt == KEEL_BF16 ? 0x1p-7 : dt == KEEL_F16 ? 0x1p-10 : 0x1p-22;
}

double bo_product_tol(const bo_product_t *p, double ref, double pre, double sum_abs)
{
    /* f32 accumulation over k terms in blocks: far below 2^-14 of the sum
     * of magnitudes for k up to 2^14; tf32 rounds (or truncates) both
     * inputs of every product to 10 bits. The output rounds to its dtype,
     * and the product before the bias and the activation may too (an
     * epilogue that rounds, or GEMM then a pass); the activation's slope is
     * at most 1.13 (GELU), and a fused epilogue may evaluate tanh-GELU with
     * a fast tanh (2e-4 of the input). A product with a wrong layout,
     * operand or bias is off by about |ref|, some hundred times more at
     * these sizes. */
    double acc = 0x1p-14 + (p->tf32 ? 0x1p-10 : 0.0);
    double tol = 1.2 * (out_eps(p->out_dt) * (fabs(ref) + fabs(pre)) + acc * sum_abs);
    if (p->act == KEEL_ACT_GELU_TANH)
        tol += 2e-4 * (fabs(pre) + 1e-3);
    return tol + 1e-30;
}

int bo_check_product(const char *label, const bo_product_t *p, int points)
{
    size_t ies = keel_dtype_size(p->in_dt), oes = keel_dtype_size(p->out_dt);
    void *arow = malloc(p->k * ies), *bcol = malloc(p->k * ies), *bias = p->bias ? malloc(p->m * ies) : NULL;
    if (!arow || !bcol || (p->bias && !bias)) {
        fprintf(stderr, "keel-bench-ops-cuda: no host memory for a check\n");
        exit(3);
    }
    if (p->bias)
        bo_download(bias, p->bias, ies, p->m, 1);
    uint64_t s = bo_seed();
    int bad = 0;
    double worst = 0;
    for (int t = 0; t < points; t++) {
        size_t i, j;
        if (t < 4) {
            i = t & 1 ? p->m - 1 : 0;
            j = t & 2 ? p->n - 1 : 0;
        } else {
            i = (size_t)((bo_rand(s, 2 * (size_t)t, 0.5f) + 0.5f) * (float)p->m) % p->m;
            j = (size_t)((bo_rand(s, 2 * (size_t)t + 1, 0.5f) + 0.5f) * (float)p->n) % p->n;
        }
        if (p->a_host) /* a strided row, gathered on the host rather than read element by element */
            for (size_t q = 0; q < p->k; q++)
                memcpy((char *)arow + q * ies, (const char *)p->a_host + (i * p->a_si + q * p->a_sp) * ies, ies);
        else
            bo_download(arow, (const char *)p->a + i * p->a_si * ies, ies, p->k, p->a_sp);
        bo_download(bcol, (const char *)p->b + j * p->b_sj * ies, ies, p->k, p->b_sp);
        unsigned char got_raw[8];
        bo_download(got_raw, (const char *)p->c + (i * p->c_si + j * p->c_sj) * oes, oes, 1, 1);
        double acc = 0, mag = 0;
        for (size_t q = 0; q < p->k; q++) {
            double prod = bo_value(arow, p->in_dt, q) * bo_value(bcol, p->in_dt, q);
            acc += prod;
            mag += fabs(prod);
        }
        if (p->bias) {
            double bv = bo_value(bias, p->in_dt, i);
            acc += bv;
            mag += fabs(bv);
        }
        double ref = act_ref(p->act, acc), got = bo_value(got_raw, p->out_dt, 0);
        double err = fabs(got - ref), tol = bo_product_tol(p, ref, acc, mag);
        if (!(err <= tol)) {
            if (bad < 4)
                printf("check %s: (%zu, %zu) is %.9g, the float64 reference %.9g (|error| %.3g > %.3g)\n", label, i, j,
                       got, ref, err, tol);
            bad++;
        }
        if (err / tol > worst)
            worst = err / tol;
    }
    printf("check %s: %d of %d points within the tolerance of a float64 reference (worst: %.2f of it)%s\n", label,
           points - bad, points, worst, bad ? ": WRONG" : "");
    free(arow);
    free(bcol);
    free(bias);
    return bad == 0;
}
