/* SPDX-License-Identifier: MIT */
/* Internal declarations of keel-hip.so that the CUDA plugin's shared sources
 * (backends/cuda/cuda_internal.h) do not already make: BLAS availability,
 * the stream scratch of the built-in operations, rocBLAS, the BLAS-backed
 * operations, run-time compilation.
 *
 * What HIP 5.2 lacks and keel-hip therefore answers NOT_SUPPORTED for:
 *   - GEMM, GEMV and the dense layer while librocblas is not loadable
 *     (Debian 12 does not package it; hip_blas.c says why; hipBLASLt is not
 *     used): the blas entry says so, and the core runs Keel's portable
 *     kernels for them instead;
 *   - thread block clusters (the row kernels take their non-cluster path);
 *   - a kernel's parameter count (no cuKernelGetParamInfo counterpart). */
#ifndef KEEL_HIP_INTERNAL_H
#define KEEL_HIP_INTERNAL_H

#include "cuda_internal.h"
#include "hip_rocblas.h"
#include "keel/backend_ops.h"

/* hip_blas.c: stream-ordered scratch for the built-in operations (reduce
 * partials), made on first use and freed with the stream. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_scratch(void *stream_ctx, void **work, size_t *work_bytes);
/* hip_blas.c: NOT_SUPPORTED for @p keel_fn, naming the BLAS library that is
 * missing and why it is not usable. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_blas_unavailable(const char *keel_fn);
/* hip_blas.c: the ops table's blas entry (keel/backend_ops.h): opens
 * librocblas if that was not tried yet; 1 and its file name, or 0 and why not. */
KEEL_CUDA_HIDDEN int keel__hip_blas_info(void *device_ctx, char *text, size_t size);
/* hip_blas.c: librocblas and the stream's rocBLAS handle (bound to the
 * stream, host scalars), both made on first use; NOT_SUPPORTED through
 * keel__hip_blas_unavailable when librocblas cannot be loaded. On success
 * the stream's device is current and the stream is marked touched: the
 * caller enqueues through the handle. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_rocblas(void *stream_ctx, const char *keel_fn,
                                                 const keel__rocblas_api_t **api, keel__rocblas_handle_t *handle);
/* hip_blas.c: a failed rocBLAS @p call as a Keel status whose message names
 * the call and the rocblas_status ("keel_gemm: rocblas_gemm_ex:
 * rocblas_status_invalid_size (4)"). */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_rocblas_error(int status, const char *keel_fn, const char *call);

/* ops_hip.c: the stream of an operation, its device made current and the
 * stream marked touched (new work: keel__cuda_stream_touch). */
KEEL_CUDA_HIDDEN gpuStream_t keel__hip_stream(void *stream_ctx);
/* ops_hip.c: a failed launch or copy of @p keel_fn as a Keel status. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_launched(gpuError_t err, const char *keel_fn);
/* ops_blas_hip.c: the BLAS-backed entries of the operations table. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_gemm(void *stream_ctx, const keel_gemm_params_t *p);
KEEL_CUDA_HIDDEN keel_status_t keel__hip_gemv(void *stream_ctx, const keel_gemv_args_t *g);
KEEL_CUDA_HIDDEN keel_status_t keel__hip_dense(void *stream_ctx, const keel_dense_params_t *p);

/* hip_rtc.c: compile @p source with hiprtc for @p dev's architecture; the
 * code object is malloc'd into *image. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_rtc_compile(const keel__cuda_device_t *dev, const char *source,
                                                     const char *name, const char *const *options, int num_options,
                                                     void **image, size_t *size);

#endif /* KEEL_HIP_INTERNAL_H */
