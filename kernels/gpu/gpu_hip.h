/* SPDX-License-Identifier: MIT */
/* The HIP side of the GPU kernels' sources (kernels/gpu): the CUDA runtime
 * and device names those sources use, mapped to HIP, so that hipcc builds the
 * same .cu files for AMD GPUs. Included instead of the CUDA headers when
 * KEEL_GPU_HIP is defined (the HIP plugin's build); C and C++ alike see the
 * runtime names, device code also the number types and warp functions.
 *
 * Warps: the kernels are written for 32-lane warps (lane = threadIdx.x & 31,
 * butterflies from offset 16). AMD's CDNA GPUs run 64-lane wavefronts, RDNA
 * 32. Every shuffle here passes width 32, so on a 64-lane wavefront each
 * half is a warp of its own, with exactly CUDA's semantics: no butterfly or
 * broadcast crosses into the other half. The kernels use no ballot, vote,
 * __syncwarp or warp-synchronous shared memory, which would not map.
 *
 * HIP's NVIDIA platform (__HIP_PLATFORM_NVIDIA__, nvcc) is CUDA underneath:
 * the runtime names still go through HIP, but the device code keeps CUDA's
 * own number types, conversions and *_sync shuffles, and the opt-in shared
 * memory limit, which HIP 6.0's NVIDIA headers do not map, is asked of the
 * CUDA runtime. */
#ifndef KEEL_KERNELS_GPU_HIP_H
#define KEEL_KERNELS_GPU_HIP_H

#include <hip/hip_runtime_api.h>

#define cudaError_t hipError_t
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaGetLastError hipGetLastError
#define cudaGetDevice hipGetDevice
#ifdef __HIP_PLATFORM_NVIDIA__
static inline hipError_t keel__hip_device_attribute(int *value, enum cudaDeviceAttr attr, int device)
{
    return hipCUDAErrorTohipError(cudaDeviceGetAttribute(value, attr, device));
}
#define cudaDeviceGetAttribute keel__hip_device_attribute
#else
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrMaxSharedMemoryPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#endif
#define cudaFuncSetAttribute(kernel, attr, value) hipFuncSetAttribute((const void *)(kernel), (attr), (value))
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize

#if defined(__HIPCC__) && defined(__HIP_PLATFORM_NVIDIA__)
#include <hip/hip_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>

/* HIP 5.2 has no hip_bf16.h: its bfloat16 is the hip_bfloat16 struct, whose
 * float constructor rounds to nearest even (NaN kept). */
typedef hip_bfloat16 __nv_bfloat16;

__device__ inline float __bfloat162float(hip_bfloat16 v) { return (float)v; }
__device__ inline hip_bfloat16 __float2bfloat16_rn(float v) { return hip_bfloat16(v); }

/* A double rounded once to a 16-bit float, as CUDA's __double2half and
 * __double2bfloat16 do (HIP 5.2 has neither). double -> float -> 16 bits
 * would round twice; rounding to float toward zero with the last bit set
 * when inexact (round to odd) keeps the second rounding exact, since float
 * has more than two bits beyond either 16-bit format's mantissa. */
__host__ __device__ inline float keel__f32_round_odd(double v)
{
    float f = (float)v;
    if (f != f || (double)f == v || __builtin_isinf(f))
        return f;
    unsigned u;
    __builtin_memcpy(&u, &f, sizeof u);
    if (__builtin_fabs((double)f) > __builtin_fabs(v))   /* rounded away from zero: step back */
        u--;
    u |= 1u;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}
__host__ __device__ inline __half __double2half(double v) { return __float2half_rn(keel__f32_round_odd(v)); }
__host__ __device__ inline hip_bfloat16 __double2bfloat16(double v) { return hip_bfloat16(keel__f32_round_odd(v)); }

/* CUDA's *_sync shuffles with the full mask, over 32-lane warps (see above). */
#define __shfl_xor_sync(mask, var, lane_mask) __shfl_xor((var), (lane_mask), 32)
#define __shfl_sync(mask, var, src_lane, width) __shfl((var), (src_lane), (width))
#endif /* __HIPCC__ */

#endif /* KEEL_KERNELS_GPU_HIP_H */
