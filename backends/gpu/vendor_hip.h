/* SPDX-License-Identifier: MIT */
/* The vendor mapping of the GPU plugins for HIP: the gpu* names of
 * vendor_cuda.h, resolved to the HIP runtime (ROCm 5.2 and later), so that
 * keel-hip.so compiles the shared sources of backends/gpu unchanged. Where
 * HIP lacks a call, the name is not defined here and the HIP plugin's own
 * file for that part says NOT_SUPPORTED instead (see
 * backends/hip/hip_internal.h for the list). Included by gpu_internal.h
 * when KEEL_GPU_HIP is defined. */
#ifndef KEEL_VENDOR_HIP_H
#define KEEL_VENDOR_HIP_H

#include <hip/hip_runtime_api.h>

#define KEEL_GPU_VENDOR "AMD"
#define KEEL_GPU_RUNTIME "HIP"
#define KEEL_GPU_BACKEND_NAME "hip"
#define KEEL_GPU_DRIVER_LIBRARY "libamdhip64.so.5"
#define KEEL_GPU_ARCH_PREFIX "gfx"

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
/* The stream waits until *ptr >= value (ptr: mapped pinned memory). */
#define gpuStreamWaitValueGeq(stream, ptr, value) \
    hipStreamWaitValue32((stream), (void *)(ptr), (value), hipStreamWaitValueGte, 0xffffffffu)
#define gpuStreamWaitValueName "hipStreamWaitValue32"
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
static inline hipError_t keel__gpu_advise(const void *p, size_t n, int advice, int ordinal)
{
    return hipMemAdvise(p, n, (hipMemoryAdvise)advice, ordinal < 0 ? hipCpuDeviceId : ordinal);
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
 * function that needs it (graph capture, KEEL_CUDA_HOST_FUNCS=cuda) is
 * NOT_SUPPORTED, named by gpuLaunchHostFuncName. */
#define gpuLaunchHostFunc keel__hip_launch_host_func
#define gpuLaunchHostFuncName keel__hip_launch_host_func_name()
__attribute__((visibility("hidden"))) hipError_t keel__hip_launch_host_func(hipStream_t stream, hipHostFn_t fn,
                                                                            void *user_data);
__attribute__((visibility("hidden"))) const char *keel__hip_launch_host_func_name(void);
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuStreamIsCapturing hipStreamIsCapturing
#define gpuStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define gpuStreamCaptureStatus hipStreamCaptureStatus
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
 * the plain per-block limit). */
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
