/* SPDX-License-Identifier: MIT */
/* Conformance suite of the built-in operations (keel/ops.h), run on every
 * usable backend by the shared fixture. Every result is compared with a
 * float64 reference computed here from the inputs as rounded to the dtype,
 * on fresh random data; outputs are poisoned first so unwritten elements
 * show. Error paths check the status, the detail and that nothing was
 * written. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tests/fixture.h"
#include "keel/ops.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/tests/gemm_ref.h"

/* Check records every passing assertion (a write to its log file): in the
 * per-element loops, call it only for a failure. */
#define EXPECT(cond, ...)                   \
    do {                                    \
        if (!(cond))                        \
            ck_assert_msg(0, __VA_ARGS__);  \
    } while (0)

static const keel_dtype_t all_dtypes[] = {KEEL_F32, KEEL_F64, KEEL_F16, KEEL_BF16};
#define NDT 4

/* ---- host-side helpers ---- */

static keel_stream_t *stream_of(keel_device_t *dev)
{
    keel_stream_t *s;
    KT_OK(keel_device_default_stream(dev, &s));
    return s;
}

static void *dalloc(keel_device_t *dev, size_t bytes)
{
    void *p;
    KT_OK(keel_malloc(dev, bytes ? bytes : 1, &p));
    return p;
}

static double urand(void)
{
    return (double)(kt_rand64() >> 11) * 0x1p-53 * 2.0 - 1.0; /* [-1, 1) */
}

static double to_dtype(keel_dtype_t dt, double v)
{
    switch (dt) {
    case KEEL_F32: return (float)v;
    case KEEL_F16: return keel__f16_to_f32(keel__f64_to_f16(v));
    case KEEL_BF16: return keel__bf16_to_f32(keel__f64_to_bf16(v));
    default: return v;
    }
}

/* Random values in [-scale, scale), rounded to dt. */
static double *rand_vals(keel_dtype_t dt, size_t n, double scale)
{
    double *v = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        v[i] = to_dtype(dt, urand() * scale);
    return v;
}

static void encode(keel_dtype_t dt, const double *v, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case KEEL_F32: ((float *)out)[i] = (float)v[i]; break;
        case KEEL_F64: ((double *)out)[i] = v[i]; break;
        case KEEL_F16: ((uint16_t *)out)[i] = keel__f64_to_f16(v[i]); break;
        case KEEL_BF16: ((uint16_t *)out)[i] = keel__f64_to_bf16(v[i]); break;
        }
    }
}

static void decode(keel_dtype_t dt, const void *in, size_t n, double *v)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case KEEL_F32: v[i] = ((const float *)in)[i]; break;
        case KEEL_F64: v[i] = ((const double *)in)[i]; break;
        case KEEL_F16: v[i] = keel__f16_to_f32(((const uint16_t *)in)[i]); break;
        case KEEL_BF16: v[i] = keel__bf16_to_f32(((const uint16_t *)in)[i]); break;
        }
    }
}

/* Device buffer holding v (n values of dt). */
static void *upload(keel_device_t *dev, keel_dtype_t dt, const double *v, size_t n)
{
    size_t es = keel_dtype_size(dt);
    void *h = malloc(n * es + 1), *d = dalloc(dev, n * es);
    encode(dt, v, n, h);
    if (n)
        KT_OK(keel_memcpy(d, h, n * es));
    free(h);
    return d;
}

/* Poisoned device buffer of n elements (0xA5 bytes: a finite, recognizable value). */
static void *poisoned(keel_device_t *dev, size_t bytes)
{
    void *d = dalloc(dev, bytes);
    KT_OK(keel_memset(d, KT_POISON_BYTE, bytes ? bytes : 1));
    return d;
}

static double *download(keel_device_t *dev, keel_dtype_t dt, const void *d, size_t n)
{
    KT_OK(keel_device_synchronize(dev));
    size_t es = keel_dtype_size(dt);
    void *h = malloc(n * es + 1);
    double *v = malloc((n ? n : 1) * sizeof(double));
    if (n)
        KT_OK(keel_memcpy(h, d, n * es));
    decode(dt, h, n, v);
    free(h);
    return v;
}

/* Unit roundoff of each dtype's storage. */
static double ulp_of(keel_dtype_t dt)
{
    switch (dt) {
    case KEEL_F32: return 0x1p-24;
    case KEEL_F64: return 0x1p-53;
    case KEEL_F16: return 0x1p-11;
    default: return 0x1p-8;
    }
}

/* The compute precision: f32 for everything but f64. */
static double ceps(keel_dtype_t dt)
{
    return dt == KEEL_F64 ? 0x1p-52 : 0x1p-23;
}

/* got and ref agree: both NaN, equal infinities, or |got - ref| <= tol[i]. */
static void expect_close(const char *what, keel_dtype_t dt, const double *got, const double *ref,
                         const double *tol, double tol1, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i], t = tol ? tol[i] : tol1;
        int ok;
        if (isnan(r))
            ok = isnan(g);
        else if (isinf(r))
            ok = g == r;
        else
            ok = fabs(g - r) <= t + 2 * ulp_of(dt) * fabs(r);
        EXPECT(ok, "%s%s %s: element %zu is %.17g, expected %.17g (tolerance %.3g, seed %lu)", kt_where(),
                      what, keel_dtype_name(dt), i, g, r, t + 2 * ulp_of(dt) * fabs(r), kt_seed());
    }
}

static void expect_bytes_unchanged(keel_device_t *dev, const void *d, size_t bytes)
{
    unsigned char *h = malloc(bytes);
    KT_OK(keel_device_synchronize(dev));
    KT_OK(keel_memcpy(h, d, bytes));
    for (size_t i = 0; i < bytes; i++)
        EXPECT(h[i] == KT_POISON_BYTE, "%sa refused call wrote byte %zu", kt_where(), i);
    free(h);
}

static const size_t sizes[] = {0, 1, 7, 33, 1000, 70001};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ======================================================================== */

KT_DEVICE_TEST(test_fill)
{
    keel_stream_t *s = stream_of(dev);
    const double values[] = {1.0 / 3.0, -2.5, 65504.0, 1e30, INFINITY, NAN};
    for (int d = 0; d < NDT; d++)
        for (size_t si = 0; si < NSIZES; si++) {
            keel_dtype_t dt = all_dtypes[d];
            size_t n = sizes[si];
            double v = values[si % 6];
            void *p = poisoned(dev, n * keel_dtype_size(dt) + 8);
            KT_OK(keel_fill(s, dt, p, n, v));
            double *got = download(dev, dt, p, n + 1), *ref = malloc((n + 1) * sizeof(double));
            for (size_t i = 0; i < n; i++)
                ref[i] = to_dtype(dt, v);
            expect_close("fill", dt, got, ref, NULL, 0, n);
            /* the element after the range is untouched */
            unsigned char tail[8];
            KT_OK(keel_memcpy(tail, (char *)p + n * keel_dtype_size(dt), 8));
            ck_assert_msg(tail[0] == KT_POISON_BYTE, "fill wrote past its %zu elements", n);
            free(got);
            free(ref);
            KT_OK(keel_free(p));
        }
}

KT_DEVICE_TEST(test_cast)
{
    keel_stream_t *s = stream_of(dev);
    size_t n = 4099;
    for (int a = 0; a < NDT; a++)
        for (int b = 0; b < NDT; b++) {
            keel_dtype_t sd = all_dtypes[a], dd = all_dtypes[b];
            double *v = rand_vals(sd, n, 100.0);
            v[0] = NAN;
            v[1] = -INFINITY;
            v[2] = to_dtype(sd, 1e-6);   /* subnormal in f16 */
            v[3] = to_dtype(sd, 70000.0); /* overflows f16 */
            v[4] = -0.0;
            void *x = upload(dev, sd, v, n), *y = poisoned(dev, n * keel_dtype_size(dd));
            KT_OK(keel_cast(s, sd, x, dd, y, n));
            double *got = download(dev, dd, y, n);
            for (size_t i = 0; i < n; i++)
                v[i] = to_dtype(dd, v[i]);
            /* conversions round once, to nearest even: exact agreement */
            expect_close("cast", dd, got, v, NULL, 0, n);
            ck_assert(signbit(got[4]));
            free(v);
            free(got);
            KT_OK(keel_free(x));
            KT_OK(keel_free(y));
        }
    /* f64 -> f16 must round once: 1 + 2^-11 + 2^-40 is just above a tie */
    double t = 1.0 + 0x1p-11 + 0x1p-40;
    void *x = upload(dev, KEEL_F64, &t, 1), *y = poisoned(dev, 2);
    KT_OK(keel_cast(s, KEEL_F64, x, KEEL_F16, y, 1));
    double *got = download(dev, KEEL_F16, y, 1);
    ck_assert_msg(got[0] == 1.0 + 0x1p-10, "f64 -> f16 of 1+2^-11+2^-40 gave %.17g", got[0]);
    free(got);
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
}

KT_DEVICE_TEST(test_copy_transpose)
{
    keel_stream_t *s = stream_of(dev);
    const size_t shapes[][2] = {{1, 1}, {1, 17}, {17, 1}, {33, 65}, {100, 257}, {0, 5}};
    for (int d = 0; d < NDT; d++)
        for (size_t k = 0; k < 6; k++) {
            keel_dtype_t dt = all_dtypes[d];
            size_t r = shapes[k][0], c = shapes[k][1], lds = c + 3, ldd = c + 5, ldt = r + 2;
            size_t ns = r ? (r - 1) * lds + c : 0, nd = r ? (r - 1) * ldd + c : 0, nt = c ? (c - 1) * ldt + r : 0;
            double *v = rand_vals(dt, ns, 10.0);
            void *x = upload(dev, dt, v, ns), *y = poisoned(dev, (nd + 1) * keel_dtype_size(dt)),
                 *t = poisoned(dev, (nt + 1) * keel_dtype_size(dt));
            KT_OK(keel_copy_2d(s, dt, r, c, x, lds, y, ldd));
            KT_OK(keel_transpose(s, dt, r, c, x, lds, t, ldt));
            double *gy = download(dev, dt, y, nd), *gt = download(dev, dt, t, nt);
            for (size_t i = 0; i < r; i++)
                for (size_t j = 0; j < c; j++) {
                    EXPECT(gy[i * ldd + j] == v[i * lds + j], "copy_2d %s (%zu,%zu) of %zux%zu",
                                  keel_dtype_name(dt), i, j, r, c);
                    EXPECT(gt[j * ldt + i] == v[i * lds + j], "transpose %s (%zu,%zu) of %zux%zu",
                                  keel_dtype_name(dt), i, j, r, c);
                }
            /* the gaps between rows are untouched */
            if (r > 1 && c > 0) {
                unsigned char gap;
                KT_OK(keel_memcpy(&gap, (char *)y + c * keel_dtype_size(dt), 1));
                ck_assert_msg(gap == KT_POISON_BYTE, "copy_2d wrote between rows");
            }
            free(v);
            free(gy);
            free(gt);
            KT_OK(keel_free(x));
            KT_OK(keel_free(y));
            KT_OK(keel_free(t));
        }
}

/* ======================================================================== */

static double ref_unary(keel_unary_op_t op, double x)
{
    switch (op) {
    case KEEL_UNARY_NEG: return -x;
    case KEEL_UNARY_ABS: return fabs(x);
    case KEEL_UNARY_EXP: return exp(x);
    case KEEL_UNARY_LOG: return log(x);
    case KEEL_UNARY_SQRT: return sqrt(x);
    case KEEL_UNARY_RELU: return isnan(x) ? x : x < 0 ? 0 : x;
    case KEEL_UNARY_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case KEEL_UNARY_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case KEEL_UNARY_SILU: return x / (1 + exp(-x));
    case KEEL_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case KEEL_UNARY_TANH: return tanh(x);
    }
    return NAN;
}

KT_DEVICE_TEST(test_unary)
{
    keel_stream_t *s = stream_of(dev);
    for (int op = KEEL_UNARY_NEG; op <= KEEL_UNARY_TANH; op++)
        for (int d = 0; d < NDT; d++) {
            keel_dtype_t dt = all_dtypes[d];
            size_t n = op % 2 ? 70001 : 1001;
            double *v = rand_vals(dt, n, 4.0);
            /* The sanitizer build checks float-to-int conversions, which the
             * CPU's exp must not make of NaN. */
            v[0] = NAN;
            v[1] = INFINITY;
            v[2] = -INFINITY;
            v[3] = 0.0;
            double *ref = malloc(n * sizeof(double));
            for (size_t i = 0; i < n; i++)
                ref[i] = to_dtype(dt, ref_unary(op, v[i]));
            void *x = upload(dev, dt, v, n), *y = poisoned(dev, n * keel_dtype_size(dt));
            KT_OK(keel_unary(s, op, dt, n, x, y));
            double *got = download(dev, dt, y, n);
            /* results near zero after cancellation (gelu, silu of negatives) need an absolute term */
            /* an absolute term for results near zero after cancellation (gelu, silu of
             * negatives), and 8 ulps of the compute type: GPU libm is within 2-4 ulps */
            double *tol = malloc(n * sizeof(double));
            for (size_t i = 0; i < n; i++)
                tol[i] = (dt == KEEL_F64 ? 1e-13 : 4e-6 + 4 * ulp_of(dt)) + 8 * ceps(dt) * fabs(ref[i]);
            char what[32];
            snprintf(what, sizeof what, "unary op %d", op);
            expect_close(what, dt, got, ref, tol, 0, n);
            /* misaligned by one element: the scalar paths */
            if (n > 2) {
                size_t es = keel_dtype_size(dt);
                KT_OK(keel_memset(y, KT_POISON_BYTE, n * es));
                KT_OK(keel_unary(s, op, dt, n - 2, (const char *)x + es, (char *)y + es));
                double *g2 = download(dev, dt, y, n);
                expect_close(what, dt, g2 + 1, ref + 1, tol + 1, 0, n - 2);
                free(g2);
            }
            /* in place */
            KT_OK(keel_unary(s, op, dt, n, x, x));
            free(got);
            got = download(dev, dt, x, n);
            expect_close(what, dt, got, ref, tol, 0, n);
            free(tol);
            free(v);
            free(ref);
            free(got);
            KT_OK(keel_free(x));
            KT_OK(keel_free(y));
        }
}

/* The transcendental operations (exp, log, tanh, sigmoid, SiLU, both GELUs)
 * in f32 and f64 over the whole range their vector math functions handle:
 * fresh random values of every magnitude from 2^-30 to 2^30 of either sign
 * (so log sees negatives, exp overflows and underflows through the
 * subnormals), with NaN, both infinities, both zeros, the largest finite
 * values and the edges of exp's range among them. Against the float64 (long
 * double for f64) reference: NaN where it is NaN, equal infinities, and
 * within 4 ulps of the result, plus for the GELUs and SiLU, whose result
 * falls toward 0 on the negative side by cancellation in the formula, an
 * absolute 2 ulps of |x|; for those and sigmoid, results below |x| times
 * the smallest normal number may come out as 0. The largest error seen, in ulps of the result, is
 * printed. */
static long double ref_math(keel_unary_op_t op, long double x)
{
    switch (op) {
    case KEEL_UNARY_EXP: return expl(x);
    case KEEL_UNARY_LOG: return logl(x);
    case KEEL_UNARY_TANH: return tanhl(x);
    case KEEL_UNARY_SIGMOID: return 1 / (1 + expl(-x));
    case KEEL_UNARY_SILU: return x / (1 + expl(-x));
    case KEEL_UNARY_GELU_ERF: return 0.5L * x * (1 + erfl(x / sqrtl(2.0L)));
    case KEEL_UNARY_GELU_TANH: return x / (1 + expl(-2 * sqrtl(2 / 3.14159265358979323846264338327950288L) *
                                                   (x + 0.044715L * x * x * x)));
    default: return NAN;
    }
}

KT_DEVICE_TEST(test_unary_math_range)
{
    keel_stream_t *s = stream_of(dev);
    const keel_unary_op_t ops[] = {KEEL_UNARY_EXP,     KEEL_UNARY_LOG,  KEEL_UNARY_TANH,     KEEL_UNARY_SIGMOID,
                                   KEEL_UNARY_SILU,    KEEL_UNARY_GELU_ERF, KEEL_UNARY_GELU_TANH};
    const keel_dtype_t dts[] = {KEEL_F32, KEEL_F64};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int d = 0; d < 2; d++) {
            keel_dtype_t dt = dts[d];
            const int f32 = dt == KEEL_F32;
            const size_t n = 50021;
            double *v = malloc(n * sizeof(double));
            for (size_t i = 0; i < n; i++) { /* sign * 2^[-30, 30) * [1, 2) */
                double m = ldexp(1.0 + 0.5 * (urand() + 1.0), (int)floor(30.0 * urand()));
                v[i] = to_dtype(dt, urand() < 0 ? -m : m);
            }
            /* near exp's edges too: |x| in [80, 110) for f32, [700, 760) for f64 */
            for (size_t i = 4; i < n; i += 7)
                v[i] = to_dtype(dt, (urand() < 0 ? -1 : 1) * (f32 ? 95.0 + 15.0 * urand() : 730.0 + 30.0 * urand()));
            const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0,
                                      f32 ? FLT_MAX : DBL_MAX, f32 ? -FLT_MAX : -DBL_MAX,
                                      f32 ? FLT_TRUE_MIN : DBL_TRUE_MIN, f32 ? 88.72283935546875 : 709.782712893384,
                                      f32 ? -103.972084045410 : -745.1332191019411, -1.0, 1.0, -20.0, -40.0};
            for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
                v[i * 97] = to_dtype(dt, special[i]);
            void *x = upload(dev, dt, v, n), *y = poisoned(dev, n * keel_dtype_size(dt));
            KT_OK(keel_unary(s, ops[o], dt, n, x, y));
            double *got = download(dev, dt, y, n);
            const double u = f32 ? 0x1p-24 : 0x1p-53, tiny = f32 ? FLT_TRUE_MIN : DBL_TRUE_MIN;
            const int cancels = ops[o] == KEEL_UNARY_SILU || ops[o] == KEEL_UNARY_GELU_ERF ||
                                ops[o] == KEEL_UNARY_GELU_TANH;
            double worst = 0;
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) {
                long double rl = ref_math(ops[o], (long double)v[i]);
                double r = f32 ? (double)(float)rl : (double)rl, g = got[i];
                int ok;
                if (isnan(r))
                    ok = isnan(g);
                else if (isinf(r))
                    ok = g == r;
                else if (isnan(g) || isinf(g))
                    ok = 0;
                else {
                    double err = fabs(g - (double)rl), rel = 4 * 2 * u * fabs(r), abs_tol = 2 * tiny;
                    if (cancels)
                        abs_tol += 2 * 2 * u * fabs(v[i]);
                    /* a / (1 + exp(-t)) once exp(-t) overflows: 0 for results
                     * below |a| times the smallest normal */
                    if (ops[o] != KEEL_UNARY_EXP && ops[o] != KEEL_UNARY_LOG && ops[o] != KEEL_UNARY_TANH)
                        abs_tol += (f32 ? FLT_MIN : DBL_MIN) * fmax(1.0, fabs(v[i]));
                    ok = err <= rel + abs_tol;
                    /* the error in ulps where the relative bound is the one that holds */
                    if (abs_tol < rel && fabs(r) >= (f32 ? FLT_MIN : DBL_MIN))
                        worst = fmax(worst, err / (2 * u * fabs(r)));
                }
                if (!ok && bad++ < 5)
                    EXPECT(0, "%sunary op %d %s: x = %.17g gave %.17g, expected %.17g (seed %lu)", kt_where(),
                           (int)ops[o], keel_dtype_name(dt), v[i], g, r, kt_seed());
            }
            EXPECT(bad == 0, "%sunary op %d %s: %zu of %zu elements out of tolerance", kt_where(), (int)ops[o],
                   keel_dtype_name(dt), bad, n);
            printf("%sunary op %d %s: max error %.2f ulp (seed %lu)\n", kt_where(), (int)ops[o],
                   keel_dtype_name(dt), worst, kt_seed());
            free(v);
            free(got);
            KT_OK(keel_free(x));
            KT_OK(keel_free(y));
        }
}


static double ref_binary(keel_binary_op_t op, double u, double v)
{
    switch (op) {
    case KEEL_BINARY_ADD: return u + v;
    case KEEL_BINARY_SUB: return u - v;
    case KEEL_BINARY_MUL: return u * v;
    case KEEL_BINARY_DIV: return u / v;
    case KEEL_BINARY_MAX: return isnan(u) || isnan(v) ? NAN : u > v ? u : v;
    case KEEL_BINARY_MIN: return isnan(u) || isnan(v) ? NAN : u < v ? u : v;
    }
    return NAN;
}

KT_DEVICE_TEST(test_binary)
{
    keel_stream_t *s = stream_of(dev);
    const size_t shapes[][2] = {{1, 1}, {1, 1001}, {37, 29}, {300, 257}};
    for (int op = KEEL_BINARY_ADD; op <= KEEL_BINARY_MIN; op++)
        for (int d = 0; d < NDT; d++)
            for (int bc = KEEL_BROADCAST_NONE; bc <= KEEL_BROADCAST_COL; bc++)
                for (size_t k = 0; k < 4; k++) {
                    keel_dtype_t dt = all_dtypes[d];
                    size_t r = shapes[k][0], c = shapes[k][1];
                    int strided = k & 1;
                    size_t lda = c + 2 * strided, ldb = c + 3 * strided, ldy = c + strided;
                    size_t na = (r - 1) * lda + c, ny = (r - 1) * ldy + c;
                    size_t nb = bc == KEEL_BROADCAST_NONE ? (r - 1) * ldb + c : bc == KEEL_BROADCAST_ROW ? c : r;
                    double alpha = 1.5, beta = op == KEEL_BINARY_DIV ? 1.0 : -0.75;
                    double *va = rand_vals(dt, na, 3.0), *vb = rand_vals(dt, nb, 3.0);
                    va[0] = NAN;
                    if (na > 2)
                        va[2] = INFINITY;
                    void *a = upload(dev, dt, va, na), *b = upload(dev, dt, vb, nb),
                         *y = poisoned(dev, ny * keel_dtype_size(dt));
                    KT_OK(keel_binary(s, op, dt, r, c, alpha, a, lda, beta, b, ldb, bc, y, ldy));
                    double *got = download(dev, dt, y, ny), *ref = malloc(ny * sizeof(double)),
                           *tol = malloc(ny * sizeof(double));
                    for (size_t i = 0; i < r; i++)
                        for (size_t j = 0; j < c; j++) {
                            double u = alpha * va[i * lda + j];
                            double w = beta * vb[bc == KEEL_BROADCAST_NONE ? i * ldb + j
                                                 : bc == KEEL_BROADCAST_ROW ? j : i];
                            ref[i * ldy + j] = to_dtype(dt, ref_binary(op, u, w));
                            tol[i * ldy + j] = 4 * ceps(dt) * (fabs(u) + fabs(w)) *
                                               (op >= KEEL_BINARY_MUL && op <= KEEL_BINARY_DIV ? fabs(ref[i * ldy + j]) + 1 : 1);
                        }
                    char what[48];
                    snprintf(what, sizeof what, "binary op %d bcast %d %zux%zu", op, bc, r, c);
                    for (size_t i = 0; i < r; i++)
                        expect_close(what, dt, got + i * ldy, ref + i * ldy, tol + i * ldy, 0, c);
                    /* in place on b: y = op(alpha a, beta y) */
                    if (bc == KEEL_BROADCAST_NONE && ldb == ldy) {
                        KT_OK(keel_binary(s, op, dt, r, c, alpha, a, lda, beta, b, ldb, bc, b, ldb));
                        free(got);
                        got = download(dev, dt, b, ny);
                        for (size_t i = 0; i < r; i++)
                            expect_close(what, dt, got + i * ldy, ref + i * ldy, tol + i * ldy, 0, c);
                    }
                    free(va);
                    free(vb);
                    free(got);
                    free(ref);
                    free(tol);
                    KT_OK(keel_free(a));
                    KT_OK(keel_free(b));
                    KT_OK(keel_free(y));
                }
}

/* keel_binary_vec: the one-row form, every op and dtype, in place on either
 * operand, and its errors naming it. */
KT_DEVICE_TEST(test_binary_vec)
{
    keel_stream_t *s = stream_of(dev);
    const size_t lengths[] = {1, 5, 1000, 65537};
    for (int op = KEEL_BINARY_ADD; op <= KEEL_BINARY_MIN; op++)
        for (int d = 0; d < NDT; d++)
            for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
                keel_dtype_t dt = all_dtypes[d];
                size_t n = lengths[k];
                double *va = rand_vals(dt, n, 3.0), *vb = rand_vals(dt, n, 3.0);
                void *a = upload(dev, dt, va, n), *b = upload(dev, dt, vb, n), *b2 = upload(dev, dt, vb, n),
                     *y = poisoned(dev, n * keel_dtype_size(dt));
                double *ref = malloc(n * sizeof(double)), *tol = malloc(n * sizeof(double));
                for (size_t i = 0; i < n; i++) {
                    ref[i] = to_dtype(dt, ref_binary(op, va[i], vb[i]));
                    tol[i] = 4 * ceps(dt) * (fabs(va[i]) + fabs(vb[i])) *
                             (op >= KEEL_BINARY_MUL && op <= KEEL_BINARY_DIV ? fabs(ref[i]) + 1 : 1);
                }
                char what[48];
                snprintf(what, sizeof what, "binary_vec op %d n %zu", op, n);
                KT_OK(keel_binary_vec(s, op, dt, n, a, b, y));
                double *got = download(dev, dt, y, n);
                expect_close(what, dt, got, ref, tol, 0, n);
                free(got);
                /* in place: b = a op b, then a = a op b (b's copy) */
                KT_OK(keel_binary_vec(s, op, dt, n, a, b, b));
                got = download(dev, dt, b, n);
                expect_close(what, dt, got, ref, tol, 0, n);
                free(got);
                KT_OK(keel_binary_vec(s, op, dt, n, a, b2, a));
                got = download(dev, dt, a, n);
                expect_close(what, dt, got, ref, tol, 0, n);
                free(got);
                free(va);
                free(vb);
                free(ref);
                free(tol);
                KT_OK(keel_free(a));
                KT_OK(keel_free(b));
                KT_OK(keel_free(b2));
                KT_OK(keel_free(y));
            }
    float host[8] = {0};
    float *x = NULL;
    (void)host[0];
    KT_OK(keel_malloc(dev, 16 * sizeof(float), (void **)&x));
    KT_OK(keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 0, x, x + 8, x)); /* nothing to do */
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_binary_vec(NULL, KEEL_BINARY_ADD, KEEL_F32, 8, x, x + 8, x));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_binary_vec(s, (keel_binary_op_t)0, KEEL_F32, 8, x, x + 8, x));
    ck_assert_msg(strstr(keel_last_error(), "keel_binary_vec") != NULL, "the message names the call: %s",
                  keel_last_error());
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_binary_vec(s, KEEL_BINARY_ADD, (keel_dtype_t)99, 8, x, x + 8, x));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 9, x + 8, x, x));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 8, x, x + 8, x + 1));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 8, x, x + 8, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 8, x, host, x));
    /* Operands the thread's registry cache holds are still held to every
     * check: a misaligned one, and one freed since the cache saw it. */
    KT_OK(keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 2, x, x + 8, x + 12));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 2, (const char *)x + 2, x + 8, x + 12));
    ck_assert_msg(strstr(keel_last_error(), "aligned") != NULL, "the message names the alignment: %s",
                  keel_last_error());
    float *z = NULL;
    KT_OK(keel_malloc(dev, 8 * sizeof(float), (void **)&z));
    KT_OK(keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 8, z, x + 8, x));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_free(z));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, 8, z, x + 8, x));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_free(x));
}

/* ======================================================================== */

KT_DEVICE_TEST(test_reduce)
{
    keel_stream_t *s = stream_of(dev);
    const size_t shapes[][2] = {{1, 1}, {1, 100003}, {7, 1}, {129, 77}, {1000, 300}, {3, 20000}};
    for (int op = KEEL_REDUCE_SUM; op <= KEEL_REDUCE_NORM2; op++)
        for (int d = 0; d < NDT; d++)
            for (int ax = KEEL_AXIS_ALL; ax <= KEEL_AXIS_COLS; ax++)
                for (size_t k = 0; k < 6; k++) {
                    keel_dtype_t dt = all_dtypes[d];
                    size_t r = shapes[k][0], c = shapes[k][1], ld = c + (k & 1 ? 0 : 5);
                    size_t n = (r - 1) * ld + c, nout = ax == KEEL_AXIS_ALL ? 1 : ax == KEEL_AXIS_ROWS ? r : c;
                    double *v = rand_vals(dt, n, 2.0);
                    void *x = upload(dev, dt, v, n), *out = poisoned(dev, nout * keel_dtype_size(dt));
                    KT_OK(keel_reduce(s, op, dt, r, c, x, ld, ax, out));
                    double *got = download(dev, dt, out, nout), *ref = malloc(nout * sizeof(double)),
                           *tol = malloc(nout * sizeof(double));
                    double *acc = malloc(nout * sizeof(double)), *mag = calloc(nout, sizeof(double));
                    size_t *cnt = calloc(nout, sizeof(size_t));
                    for (size_t o = 0; o < nout; o++)
                        acc[o] = op == KEEL_REDUCE_MAX ? -INFINITY : op == KEEL_REDUCE_MIN ? INFINITY : 0;
                    for (size_t i = 0; i < r; i++)
                        for (size_t j = 0; j < c; j++) {
                            size_t o = ax == KEEL_AXIS_ALL ? 0 : ax == KEEL_AXIS_ROWS ? i : j;
                            double e = v[i * ld + j];
                            cnt[o]++;
                            if (op == KEEL_REDUCE_MAX)
                                acc[o] = e > acc[o] ? e : acc[o];
                            else if (op == KEEL_REDUCE_MIN)
                                acc[o] = e < acc[o] ? e : acc[o];
                            else if (op == KEEL_REDUCE_NORM2)
                                acc[o] += e * e, mag[o] += e * e;
                            else
                                acc[o] += e, mag[o] += fabs(e);
                        }
                    for (size_t o = 0; o < nout; o++) {
                        if (op == KEEL_REDUCE_MEAN)
                            acc[o] /= (double)cnt[o], mag[o] /= (double)cnt[o];
                        if (op == KEEL_REDUCE_NORM2)
                            acc[o] = sqrt(acc[o]), mag[o] = acc[o];
                        ref[o] = to_dtype(dt, acc[o]);
                        /* blocked accumulation: the error grows like sqrt(n) in practice, n at worst */
                        tol[o] = 2 * ceps(dt) * sqrt((double)cnt[o]) * mag[o] + 4 * ceps(dt) * mag[o];
                    }
                    free(acc);
                    free(mag);
                    free(cnt);
                    char what[48];
                    snprintf(what, sizeof what, "reduce op %d axis %d %zux%zu", op, ax, r, c);
                    expect_close(what, dt, got, ref, tol, 0, nout);
                    free(v);
                    free(got);
                    free(ref);
                    free(tol);
                    KT_OK(keel_free(x));
                    KT_OK(keel_free(out));
                }
}

KT_DEVICE_TEST(test_reduce_special)
{
    keel_stream_t *s = stream_of(dev);
    for (int d = 0; d < NDT; d++) {
        keel_dtype_t dt = all_dtypes[d];
        size_t n = 5000;
        double *v = rand_vals(dt, n, 1.0);
        v[4321] = NAN;
        void *x = upload(dev, dt, v, n), *out = poisoned(dev, 32);
        for (int op = KEEL_REDUCE_SUM; op <= KEEL_REDUCE_NORM2; op++) {
            KT_OK(keel_reduce(s, op, dt, 1, n, x, n, KEEL_AXIS_ALL, out));
            double *got = download(dev, dt, out, 1);
            ck_assert_msg(isnan(got[0]), "reduce op %d %s: NaN input gave %g", op, keel_dtype_name(dt), got[0]);
            free(got);
        }
        /* empty sums are 0; empty max is refused and writes nothing */
        KT_OK(keel_memset(out, KT_POISON_BYTE, 32));
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_reduce(s, KEEL_REDUCE_MAX, dt, 0, 4, x, 4, KEEL_AXIS_ALL, out));
        expect_bytes_unchanged(dev, out, 32);
        KT_OK(keel_reduce(s, KEEL_REDUCE_SUM, dt, 0, 4, x, 4, KEEL_AXIS_COLS, out));
        double *got = download(dev, dt, out, 4);
        for (int i = 0; i < 4; i++)
            ck_assert(got[i] == 0);
        free(got);
        free(v);
        KT_OK(keel_free(x));
        KT_OK(keel_free(out));
    }
}

KT_DEVICE_TEST(test_argmax)
{
    keel_stream_t *s = stream_of(dev);
    const size_t shapes[][2] = {{1, 1}, {5, 1}, {33, 1000}, {4, 70000}};
    for (int d = 0; d < NDT; d++)
        for (size_t k = 0; k < 4; k++) {
            keel_dtype_t dt = all_dtypes[d];
            size_t r = shapes[k][0], c = shapes[k][1], ld = c + 1, n = (r - 1) * ld + c;
            double *v = rand_vals(dt, n, 100.0);
            if (r > 2 && c > 10) {
                v[1 * ld + 7] = NAN;     /* NaN wins */
                v[2 * ld + 3] = 1e4;     /* tie: first index wins */
                v[2 * ld + 9] = 1e4;
            }
            void *x = upload(dev, dt, v, n);
            int64_t *out = poisoned(dev, r * sizeof(int64_t)), *h = malloc(r * sizeof(int64_t));
            KT_OK(keel_argmax_rows(s, dt, r, c, x, ld, out));
            KT_OK(keel_device_synchronize(dev));
            KT_OK(keel_memcpy(h, out, r * sizeof(int64_t)));
            for (size_t i = 0; i < r; i++) {
                size_t best = 0;
                for (size_t j = 0; j < c; j++) {
                    double e = v[i * ld + j], b = v[i * ld + best];
                    if (isnan(b))
                        break;
                    if (e > b || isnan(e))
                        best = j;
                }
                EXPECT(h[i] == (int64_t)best, "argmax %s row %zu of %zux%zu: %lld, expected %zu (seed %lu)",
                              keel_dtype_name(dt), i, r, c, (long long)h[i], best, kt_seed());
            }
            free(v);
            free(h);
            KT_OK(keel_free(x));
            KT_OK(keel_free(out));
        }
}

/* One softmax (lg: log-softmax) of r x c values of dt against a float64
 * reference; strided: rows padded, so that no 16-byte path applies. */
static void softmax_case(keel_device_t *dev, keel_stream_t *s, keel_dtype_t dt, size_t r, size_t c, int strided, int lg)
{
    size_t ldx = c + 2 * strided, ldy = c + strided;
    size_t nx = (r - 1) * ldx + c, ny = (r - 1) * ldy + c;
    double *v = rand_vals(dt, nx, 8.0);
    if (r > 2 && c > 3) {
        v[0 * ldx + 1] = -INFINITY; /* exp(-inf) = 0 */
        v[1 * ldx + 2] = NAN;       /* the whole row becomes NaN */
    }
    if (r > 3 && c > 3)
        for (size_t j = 0; j < c; j++) {
            /* row 2: -inf but for a NaN and one number far from it, so that some
             * lane or thread holds only -inf and NaN: still all NaN; row 3: -inf
             * but for one number, which gets all the weight */
            v[2 * ldx + j] = j == 0 ? NAN : j == c - 1 ? 1.5 : -INFINITY;
            v[3 * ldx + j] = j == c / 2 ? -2.0 : -INFINITY;
        }
    void *x = upload(dev, dt, v, nx), *y = poisoned(dev, ny * keel_dtype_size(dt));
    KT_OK(keel_softmax_rows(s, dt, r, c, x, ldx, y, ldy, lg));
    double *got = download(dev, dt, y, ny), *ref = malloc(ny * sizeof(double));
    for (size_t i = 0; i < r; i++) {
        const double *xr = v + i * ldx;
        double m = -INFINITY, sum = 0;
        int nan = 0;
        for (size_t j = 0; j < c; j++)
            m = xr[j] > m ? xr[j] : m, nan |= isnan(xr[j]);
        for (size_t j = 0; j < c; j++)
            sum += exp(xr[j] - m);
        for (size_t j = 0; j < c; j++)
            ref[i * ldy + j] = nan ? NAN : to_dtype(dt, lg ? xr[j] - m - log(sum) : exp(xr[j] - m) / sum);
    }
    /* f32 exp of values up to 16 loses ~16 ulps of its argument */
    double atol = dt == KEEL_F64 ? 1e-13 : lg ? 3e-5 + 2 * ulp_of(dt) * 20 : 2e-6;
    char what[48];
    snprintf(what, sizeof what, "%s %zux%zu", lg ? "log_softmax" : "softmax", r, c);
    for (size_t i = 0; i < r; i++)
        expect_close(what, dt, got + i * ldy, ref + i * ldy, NULL, atol, c);
    /* in place */
    KT_OK(keel_softmax_rows(s, dt, r, c, x, ldx, x, ldx, lg));
    free(got);
    got = download(dev, dt, x, nx);
    for (size_t i = 0; i < r; i++)
        expect_close(what, dt, got + i * ldx, ref + i * ldy, NULL, atol, c);
    free(v);
    free(got);
    free(ref);
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
}

/* Rows long enough to take a thread block cluster each on GPUs, and more of
 * them than the device runs clusters at once, so every cluster walks
 * several rows (f32, f16 and bf16 alike: 1 to 16 blocks per row). Not on
 * the CPU, where the shapes above cover every path. */
static const size_t long_rows[][2] = {{300, 20000}, {200, 40000}, {120, 80000}, {48, 200000}};

typedef void (*row_case_fn)(keel_device_t *, keel_stream_t *, keel_dtype_t, size_t, size_t, int, int);

/* Every case of a row operation for each value of its flag (log-softmax
 * off and on; layer norm's affine) from first to last: each dtype over
 * shapes, contiguous and strided, then on GPUs the long rows in f32, f16
 * and bf16. */
static void run_row_cases(keel_device_t *dev, row_case_fn fn, const size_t (*shapes)[2], size_t nshapes,
                          int first, int last)
{
    keel_stream_t *s = stream_of(dev);
    for (int flag = first; flag <= last; flag++) {
        for (int d = 0; d < NDT; d++)
            for (size_t k = 0; k < 2 * nshapes; k++)
                fn(dev, s, all_dtypes[d], shapes[k / 2][0], shapes[k / 2][1], (int)(k & 1), flag);
        if (kt_is_cpu(dev))
            continue;
        for (size_t k = 0; k < sizeof long_rows / sizeof long_rows[0]; k++) {
            fn(dev, s, KEEL_F32, long_rows[k][0], long_rows[k][1], 0, flag);
            fn(dev, s, KEEL_F16, long_rows[k][0], long_rows[k][1], 0, flag);
            fn(dev, s, KEEL_BF16, long_rows[k][0], long_rows[k][1], 0, flag);
        }
    }
}

KT_DEVICE_TEST(test_softmax)
{
    /* short rows (several rows per warp on GPUs, with 4 to 32 lanes per
     * row, and row counts that leave a warp's last rows empty), cached and
     * uncached long ones; contiguous rows (16-byte paths) and odd strides;
     * on the CPU, rows of at most 512 (TILE) elements go in batches of
     * eight, over ranges of rows that the pool's threads take: whole
     * batches and the rows after them, with 512 and 513 either side of
     * the batched length */
    static const size_t shapes[][2] = {{1, 1},    {3, 7},    {9, 128},   {33, 24}, {7, 256}, {5, 1024},
                                       {17, 512}, {11, 513}, {1000, 100}, {64, 1000}, {5, 5000}, {4, 70000}};
    run_row_cases(dev, softmax_case, shapes, sizeof shapes / sizeof shapes[0], 0, 1);
}

/* One layer norm of r x c values of dt against a float64 reference;
 * affine: 0 neither gamma nor beta, 1 both, 2 gamma alone, 3 beta alone. */
static void layernorm_case(keel_device_t *dev, keel_stream_t *s, keel_dtype_t dt, size_t r, size_t c, int strided,
                           int affine)
{
    size_t ldx = c + 3 * strided, ldy = c;
    size_t nx = (r - 1) * ldx + c, ny = (r - 1) * ldy + c;
    double *v = rand_vals(dt, nx, 3.0), *g = rand_vals(dt, c, 2.0), *b = rand_vals(dt, c, 1.0);
    for (size_t i = 0; i < nx; i++)
        v[i] = to_dtype(dt, v[i] + 5.0); /* an offset the mean must remove */
    void *x = upload(dev, dt, v, nx), *y = poisoned(dev, ny * keel_dtype_size(dt));
    void *dg = upload(dev, dt, g, c), *db = upload(dev, dt, b, c);
    double eps = 1e-5;
    int use_g = affine == 1 || affine == 2, use_b = affine == 1 || affine == 3;
    KT_OK(keel_layernorm_rows(s, dt, r, c, x, ldx, use_g ? dg : NULL, use_b ? db : NULL, eps, y, ldy));
    double *got = download(dev, dt, y, ny), *ref = malloc(ny * sizeof(double));
    for (size_t i = 0; i < r; i++) {
        const double *xr = v + i * ldx;
        double mean = 0, var = 0;
        for (size_t j = 0; j < c; j++)
            mean += xr[j];
        mean /= (double)c;
        for (size_t j = 0; j < c; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= (double)c;
        for (size_t j = 0; j < c; j++) {
            double o = (xr[j] - mean) / sqrt(var + eps);
            ref[i * ldy + j] = to_dtype(dt, o * (use_g ? g[j] : 1.0) + (use_b ? b[j] : 0.0));
        }
    }
    double atol = dt == KEEL_F64 ? 1e-11 : 2e-5;
    char what[48];
    snprintf(what, sizeof what, "layernorm %zux%zu affine %d", r, c, affine);
    for (size_t i = 0; i < r; i++)
        expect_close(what, dt, got + i * ldy, ref + i * ldy, NULL, atol, c);
    free(v);
    free(g);
    free(b);
    free(got);
    free(ref);
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
    KT_OK(keel_free(dg));
    KT_OK(keel_free(db));
}

KT_DEVICE_TEST(test_layernorm)
{
    /* the shapes of test_softmax's CPU batches, as there */
    static const size_t shapes[][2] = {{1, 1},    {3, 7},     {9, 128},   {33, 24},  {7, 256},
                                       {17, 512}, {11, 513}, {1000, 100}, {64, 1000}, {3, 20000}, {2, 40000}};
    run_row_cases(dev, layernorm_case, shapes, sizeof shapes / sizeof shapes[0], 0, 1);
}

/* Gamma alone and beta alone: short rows everywhere, and on GPUs the long
 * rows, which take kernels of their own (one block, a cluster, or a row
 * streamed through shared memory, which in f16 and bf16 also stages
 * gamma or beta there). */
KT_DEVICE_TEST(test_layernorm_gamma_or_beta)
{
    static const size_t shapes[][2] = {{9, 128}, {5, 3000}};
    run_row_cases(dev, layernorm_case, shapes, sizeof shapes / sizeof shapes[0], 2, 3);
}

/* ======================================================================== */


typedef struct {
    keel_dtype_t in, out;
    keel_compute_t compute;
} gemm_types_t;

static void run_gemm_case(keel_device_t *dev, gemm_types_t ty, keel_layout_t layout, int ta, int tb, size_t m,
                          size_t n, size_t k, size_t batch, double alpha, double beta)
{
    keel_stream_t *s = stream_of(dev);
    size_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t pad = 3;
    size_t lda = (layout == KEEL_ROW_MAJOR ? ac : ar) + pad, ldb = (layout == KEEL_ROW_MAJOR ? bc : br) + 1,
           ldc = (layout == KEEL_ROW_MAJOR ? n : m) + 2;
    if (!lda) lda = 1;
    size_t ea = gemm_ref_extent(layout, ar, ac, lda), eb = gemm_ref_extent(layout, br, bc, ldb), ec = gemm_ref_extent(layout, m, n, ldc);
    size_t sa = ea + 5, sb = eb + 7, sc = ec + 1;
    size_t na = batch > 1 ? (batch - 1) * sa + ea : ea, nb = batch > 1 ? (batch - 1) * sb + eb : eb,
           nc = batch > 1 ? (batch - 1) * sc + ec : ec;
    double *va = rand_vals(ty.in, na, 1.0), *vb = rand_vals(ty.in, nb, 1.0), *vc = rand_vals(ty.out, nc, 1.0);
    if (beta == 0 && nc)
        vc[0] = NAN; /* beta 0: C is not read */
    void *a = upload(dev, ty.in, va, na), *b = upload(dev, ty.in, vb, nb), *c = upload(dev, ty.out, vc, nc);
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = layout;
    p.transa = ta ? KEEL_TRANS : KEEL_NO_TRANS;
    p.transb = tb ? KEEL_TRANS : KEEL_NO_TRANS;
    p.m = m, p.n = n, p.k = k;
    p.alpha = alpha, p.beta = beta;
    p.a_type = p.b_type = ty.in;
    p.c_type = ty.out;
    p.compute = ty.compute;
    p.a = a, p.lda = lda, p.b = b, p.ldb = ldb, p.c = c, p.ldc = ldc;
    p.batch_count = batch;
    p.stride_a = sa, p.stride_b = sb, p.stride_c = sc;
    KT_OK(keel_gemm(s, &p));
    double *got = download(dev, ty.out, c, nc);
    double prod_eps = ty.compute == KEEL_COMPUTE_TF32 ? 0x1p-10 : ceps(ty.in);
    for (size_t bi = 0; bi < (batch ? batch : 1); bi++) {
        const double *A = va + bi * sa, *B = vb + bi * sb, *C0 = vc + bi * sc;
        const double *G = got + bi * sc;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double mag, acc = gemm_ref_entry(A, lda, ta, B, ldb, tb, layout, k, i, j, &mag);
                double cv = C0[gemm_ref_idx(layout, ldc, i, j)];
                double ref = alpha * acc + (beta != 0 ? beta * cv : 0);
                double tol = (2.0 * k + 4) * prod_eps * fabs(alpha) * mag + (beta != 0 ? 4 * ceps(ty.out) * fabs(beta * cv) : 0);
                double g = G[gemm_ref_idx(layout, ldc, i, j)];
                ref = to_dtype(ty.out, ref);
                EXPECT(fabs(g - ref) <= tol + 2 * ulp_of(ty.out) * fabs(ref),
                              "%sgemm %s->%s compute %d %s ta %d tb %d m %zu n %zu k %zu batch %zu: C[%zu](%zu,%zu) = "
                              "%.10g, expected %.10g (tolerance %.3g, seed %lu)",
                              kt_where(), keel_dtype_name(ty.in), keel_dtype_name(ty.out), ty.compute,
                              layout == KEEL_ROW_MAJOR ? "row" : "col", ta, tb, m, n, k, batch, bi, i, j, g, ref,
                              tol + 2 * ulp_of(ty.out) * fabs(ref), kt_seed());
            }
    }
    free(va);
    free(vb);
    free(vc);
    free(got);
    KT_OK(keel_free(a));
    KT_OK(keel_free(b));
    KT_OK(keel_free(c));
}

/* C = A B for contiguous row-major f32 matrices (m x k, k x n, m x n). */
static keel_gemm_params_t gemm_f32_rows(size_t m, size_t n, size_t k, const void *a, const void *b, void *c)
{
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.m = m, p.n = n, p.k = k, p.alpha = 1;
    p.a_type = p.b_type = p.c_type = KEEL_F32;
    p.a = a, p.lda = k, p.b = b, p.ldb = n, p.c = c, p.ldc = n;
    return p;
}

/* Whether @p dev's backend has no BLAS: the hip backend without rocBLAS
 * (Debian does not package it, and HIP's NVIDIA platform has none). Its GEMM
 * must then answer NOT_SUPPORTED naming rocBLAS, and the tests of BLAS-backed
 * operations skip; on every other backend a refusal fails the test. */
static int blas_missing(keel_device_t *dev)
{
    keel_device_properties_t pr;
    memset(&pr, 0, sizeof pr);
    pr.struct_size = sizeof pr;
    KT_OK(keel_device_get_properties(dev, &pr));
    if (strcmp(pr.backend, "hip") != 0)
        return 0;
    const double one = 1.0;
    void *a = upload(dev, KEEL_F32, &one, 1), *c = poisoned(dev, 4);
    keel_gemm_params_t p = gemm_f32_rows(1, 1, 1, a, a, c);
    keel_stream_t *s = stream_of(dev);
    keel_status_t st = keel_gemm(s, &p);
    char detail[1024];
    snprintf(detail, sizeof detail, "%s", keel_last_error());
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_free(a));
    KT_OK(keel_free(c));
    if (st == KEEL_OK)
        return 0;
    ck_assert_msg(st == KEEL_ERROR_NOT_SUPPORTED && strstr(detail, "rocBLAS") != NULL,
                  "%skeel_gemm -> %s (%s)", kt_where(), keel_status_name(st), detail);
    static atomic_int said;
    if (atomic_exchange(&said, 1) == 0)
        printf("%s: no BLAS, so its BLAS tests are skipped: %s\n", keel_device_name(dev), detail);
    return 1;
}

static const gemm_types_t gemm_types[] = {
    {KEEL_F32, KEEL_F32, KEEL_COMPUTE_DEFAULT}, {KEEL_F64, KEEL_F64, KEEL_COMPUTE_DEFAULT},
    {KEEL_F16, KEEL_F16, KEEL_COMPUTE_DEFAULT}, {KEEL_BF16, KEEL_BF16, KEEL_COMPUTE_DEFAULT},
    {KEEL_F16, KEEL_F32, KEEL_COMPUTE_DEFAULT}, {KEEL_BF16, KEEL_F32, KEEL_COMPUTE_F32},
    {KEEL_F32, KEEL_F32, KEEL_COMPUTE_TF32},
};

KT_DEVICE_TEST(test_gemm)
{
    if (blas_missing(dev))
        return;
    const size_t shapes[][3] = {{1, 1, 1}, {17, 33, 9}, {64, 65, 127}, {5, 3, 0}};
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++)
        for (int layout = 0; layout <= 1; layout++)
            for (int tr = 0; tr < 4; tr++)
                for (size_t k = 0; k < 4; k++)
                    run_gemm_case(dev, gemm_types[t], layout, tr & 1, tr >> 1, shapes[k][0], shapes[k][1],
                                  shapes[k][2], 1, k == 1 ? 1.0 : -0.5, k & 1 ? 0.0 : 0.75);
}

KT_DEVICE_TEST(test_gemm_batched)
{
    if (blas_missing(dev))
        return;
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++)
        for (int layout = 0; layout <= 1; layout++) {
            run_gemm_case(dev, gemm_types[t], layout, 0, 1, 13, 7, 21, 3, 1.25, 0.5);
            run_gemm_case(dev, gemm_types[t], layout, 1, 0, 32, 32, 32, 4, 1.0, 0.0);
        }
    /* a large square one, where the BLAS takes its blocked paths */
    run_gemm_case(dev, gemm_types[0], KEEL_ROW_MAJOR, 0, 0, 300, 257, 199, 1, 1.0, 0.0);
}

/* With k = 0, A and B are empty and may be NULL: C = beta C, also for each
 * matrix of a batch. (Under clang's UBSan the CPU backend's NULL + 0 for
 * the batch's matrices of A and B was a report.) */
KT_DEVICE_TEST(test_gemm_k0_null)
{
    if (blas_missing(dev))
        return;
    keel_stream_t *s = stream_of(dev);
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++) {
        gemm_types_t ty = gemm_types[t];
        size_t m = 5, n = 3, batch = 2, nc = batch * m * n;
        double *vc = rand_vals(ty.out, nc, 2.0), *ref = malloc(nc * sizeof(double));
        for (size_t i = 0; i < nc; i++)
            ref[i] = to_dtype(ty.out, 0.75 * vc[i]);
        void *c = upload(dev, ty.out, vc, nc);
        keel_gemm_params_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        p.m = m, p.n = n, p.k = 0, p.alpha = 1.0, p.beta = 0.75;
        p.a_type = p.b_type = ty.in;
        p.c_type = ty.out;
        p.compute = ty.compute;
        p.lda = 1, p.ldb = n, p.c = c, p.ldc = n;
        p.batch_count = batch, p.stride_c = m * n;
        KT_OK(keel_gemm(s, &p));
        double *got = download(dev, ty.out, c, nc);
        expect_close("gemm k=0", ty.out, got, ref, NULL, 0.0, nc);
        free(got);
        free(ref);
        free(vc);
        KT_OK(keel_free(c));
    }
}

/* NaN and Inf in A reach C as IEEE arithmetic says: a NaN poisons its row,
 * an Inf gives +-Inf (or NaN where Inf - Inf happens). */
KT_DEVICE_TEST(test_gemm_nan)
{
    if (blas_missing(dev))
        return;
    keel_stream_t *s = stream_of(dev);
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++) {
        gemm_types_t ty = gemm_types[t];
        size_t m = 4, n = 5, k = 3;
        double va[12], vb[15];
        for (int i = 0; i < 12; i++)
            va[i] = 1.0 + i * 0.125; /* row-major 4 x 3, all positive */
        for (int i = 0; i < 15; i++)
            vb[i] = 0.5 + i * 0.0625;
        va[0 * 3 + 1] = NAN;      /* row 0 of C: NaN */
        va[2 * 3 + 0] = INFINITY; /* row 2 of C: +Inf (B is positive) */
        void *a = upload(dev, ty.in, va, 12), *b = upload(dev, ty.in, vb, 15), *c = poisoned(dev, 20 * 8);
        keel_gemm_params_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        p.m = m, p.n = n, p.k = k, p.alpha = 1.0;
        p.a_type = p.b_type = ty.in;
        p.c_type = ty.out;
        p.compute = ty.compute;
        p.a = a, p.lda = k, p.b = b, p.ldb = n, p.c = c, p.ldc = n;
        KT_OK(keel_gemm(s, &p));
        double *got = download(dev, ty.out, c, 20);
        for (size_t j = 0; j < n; j++) {
            EXPECT(isnan(got[0 * n + j]), "%sgemm %s: C(0,%zu) = %g, expected NaN", kt_where(),
                   keel_dtype_name(ty.in), j, got[j]);
            EXPECT(isinf(got[2 * n + j]) && got[2 * n + j] > 0, "%sgemm %s: C(2,%zu) = %g, expected +Inf",
                   kt_where(), keel_dtype_name(ty.in), j, got[2 * n + j]);
            EXPECT(isfinite(got[1 * n + j]), "%sgemm %s: C(1,%zu) = %g, expected finite", kt_where(),
                   keel_dtype_name(ty.in), j, got[n + j]);
        }
        free(got);
        KT_OK(keel_free(a));
        KT_OK(keel_free(b));
        KT_OK(keel_free(c));
    }
}

KT_DEVICE_TEST(test_gemv)
{
    if (blas_missing(dev))
        return;
    keel_stream_t *s = stream_of(dev);
    const size_t shapes[][2] = {{1, 1}, {37, 20}, {300, 501}, {4, 0}};
    for (int d = 0; d < NDT; d++)
        for (int layout = 0; layout <= 1; layout++)
            for (int t = 0; t <= 1; t++)
                for (size_t k = 0; k < 4; k++) {
                    keel_dtype_t dt = all_dtypes[d];
                    size_t m = shapes[k][0], n = shapes[k][1], lda = (layout == KEEL_ROW_MAJOR ? n : m) + 3;
                    size_t incx = k & 1 ? 2 : 1, incy = k & 1 ? 1 : 3;
                    size_t xl = t ? m : n, yl = t ? n : m;
                    size_t na = gemm_ref_extent(layout, m, n, lda), nx = xl ? (xl - 1) * incx + 1 : 0,
                           ny = yl ? (yl - 1) * incy + 1 : 0;
                    double *va = rand_vals(dt, na, 1.0), *vx = rand_vals(dt, nx, 1.0), *vy = rand_vals(dt, ny, 1.0);
                    double alpha = 0.5, beta = k == 1 ? 0.0 : -1.5;
                    if (beta == 0 && ny)
                        vy[0] = NAN;
                    void *a = upload(dev, dt, va, na), *x = upload(dev, dt, vx, nx), *y = upload(dev, dt, vy, ny);
                    KT_OK(keel_gemv(s, dt, layout, t, m, n, alpha, a, lda, x, incx, beta, y, incy));
                    double *got = download(dev, dt, y, ny);
                    for (size_t i = 0; i < yl; i++) {
                        double acc = 0, mag = 0;
                        for (size_t l = 0; l < xl; l++) {
                            double e = t ? gemm_ref_at(va, layout, lda, l, i) : gemm_ref_at(va, layout, lda, i, l);
                            acc += e * vx[l * incx];
                            mag += fabs(e * vx[l * incx]);
                        }
                        double yv = vy[i * incy];
                        double ref = to_dtype(dt, alpha * acc + (beta != 0 ? beta * yv : 0));
                        double tol = (2.0 * xl + 4) * ceps(dt) * fabs(alpha) * mag + (beta != 0 ? 4 * ceps(dt) * fabs(beta * yv) : 0) +
                                     2 * ulp_of(dt) * fabs(ref);
                        EXPECT(fabs(got[i * incy] - ref) <= tol,
                                      "%sgemv %s %s trans %d %zux%zu: y[%zu] = %.10g, expected %.10g (seed %lu)",
                                      kt_where(), keel_dtype_name(dt), layout ? "col" : "row", t, m, n, i,
                                      got[i * incy], ref, kt_seed());
                    }
                    free(va);
                    free(vx);
                    free(vy);
                    free(got);
                    KT_OK(keel_free(a));
                    KT_OK(keel_free(x));
                    KT_OK(keel_free(y));
                }
}

static double ref_act(keel_activation_t act, double v)
{
    switch (act) {
    case KEEL_ACT_RELU: return v < 0 ? 0 : v;
    case KEEL_ACT_GELU: return ref_unary(KEEL_UNARY_GELU_TANH, v);
    case KEEL_ACT_GELU_ERF: return ref_unary(KEEL_UNARY_GELU, v);
    default: return v;
    }
}

KT_DEVICE_TEST(test_dense)
{
    if (blas_missing(dev))
        return;
    keel_stream_t *s = stream_of(dev);
    const size_t shapes[][3] = {{1, 1, 1}, {33, 17, 65}, {64, 8, 128}, {7, 5, 0}};
    for (int d = 0; d < NDT; d++)
        for (int layout = 0; layout <= 1; layout++)
            for (int tw = 0; tw <= 1; tw++)
                for (int act = KEEL_ACT_NONE; act <= KEEL_ACT_GELU_ERF; act++)
                    for (size_t k = 0; k < 4; k++) {
                        keel_dtype_t dt = all_dtypes[d];
                        size_t m = shapes[k][0], n = shapes[k][1], kk = shapes[k][2];
                        size_t wr = tw ? kk : m, wc = tw ? m : kk;
                        size_t ldw = (layout == KEEL_ROW_MAJOR ? wc : wr) + 1, ldx = (layout == KEEL_ROW_MAJOR ? n : kk) + 2,
                               ldy = (layout == KEEL_ROW_MAJOR ? n : m) + (k & 1);
                        if (!ldx) ldx = 1;
                        size_t nw = gemm_ref_extent(layout, wr, wc, ldw), nx = gemm_ref_extent(layout, kk, n, ldx),
                               ny = gemm_ref_extent(layout, m, n, ldy);
                        int with_bias = (act + k) % 2 == 0;
                        double *vw = rand_vals(dt, nw, 1.0), *vx = rand_vals(dt, nx, 1.0), *vb = rand_vals(dt, m, 1.0);
                        void *w = upload(dev, dt, vw, nw), *x = upload(dev, dt, vx, nx), *b = upload(dev, dt, vb, m),
                             *y = poisoned(dev, ny * keel_dtype_size(dt));
                        keel_dense_params_t p;
                        memset(&p, 0, sizeof p);
                        p.struct_size = sizeof p;
                        p.layout = layout;
                        p.transw = tw;
                        p.m = m, p.n = n, p.k = kk;
                        p.dtype = dt;
                        p.act = act;
                        p.w = w, p.ldw = ldw, p.x = x, p.ldx = ldx, p.bias = with_bias ? b : NULL, p.y = y, p.ldy = ldy;
                        KT_OK(keel_dense(s, &p));
                        double *got = download(dev, dt, y, ny);
                        for (size_t i = 0; i < m; i++)
                            for (size_t j = 0; j < n; j++) {
                                double acc = 0, mag = 0;
                                for (size_t l = 0; l < kk; l++) {
                                    double e = tw ? gemm_ref_at(vw, layout, ldw, l, i) : gemm_ref_at(vw, layout, ldw, i, l);
                                    acc += e * gemm_ref_at(vx, layout, ldx, l, j);
                                    mag += fabs(e * gemm_ref_at(vx, layout, ldx, l, j));
                                }
                                double pre = acc + (with_bias ? vb[i] : 0);
                                double ref = to_dtype(dt, ref_act(act, pre));
                                double tol = (2.0 * kk + 8) * ceps(dt) * (mag + 1) + 2 * ulp_of(dt) * fabs(ref) +
                                             (dt == KEEL_F64 ? 0 : 1e-6);
                                /* W.X may be rounded to the output type before the bias and the
                                 * activation (a GEMM then a pass, or an epilogue that rounds): one
                                 * more rounding of the product and of the bias, carried through
                                 * the activation's slope (at most 1.13 for GELU) */
                                tol += 1.13 * ulp_of(dt) * (fabs(acc) + (with_bias ? fabs(vb[i]) : 0));
                                /* fused GPU epilogues may evaluate tanh-GELU with a fast tanh */
                                if (act == KEEL_ACT_GELU && dt != KEEL_F64)
                                    tol += 2e-4 * (fabs(pre) + 1e-3);
                                double g = got[gemm_ref_idx(layout, ldy, i, j)];
                                EXPECT(fabs(g - ref) <= tol,
                                              "%sdense %s %s tw %d act %d bias %d %zux%zux%zu: Y(%zu,%zu) = %.10g, "
                                              "expected %.10g (seed %lu)",
                                              kt_where(), keel_dtype_name(dt), layout ? "col" : "row", tw, act,
                                              with_bias, m, n, kk, i, j, g, ref, kt_seed());
                            }
                        free(vw);
                        free(vx);
                        free(vb);
                        free(got);
                        KT_OK(keel_free(w));
                        KT_OK(keel_free(x));
                        KT_OK(keel_free(b));
                        KT_OK(keel_free(y));
                    }
}

/* ======================================================================== */
/* bad input: an error with a detail, and nothing written                    */
/* ======================================================================== */

KT_DEVICE_TEST(test_errors)
{
    keel_stream_t *s = stream_of(dev);
    size_t bytes = 4096;
    float *x = poisoned(dev, bytes), *y = poisoned(dev, bytes);
    float host[16];

    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_fill(NULL, KEEL_F32, y, 4, 1.0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_fill(s, (keel_dtype_t)99, y, 4, 1.0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_fill(s, KEEL_F32, NULL, 4, 1.0));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_fill(s, KEEL_F32, host, 4, 1.0));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_fill(s, KEEL_F32, y, bytes / 4 + 1, 1.0));
    KT_DETAIL_HAS("keel_fill");
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_fill(s, KEEL_F32, y + 1, bytes / 4, 1.0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_fill(s, KEEL_F32, y, SIZE_MAX / 2, 1.0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_fill(s, KEEL_F32, (char *)y + 1, 4, 1.0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_unary(s, (keel_unary_op_t)0, KEEL_F32, 4, x, y));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_unary(s, KEEL_UNARY_EXP, KEEL_F32, 8, x, x + 1));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_cast(s, KEEL_F32, x, KEEL_F64, x, 8));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_copy_2d(s, KEEL_F32, 4, 8, x, 7, y, 8));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_copy_2d(s, KEEL_F32, 100, 8, x, 16, y, 8));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_copy_2d(s, KEEL_F32, SIZE_MAX / 8, 8, x, SIZE_MAX / 4, y, 8));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 2, 4, 1, x, 4, 1, y, 4, (keel_broadcast_t)7, y, 4));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 2, 4, 1, x, 4, 1, y, 4, KEEL_BROADCAST_NONE, x, 5));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 2, 4, 1, x, 4, 1, host, 4, KEEL_BROADCAST_NONE, y, 4));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, 8, 1, x, 8, 1, y, 8, KEEL_BROADCAST_NONE, x + 1, 8));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 2, 8, 1, x, 8, 1, y + 4, 0, KEEL_BROADCAST_ROW, y, 8));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_softmax_rows(s, KEEL_F32, 2, 8, x, 8, x + 3, 8, 0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_reduce(s, KEEL_REDUCE_SUM, KEEL_F32, 4, 4, x, 4, (keel_reduce_axis_t)3, y));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_reduce(s, KEEL_REDUCE_SUM, KEEL_F32, 1, 2000, x, 2000, KEEL_AXIS_ALL, y));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_argmax_rows(s, KEEL_F32, 4, 0, x, 4, (int64_t *)y));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_softmax_rows(s, KEEL_F32, 4, 8, x, 8, x, 9, 0));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_layernorm_rows(s, KEEL_F32, 4, 8, x, 8, NULL, NULL, -1.0, y, 8));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_layernorm_rows(s, KEEL_F32, 4, 8, x, 8, host, NULL, 1e-5, y, 8));

    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.m = p.n = p.k = 8;
    p.alpha = 1;
    p.a_type = p.b_type = p.c_type = KEEL_F32;
    p.a = x, p.lda = 8, p.b = x, p.ldb = 8, p.c = y, p.ldc = 8;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, NULL));
    p.b_type = KEEL_F16;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.b_type = KEEL_F32;
    p.compute = KEEL_COMPUTE_F64;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.compute = KEEL_COMPUTE_DEFAULT;
    p.lda = 7;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.lda = 8;
    p.m = 1000;
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_gemm(s, &p));
    p.m = 8;
    p.batch_count = 2;
    p.stride_c = 10;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.batch_count = SIZE_MAX / 2;
    p.stride_c = 64;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.batch_count = 1;
    p.struct_size = 3;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.struct_size = sizeof p;
    p.c = x + 4; /* C overlaps A and B */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemm(s, &p));
    p.c = host;
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_gemm(s, &p));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_gemv(s, KEEL_F32, KEEL_ROW_MAJOR, KEEL_NO_TRANS, 4, 4, 1, x, 4, x, 0, 0, y, 1));

    keel_dense_params_t dp;
    memset(&dp, 0, sizeof dp);
    dp.struct_size = sizeof dp;
    dp.m = dp.n = dp.k = 8;
    dp.dtype = KEEL_F32;
    dp.w = x, dp.ldw = 8, dp.x = x, dp.ldx = 8, dp.y = y, dp.ldy = 8;
    dp.act = (keel_activation_t)9;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_dense(s, &dp));
    dp.act = KEEL_ACT_RELU;
    dp.bias = host;
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_dense(s, &dp));

    /* a pointer of another device */
    keel_device_t *other = kt_other_device(dev);
    if (!other)
        other = kt_foreign_device(dev);
    if (other) {
        void *o;
        KT_OK(keel_malloc(other, 64, &o));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_fill(s, KEEL_F32, o, 4, 1.0));
        KT_OK(keel_free(o));
    }
    expect_bytes_unchanged(dev, x, bytes);
    expect_bytes_unchanged(dev, y, bytes);
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
}

/* The validation fast path serves pointers from the thread's registry cache:
 * every check must still hold for a pointer the cache has just seen valid.
 * Each case first makes a call that succeeds (so the buffers are cached),
 * then one that must be refused and write nothing. */
static void *free_in_thread(void *p)
{
    keel_status_t st = keel_free(p);
    return (void *)(intptr_t)st;
}

KT_DEVICE_TEST(test_cached_checks)
{
    keel_stream_t *s = stream_of(dev);
    const size_t n = 64, bytes = n * 4;
    float *a = poisoned(dev, bytes), *b = poisoned(dev, bytes), *y = poisoned(dev, bytes);
    KT_OK(keel_fill(s, KEEL_F32, a, n, 1.0));
    KT_OK(keel_fill(s, KEEL_F32, b, n, 2.0));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_memset(y, KT_POISON_BYTE, bytes));
#define WARM() KT_OK(keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, n / 2, 1, a, n / 2, 1, b, n / 2, \
                                 KEEL_BROADCAST_NONE, a + n / 2, n / 2))
    /* too short: one element past the end of a cached allocation */
    WARM();
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, n + 1, 1, a, n + 1, 1, b, n + 1, KEEL_BROADCAST_NONE, y,
                        n + 1));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_unary(s, KEEL_UNARY_RELU, KEEL_F32, n - 1, a, y + 2));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_cast(s, KEEL_F32, a, KEEL_F64, y, n / 2 + 1));
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_fill(s, KEEL_F32, y + 1, n, 0.0));
    /* misaligned inside a cached allocation */
    WARM();
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, 4, 1, a, 4, 1, b, 4, KEEL_BROADCAST_NONE,
                        (float *)((char *)y + 2), 4));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_cast(s, KEEL_F32, a, KEEL_F64, (char *)y + 4, 4));
    /* partial overlap of the output with an input, all three cached */
    WARM();
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, 8, 1, a, 8, 1, y, 8, KEEL_BROADCAST_NONE, y + 1, 8));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, 8, y, y + 3));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_cast(s, KEEL_F32, y, KEEL_F64, y + 2, 8));
    expect_bytes_unchanged(dev, y, bytes);

    /* freed on this thread after being cached */
    float *f = poisoned(dev, bytes);
    KT_OK(keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, n, a, f));
    KT_OK(keel_free(f));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, n, a, f));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, n, 1, a, n, 1, f, n, KEEL_BROADCAST_NONE, y, n));
    /* a smaller allocation that may reuse the freed address: its own size counts */
    float *g = poisoned(dev, bytes / 2);
    KT_FAIL(KEEL_ERROR_OUT_OF_RANGE, keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, n, a, g));
    expect_bytes_unchanged(dev, g, bytes / 2);
    KT_OK(keel_free(g));

    /* freed by another thread while this thread has it cached */
    float *t = poisoned(dev, bytes);
    KT_OK(keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, n, 1, a, n, 1, b, n, KEEL_BROADCAST_NONE, t, n));
    KT_OK(keel_stream_synchronize(s));
    pthread_t th;
    void *ret;
    ck_assert_int_eq(pthread_create(&th, NULL, free_in_thread, t), 0);
    ck_assert_int_eq(pthread_join(th, &ret), 0);
    ck_assert_int_eq((int)(intptr_t)ret, KEEL_OK);
    KT_FAIL(KEEL_ERROR_INVALID_POINTER,
            keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, n, 1, a, n, 1, b, n, KEEL_BROADCAST_NONE, t, n));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_fill(s, KEEL_F32, t, n, 0.0));

    /* a buffer of another device, cached by a successful call on that device */
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_stream_t *os = stream_of(other);
        float *o = poisoned(other, bytes);
        KT_OK(keel_fill(os, KEEL_F32, o, n, 3.0));
        KT_OK(keel_stream_synchronize(os));
        KT_OK(keel_memset(o, KT_POISON_BYTE, bytes));
        WARM();
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_fill(s, KEEL_F32, o, n, 0.0));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_unary(s, KEEL_UNARY_NEG, KEEL_F32, n, a, o));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH,
                keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, n, 1, a, n, 1, b, n, KEEL_BROADCAST_NONE, o, n));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_cast(s, KEEL_F32, o, KEEL_F64, y, n / 2));
        expect_bytes_unchanged(other, o, bytes);
        KT_OK(keel_free(o));
    }
#undef WARM
    expect_bytes_unchanged(dev, y, bytes);
    KT_OK(keel_free(a));
    KT_OK(keel_free(b));
    KT_OK(keel_free(y));
}

/* Stream order: a chain of operations on a new stream, read back once. */
KT_DEVICE_TEST(test_stream_order)
{
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    size_t n = 100000;
    float *x = poisoned(dev, n * 4), *y = poisoned(dev, n * 4), *out = poisoned(dev, 4);
    KT_OK(keel_fill(s, KEEL_F32, x, n, 2.0));
    KT_OK(keel_unary(s, KEEL_UNARY_SQRT, KEEL_F32, n, x, y));
    KT_OK(keel_binary(s, KEEL_BINARY_MUL, KEEL_F32, 1, n, 1.0, y, n, 1.0, y, n, KEEL_BROADCAST_NONE, y, n));
    KT_OK(keel_reduce(s, KEEL_REDUCE_SUM, KEEL_F32, 1, n, y, n, KEEL_AXIS_ALL, out));
    KT_OK(keel_stream_synchronize(s));
    float h;
    KT_OK(keel_memcpy(&h, out, 4));
    ck_assert_msg(fabs(h - 2.0 * n) < 1e-3 * n, "fill, sqrt, mul, sum gave %g", h);
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
    KT_OK(keel_free(out));
    KT_OK(keel_stream_destroy(s));
}

/* A host function enqueued after an operation runs after it, also when a
 * host function was enqueued just before the operation (on CUDA, host
 * functions with nothing between them share one wait on the stream: an
 * operation must count as something between them). Managed memory, so that
 * the host function can read what the operation wrote. */
static void read_last(void *p)
{
    float **pp = p;
    pp[1][0] = pp[0][0];
}

KT_DEVICE_TEST(test_host_func_after_op)
{
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    size_t n = 1 << 20;
    float *m = NULL, seen = -1.0f;
    KT_OK(keel_malloc_managed(dev, n * 4, (void **)&m));
    KT_OK(keel_memset(m, 0, n * 4));
    float *args[2] = {m + n - 1, &seen};
    for (int round = 1; round <= 3; round++) {
        KT_OK(keel_stream_launch_host_func(s, kt_host_sleep, (void *)(intptr_t)20));
        KT_OK(keel_fill(s, KEEL_F32, m, n, (double)round));
        KT_OK(keel_stream_launch_host_func(s, read_last, args));
        KT_OK(keel_stream_synchronize(s));
        ck_assert_msg(seen == (float)round, "%sround %d: the host function after keel_fill saw %g, expected %d",
                      kt_where(), round, seen, round);
    }
    KT_OK(keel_free(m));
    KT_OK(keel_stream_destroy(s));
}

/* The first GEMM and dense layer of a shape make a plan (on CUDA the plan
 * may time cuBLASLt's candidates); making it must not wait for work already
 * queued on the stream, here a host function that blocks until the test
 * opens it after the calls return. A timer opens the gate after 3 s in any
 * case. Where even a plain operation returns only after that (launches made
 * synchronous by a tool such as compute-sanitizer), the property cannot be
 * observed and the test says so; the results are checked either way. */
KT_DEVICE_TEST(test_first_plan_does_not_wait)
{
    if (blas_missing(dev))
        return;
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    /* shapes no other test uses, so both calls make a new plan */
    const size_t m = 136, n = 72, k = 200;
    double *va = rand_vals(KEEL_F32, m * k, 1.0), *vb = rand_vals(KEEL_F32, k * n, 1.0),
           *vbias = rand_vals(KEEL_F32, m, 1.0);
    void *a = upload(dev, KEEL_F32, va, m * k), *b = upload(dev, KEEL_F32, vb, k * n),
         *bias = upload(dev, KEEL_F32, vbias, m), *c = poisoned(dev, m * n * 4), *y = poisoned(dev, m * n * 4),
         *z = poisoned(dev, m * n * 4);
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    ck_assert_msg(kt_gate_open_later(g, 3000) == 0, "%scannot start the gate's timer", kt_where());
    KT_OK(keel_fill(s, KEEL_F32, z, m * n, 1.0));
    int plain_returned = !kt_gate_is_open(g);
    keel_gemm_params_t p = gemm_f32_rows(m, n, k, a, b, c);
    KT_OK(keel_gemm(s, &p));
    int gemm_returned = !kt_gate_is_open(g);
    keel_dense_params_t d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.layout = KEEL_ROW_MAJOR;
    d.m = m, d.n = n, d.k = k;
    d.dtype = KEEL_F32;
    d.act = KEEL_ACT_RELU;
    d.w = a, d.ldw = k, d.x = b, d.ldx = n, d.bias = bias, d.y = y, d.ldy = n;
    KT_OK(keel_dense(s, &d));
    int dense_returned = !kt_gate_is_open(g);
    kt_gate_open(g);
    KT_OK(keel_stream_synchronize(s));
    if (!plain_returned)
        printf("%sa plain operation returned only after the gate's timer opened it (launches are synchronous "
               "here, as under compute-sanitizer): whether plans wait was not observed\n",
               kt_where());
    else {
        ck_assert_msg(gemm_returned, "%sthe first keel_gemm of a shape waited for the stream's queued work",
                      kt_where());
        ck_assert_msg(dense_returned, "%sthe first keel_dense of a shape waited for the stream's queued work",
                      kt_where());
    }
    double *gc = download(dev, KEEL_F32, c, m * n), *gy = download(dev, KEEL_F32, y, m * n);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0, mag = 0;
            for (size_t l = 0; l < k; l++) {
                acc += va[i * k + l] * vb[l * n + j];
                mag += fabs(va[i * k + l] * vb[l * n + j]);
            }
            double tol = (2.0 * k + 4) * ceps(KEEL_F32) * (mag + fabs(vbias[i]) + 1);
            double ry = acc + vbias[i] > 0 ? acc + vbias[i] : 0;
            EXPECT(fabs(gc[i * n + j] - acc) <= tol, "%sgemm C(%zu,%zu) = %.9g, expected %.9g (seed %lu)",
                   kt_where(), i, j, gc[i * n + j], acc, kt_seed());
            EXPECT(fabs(gy[i * n + j] - ry) <= tol, "%sdense Y(%zu,%zu) = %.9g, expected %.9g (seed %lu)",
                   kt_where(), i, j, gy[i * n + j], ry, kt_seed());
        }
    kt_gate_free(g);
    free(va);
    free(vb);
    free(vbias);
    free(gc);
    free(gy);
    void *bufs[] = {a, b, bias, c, y, z};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        KT_OK(keel_free(bufs[i]));
    KT_OK(keel_stream_destroy(s));
}

/* ---- small operations from several threads on one stream ----
 * On the CPU a small operation on an idle stream runs on the calling thread
 * (keel__cpu_enqueue_small); everything else queues. The threads here mix
 * both, and host functions check, in stream order, what device memory holds
 * (the CPU's device memory is host memory):
 *  - a probe that sleeps keeps the worker busy with an empty queue; what the
 *    thread enqueues then (on data the probe watches) must queue behind it;
 *  - a long small operation (tanh over 16k elements) runs inline while other
 *    threads enqueue probes; those must not run before it ends, or they see
 *    its output half written;
 *  - a chain y = 2y + 1 shared by all threads comes out as in stream order. */

#define SO_THREADS 3
#define SO_ITERS 40
#define SO_NY 4096    /* the shared chain */
#define SO_NZ 16384   /* the largest size that runs inline */

typedef struct {
    keel_stream_t *s;
    pthread_mutex_t *group;   /* makes one group of commands consecutive in the stream */
    float *y, *z, *ones;
    double **w;
    int t;
    atomic_int *bad;
    double *y_shadow;         /* what y holds: read and written by host functions only */
} so_thread_t;

typedef struct {
    so_thread_t *th;
    int sleep_us;
    atomic_int started;
} so_probe_t;

static void so_sleep_us(int us)
{
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static int so_uniform(const double *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[0] && !(v[i] != v[i] && v[0] != v[0]))
            return 0;
    return 1;
}

/* y has had y = 2y + 1 applied twice since the last check, to every element.
 * Resets it to a small value. */
static void so_check_y(void *p)
{
    so_probe_t *pr = p;
    so_thread_t *th = pr->th;
    double want = 4.0 * *th->y_shadow + 3.0;
    for (size_t i = 0; i < SO_NY; i++)
        if (th->y[i] != (float)want) {
            atomic_fetch_add(th->bad, 1);
            break;
        }
    double next = fmod(want, 97.0);
    for (size_t i = 0; i < SO_NY; i++)
        th->y[i] = (float)next;
    *th->y_shadow = next;
}

/* z was filled with 0 and then had z = 2z + 1 applied three times. While it
 * sleeps, nothing else may run: not the next group's operations on y. */
static void so_check_z(void *p)
{
    so_probe_t *pr = p;
    atomic_store(&pr->started, 1);
    for (size_t i = 0; i < SO_NZ; i++)
        if (pr->th->z[i] != 7.0f) {
            atomic_fetch_add(pr->th->bad, 1);
            break;
        }
    if (pr->sleep_us) {
        float y0 = pr->th->y[0], y1 = pr->th->y[SO_NY - 1];
        so_sleep_us(pr->sleep_us);
        if (pr->th->z[0] != 7.0f || pr->th->z[SO_NZ - 1] != 7.0f || pr->th->y[0] != y0 ||
            pr->th->y[SO_NY - 1] != y1)
            atomic_fetch_add(pr->th->bad, 1);
    }
}

/* Every w is the output of whole operations: no operation is half done. */
static void so_check_w(void *p)
{
    so_probe_t *pr = p;
    for (int t = 0; t < SO_THREADS; t++)
        if (!so_uniform(pr->th->w[t], SO_NZ))
            atomic_fetch_add(pr->th->bad, 1);
    for (size_t i = 1; i < SO_NY; i++)
        if (pr->th->y[i] != pr->th->y[0]) {
            atomic_fetch_add(pr->th->bad, 1);
            break;
        }
}

static void *so_thread(void *p)
{
    so_thread_t *th = p;
    static so_probe_t probes[SO_THREADS][SO_ITERS][3];
    for (int j = 0; j < SO_ITERS; j++) {
        so_probe_t *pz = &probes[th->t][j][0], *py = &probes[th->t][j][1], *pw = &probes[th->t][j][2];
        /* First after the drain, so one thread's runs inline while the
         * others' queue behind it; long enough (libm's tanh in f64) that the
         * worker reaches them before it ends. */
        keel_unary(th->s, KEEL_UNARY_TANH, KEEL_F64, SO_NZ, th->w[th->t], th->w[th->t]);
        pw->th = th;
        keel_stream_launch_host_func(th->s, so_check_w, pw);
        /* This thread's own chain, not grouped: other threads' commands
         * interleave with it, its order must hold all the same. */
        if (j % 2)   /* 64 KiB: small enough to run inline too */
            keel_memset_async(th->z, 0, SO_NZ * 4, th->s);
        else
            keel_fill(th->s, KEEL_F32, th->z, SO_NZ, 0.0);
        for (int r = 0; r < 3; r++)
            keel_binary(th->s, KEEL_BINARY_ADD, KEEL_F32, 1, SO_NZ, 2.0, th->z, SO_NZ, 1.0, th->ones, SO_NZ,
                        KEEL_BROADCAST_NONE, th->z, SO_NZ);
        pz->th = th;
        pz->sleep_us = (j + th->t) % 4 == 1 ? 300 : 0;
        keel_stream_launch_host_func(th->s, so_check_z, pz);
        /* Once the worker is in the probe, the queue may well be empty while
         * the stream is busy: the operations on y below must still queue. */
        for (int k = 0; pz->sleep_us && !atomic_load(&pz->started) && k < 1000; k++)
            so_sleep_us(5);

        pthread_mutex_lock(th->group);
        for (int r = 0; r < 2; r++)
            keel_binary(th->s, KEEL_BINARY_ADD, KEEL_F32, 1, SO_NY, 2.0, th->y, SO_NY, 1.0, th->ones, SO_NY,
                        KEEL_BROADCAST_NONE, th->y, SO_NY);
        py->th = th;
        keel_stream_launch_host_func(th->s, so_check_y, py);
        pthread_mutex_unlock(th->group);

        /* Wait for the stream to drain, as all threads do: their next
         * operations then start together, some inline, some behind. */
        for (int k = 0; keel_stream_query(th->s) == KEEL_ERROR_NOT_READY && k < 20000; k++)
            so_sleep_us(10);
        so_sleep_us(5 * th->t);
    }
    return NULL;
}

KT_DEVICE_TEST(test_small_ops_threads)
{
    if (!kt_is_cpu(dev))
        return;   /* the host functions read device memory directly */
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    float *y = dalloc(dev, SO_NY * 4), *ones = dalloc(dev, SO_NZ * 4), *z[SO_THREADS];
    double *w[SO_THREADS];
    KT_OK(keel_fill(s, KEEL_F32, y, SO_NY, 0.0));
    KT_OK(keel_fill(s, KEEL_F32, ones, SO_NZ, 1.0));
    pthread_mutex_t group = PTHREAD_MUTEX_INITIALIZER;
    atomic_int bad = 0;
    double y_shadow = 0;
    so_thread_t th[SO_THREADS];
    pthread_t tid[SO_THREADS];
    for (int t = 0; t < SO_THREADS; t++) {
        z[t] = dalloc(dev, SO_NZ * 4);
        w[t] = dalloc(dev, SO_NZ * 8);
        KT_OK(keel_fill(s, KEEL_F64, w[t], SO_NZ, 3.0 + t));
        th[t] = (so_thread_t){s, &group, y, z[t], ones, w, t, &bad, &y_shadow};
    }
    KT_OK(keel_stream_synchronize(s));
    for (int t = 0; t < SO_THREADS; t++)
        ck_assert_int_eq(pthread_create(&tid[t], NULL, so_thread, &th[t]), 0);
    for (int t = 0; t < SO_THREADS; t++)
        pthread_join(tid[t], NULL);
    /* One more small operation, then an event: the event must see it done. */
    keel_event_t *ev;
    KT_OK(keel_event_create(dev, 0, &ev));
    KT_OK(keel_binary(s, KEEL_BINARY_ADD, KEEL_F32, 1, SO_NY, 2.0, y, SO_NY, 1.0, ones, SO_NY, KEEL_BROADCAST_NONE,
                      y, SO_NY));
    KT_OK(keel_event_record(ev, s));
    KT_OK(keel_event_synchronize(ev));
    float *h = malloc(SO_NY * 4);
    KT_OK(keel_memcpy(h, y, SO_NY * 4));
    ck_assert_msg(h[0] == (float)(2.0 * y_shadow + 1.0) && h[SO_NY - 1] == h[0],
                  "after the threads and one more y = 2y + 1: y = %g, expected %g", h[0], 2.0 * y_shadow + 1.0);
    KT_OK(keel_stream_synchronize(s));
    ck_assert_msg(atomic_load(&bad) == 0, "%d host-function checks saw work out of stream order", atomic_load(&bad));
    for (int t = 0; t < SO_THREADS; t++) {
        KT_OK(keel_memcpy(h, z[t], 4));
        ck_assert_msg(h[0] == 7.0f, "thread %d: z = %g, expected 7", t, h[0]);
        KT_OK(keel_free(z[t]));
        KT_OK(keel_free(w[t]));
    }
    free(h);
    KT_OK(keel_event_destroy(ev));
    KT_OK(keel_free(y));
    KT_OK(keel_free(ones));
    KT_OK(keel_stream_destroy(s));
}

/* Operations captured into a graph run right each time the graph does (the
 * CPU runs own their scratch buffers; a replay must not reuse freed ones). */
KT_DEVICE_TEST(test_graph_capture)
{
    if (blas_missing(dev))
        return;
    keel_stream_t *s;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    size_t n = 24;
    double va[24 * 24];
    for (size_t i = 0; i < n * n; i++)
        va[i] = to_dtype(KEEL_BF16, urand());
    void *a = upload(dev, KEEL_BF16, va, n * n), *c = poisoned(dev, n * n * 2), *out = poisoned(dev, 8);
    keel_gemm_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.m = p.n = p.k = n, p.alpha = 1.0;
    p.a_type = p.b_type = p.c_type = KEEL_BF16;
    p.a = a, p.lda = n, p.b = a, p.ldb = n, p.c = c, p.ldc = n;
    /* once outside the capture: vendor libraries make their handles and
     * workspaces on first use, which a capture may not allow */
    KT_OK(keel_gemm(s, &p));
    KT_OK(keel_reduce(s, KEEL_REDUCE_SUM, KEEL_BF16, n, n, c, n, KEEL_AXIS_ALL, out));
    KT_OK(keel_stream_synchronize(s));
    keel_status_t st = keel_stream_begin_capture(s);
    if (kt_unsupported(dev, KT_GRAPHS, st)) {
        KT_OK(keel_stream_destroy(s));
        return;
    }
    KT_OK(st);
    KT_OK(keel_fill(s, KEEL_BF16, c, n * n, 0.0));
    KT_OK(keel_gemm(s, &p));
    KT_OK(keel_reduce(s, KEEL_REDUCE_SUM, KEEL_BF16, n, n, c, n, KEEL_AXIS_ALL, out));
    keel_graph_t *g;
    keel_graph_exec_t *e;
    KT_OK(keel_stream_end_capture(s, &g));
    KT_OK(keel_graph_instantiate(g, &e));
    double ref = 0, mag = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0;
            for (size_t l = 0; l < n; l++)
                acc += va[i * n + l] * va[l * n + j];
            acc = to_dtype(KEEL_BF16, acc);
            ref += acc;
            mag += fabs(acc);
        }
    for (int rep = 0; rep < 3; rep++) {
        KT_OK(keel_memset(out, KT_POISON_BYTE, 8));
        KT_OK(keel_graph_launch(e, s));
        KT_OK(keel_stream_synchronize(s));
        double *got = download(dev, KEEL_BF16, out, 1);
        ck_assert_msg(fabs(got[0] - ref) <= 0.02 * mag, "replay %d: sum %g, expected %g", rep, got[0], ref);
        free(got);
    }
    KT_OK(keel_graph_exec_destroy(e));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_free(a));
    KT_OK(keel_free(c));
    KT_OK(keel_free(out));
    KT_OK(keel_stream_destroy(s));
}

/* Two streams running the same operations at once do not share state. */
KT_DEVICE_TEST(test_concurrent_streams)
{
    if (blas_missing(dev))
        return;
    enum { NS = 3 };
    keel_stream_t *st[NS];
    size_t n = 48;
    double va[48 * 48];
    for (size_t i = 0; i < n * n; i++)
        va[i] = to_dtype(KEEL_BF16, urand());
    void *a = upload(dev, KEEL_BF16, va, n * n), *c[NS];
    for (int i = 0; i < NS; i++) {
        KT_OK(keel_stream_create(dev, 0, 0, &st[i]));
        c[i] = poisoned(dev, n * n * 2);
    }
    keel_dense_params_t p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.layout = KEEL_ROW_MAJOR;
    p.m = p.n = p.k = n;
    p.dtype = KEEL_BF16;
    p.act = KEEL_ACT_RELU;
    p.w = a, p.ldw = n, p.x = a, p.ldx = n, p.bias = a, p.ldy = n;
    for (int rep = 0; rep < 4; rep++)
        for (int i = 0; i < NS; i++) {
            p.y = c[i];
            KT_OK(keel_dense(st[i], &p));
            KT_OK(keel_softmax_rows(st[i], KEEL_BF16, n, n, c[i], n, c[i], n, 0));
        }
    for (int i = 0; i < NS; i++)
        KT_OK(keel_stream_synchronize(st[i]));
    double *first = download(dev, KEEL_BF16, c[0], n * n);
    for (size_t e = 0; e < n * n; e++)
        EXPECT(first[e] >= 0 && first[e] <= 1, "%ssoftmax output %g out of [0, 1]", kt_where(), first[e]);
    for (int i = 1; i < NS; i++) {
        double *got = download(dev, KEEL_BF16, c[i], n * n);
        for (size_t e = 0; e < n * n; e++)
            EXPECT(got[e] == first[e], "%sstream %d element %zu: %g, stream 0 has %g", kt_where(), i, e, got[e],
                   first[e]);
        free(got);
    }
    free(first);
    for (int i = 0; i < NS; i++) {
        KT_OK(keel_free(c[i]));
        KT_OK(keel_stream_destroy(st[i]));
    }
    KT_OK(keel_free(a));
}

/* The same program on two backends agrees (when a GPU backend is usable too). */
START_TEST(test_cross_backend)
{
    keel_device_t *cpu = NULL, *gpu = NULL;
    for (int i = 0; i < kt_device_count(); i++) {
        keel_device_t *d = kt_device(i);
        if (kt_is_cpu(d) && !cpu)
            cpu = d;
        else if (!kt_is_cpu(d) && !gpu)
            gpu = d;
    }
    if (!cpu || !gpu || blas_missing(gpu))
        return; /* nothing to compare on this machine */
    size_t m = 96, n = 80, k = 112;
    double *va = rand_vals(KEEL_F32, m * k, 1.0), *vb = rand_vals(KEEL_F32, k * n, 1.0), *res[2];
    keel_device_t *devs[2] = {cpu, gpu};
    for (int t = 0; t < 2; t++) {
        keel_stream_t *s = stream_of(devs[t]);
        void *a = upload(devs[t], KEEL_F32, va, m * k), *b = upload(devs[t], KEEL_F32, vb, k * n),
             *c = poisoned(devs[t], m * n * 4);
        keel_gemm_params_t p = gemm_f32_rows(m, n, k, a, b, c);
        KT_OK(keel_gemm(s, &p));
        KT_OK(keel_softmax_rows(s, KEEL_F32, m, n, c, n, c, n, 0));
        res[t] = download(devs[t], KEEL_F32, c, m * n);
        KT_OK(keel_free(a));
        KT_OK(keel_free(b));
        KT_OK(keel_free(c));
    }
    expect_close("cpu vs gpu gemm+softmax", KEEL_F32, res[1], res[0], NULL, 1e-5, m * n);
    free(va);
    free(vb);
    free(res[0]);
    free(res[1]);
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("elementwise");
    tcase_set_timeout(tc, 120);
    kt_add_device_test(tc, test_fill);
    kt_add_device_test(tc, test_cast);
    kt_add_device_test(tc, test_copy_transpose);
    kt_add_device_test(tc, test_unary);
    kt_add_device_test(tc, test_unary_math_range);
    kt_add_device_test(tc, test_binary);
    kt_add_device_test(tc, test_binary_vec);
    suite_add_tcase(s, tc);
    tc = tcase_create("reductions");
    tcase_set_timeout(tc, 120);
    kt_add_device_test(tc, test_reduce);
    kt_add_device_test(tc, test_reduce_special);
    kt_add_device_test(tc, test_argmax);
    kt_add_device_test(tc, test_softmax);
    kt_add_device_test(tc, test_layernorm);
    kt_add_device_test(tc, test_layernorm_gamma_or_beta);
    suite_add_tcase(s, tc);
    tc = tcase_create("blas");
    tcase_set_timeout(tc, 300);
    kt_add_device_test(tc, test_gemm);
    kt_add_device_test(tc, test_gemm_batched);
    kt_add_device_test(tc, test_gemm_nan);
    kt_add_device_test(tc, test_gemm_k0_null);
    kt_add_device_test(tc, test_gemv);
    kt_add_device_test(tc, test_dense);
    suite_add_tcase(s, tc);
    tc = tcase_create("api");
    kt_add_device_test(tc, test_errors);
    kt_add_device_test(tc, test_cached_checks);
    kt_add_device_test(tc, test_stream_order);
    kt_add_device_test(tc, test_small_ops_threads);
    kt_add_device_test(tc, test_graph_capture);
    kt_add_device_test(tc, test_concurrent_streams);
    kt_add_device_test(tc, test_host_func_after_op);
    kt_add_device_test(tc, test_first_plan_does_not_wait);
    tcase_add_test(tc, test_cross_backend);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, ops_suite(), 1, 1);
}
