/* SPDX-License-Identifier: MIT */
/* Internal declarations of keel-hip.so beyond the GPU plugins' shared ones
 * (backends/gpu/gpu_internal.h, and backends/gpu/gpu_ops.h for the hooks of
 * the operations table): BLAS availability, rocBLAS, hipBLASLt, run-time
 * compilation.
 *
 * What HIP 5.2 lacks and keel-hip therefore answers NOT_SUPPORTED for:
 *   - GEMM, GEMV and the dense layer while librocblas is not loadable
 *     (Debian 12 does not package it; hip_blas.c says why): the blas entry
 *     says so, and the core runs Keel's portable kernels for them instead;
 *     where libhipblaslt is (ROCm 6), the dense calls it takes run on its
 *     fused epilogues, rocBLAS or not;
 *   - thread block clusters (the row kernels take their non-cluster path);
 *   - a kernel's parameter count (no cuKernelGetParamInfo counterpart).
 * On HIP's NVIDIA platform rocBLAS (AMD GPUs only) is not looked for: the
 * core runs the portable kernels for GEMM, GEMV and the dense layer there
 * too. Clusters are absent there as well. */
#ifndef KEEL_HIP_INTERNAL_H
#define KEEL_HIP_INTERNAL_H

#include "backends/gpu/gpu_internal.h"
#include "hip_rocblas.h"
#include "hip_hipblaslt_plan.h"

/* hip_blas.c: NOT_SUPPORTED for @p keel_fn, naming the BLAS library that is
 * missing and why it is not usable. */
KEEL_GPU_HIDDEN keel_status_t keel__hip_blas_unavailable(const char *keel_fn);
/* hip_blas.c: librocblas and the stream's rocBLAS handle (bound to the
 * stream, host scalars), both made on first use; NOT_SUPPORTED through
 * keel__hip_blas_unavailable when librocblas cannot be loaded. On success
 * the stream's device is current and the stream is marked touched: the
 * caller enqueues through the handle. */
KEEL_GPU_HIDDEN keel_status_t keel__hip_rocblas(void *stream_ctx, const char *keel_fn,
                                                const keel__rocblas_api_t **api, keel__rocblas_handle_t *handle);
/* hip_blas.c: a failed rocBLAS @p call as a Keel status whose message names
 * the call and the rocblas_status ("keel_gemm: rocblas_gemm_ex:
 * rocblas_status_invalid_size (4)"). */
KEEL_GPU_HIDDEN keel_status_t keel__hip_rocblas_error(int status, const char *keel_fn, const char *call);

/* hip_blas.c: libhipblaslt, and the stream's hipBLASLt handle and
 * workspace, made on first use. NOT_SUPPORTED, with no error set, when
 * hipBLASLt is not usable (not installed, a release keel-hip does not
 * declare, no handle or workspace for this stream): the dense layer then
 * takes the rocBLAS path. On success the stream's device is current and the
 * stream is marked touched: the caller enqueues through the handle. */
KEEL_GPU_HIDDEN keel_status_t keel__hip_hipblaslt(void *stream_ctx, const keel__hipblaslt_api_t **api,
                                                  keel__hipblaslt_handle_t *handle, void **workspace,
                                                  size_t *workspace_bytes);

/* hip_rtc.c: compile @p source with hiprtc for @p dev's architecture; the
 * code object is malloc'd into *image. */
KEEL_GPU_HIDDEN keel_status_t keel__hip_rtc_compile(const keel__gpu_device_t *dev, const char *source,
                                                    const char *name, const char *const *options, int num_options,
                                                    void **image, size_t *size);

#ifdef __HIP_PLATFORM_NVIDIA__
/* hip_nv_driver.c: resolves the driver API entry points that HIP's NVIDIA
 * headers call (cuModuleLoadData, cuLaunchKernel, ...) through the CUDA
 * runtime; probe calls it once the runtime has found a device. */
KEEL_GPU_HIDDEN keel_status_t keel__hip_nv_driver_load(void);
#endif

#endif /* KEEL_HIP_INTERNAL_H */
