/* SPDX-License-Identifier: MIT */
/* The vendor mapping of the GPU plugins for HIP: the gpu* names of
 * vendor_cuda.h, resolved to the HIP runtime (ROCm 5.2 and later), so that
 * keel-hip.so compiles the shared sources of backends/gpu unchanged. Where
 * HIP lacks a call, the name is not defined here and the HIP plugin's own
 * file for that part says NOT_SUPPORTED instead (see
 * backends/hip/hip_internal.h for the list). Included by gpu_internal.h
 * when KEEL_GPU_HIP is defined.
 *
 * On HIP's NVIDIA platform (__HIP_PLATFORM_NVIDIA__, configure
 * --with-hip-platform=nvidia) the HIP names are HIP's inline wrappers of the
 * CUDA runtime; the few places where that platform differs are marked. */
#ifndef KEEL_VENDOR_HIP_H
#define KEEL_VENDOR_HIP_H

#include <hip/hip_runtime_api.h>

#define KEEL_GPU_RUNTIME "HIP"

#if defined(__HIP_PLATFORM_NVIDIA__) && !defined(__CUDACC__)
/* HIP 6.0's NVIDIA headers declare the capture, graph and host-function
 * calls for CUDA C++ only (under __CUDACC__); to the plugin's C they are
 * given here as those headers define them: the CUDA runtime call, its error
 * converted to HIP's. */
static inline hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode)
{
    return hipCUDAErrorTohipError(cudaStreamBeginCapture(stream, mode));
}
static inline hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t *graph)
{
    return hipCUDAErrorTohipError(cudaStreamEndCapture(stream, graph));
}
static inline hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *status)
{
    return hipCUDAErrorTohipError(cudaStreamIsCapturing(stream, status));
}
static inline hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *exec, hipGraph_t graph,
                                                      unsigned long long flags)
{
    return hipCUDAErrorTohipError(cudaGraphInstantiateWithFlags(exec, graph, flags));
}
static inline hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream)
{
    return hipCUDAErrorTohipError(cudaGraphLaunch(exec, stream));
}
static inline hipError_t hipGraphDestroy(hipGraph_t graph)
{
    return hipCUDAErrorTohipError(cudaGraphDestroy(graph));
}
static inline hipError_t hipGraphExecDestroy(hipGraphExec_t exec)
{
    return hipCUDAErrorTohipError(cudaGraphExecDestroy(exec));
}
static inline hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void *user_data)
{
    return hipCUDAErrorTohipError(cudaLaunchHostFunc(stream, fn, user_data));
}
#endif

#define KEEL_GPU_BACKEND_NAME "hip"
#ifdef __HIP_PLATFORM_NVIDIA__
#define KEEL_GPU_VENDOR "NVIDIA"
#define KEEL_GPU_ARCH_PREFIX "sm_"
#else
#define KEEL_GPU_VENDOR "AMD"
#define KEEL_GPU_DRIVER_LIBRARY "libamdhip64.so.5"
#define KEEL_GPU_ARCH_PREFIX "gfx"
#endif

typedef hipError_t gpuError_t;
typedef hipStream_t gpuStream_t;
typedef hipEvent_t gpuEvent_t;
typedef hipGraph_t gpuGraph_t;
typedef hipGraphExec_t gpuGraphExec_t;
typedef hipMemPool_t gpuMemPool_t;
typedef hipHostFn_t gpuHostFn_t;

/* Module-level names: HIP has one error type, one device type and modules
 * in place of CUDA's libraries and context-independent kernels. */
typedef hipError_t gpuDrvError_t;
typedef hipDevice_t gpuDevice_t;
typedef hipCtx_t gpuContext_t;
typedef hipModule_t gpuLibrary_t;
typedef hipFunction_t gpuFunction_t;
typedef hipFunction_t gpuKernel_t;
#define gpuDrvSuccess hipSuccess
#define gpuDrvErrorInvalidValue hipErrorInvalidValue
/* The stream waits until *ptr >= value (ptr: mapped pinned memory). On
 * NVIDIA, straight to the driver: HIP's wrapper prints a warning for a value
 * past INT32_MAX, and a library must not print. */
#ifdef __HIP_PLATFORM_NVIDIA__
#define gpuStreamWaitValueGeq(stream, ptr, value) \
    hipCUResultTohipError(cuStreamWaitValue32((stream), (CUdeviceptr)(ptr), (cuuint32_t)(value), CU_STREAM_WAIT_VALUE_GEQ))
#define gpuStreamWaitValueName "cuStreamWaitValue32"
#else
#define gpuStreamWaitValueGeq(stream, ptr, value) \
    hipStreamWaitValue32((stream), (void *)(ptr), (value), hipStreamWaitValueGte, 0xffffffffu)
#define gpuStreamWaitValueName "hipStreamWaitValue32"
#endif
#define gpuDrvGetErrorName(res, name) (void)(*(name) = hipGetErrorName(res))

#define gpuSuccess hipSuccess
#define gpuErrorNotReady hipErrorNotReady
#define gpuErrorMemoryAllocation hipErrorOutOfMemory
#define gpuErrorNoDevice hipErrorNoDevice
#define gpuErrorInsufficientDriver hipErrorInsufficientDriver
#define gpuErrorInvalidValue hipErrorInvalidValue

#define gpuGetErrorName hipGetErrorName
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuDriverGetVersion hipDriverGetVersion
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDevice hipGetDevice
#define gpuSetDevice hipSetDevice
#define gpuDeviceGetAttribute hipDeviceGetAttribute
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpuDeviceGetStreamPriorityRange hipDeviceGetStreamPriorityRange
#define gpuDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define gpuMemPoolSetAttribute hipMemPoolSetAttribute
#define gpuMemPoolTrimTo hipMemPoolTrimTo
#define gpuMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define gpuMemGetInfo hipMemGetInfo

#define gpuMalloc hipMalloc
#define gpuFree hipFree
/* hipHostAlloc is deprecated; hipHostMalloc takes the same flags. */
#define gpuHostAlloc hipHostMalloc
#define gpuHostAllocPortable hipHostMallocPortable
#define gpuHostAllocMapped hipHostMallocMapped
#define gpuFreeHost hipHostFree
#define gpuMallocManaged hipMallocManaged
#define gpuMemAttachGlobal hipMemAttachGlobal
#define gpuMallocAsync hipMallocAsync
#define gpuFreeAsync hipFreeAsync
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemcpyPeerAsync hipMemcpyPeerAsync
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuMemset2DAsync hipMemset2DAsync
#define gpuHostRegister hipHostRegister
#define gpuHostRegisterPortable hipHostRegisterPortable
#define gpuHostUnregister hipHostUnregister
/* Managed-memory hints toward a device ordinal, or the host for -1. */
static inline hipError_t keel__gpu_prefetch(const void *p, size_t n, int ordinal, hipStream_t s)
{
    return hipMemPrefetchAsync(p, n, ordinal < 0 ? hipCpuDeviceId : ordinal, s);
}
/* advice is a keel_memory_advice_t, mapped by name: HIP's NVIDIA headers
 * number hipMemoryAdvise from 0, AMD's from 1. */
static inline hipError_t keel__gpu_advise(const void *p, size_t n, int advice, int ordinal)
{
    /* indexed by keel_memory_advice_t (1 to 6; 0 is not one) */
    static const hipMemoryAdvise hip_advice[] = {
        hipMemAdviseSetReadMostly,          hipMemAdviseSetReadMostly,    hipMemAdviseUnsetReadMostly,
        hipMemAdviseSetPreferredLocation,   hipMemAdviseUnsetPreferredLocation, hipMemAdviseSetAccessedBy,
        hipMemAdviseUnsetAccessedBy};
    if (advice < 1 || advice > 6)
        return hipErrorInvalidValue;
    return hipMemAdvise(p, n, hip_advice[advice], ordinal < 0 ? hipCpuDeviceId : ordinal);
}
#define gpuPrefetchName "hipMemPrefetchAsync"
#define gpuAdviseName "hipMemAdvise"

#define gpuStreamCreateWithPriority hipStreamCreateWithPriority
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamQuery hipStreamQuery
#define gpuStreamWaitEvent hipStreamWaitEvent
/* ROCm 5.2's headers declare hipLaunchHostFunc but libamdhip64 does not
 * export it: hip_hostfn.c looks it up at run time, and without it a host
 * function that needs it (graph capture, KEEL_GPU_HOST_FUNCS=hip) is
 * NOT_SUPPORTED, named by gpuLaunchHostFuncName. (On NVIDIA it is
 * cudaLaunchHostFunc, always there.) */
#define gpuLaunchHostFunc keel__hip_launch_host_func
#define gpuLaunchHostFuncName keel__hip_launch_host_func_name()
__attribute__((visibility("hidden"))) hipError_t keel__hip_launch_host_func(hipStream_t stream, hipHostFn_t fn,
                                                                            void *user_data);
__attribute__((visibility("hidden"))) const char *keel__hip_launch_host_func_name(void);
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamIsCapturing hipStreamIsCapturing
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
/* The shared sources say "enum gpuStreamCaptureStatus": HIP's NVIDIA
 * headers make hipStreamCaptureStatus a typedef of CUDA's enum. */
#ifdef __HIP_PLATFORM_NVIDIA__
#define gpuStreamCaptureStatus cudaStreamCaptureStatus
#else
#define gpuStreamCaptureStatus hipStreamCaptureStatus
#endif
#define gpuStreamCaptureStatusNone hipStreamCaptureStatusNone

#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDefault hipEventDefault
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventBlockingSync hipEventBlockingSync
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventQuery hipEventQuery
#define gpuEventElapsedTime hipEventElapsedTime

/* hipGraphInstantiateWithFlags and the auto-free flag are in HIP 5.2's API;
 * whether a replay frees what the capture allocated is untested on AMD. */
#define gpuGraphInstantiate(exec, graph) \
    hipGraphInstantiateWithFlags((exec), (graph), hipGraphInstantiateFlagAutoFreeOnLaunch)
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy

/* Device attributes, by what Keel asks of them. HIP reports a GCN
 * architecture's major/minor (gfx90a: 9.0) as the compute capability, and
 * the opt-in shared memory limit only on NVIDIA (hip_device.c falls back to
 * the plain per-block limit on AMD; HIP 6.0's NVIDIA headers do not map the
 * attribute, so on NVIDIA hip_device.c and hip_module.c read it from the
 * device's properties and the kernel's attributes). */
#define gpuAttrComputeUnits hipDeviceAttributeMultiprocessorCount
#define gpuAttrMaxThreadsPerBlock hipDeviceAttributeMaxThreadsPerBlock
#define gpuAttrMaxBlockDimX hipDeviceAttributeMaxBlockDimX
#define gpuAttrMaxBlockDimY hipDeviceAttributeMaxBlockDimY
#define gpuAttrMaxBlockDimZ hipDeviceAttributeMaxBlockDimZ
#define gpuAttrMaxGridDimX hipDeviceAttributeMaxGridDimX
#define gpuAttrMaxGridDimY hipDeviceAttributeMaxGridDimY
#define gpuAttrMaxGridDimZ hipDeviceAttributeMaxGridDimZ
#define gpuAttrWarpSize hipDeviceAttributeWarpSize
#define gpuAttrSharedPerBlockOptin hipDeviceAttributeSharedMemPerBlockOptin
#define gpuAttrSharedPerBlock hipDeviceAttributeMaxSharedMemoryPerBlock
#define gpuAttrClockRate hipDeviceAttributeClockRate
#define gpuAttrCcMajor hipDeviceAttributeComputeCapabilityMajor
#define gpuAttrCcMinor hipDeviceAttributeComputeCapabilityMinor
#define gpuAttrPciBusId hipDeviceAttributePciBusId
#define gpuAttrUnifiedAddressing hipDeviceAttributeUnifiedAddressing
#define gpuAttrManagedMemory hipDeviceAttributeManagedMemory
#define gpuAttrConcurrentManagedAccess hipDeviceAttributeConcurrentManagedAccess
#define gpuAttrMemoryPoolsSupported hipDeviceAttributeMemoryPoolsSupported
#define gpuAttrAsyncEngineCount hipDeviceAttributeAsyncEngineCount

#endif /* KEEL_VENDOR_HIP_H */
