/* SPDX-License-Identifier: MIT */
/* The hand-written loops of keel-bench-ops-cpu: what a user writes instead
 * of Keel's transcendental, row and dense-epilogue operations, built the
 * way such code is built for speed: -O3 -march=native -ffast-math with
 * OpenMP (kernels/Makefile.include). Under -ffast-math glibc's <math.h>
 * declares its vector math functions (libmvec), so each loop here calls
 * expf, tanhf, erff or logf for 8 or 16 elements at a time; the loops also
 * reassociate their sums, which Keel's do not. */
#include "config.h"
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "kernels/bench/bench_ops_cpu_hand.h"

/* The build's CFLAGS (-O2 by default) come after a program's own flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

int hand_set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
    return omp_get_max_threads();
#else
    (void)n;
    return 0;
#endif
}

int hand_fast_math(void)
{
#ifdef __FAST_MATH__
    return 1;
#else
    return 0;
#endif
}

#define MAP(EXPR)                                                \
    do {                                                         \
        _Pragma("omp parallel for simd schedule(static)")        \
        for (size_t i = 0; i < n; i++) {                         \
            float v = x[i];                                      \
            y[i] = (EXPR);                                       \
        }                                                        \
    } while (0)

void hand_unary(keel_unary_op_t op, size_t n, const float *restrict x, float *restrict y)
{
    switch (op) {
    case KEEL_UNARY_EXP: MAP(expf(v)); break;
    case KEEL_UNARY_LOG: MAP(logf(v)); break;
    case KEEL_UNARY_TANH: MAP(tanhf(v)); break;
    case KEEL_UNARY_SIGMOID: MAP(1.0f / (1.0f + expf(-v))); break;
    case KEEL_UNARY_SILU: MAP(v / (1.0f + expf(-v))); break;
    case KEEL_UNARY_GELU_TANH: MAP(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))); break;
    case KEEL_UNARY_GELU_ERF: MAP(0.5f * v * (1.0f + erff(v * 0.70710678f))); break;
    default: break;
    }
}

void hand_softmax(size_t rows, size_t cols, const float *restrict x, float *restrict y)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; i++) {
        const float *xr = x + i * cols;
        float *yr = y + i * cols;
        float m = xr[0], s = 0;
        for (size_t j = 0; j < cols; j++)
            m = xr[j] > m ? xr[j] : m;
        for (size_t j = 0; j < cols; j++)
            s += yr[j] = expf(xr[j] - m);
        float r = 1.0f / s;
        for (size_t j = 0; j < cols; j++)
            yr[j] *= r;
    }
}

void hand_layernorm(size_t rows, size_t cols, const float *restrict x, const float *restrict gamma,
                    const float *restrict beta, float eps, float *restrict y)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < rows; i++) {
        const float *xr = x + i * cols;
        float *yr = y + i * cols;
        float s = 0, v = 0;
        for (size_t j = 0; j < cols; j++)
            s += xr[j];
        float mean = s / (float)cols;
        for (size_t j = 0; j < cols; j++) {
            float d = xr[j] - mean;
            v += d * d;
        }
        float rstd = 1.0f / sqrtf(v / (float)cols + eps);
        for (size_t j = 0; j < cols; j++)
            yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
    }
}

/* The pass after sgemm: threaded only past 2^20 elements. Right after the
 * GEMM, OpenBLAS's threads still spin, and on a machine with as many cores
 * as they are, a team of OpenMP threads waits for the scheduler to move
 * them (256 x 256 took 2.9 ms that way against 12 us on one thread):
 * a user who measured would not thread a small pass. */
#define ROWS(EXPR)                                               \
    do {                                                         \
        _Pragma("omp parallel for schedule(static) if (m * n > ((size_t)1 << 20))") \
        for (size_t i = 0; i < m; i++) {                         \
            float *yr = y + i * n, b = bias[i];                  \
            for (size_t j = 0; j < n; j++) {                     \
                float v = yr[j] + b;                             \
                yr[j] = (EXPR);                                  \
            }                                                    \
        }                                                        \
    } while (0)

void hand_bias_act(keel_activation_t act, size_t m, size_t n, const float *restrict bias, float *restrict y)
{
    switch (act) {
    case KEEL_ACT_RELU: ROWS(v < 0 ? 0.0f : v); break;
    case KEEL_ACT_GELU_TANH: ROWS(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))); break;
    case KEEL_ACT_GELU_ERF: ROWS(0.5f * v * (1.0f + erff(v * 0.70710678f))); break;
    default: ROWS(v); break;
    }
}
