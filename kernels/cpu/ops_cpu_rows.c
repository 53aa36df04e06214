/* SPDX-License-Identifier: MIT */
/* The row loops of softmax, log-softmax and layer norm in f32 and f64: each
 * pass a loop the compiler vectorizes (in the SSE2, AVX2 and AVX-512F builds
 * of KEEL_CPU_VEC_MATH), the exponentials glibc's vector forms where there
 * are (kernels/cpu/cpu_mvec.h). The pool's threads take ranges of rows
 * (kernels/cpu/ops_cpu.c); each range is done here.
 *
 * Rows of up to TILE elements are done BATCH rows at a time, one step for
 * every row of the batch before the next step (all the maxima, then all the
 * exponentials, all the sums, then all the scalings): each row's steps
 * depend on one another (the max before the exponentials, the sum before the
 * scaling), and taking them a batch at a time lets the processor overlap the
 * rows' chains instead of waiting out each one. The sums come after all the
 * exponentials (log-softmax, whose exponentials go to a stack tile, keeps
 * them together): a call to the vector exp leaves no register to a sum in
 * flight, and eight rows' sums with no call between them overlap.
 *
 * Sums: f64 accumulators, added together in a fixed order at the end, so
 * every build gives the same sums (the AVX-512 build's sums of squares may
 * differ in the last bits: it contracts them into multiply-adds). An f32
 * softmax tile (32 values to a lane) or an f32 block of BATCH_SUM elements
 * of layer norm (16 to a lane) is first summed in f32 lanes, in chains of
 * at most eight additions joined by a tree of one or two, and each lane
 * then added into f64: the rounding error stays that of a few f32
 * additions however long the row, and the f32 loops take half the vector
 * operations of widening every value.
 *
 * Softmax: the row's max, then exp(x - max) a tile at a time (into y, or a
 * stack tile for log-softmax) with its sum while the tile is in L1, then the
 * scaling pass. The max skips NaN; a NaN in the row still makes the sum,
 * and so the whole row, NaN.
 *
 * Layer norm: the mean and variance (ln_stats_float and ln_stats_double
 * below), then the write. */
#include "config.h"
#include <math.h>
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_mvec.h"

#define TILE KEEL_CPU_TILE
#define BATCH 8
#define BATCH_SUM 256

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

/* a0, a1 += the sixteen f32 lanes of f, widened. */
#define ADD_WIDENED(a0, a1, f)                                                                        \
    do {                                                                                              \
        (a0) += __builtin_convertvector(__builtin_shufflevector((f), (f), 0, 1, 2, 3, 4, 5, 6, 7), v8d); \
        (a1) += __builtin_convertvector(                                                              \
            __builtin_shufflevector((f), (f), 8, 9, 10, 11, 12, 13, 14, 15), v8d);                     \
    } while (0)

/* a0, a1, tail += f64 x[0, n): lane k of the sixteen takes the elements i
 * with i % 16 == k (four accumulators while 32 remain, so that the adds
 * overlap), the last n % 16 go to tail. */
#define SUM_double(x, n, a0, a1, tail)                    \
    do {                                                  \
        size_t i_ = 0;                                    \
        v8d b0_ = {0}, b1_ = {0};                         \
        for (; i_ + 32 <= (n); i_ += 32) {                \
            (a0) += ld8_double((x) + i_);                 \
            (a1) += ld8_double((x) + i_ + 8);             \
            b0_ += ld8_double((x) + i_ + 16);             \
            b1_ += ld8_double((x) + i_ + 24);             \
        }                                                 \
        (a0) += b0_;                                      \
        (a1) += b1_;                                      \
        for (; i_ + 16 <= (n); i_ += 16) {                \
            (a0) += ld8_double((x) + i_);                 \
            (a1) += ld8_double((x) + i_ + 8);             \
        }                                                 \
        for (; i_ < (n); i_++)                            \
            (tail) += (x)[i_];                            \
    } while (0)

/* The same over an f32 tile of at most TILE (512) elements: summed in four
 * sets of f32 lanes (each lane at most eight values), whose sum is widened
 * into a0, a1; the last n % 16 go to tail. */
#define SUM_float(x, n, a0, a1, tail)                                 \
    do {                                                              \
        v16f f0_ = {0}, f1_ = {0}, f2_ = {0}, f3_ = {0};              \
        size_t i_ = 0;                                                \
        for (; i_ + 64 <= (n); i_ += 64) {                            \
            v16f e0_, e1_, e2_, e3_;                                  \
            memcpy(&e0_, (x) + i_, sizeof e0_);                       \
            memcpy(&e1_, (x) + i_ + 16, sizeof e1_);                  \
            memcpy(&e2_, (x) + i_ + 32, sizeof e2_);                  \
            memcpy(&e3_, (x) + i_ + 48, sizeof e3_);                  \
            f0_ += e0_;                                               \
            f1_ += e1_;                                               \
            f2_ += e2_;                                               \
            f3_ += e3_;                                               \
        }                                                             \
        for (; i_ + 16 <= (n); i_ += 16) {                            \
            v16f e0_;                                                 \
            memcpy(&e0_, (x) + i_, sizeof e0_);                       \
            f0_ += e0_;                                               \
        }                                                             \
        v16f f_ = (f0_ + f1_) + (f2_ + f3_);                          \
        ADD_WIDENED(a0, a1, f_);                                      \
        for (; i_ < (n); i_++)                                        \
            (tail) += (x)[i_];                                        \
    } while (0)

/* The largest lane (the lanes hold no NaN), a tree of halvings in
 * registers. */
typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef int64_t v2l __attribute__((vector_size(16)));
/* The larger of a and b lane by lane, a where b is NaN (C has no ?: on
 * vectors). */
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
 * bytes of T, VI as many integers of its width. Four running maxima while
 * four vectors remain: a compare and a blend take several cycles, and one
 * running max would wait for them at every vector. */
#define ROW_MAX(T, VT, VI, x, n, m)                                       \
    do {                                                                  \
        const size_t w_ = sizeof(VT) / sizeof(T);                         \
        VT l_ = (VT){0} - INFINITY, k1_ = l_, k2_ = l_, k3_ = l_;         \
        size_t i_ = 0;                                                    \
        for (; i_ + 4 * w_ <= (n); i_ += 4 * w_) {                        \
            VT v0_, v1_, v2_, v3_;                                        \
            memcpy(&v0_, (x) + i_, sizeof v0_);                           \
            memcpy(&v1_, (x) + i_ + w_, sizeof v1_);                      \
            memcpy(&v2_, (x) + i_ + 2 * w_, sizeof v2_);                  \
            memcpy(&v3_, (x) + i_ + 3 * w_, sizeof v3_);                  \
            l_ = VMAX(VT, VI, l_, v0_);                                   \
            k1_ = VMAX(VT, VI, k1_, v1_);                                 \
            k2_ = VMAX(VT, VI, k2_, v2_);                                 \
            k3_ = VMAX(VT, VI, k3_, v3_);                                 \
        }                                                                 \
        l_ = VMAX(VT, VI, l_, k1_);                                       \
        k2_ = VMAX(VT, VI, k2_, k3_);                                     \
        l_ = VMAX(VT, VI, l_, k2_);                                       \
        for (; i_ + w_ <= (n); i_ += w_) {                                \
            VT v_;                                                        \
            memcpy(&v_, (x) + i_, sizeof v_);                             \
            l_ = VMAX(VT, VI, l_, v_);                                    \
        }                                                                 \
        (m) = -INFINITY;                                                  \
        for (; i_ < (n); i_++)                                            \
            (m) = (x)[i_] > (m) ? (x)[i_] : (m);                          \
        const T t_ = lanes_max_##T(&l_);                                  \
        (m) = t_ > (m) ? t_ : (m);                                        \
    } while (0)

/* The mean and variance of a row for layer norm. An f32 row: one pass over
 * d = x - x[0], the sums of d and of d * d in f32 lanes within blocks of
 * BATCH_SUM elements, each block's lanes added into f64. Shifting by x[0]
 * keeps the variance's cancellation (the mean of d squared taken from the
 * mean of d * d) small unless x[0] lies far out in the row. An f64 row:
 * the mean, then the squares around it. */
INL void ln_stats_float(const float *x, size_t n, double *mean, double *var)
{
    const float s = n ? x[0] : 0;
    const v16f sv = (v16f){0} + s;
    v8d a0 = {0}, a1 = {0}, q0 = {0}, q1 = {0};
    double ta = 0, tq = 0;
    size_t i = 0;
    while (i + 16 <= n) {
        v16f fa0 = {0}, fa1 = {0}, fq0 = {0}, fq1 = {0};
        const size_t end = n - i > BATCH_SUM ? i + BATCH_SUM : n;
        for (; i + 32 <= end; i += 32) {
            v16f d0, d1;
            memcpy(&d0, x + i, sizeof d0);
            memcpy(&d1, x + i + 16, sizeof d1);
            d0 -= sv;
            d1 -= sv;
            fa0 += d0;
            fa1 += d1;
            fq0 += d0 * d0;
            fq1 += d1 * d1;
        }
        for (; i + 16 <= end; i += 16) {
            v16f d0;
            memcpy(&d0, x + i, sizeof d0);
            d0 -= sv;
            fa0 += d0;
            fq0 += d0 * d0;
        }
        v16f fa = fa0 + fa1, fq = fq0 + fq1;
        ADD_WIDENED(a0, a1, fa);
        ADD_WIDENED(q0, q1, fq);
    }
    for (; i < n; i++) {
        double d = (double)x[i] - s;
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
    SUM_double(x, n, a0, a1, tail);
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

/* Row i of x and of y. */
#define XR(i) (x + (i) * ldx)
#define YR(i) (y + (i) * ldy)

#define DEFINE_ROWS(T, VT, VI, EXP, SQRT)                                                              \
    /* o[0, n) = exp(x - m). */                                                                      \
    INL void exp_row_##T(const T *x, T *o, size_t n, T m)                                              \
    {                                                                                                  \
        for (size_t i = 0; i < n; i++)                                                                 \
            o[i] = EXP(x[i] - m);                                                                      \
    }                                                                                                  \
                                                                                                       \
    /* The sum of a tile (n <= TILE), as exp_sum sums each tile. */                                    \
    INL double tile_sum_##T(const T *o, size_t n)                                                      \
    {                                                                                                  \
        v8d a0 = {0}, a1 = {0};                                                                        \
        double tail = 0;                                                                               \
        SUM_##T(o, n, a0, a1, tail);                                                                   \
        return lanes_total(a0, a1, tail);                                                              \
    }                                                                                                  \
                                                                                                       \
    /* exp(x - m) over the row, a tile at a time, into y (t: NULL) or the tile t; returns the sum. */ \
    INL double exp_sum_##T(const T *x, T *y, T *t, size_t n, T m)                                      \
    {                                                                                                  \
        v8d a0 = {0}, a1 = {0};                                                                        \
        double tail = 0;                                                                               \
        for (size_t off = 0; off < n; off += TILE) {                                                   \
            size_t c = n - off < TILE ? n - off : TILE;                                                \
            T *o = t ? t : y + off;                                                                    \
            exp_row_##T(x + off, o, c, m);                                                             \
            SUM_##T(o, c, a0, a1, tail);                                                               \
        }                                                                                              \
        return lanes_total(a0, a1, tail);                                                              \
    }                                                                                                  \
                                                                                                       \
    INL void softmax_out_##T(const T *x, T *y, size_t n, int lg, T m, double sum)                     \
    {                                                                                                  \
        if (lg) {                                                                                      \
            const T lse = (T)log(sum) + m;                                                             \
            ROW_MAP(n, x[j] - lse);                                                                    \
        } else {                                                                                       \
            const T r = (T)1 / (T)sum;                                                                 \
            ROW_MAP(n, y[j] * r);                                                                      \
        }                                                                                              \
    }                                                                                                  \
                                                                                                       \
    static KEEL_CPU_VEC_MATH void softmax_##T(const T *x, size_t ldx, T *y, size_t ldy, size_t rows,  \
                                              size_t n, int lg)                                        \
    {                                                                                                  \
        T t[TILE];                                                                                     \
        T *tile = lg ? t : NULL;                                                                       \
        size_t i = 0;                                                                                  \
        if (n <= TILE)                                                                                 \
            for (; i + BATCH <= rows; i += BATCH) {                                                    \
                T m[BATCH];                                                                            \
                double sum[BATCH];                                                                     \
                for (int k = 0; k < BATCH; k++)                                                        \
                    ROW_MAX(T, VT, VI, XR(i + k), n, m[k]);                                            \
                if (lg) {                                                                              \
                    for (int k = 0; k < BATCH; k++)                                                    \
                        sum[k] = exp_sum_##T(XR(i + k), YR(i + k), tile, n, m[k]);                     \
                } else { /* the sums apart from the exponentials' calls (see above) */                 \
                    for (int k = 0; k < BATCH; k++)                                                    \
                        exp_row_##T(XR(i + k), YR(i + k), n, m[k]);                                    \
                    for (int k = 0; k < BATCH; k++)                                                    \
                        sum[k] = tile_sum_##T(YR(i + k), n);                                           \
                }                                                                                      \
                for (int k = 0; k < BATCH; k++)                                                        \
                    softmax_out_##T(XR(i + k), YR(i + k), n, lg, m[k], sum[k]);                        \
            }                                                                                          \
        for (; i < rows; i++) {                                                                        \
            T m;                                                                                       \
            ROW_MAX(T, VT, VI, XR(i), n, m);                                                           \
            softmax_out_##T(XR(i), YR(i), n, lg, m, exp_sum_##T(XR(i), YR(i), tile, n, m));            \
        }                                                                                              \
    }                                                                                                  \
                                                                                                       \
    INL void layernorm_out_##T(const T *x, T *y, size_t n, const T *g, const T *b, T mu, T rstd)       \
    {                                                                                                  \
        if (g && b)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd * g[j] + b[j]);                                              \
        else if (g)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd * g[j]);                                                     \
        else if (b)                                                                                    \
            ROW_MAP(n, (x[j] - mu) * rstd + b[j]);                                                     \
        else                                                                                           \
            ROW_MAP(n, (x[j] - mu) * rstd);                                                            \
    }                                                                                                  \
                                                                                                       \
    INL void layernorm_stats_##T(const T *x, size_t n, double eps, T *mu, T *rstd)                     \
    {                                                                                                  \
        double mean, var;                                                                              \
        ln_stats_##T(x, n, &mean, &var);                                                               \
        *mu = (T)mean;                                                                                 \
        *rstd = (T)1 / SQRT((T)(var + eps));                                                           \
    }                                                                                                  \
                                                                                                       \
    static KEEL_CPU_VEC_MATH void layernorm_##T(const T *x, size_t ldx, T *y, size_t ldy, size_t rows,\
                                                size_t n, const T *g, const T *b, double eps)          \
    {                                                                                                  \
        size_t i = 0;                                                                                  \
        if (n <= TILE)                                                                                 \
            for (; i + BATCH <= rows; i += BATCH) {                                                    \
                T mu[BATCH], rstd[BATCH];                                                              \
                for (int k = 0; k < BATCH; k++)                                                        \
                    layernorm_stats_##T(XR(i + k), n, eps, &mu[k], &rstd[k]);                          \
                for (int k = 0; k < BATCH; k++)                                                        \
                    layernorm_out_##T(XR(i + k), YR(i + k), n, g, b, mu[k], rstd[k]);                  \
            }                                                                                          \
        for (; i < rows; i++) {                                                                        \
            T mu, rstd;                                                                                \
            layernorm_stats_##T(XR(i), n, eps, &mu, &rstd);                                            \
            layernorm_out_##T(XR(i), YR(i), n, g, b, mu, rstd);                                        \
        }                                                                                              \
    }
DEFINE_ROWS(float, v16f, v16i, MATH_EXPF, sqrtf)
DEFINE_ROWS(double, v8d, v8l, exp, sqrt)

void keel__cpu_softmax_rows_f32(const float *x, size_t ldx, float *y, size_t ldy, size_t rows, size_t n, int lg)
{
    softmax_float(x, ldx, y, ldy, rows, n, lg);
}

void keel__cpu_softmax_rows_f64(const double *x, size_t ldx, double *y, size_t ldy, size_t rows, size_t n, int lg)
{
    softmax_double(x, ldx, y, ldy, rows, n, lg);
}

void keel__cpu_layernorm_rows_f32(const float *x, size_t ldx, float *y, size_t ldy, size_t rows, size_t n,
                                  const float *g, const float *b, double eps)
{
    layernorm_float(x, ldx, y, ldy, rows, n, g, b, eps);
}

void keel__cpu_layernorm_rows_f64(const double *x, size_t ldx, double *y, size_t ldy, size_t rows, size_t n,
                                  const double *g, const double *b, double eps)
{
    layernorm_double(x, ldx, y, ldy, rows, n, g, b, eps);
}
