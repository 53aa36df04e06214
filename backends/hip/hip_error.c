/* SPDX-License-Identifier: MIT */
/* HIP errors as Keel statuses: the counterpart of backends/cuda/cuda_error.c
 * for the shared sources' keel__gpu_error and keel__gpu_drv_error (HIP has
 * one error type for runtime and module calls). */
#include "backends/gpu/gpu_internal.h"

keel_status_t keel__gpu_status_of(int err)
{
    switch ((hipError_t)err) {
    case hipSuccess:
        return KEEL_OK;
    case hipErrorOutOfMemory:
        return KEEL_ERROR_OUT_OF_MEMORY;
    case hipErrorNotReady:
        return KEEL_ERROR_NOT_READY;
    case hipErrorInvalidValue:
    case hipErrorInvalidConfiguration:
    case hipErrorInvalidPitchValue:
    case hipErrorInvalidMemcpyDirection:
        return KEEL_ERROR_INVALID_ARGUMENT;
    case hipErrorInvalidDevicePointer:
        return KEEL_ERROR_INVALID_POINTER;
    case hipErrorInvalidHandle:
    case hipErrorContextIsDestroyed:
        return KEEL_ERROR_INVALID_HANDLE;
    case hipErrorInvalidDevice:
    case hipErrorNoDevice:
        return KEEL_ERROR_NO_DEVICE;
    case hipErrorInsufficientDriver:
    case hipErrorNotInitialized:
        return KEEL_ERROR_BACKEND_UNAVAILABLE;
    case hipErrorNotSupported:
    case hipErrorStreamCaptureUnsupported:
    case hipErrorPeerAccessUnsupported:
        return KEEL_ERROR_NOT_SUPPORTED;
    case hipErrorNotFound:
    case hipErrorFileNotFound:
    case hipErrorInvalidSymbol:
    case hipErrorInvalidDeviceFunction:
        return KEEL_ERROR_NOT_FOUND;
    case hipErrorInvalidImage:
    case hipErrorNoBinaryForGpu:
    case hipErrorInvalidKernelFile:
    case hipErrorInvalidSource:
    case hipErrorSharedObjectInitFailed:
    case hipErrorSharedObjectSymbolNotFound:
        return KEEL_ERROR_COMPILE_FAILED;
    case hipErrorLaunchOutOfResources:
    case hipErrorCooperativeLaunchTooLarge:
        return KEEL_ERROR_LAUNCH_FAILED;
    case hipErrorStreamCaptureInvalidated:
    case hipErrorStreamCaptureMerge:
    case hipErrorStreamCaptureUnmatched:
    case hipErrorStreamCaptureUnjoined:
    case hipErrorStreamCaptureIsolation:
    case hipErrorStreamCaptureImplicit:
    case hipErrorCapturedEvent:
    case hipErrorStreamCaptureWrongThread:
        return KEEL_ERROR_BUSY;
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorLaunchTimeOut:
    case hipErrorAssert:
    case hipErrorECCNotCorrectable:
    case hipErrorUnknown:
        return KEEL_ERROR_DEVICE_LOST;
    default:
        return KEEL_ERROR_BACKEND;
    }
}

keel_status_t keel__gpu_drv_error_as(hipError_t err, keel_status_t st, const char *keel_fn, const char *what)
{
    if (KEEL_GPU_UNLIKELY(keel__gpu_fault_pending) && err == KEEL_GPU_FAULT_ERROR)
        return keel__gpu_fault_report(keel_fn, what);
    /* Clears the runtime's record of a non-sticky error (see backends/cuda/cuda_error.c). */
    (void)hipGetLastError();
    int has_what = what != NULL && what[0] != '\0';
    return keel__gpu_host->set_error(st, "%s%s%s: %s%s%s%s", keel_fn ? keel_fn : "", keel_fn ? ": " : "",
                                     hipGetErrorName(err), hipGetErrorString(err), has_what ? " (" : "",
                                     has_what ? what : "", has_what ? ")" : "");
}

keel_status_t keel__gpu_drv_error(hipError_t err, const char *keel_fn, const char *what)
{
    return keel__gpu_drv_error_as(err, keel__gpu_status_of((int)err), keel_fn, what);
}

keel_status_t keel__gpu_error(hipError_t err, const char *keel_fn, const char *what)
{
    return keel__gpu_drv_error(err, keel_fn, what);
}
