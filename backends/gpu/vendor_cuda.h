/* SPDX-License-Identifier: MIT */
/* The vendor mapping of the GPU plugins for CUDA: the sources of
 * backends/gpu call gpu* names, which resolve here to the CUDA runtime and,
 * through keel__cu, the driver API. The HIP plugin compiles the same sources
 * with vendor_hip.h, which maps them to hip*. Only names the sources use are
 * listed; where the vendors differ in more than the name (probe, devices,
 * errors, modules, run-time compilation, BLAS) each plugin keeps a file of
 * its own (backends/cuda, backends/hip). Included by gpu_internal.h. */
#ifndef KEEL_VENDOR_CUDA_H
#define KEEL_VENDOR_CUDA_H

#include <cuda.h>
#include <cuda_runtime.h>
#include "backends/cuda/cuda_driver.h" /* keel__cu, for the driver-API names below */

#define KEEL_GPU_VENDOR "NVIDIA"
#define KEEL_GPU_RUNTIME "CUDA"
#define KEEL_GPU_BACKEND_NAME "cuda"
#define KEEL_GPU_DRIVER_LIBRARY "libcuda.so.1"
#define KEEL_GPU_ARCH_PREFIX "sm_"

typedef cudaError_t gpuError_t;
typedef cudaStream_t gpuStream_t;
typedef cudaEvent_t gpuEvent_t;
typedef cudaGraph_t gpuGraph_t;
typedef cudaGraphExec_t gpuGraphExec_t;
typedef cudaMemPool_t gpuMemPool_t;
typedef cudaHostFn_t gpuHostFn_t;

/* Driver-API names (modules, kernels, stream memory operations). */
typedef CUresult gpuDrvError_t;
typedef CUdevice gpuDevice_t;
typedef CUcontext gpuContext_t;
typedef CUlibrary gpuLibrary_t;
typedef CUfunction gpuFunction_t;
typedef CUkernel gpuKernel_t;
#define gpuDrvSuccess CUDA_SUCCESS
#define gpuDrvErrorInvalidValue CUDA_ERROR_INVALID_VALUE
/* The stream waits until *ptr >= value (ptr: mapped pinned memory). */
#define gpuStreamWaitValueGeq(stream, ptr, value) \
    keel__cu.StreamWaitValue32((CUstream)(stream), (CUdeviceptr)(uintptr_t)(ptr), (value), CU_STREAM_WAIT_VALUE_GEQ)
#define gpuStreamWaitValueName "cuStreamWaitValue32"
#define gpuDrvGetErrorName(res, name) (void)keel__cu.GetErrorName((res), (name))

#define gpuSuccess cudaSuccess
#define gpuErrorNotReady cudaErrorNotReady
#define gpuErrorMemoryAllocation cudaErrorMemoryAllocation
#define gpuErrorNoDevice cudaErrorNoDevice
#define gpuErrorInsufficientDriver cudaErrorInsufficientDriver
#define gpuErrorInvalidValue cudaErrorInvalidValue

#define gpuGetErrorName cudaGetErrorName
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuDriverGetVersion cudaDriverGetVersion
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDevice cudaGetDevice
#define gpuSetDevice cudaSetDevice
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpuDeviceGetStreamPriorityRange cudaDeviceGetStreamPriorityRange
#define gpuDeviceGetDefaultMemPool cudaDeviceGetDefaultMemPool
#define gpuMemPoolSetAttribute cudaMemPoolSetAttribute
#define gpuMemPoolTrimTo cudaMemPoolTrimTo
#define gpuMemPoolAttrReleaseThreshold cudaMemPoolAttrReleaseThreshold
#define gpuMemGetInfo cudaMemGetInfo

#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuHostAlloc cudaHostAlloc
#define gpuHostAllocPortable cudaHostAllocPortable
#define gpuHostAllocMapped cudaHostAllocMapped
#define gpuFreeHost cudaFreeHost
#define gpuMallocManaged cudaMallocManaged
#define gpuMemAttachGlobal cudaMemAttachGlobal
#define gpuMallocAsync cudaMallocAsync
#define gpuFreeAsync cudaFreeAsync
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemcpyPeerAsync cudaMemcpyPeerAsync
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuMemset2DAsync cudaMemset2DAsync
#define gpuHostRegister cudaHostRegister
#define gpuHostRegisterPortable cudaHostRegisterPortable
#define gpuHostUnregister cudaHostUnregister
/* Managed-memory hints toward a device ordinal, or the host for -1. CUDA 13
 * names the place with a cudaMemLocation; earlier releases with an ordinal. */
static inline cudaError_t keel__gpu_prefetch(const void *p, size_t n, int ordinal, cudaStream_t s)
{
#if CUDART_VERSION >= 13000
    struct cudaMemLocation loc = {ordinal < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice,
                                  ordinal < 0 ? 0 : ordinal};
    return cudaMemPrefetchAsync(p, n, loc, 0, s);
#else
    return cudaMemPrefetchAsync(p, n, ordinal < 0 ? cudaCpuDeviceId : ordinal, s);
#endif
}
static inline cudaError_t keel__gpu_advise(const void *p, size_t n, int advice, int ordinal)
{
#if CUDART_VERSION >= 13000
    struct cudaMemLocation loc = {ordinal < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice,
                                  ordinal < 0 ? 0 : ordinal};
    return cudaMemAdvise(p, n, (enum cudaMemoryAdvise)advice, loc);
#else
    return cudaMemAdvise(p, n, (enum cudaMemoryAdvise)advice, ordinal < 0 ? cudaCpuDeviceId : ordinal);
#endif
}
#define gpuPrefetchName "cudaMemPrefetchAsync"
#define gpuAdviseName "cudaMemAdvise"

#define gpuStreamCreateWithPriority cudaStreamCreateWithPriority
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamQuery cudaStreamQuery
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuLaunchHostFunc cudaLaunchHostFunc
#define gpuLaunchHostFuncName "cudaLaunchHostFunc"
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuStreamIsCapturing cudaStreamIsCapturing
#define gpuStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define gpuStreamCaptureStatus cudaStreamCaptureStatus
#define gpuStreamCaptureStatusNone cudaStreamCaptureStatusNone

#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDefault cudaEventDefault
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventBlockingSync cudaEventBlockingSync
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventQuery cudaEventQuery
#define gpuEventElapsedTime cudaEventElapsedTime

#define gpuGraphInstantiate(exec, graph) \
    cudaGraphInstantiate((exec), (graph), cudaGraphInstantiateFlagAutoFreeOnLaunch)
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy

/* Device attributes, by what Keel asks of them. */
#define gpuAttrComputeUnits cudaDevAttrMultiProcessorCount
#define gpuAttrMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define gpuAttrMaxBlockDimX cudaDevAttrMaxBlockDimX
#define gpuAttrMaxBlockDimY cudaDevAttrMaxBlockDimY
#define gpuAttrMaxBlockDimZ cudaDevAttrMaxBlockDimZ
#define gpuAttrMaxGridDimX cudaDevAttrMaxGridDimX
#define gpuAttrMaxGridDimY cudaDevAttrMaxGridDimY
#define gpuAttrMaxGridDimZ cudaDevAttrMaxGridDimZ
#define gpuAttrWarpSize cudaDevAttrWarpSize
#define gpuAttrSharedPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define gpuAttrClockRate cudaDevAttrClockRate
#define gpuAttrCcMajor cudaDevAttrComputeCapabilityMajor
#define gpuAttrCcMinor cudaDevAttrComputeCapabilityMinor
#define gpuAttrPciBusId cudaDevAttrPciBusId
#define gpuAttrUnifiedAddressing cudaDevAttrUnifiedAddressing
#define gpuAttrManagedMemory cudaDevAttrManagedMemory
#define gpuAttrConcurrentManagedAccess cudaDevAttrConcurrentManagedAccess
#define gpuAttrMemoryPoolsSupported cudaDevAttrMemoryPoolsSupported
#define gpuAttrAsyncEngineCount cudaDevAttrAsyncEngineCount

#endif /* KEEL_VENDOR_CUDA_H */
