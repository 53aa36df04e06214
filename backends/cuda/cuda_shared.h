/* SPDX-License-Identifier: MIT */
/* What the CUDA plugin's core (backends/cuda) offers the CUDA implementations
 * of the built-in operations (kernels/gpu, backends/cuda/ops_*): the vendor
 * handles behind Keel's contexts. Internal to keel-cuda.so. */
#ifndef KEEL_CUDA_SHARED_H
#define KEEL_CUDA_SHARED_H

#include "keel/status.h"
#ifdef KEEL_GPU_HIP
#include "vendor_hip.h"
#else
#include <cublas_v2.h>
#include <cublasLt.h>
#include "vendor_cuda.h"
#endif

/* The cudaStream_t behind a Keel stream context of this plugin. */
__attribute__((visibility("hidden"))) gpuStream_t keel__cuda_stream(void *stream_ctx);

/* The CUDA device ordinal of a stream context. */
__attribute__((visibility("hidden"))) int keel__cuda_stream_device(void *stream_ctx);

#ifndef KEEL_GPU_HIP
/* Lazily created vendor handles: a cuBLAS handle and its workspace per
 * stream (one handle shared by several streams is not thread-safe), a
 * cuBLASLt handle per device with a workspace per stream (bytes reported
 * through *workspace_bytes). Thread-safe. On failure they set the error
 * through the host API and return its status. */
__attribute__((visibility("hidden"))) keel_status_t keel__cuda_cublas(void *stream_ctx, cublasHandle_t *handle);
__attribute__((visibility("hidden"))) keel_status_t keel__cuda_cublaslt(void *stream_ctx, cublasLtHandle_t *handle,
                                                                        void **workspace, size_t *workspace_bytes);
#endif

/* Turn a CUDA runtime error into a Keel status with the CUDA error name and
 * message and the calling Keel function ("keel_gemm: cudaErrorInvalidValue: ..."). */
__attribute__((visibility("hidden"))) keel_status_t keel__cuda_error(gpuError_t err, const char *keel_fn,
                                                                     const char *what);

#endif /* KEEL_CUDA_SHARED_H */
