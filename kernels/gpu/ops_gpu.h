/* SPDX-License-Identifier: MIT */
/* Launchers of the GPU kernels of the built-in operations (ops_kernels.cu),
 * called by the GPU plugins' operations table (backends/gpu/gpu_ops.c). Each
 * enqueues on @p stream and returns the launch error. Arguments have been
 * validated by the core (keel/backend_ops.h). Internal to the GPU plugin. */
#ifndef KEEL_KERNELS_GPU_OPS_H
#define KEEL_KERNELS_GPU_OPS_H

#include <stddef.h>
#include <stdint.h>
#ifdef KEEL_GPU_HIP
#include "kernels/gpu/gpu_hip.h"
#else
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KEEL_GPU_HIDDEN __attribute__((visibility("hidden")))

/* dtype and op arguments carry the keel/ops.h enum values as ints, so that
 * this header needs no Keel header in device code. */
KEEL_GPU_HIDDEN cudaError_t keel__gpu_fill(cudaStream_t s, int dtype, void *p, size_t n, double value);
KEEL_GPU_HIDDEN cudaError_t keel__gpu_cast(cudaStream_t s, int src_dtype, const void *src, int dst_dtype, void *dst,
                                           size_t n);
KEEL_GPU_HIDDEN cudaError_t keel__gpu_transpose(cudaStream_t s, size_t esize, size_t rows, size_t cols,
                                                const void *src, size_t lds, void *dst, size_t ldd);
KEEL_GPU_HIDDEN cudaError_t keel__gpu_unary(cudaStream_t s, int op, int dtype, size_t n, const void *x, void *y);
/* y = op(alpha a, beta b) over rows x cols, b broadcast per keel_broadcast_t (0 none, 1 row, 2 col). */
KEEL_GPU_HIDDEN cudaError_t keel__gpu_binary(cudaStream_t s, int op, int dtype, int broadcast, size_t rows,
                                             size_t cols, double alpha, const void *a, size_t lda, double beta,
                                             const void *b, size_t ldb, void *y, size_t ldy);
/* @p work / @p work_bytes: stream-ordered scratch (partial results); 8 KiB at least. */
KEEL_GPU_HIDDEN cudaError_t keel__gpu_reduce(cudaStream_t s, int op, int dtype, int axis, size_t rows, size_t cols,
                                             const void *x, size_t ld, void *out, void *work, size_t work_bytes);
KEEL_GPU_HIDDEN cudaError_t keel__gpu_argmax_rows(cudaStream_t s, int dtype, size_t rows, size_t cols,
                                                  const void *x, size_t ld, int64_t *out);
KEEL_GPU_HIDDEN cudaError_t keel__gpu_softmax_rows(cudaStream_t s, int dtype, size_t rows, size_t cols,
                                                   const void *x, size_t ldx, void *y, size_t ldy, int log_softmax);
KEEL_GPU_HIDDEN cudaError_t keel__gpu_layernorm_rows(cudaStream_t s, int dtype, size_t rows, size_t cols,
                                                     const void *x, size_t ldx, const void *gamma, const void *beta,
                                                     double eps, void *y, size_t ldy);
/* Y = act(Y + bias) in place: Y m x n, column-major when @p col_major, else
 * row-major; bias (m elements, may be NULL) indexed by the row. act is a
 * keel_activation_t. */
KEEL_GPU_HIDDEN cudaError_t keel__gpu_bias_act(cudaStream_t s, int dtype, int col_major, size_t m, size_t n,
                                               void *y, size_t ldy, const void *bias, int act);
/* C = beta C for a column-major m x n matrix (a batch of them, stride_c
 * apart); beta 0 writes zeros without reading. */
KEEL_GPU_HIDDEN cudaError_t keel__gpu_scale(cudaStream_t s, int dtype, size_t m, size_t n, void *c, size_t ldc,
                                            size_t batch, size_t stride_c, double beta);
/* Holds @p stream for about @p ns nanoseconds (one thread sleeping on the
 * GPU's global timer): work enqueued behind it meanwhile then runs back to
 * back, so that events around it time the GPU and not the host's enqueueing
 * (the GEMM tuner). */
#ifndef KEEL_GPU_HIP
KEEL_GPU_HIDDEN cudaError_t keel__gpu_hold(cudaStream_t s, unsigned ns);
#endif

#ifdef __cplusplus
}
#endif

#endif /* KEEL_KERNELS_GPU_OPS_H */
