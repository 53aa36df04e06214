/* SPDX-License-Identifier: MIT */
/* CUDA errors as Keel statuses. The runtime's cudaError_t and the driver's
 * CUresult share their numeric values for every code mapped here, so one
 * table serves both. */
#include "cuda_internal.h"

keel_status_t keel__gpu_status_of(int err)
{
    switch (err) {
    case cudaSuccess:
        return KEEL_OK;
    case cudaErrorMemoryAllocation:
        return KEEL_ERROR_OUT_OF_MEMORY;
    case cudaErrorNotReady:
        return KEEL_ERROR_NOT_READY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidMemcpyDirection:
        return KEEL_ERROR_INVALID_ARGUMENT;
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidHostPointer:
        return KEEL_ERROR_INVALID_POINTER;
    case cudaErrorInvalidResourceHandle:
    case cudaErrorContextIsDestroyed:
        return KEEL_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidDevice:
    case cudaErrorNoDevice:
        return KEEL_ERROR_NO_DEVICE;
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
        return KEEL_ERROR_BACKEND_UNAVAILABLE;
    case cudaErrorNotSupported:
    case cudaErrorNotPermitted:
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorPeerAccessUnsupported:
        return KEEL_ERROR_NOT_SUPPORTED;
    case cudaErrorSymbolNotFound:
    case cudaErrorFileNotFound:
    case cudaErrorInvalidSymbol:
    case cudaErrorInvalidDeviceFunction:
        return KEEL_ERROR_NOT_FOUND;
    case cudaErrorInvalidKernelImage:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidPtx:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorJitCompilerNotFound:
    case cudaErrorJitCompilationDisabled:
    case cudaErrorInvalidSource:
    case cudaErrorSharedObjectInitFailed:
    case cudaErrorSharedObjectSymbolNotFound:
        return KEEL_ERROR_COMPILE_FAILED;
    case cudaErrorLaunchOutOfResources:
    case cudaErrorCooperativeLaunchTooLarge:
    case cudaErrorLaunchIncompatibleTexturing:
        return KEEL_ERROR_LAUNCH_FAILED;
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureWrongThread:
        return KEEL_ERROR_BUSY;
    /* Sticky errors: the context is corrupted and every later call fails. */
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorCudartUnloading:
    case cudaErrorUnknown:
        return KEEL_ERROR_DEVICE_LOST;
    default:
        return KEEL_ERROR_BACKEND;
    }
}

/* "keel_fn: NAME: message (what)". keel_fn is NULL where the core puts its
 * own prefix before the detail (allocations, device open, probe). */
static keel_status_t report(keel_status_t st, const char *keel_fn, const char *name, const char *msg,
                            const char *what)
{
    int has_what = what != NULL && what[0] != '\0';
    return keel__gpu_host->set_error(st, "%s%s%s: %s%s%s%s", keel_fn ? keel_fn : "", keel_fn ? ": " : "", name, msg,
                                     has_what ? " (" : "", has_what ? what : "", has_what ? ")" : "");
}

keel_status_t keel__gpu_error(cudaError_t err, const char *keel_fn, const char *what)
{
    if (KEEL_GPU_UNLIKELY(keel__gpu_fault_pending) && err == KEEL_GPU_FAULT_ERROR)
        return keel__gpu_fault_report(keel_fn, what);
    keel_status_t st = keel__gpu_status_of(err);
    /* Clears the runtime's record of a non-sticky error so the next call
     * (e.g. an allocation that fits after an out-of-memory) is not failed by it. */
    (void)cudaGetLastError();
    return report(st, keel_fn, cudaGetErrorName(err), cudaGetErrorString(err), what);
}

keel_status_t keel__gpu_drv_error(CUresult res, const char *keel_fn, const char *what)
{
    return keel__gpu_drv_error_as(res, keel__gpu_status_of((int)res), keel_fn, what);
}

keel_status_t keel__gpu_drv_error_as(CUresult res, keel_status_t st, const char *keel_fn, const char *what)
{
    if (KEEL_GPU_UNLIKELY(keel__gpu_fault_pending) && res == gpuDrvErrorInvalidValue)
        return keel__gpu_fault_report(keel_fn, what);
    const char *name = NULL, *msg = NULL;
    if (keel__cu.GetErrorName == NULL || keel__cu.GetErrorName(res, &name) != CUDA_SUCCESS || name == NULL)
        name = "CUDA_ERROR_UNKNOWN";
    if (keel__cu.GetErrorString == NULL || keel__cu.GetErrorString(res, &msg) != CUDA_SUCCESS || msg == NULL)
        msg = "unrecognized error code";
    return report(st, keel_fn, name, msg, what);
}
