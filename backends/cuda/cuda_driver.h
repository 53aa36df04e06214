/* SPDX-License-Identifier: MIT */
/* The CUDA driver API entry points keel-cuda.so uses, resolved through the
 * CUDA runtime at probe time (cuda_driver.c) so that the plugin never links
 * libcuda and loads on machines without a driver. Included by
 * backends/gpu/vendor_cuda.h, whose driver-API names call through keel__cu. */
#ifndef KEEL_CUDA_DRIVER_H
#define KEEL_CUDA_DRIVER_H

#include <cuda.h>
#include "keel/status.h"

struct keel__cuda_driver {
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*KernelGetFunction)(CUfunction *, CUkernel);
    CUresult (*LibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned int,
                                CUlibraryOption *, void **, unsigned int);
    CUresult (*LibraryLoadFromFile)(CUlibrary *, const char *, CUjit_option *, void **, unsigned int,
                                    CUlibraryOption *, void **, unsigned int);
    CUresult (*LibraryUnload)(CUlibrary);
    CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
    CUresult (*LibraryGetModule)(CUmodule *, CUlibrary);
    CUresult (*LibraryGetGlobal)(CUdeviceptr *, size_t *, CUlibrary, const char *);
    CUresult (*KernelGetAttribute)(int *, CUfunction_attribute, CUkernel, CUdevice);
    CUresult (*KernelSetAttribute)(CUfunction_attribute, int, CUkernel, CUdevice);
    CUresult (*KernelGetParamInfo)(CUkernel, size_t, size_t *, size_t *);   /* may be NULL (driver < 12.4) */
    CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
    CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
};
__attribute__((visibility("hidden"))) extern struct keel__cuda_driver keel__cu;

/* Fills keel__cu; on failure sets the error (naming the missing entry point). */
__attribute__((visibility("hidden"))) keel_status_t keel__cuda_driver_load(void);

#endif /* KEEL_CUDA_DRIVER_H */
