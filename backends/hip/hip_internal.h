/* Internal declarations of keel-hip.so that the CUDA plugin's shared sources
 * (backends/cuda/cuda_internal.h) do not already make: BLAS availability,
 * the stream scratch of the built-in operations, run-time compilation.
 *
 * What HIP 5.2 lacks and keel-hip therefore answers NOT_SUPPORTED for:
 *   - GEMM, GEMV and the dense layer while neither rocBLAS nor hipBLASLt is
 *     loadable (Debian 12 packages neither; hip_blas.c names the library);
 *   - thread block clusters (the row kernels take their non-cluster path);
 *   - a kernel's parameter count (no cuKernelGetParamInfo counterpart). */
#ifndef KEEL_HIP_INTERNAL_H
#define KEEL_HIP_INTERNAL_H

#include "cuda_internal.h"

/* hip_blas.c: stream-ordered scratch for the built-in operations (reduce
 * partials), made on first use and freed with the stream. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_scratch(void *stream_ctx, void **work, size_t *work_bytes);
/* hip_blas.c: NOT_SUPPORTED for @p keel_fn, naming the BLAS library that is
 * missing (or that keel-hip does not call yet). */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_blas_unavailable(const char *keel_fn);

/* hip_rtc.c: compile @p source with hiprtc for @p dev's architecture; the
 * code object is malloc'd into *image. */
KEEL_CUDA_HIDDEN keel_status_t keel__hip_rtc_compile(const keel__cuda_device_t *dev, const char *source,
                                                     const char *name, const char *const *options, int num_options,
                                                     void **image, size_t *size);

#endif /* KEEL_HIP_INTERNAL_H */
