/* SPDX-License-Identifier: MIT */
/* The row loops of softmax, log-softmax and layer norm in f32 and f64: one
 * row at a time, each pass a plain loop the compiler vectorizes (in the
 * SSE2, AVX2 and AVX-512F builds of KEEL_CPU_VEC_MATH), the exponentials
 * glibc's vector forms where there are (kernels/cpu/cpu_mvec.h). The rows
 * themselves are spread over the pool by the caller (kernels/cpu/ops_cpu.c).
 *
 * Sums go through sixteen independent f64 accumulators, added together in a
 * fixed order at the end: the adds do not wait on one another and nothing
 * is reassociated, so every build gives the same plain sums (the AVX-512
 * build's sums of squares may differ in the last bits: it contracts them
 * into multiply-adds).
 *
 * Softmax: the row's max, then exp(x - max) a tile at a time (into y, or a
 * stack tile for log-softmax) with its sum while the tile is in L1, then the
 * scaling pass. The max skips NaN; a NaN in the row still makes the sum,
 * and so the whole row, NaN.
 *
 * Layer norm: the statistics in f64 (ln_stats_float and ln_stats_double
 * below), then the write. */
#include "config.h"
#include <math.h>
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_mvec.h"

#define TILE KEEL_CPU_TILE

/* GCC's vector types: the accumulators stay in registers, one AVX-512
 * register each (two AVX2 or four SSE2 ones in the other builds). */
typedef double v8d __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef int64_t v8l __attribute__((vector_size(64)));
#define INL static inline __attribute__((always_inline))
/* No function here takes or returns a 64-byte vector by value: without
 * AVX-512 that changes the calling convention, which clang refuses and GCC
 * warns of. The loads are macros, the lanes are passed by address. */

/* Eight elements from p, widened to f64. Built lane by lane: GCC turns
 * that into one widening load of all eight in the AVX-512 build, where
 * __builtin_convertvector gave two four-lane conversions and an insert. */
#define ld8_float(p) __extension__({                                          \
    v8f f_;                                                                   \
    memcpy(&f_, (p), sizeof f_);                                              \
    (v8d){f_[0], f_[1], f_[2], f_[3], f_[4], f_[5], f_[6], f_[7]};            \
})
#define ld8_double(p) __extension__({ \
    v8d d_;                           \
    memcpy(&d_, (p), sizeof d_);      \
    d_;                               \
})

/* The sixteen lanes and the tail added in a fixed order; the halves are
 * folded with shuffles, in registers. */
typedef double v4d __attribute__((vector_size(32)));
INL double lanes_sum(const v8d *a0, const v8d *a1, double tail)
{
    v8d t = *a0 + *a1;
    v4d u = __builtin_shufflevector(t, t, 0, 1, 2, 3) + __builtin_shufflevector(t, t, 4, 5, 6, 7);
    return ((u[0] + tail) + u[2]) + (u[1] + u[3]);
}
#define lanes_total(a0, a1, tail) lanes_sum(&(a0), &(a1), (tail))

/* a0, a1, tail += F over x[0, n): lane k takes the elements i with
 * i % 16 == k, the last n % 16 go to tail. F maps a v8d, or a double. */
#define ACC16(T, x, n, a0, a1, tail, F)                   \
    do {                                                  \
        size_t i_ = 0;                                    \
        for (; i_ + 16 <= (n); i_ += 16) {                \
            v8d v0_ = ld8_##T((x) + i_);                  \
            v8d v1_ = ld8_##T((x) + i_ + 8);              \
            (a0) += F(v0_);                               \
            (a1) += F(v1_);                               \
        }                                                 \
        for (; i_ < (n); i_++)                            \
            (tail) += F((double)(x)[i_]);                 \
    } while (0)
#define SAME(v) (v)

/* The largest lane (the lanes hold no NaN), a tree of halvings in
 * registers. */
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef int64_t v2l __attribute__((vector_size(16)));
/* The larger of a and b lane by lane (C has no ?: on vectors). */
#define VMAX(VT, VI, a, b) __extension__({                 \
    VT a_ = (a), b_ = (b);                                 \
    VI gt_ = b_ > a_;                                      \
    (VT)(((VI)b_ & gt_) | ((VI)a_ & ~gt_));                \
})
#define SMAX(a, b) ((b) > (a) ? (b) : (a))
INL float lanes_max_float(const v16f *l)
{
    v8f h8 = VMAX(v8f, v8i, __builtin_shufflevector(*l, *l, 0, 1, 2, 3, 4, 5, 6, 7),
                  __builtin_shufflevector(*l, *l, 8, 9, 10, 11, 12, 13, 14, 15));
    v4f h4 = VMAX(v4f, v4i, __builtin_shufflevector(h8, h8, 0, 1, 2, 3), __builtin_shufflevector(h8, h8, 4, 5, 6, 7));
    return SMAX(SMAX(h4[0], h4[2]), SMAX(h4[1], h4[3]));
}
INL double lanes_max_double(const v8d *l)
{
    v4d h4 = VMAX(v4d, v4l, __builtin_shufflevector(*l, *l, 0, 1, 2, 3), __builtin_shufflevector(*l, *l, 4, 5, 6, 7));
    v2d h2 = VMAX(v2d, v2l, __builtin_shufflevector(h4, h4, 0, 1), __builtin_shufflevector(h4, h4, 2, 3));
    return SMAX(h2[0], h2[1]);
}

/* The max of x[0, n), NaN skipped; -Inf when there is none. VT holds 64
 * bytes of T, VI as many integers of its width. */
#define ROW_MAX(T, VT, VI, x, n, m)                                       \
    do {                                                                  \
        const size_t w_ = sizeof(VT) / sizeof(T);                         \
        VT l_ = (VT){0} - INFINITY;                                       \
        size_t i_ = 0;                                                    \
        for (; i_ + w_ <= (n); i_ += w_) {                                \
            VT v_;                                                        \
            memcpy(&v_, (x) + i_, sizeof v_);                             \
            VI gt_ = v_ > l_;                                             \
            l_ = (VT)(((VI)v_ & gt_) | ((VI)l_ & ~gt_));                  \
        }                                                                 \
        (m) = -INFINITY;                                                  \
        for (; i_ < (n); i_++)                                            \
            (m) = (x)[i_] > (m) ? (x)[i_] : (m);                          \
        const T t_ = lanes_max_##T(&l_);                                  \
        (m) = t_ > (m) ? t_ : (m);                                        \
    } while (0)

/* The mean and variance of a row for layer norm. An f32 row: one pass over
 * x - x[0], the sums and the sums of squares in f64, whose 29 more bits
 * than the data's leave the cancellation of the variance harmless unless
 * x[0] lies millions of standard deviations from the mean. An f64 row: the
 * mean, then the squares around it. */
INL void ln_stats_float(const float *x, size_t n, double *mean, double *var)
{
    const double s = n ? x[0] : 0;
    const v8d sv = (v8d){0} + s;
    v8d a0 = {0}, a1 = {0}, q0 = {0}, q1 = {0};
    double ta = 0, tq = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8d d0 = ld8_float(x + i) - sv, d1 = ld8_float(x + i + 8) - sv;
        a0 += d0;
        a1 += d1;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    for (; i < n; i++) {
        double d = x[i] - s;
        ta += d;
        tq += d * d;
    }
    const double inv = 1.0 / (double)n; /* off the sums' critical path */
    const double sd = lanes_total(a0, a1, ta) * inv, v = lanes_total(q0, q1, tq) * inv - sd * sd;
    *mean = s + sd;
    *var = v > 0 ? v : 0;
}

INL void ln_stats_double(const double *x, size_t n, double *mean, double *var)
{
    v8d a0 = {0}, a1 = {0};
    double tail = 0;
    ACC16(double, x, n, a0, a1, tail, SAME);
    const double m = lanes_total(a0, a1, tail) / (double)n;
    const v8d mv = (v8d){0} + m;
    v8d q0 = {0}, q1 = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v8d d0 = ld8_double(x + i) - mv, d1 = ld8_double(x + i + 8) - mv;
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    double tq = 0;
    for (; i < n; i++)
        tq += (x[i] - m) * (x[i] - m);
    *mean = m;
    *var = lanes_total(q0, q1, tq) / (double)n;
}

/* y[j] = EXPR over the row. */
#define ROW_MAP(n, EXPR)                  \
    do {                                  \
        for (size_t j = 0; j < (n); j++)  \
            y[j] = (EXPR);                \
    } while (0)

#define DEFINE_ROWS(T, VT, VI, EXP, SQRT)                                                              \
    static KEEL_CPU_VEC_MATH void softmax_##T(const T *x, T *y, size_t n, int lg)                     \
    {                                                                                                  \
        T m;                                                                                           \
        ROW_MAX(T, VT, VI, x, n, m);                                                                   \
        v8d a0 = {0}, a1 = {0};                                                                        \
        double tail = 0;                                                                               \
        T t[TILE];                                                                                     \
        for (size_t off = 0; off < n; off += TILE) {                                                   \
            size_t c = n - off < TILE ? n - off : TILE;                                                \
            T *o = lg ? t : y + off;                                                                   \
            const T *xs = x + off;                                                                     \
            for (size_t i = 0; i < c; i++)                                                             \
                o[i] = EXP(xs[i] - m);                                                                 \
            ACC16(T, o, c, a0, a1, tail, SAME);                                                        \
        }                                                                                              \
        double sum = lanes_total(a0, a1, tail);                                                        \
        if (lg) {                                                                                      \
            const T lse = (T)log(sum) + m;                                                             \
            ROW_MAP(n, x[j] - lse);                                                                    \
        } else {                                                                                       \
            const T r = (T)1 / (T)sum;                                                                 \
            ROW_MAP(n, y[j] * r);                                                                      \
        }                                                                                              \
    }                                                                                                  \
                                                                                                       \
    static KEEL_CPU_VEC_MATH void layernorm_##T(const T *x, T *y, size_t n, const T *g, const T *b,   \
                                                double eps)                                            \
    {                                                                                                  \
        double mean, var;                                                                              \
        ln_stats_##T(x, n, &mean, &var);                                                               \
        const T rstd = (T)1 / SQRT((T)(var + eps)), mu = (T)mean;                                      \
        if (g && b)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd * g[j] + b[j]);                                              \
        else if (g)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd * g[j]);                                                     \
        else if (b)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd + b[j]);                                                     \
        else                                                                                           \
            ROW_MAP(n, (x[j] - mu) * rstd);                                                            \
    }
DEFINE_ROWS(float, v16f, v16i, MATH_EXPF, sqrtf)
DEFINE_ROWS(double, v8d, v8l, exp, sqrt)

void keel__cpu_softmax_row_f32(const float *x, float *y, size_t n, int lg)
{
    softmax_float(x, y, n, lg);
}

void keel__cpu_softmax_row_f64(const double *x, double *y, size_t n, int lg)
{
    softmax_double(x, y, n, lg);
}

void keel__cpu_layernorm_row_f32(const float *x, float *y, size_t n, const float *g, const float *b, double eps)
{
    layernorm_float(x, y, n, g, b, eps);
}

void keel__cpu_layernorm_row_f64(const double *x, double *y, size_t n, const double *g, const double *b,
                                 double eps)
{
    layernorm_double(x, y, n, g, b, eps);
}
