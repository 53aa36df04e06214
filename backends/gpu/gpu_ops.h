/* SPDX-License-Identifier: MIT */
/* The operations table of the GPU plugins (keel/backend_ops.h): gpu_ops.c
 * runs the memory-bound operations through the kernels of kernels/gpu and
 * the copy engines, and leaves to each vendor's files what needs its BLAS
 * library (backends/cuda/cuda_ops_blas.c: cuBLASLt and cuBLAS;
 * backends/hip/hip_ops_blas.c: rocBLAS and hipBLASLt). The hooks below are
 * those files' part. Internal to the GPU plugins. */
#ifndef KEEL_GPU_OPS_H
#define KEEL_GPU_OPS_H

#include "backends/gpu/gpu_internal.h"
#include "keel/backend_ops.h"
#include "kernels/dtype_size.h"
#include "kernels/gpu/ops_gpu.h"

/* The stream of an operation, its device made current. The operation is
 * new work on the stream: a host function enqueued after it must wait for
 * it, not share the wait of one enqueued before (keel__gpu_stream_touch). */
static inline gpuStream_t keel__gpu_op_stream(void *stream_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    (void)keel__gpu_use_device(s->dev);
    keel__gpu_stream_touch(s);
    return s->stream;
}

/* The stream of an operation that only launches built-in kernels. CUDA: a
 * kernel launched through its CUkernel handle runs in the context of the
 * stream it is given (cuLaunchKernel; kernels/gpu/gpu_launch.cuh), so the
 * stream's device need not be made current, which spares a cudaGetDevice
 * per call; where a kernel has no handle, the launch path makes the device
 * current itself. HIP, and CUDA runtimes without cudaStreamGetDevice: as
 * keel__gpu_op_stream. */
static inline gpuStream_t keel__gpu_launch_stream(void *stream_ctx)
{
#if defined(KEEL_GPU_HIP) || CUDART_VERSION < 12080
    return keel__gpu_op_stream(stream_ctx);
#else
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_stream_touch(s);
    return s->stream;
#endif
}

/* A failed launch or copy of @p keel_fn as a Keel status. */
static inline keel_status_t keel__gpu_launched(gpuError_t err, const char *keel_fn)
{
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, keel_fn, "kernel launch");
    return KEEL_OK;
}

/* ---- the vendor's hooks ---- */
/* Stream-ordered device scratch for the reductions' partial results, at
 * least 8 KiB (kernels/gpu/ops_gpu.h), made on first use and kept with the
 * stream. CUDA: the stream's BLAS workspace; HIP: a buffer of its own. */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_ops_scratch(void *stream_ctx, void **work, size_t *work_bytes);
/* GEMM with k > 0 (gpu_ops.c scales C for k = 0). */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_blas_gemm(void *stream_ctx, const keel_gemm_params_t *p);
/* GEMV with a non-empty x (gpu_ops.c scales y for an empty one). */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_blas_gemv(void *stream_ctx, const keel_gemv_args_t *g);
/* The dense layer, k = 0 included. */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_blas_dense(void *stream_ctx, const keel_dense_params_t *p);
/* The ops table's blas entry (keel/backend_ops.h): 1 and the vendor BLAS
 * library's name and version in text, or 0 and why it is not usable (the
 * core then runs Keel's portable kernels for GEMM, GEMV and dense). */
KEEL_GPU_HIDDEN int keel__gpu_blas_info(void *device_ctx, char *text, size_t size);

#endif /* KEEL_GPU_OPS_H */
