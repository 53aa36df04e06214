/* SPDX-License-Identifier: MIT */
/* The row loops of softmax, log-softmax and layer norm in f32 and f64: one
 * row at a time, each pass a plain loop the compiler vectorizes (in the
 * SSE2, AVX2 and AVX-512F builds of KEEL_CPU_VEC_MATH), the exponentials
 * glibc's vector forms where there are (kernels/cpu/cpu_mvec.h). The rows
 * themselves are spread over the pool by the caller (kernels/cpu/ops_cpu.c).
 *
 * Sums go through LANES independent f64 accumulators, added together in a
 * fixed order at the end: the adds do not wait on one another, nothing is
 * reassociated, and every build gives the same sum.
 *
 * Softmax: the row's max, then exp(x - max) a tile at a time (into y, or a
 * stack tile for log-softmax) with its sum while the tile is in L1, then the
 * scaling pass. The max skips NaN; a NaN in the row still makes the sum,
 * and so the whole row, NaN.
 *
 * Layer norm: the mean, then the sum of squares around it (two passes, no
 * cancellation), then the write; statistics in f64. */
#include "config.h"
#include <math.h>
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_mvec.h"

#define LANES 16
#define TILE KEEL_CPU_TILE

/* The lanes of s added pairwise, always in the same order. */
static inline double lanes_total(const double *s)
{
    double t[LANES / 2];
    for (int k = 0; k < LANES / 2; k++)
        t[k] = s[k] + s[k + LANES / 2];
    for (int w = LANES / 4; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            t[k] += t[k + w];
    return t[0];
}

/* s[k] += EXPR for element i + k of each block of LANES, the rest into s[0]. */
#define LANES_ADD(s, n, EXPR)                             \
    do {                                                  \
        size_t i_ = 0;                                    \
        for (; i_ + LANES <= (n); i_ += LANES)            \
            for (int k = 0; k < LANES; k++) {             \
                size_t i = i_ + k;                        \
                (s)[k] += (EXPR);                         \
            }                                             \
        for (size_t i = i_; i < (n); i++)                 \
            (s)[0] += (EXPR);                             \
    } while (0)

/* y[j] = EXPR over the row. */
#define ROW_MAP(n, EXPR)                  \
    do {                                  \
        for (size_t j = 0; j < (n); j++)  \
            y[j] = (EXPR);                \
    } while (0)

#define DEFINE_ROWS(T, EXP)                                                                            \
    static KEEL_CPU_VEC_MATH void softmax_##T(const T *x, T *y, size_t n, int lg)                     \
    {                                                                                                  \
        T l[LANES];                                                                                    \
        for (int k = 0; k < LANES; k++)                                                                \
            l[k] = -INFINITY;                                                                          \
        size_t i0 = 0;                                                                                 \
        for (; i0 + LANES <= n; i0 += LANES)                                                           \
            for (int k = 0; k < LANES; k++)                                                            \
                l[k] = x[i0 + k] > l[k] ? x[i0 + k] : l[k];                                            \
        T m = -INFINITY;                                                                               \
        for (; i0 < n; i0++)                                                                           \
            m = x[i0] > m ? x[i0] : m;                                                                 \
        for (int k = 0; k < LANES; k++)                                                                \
            m = l[k] > m ? l[k] : m;                                                                   \
        double s[LANES] = {0};                                                                         \
        T t[TILE];                                                                                     \
        for (size_t off = 0; off < n; off += TILE) {                                                   \
            size_t c = n - off < TILE ? n - off : TILE;                                                \
            T *o = lg ? t : y + off;                                                                   \
            const T *xs = x + off;                                                                     \
            for (size_t i = 0; i < c; i++)                                                             \
                o[i] = EXP(xs[i] - m);                                                                 \
            LANES_ADD(s, c, o[i]);                                                                     \
        }                                                                                              \
        double sum = lanes_total(s);                                                                   \
        if (lg) {                                                                                      \
            const T lse = (T)log(sum) + m;                                                             \
            ROW_MAP(n, x[j] - lse);                                                                    \
        } else {                                                                                       \
            const T r = (T)(1.0 / sum);                                                                \
            ROW_MAP(n, y[j] * r);                                                                      \
        }                                                                                              \
    }                                                                                                  \
                                                                                                       \
    static KEEL_CPU_VEC_MATH void layernorm_##T(const T *x, T *y, size_t n, const T *g, const T *b,   \
                                                double eps)                                            \
    {                                                                                                  \
        double s[LANES] = {0};                                                                         \
        LANES_ADD(s, n, (double)x[i]);                                                                 \
        const double mean = lanes_total(s) / (double)n;                                                \
        double q[LANES] = {0};                                                                         \
        LANES_ADD(q, n, ((double)x[i] - mean) * ((double)x[i] - mean));                                \
        const T rstd = (T)(1.0 / sqrt(lanes_total(q) / (double)n + eps)), mu = (T)mean;                \
        if (g && b)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd * g[j] + b[j]);                                              \
        else if (g)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd * g[j]);                                                     \
        else if (b)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd + b[j]);                                                     \
        else                                                                                           \
            ROW_MAP(n, (x[j] - mu) * rstd);                                                            \
    }
DEFINE_ROWS(float, MATH_EXPF)
DEFINE_ROWS(double, exp)

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
