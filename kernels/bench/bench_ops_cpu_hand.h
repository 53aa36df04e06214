/* SPDX-License-Identifier: MIT */
/* The hand-written threaded loops keel-bench-ops-cpu holds the CPU
 * backend's transcendental, row and dense-epilogue operations against
 * (bench_ops_cpu_hand.c). Row-major, f32; every call spreads its loop over
 * hand_threads() OpenMP threads. */
#ifndef KEEL_BENCH_OPS_CPU_HAND_H
#define KEEL_BENCH_OPS_CPU_HAND_H

#include <stddef.h>
#include "keel/ops.h"

/* Sets the loops' thread count (OpenMP's), and reads it back; 0 where the
 * file was built without OpenMP (the loops then run on one thread). */
int hand_set_threads(int n);
/* Whether the loops were built with -ffast-math (so that their math calls
 * are glibc's vector forms). */
int hand_fast_math(void);

/* y = op(x) for op exp, log, tanh, sigmoid, silu, gelu_tanh, gelu_erf, in
 * the forms a user writes: 1 / (1 + expf(-x)), x / (1 + expf(-x)),
 * 0.5 x (1 + tanhf(...)), 0.5 x (1 + erff(x / sqrt 2)). */
void hand_unary(keel_unary_op_t op, size_t n, const float *x, float *y);
/* Softmax of each row. */
void hand_softmax(size_t rows, size_t cols, const float *x, float *y);
/* Layer norm of each row: (x - mean) / sqrt(var + eps) * gamma + beta. */
void hand_layernorm(size_t rows, size_t cols, const float *x, const float *gamma, const float *beta, float eps,
                    float *y);
/* y[i][j] = act(y[i][j] + bias[i]) over an m x n row-major matrix: the pass
 * a user runs after sgemm. */
void hand_bias_act(keel_activation_t act, size_t m, size_t n, const float *bias, float *y);

#endif /* KEEL_BENCH_OPS_CPU_HAND_H */
