/* SPDX-License-Identifier: MIT */
/* The driver API entry points the plugin uses, resolved through the CUDA
 * runtime (linked statically) instead of linking libcuda: the plugin then
 * loads on a machine with no NVIDIA driver, and probe() reports its absence. */
#include <string.h>
#include "cuda_internal.h"

struct keel__cuda_driver keel__cu;

/* The ABI version of each entry point: the one this toolkit's cuda.h
 * declares, which is what the typed pointers in keel__cuda_driver follow. */
#define KEEL_CUDA_DRIVER_ABI CUDART_VERSION

static keel_status_t resolve(const char *name, void **slot, int optional)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    void *fn = NULL;
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, KEEL_CUDA_DRIVER_ABI, cudaEnableDefault, &q);
    if (err == cudaSuccess && fn != NULL && q == cudaDriverEntryPointSuccess) {
        *slot = fn;
        return KEEL_OK;
    }
    *slot = NULL;
    if (optional)
        return KEEL_OK;
    (void)cudaGetLastError();
    return keel__gpu_host->set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                     "the NVIDIA driver has no usable %s (%s; CUDA %d.%d ABI asked): update the driver",
                                     name, err != cudaSuccess ? cudaGetErrorName(err)
                                           : q == cudaDriverEntryPointVersionNotSufficent ? "version not sufficient"
                                                                                            : "symbol not found",
                                     KEEL_CUDA_DRIVER_ABI / 1000, KEEL_CUDA_DRIVER_ABI % 1000 / 10);
}

keel_status_t keel__cuda_driver_load(void)
{
    static const struct {
        const char *name;
        size_t offset;
        int optional;
    } table[] = {
#define E(field, opt) {"cu" #field, offsetof(struct keel__cuda_driver, field), opt}
        E(GetErrorName, 0),
        E(GetErrorString, 0),
        E(DeviceGet, 0),
        E(DeviceGetName, 0),
        E(DeviceTotalMem, 0),
        E(DevicePrimaryCtxRetain, 0),
        E(DevicePrimaryCtxRelease, 0),
        E(CtxGetCurrent, 0),
        E(CtxPushCurrent, 0),
        E(CtxPopCurrent, 0),
        E(CtxSetCurrent, 0),
        E(KernelGetFunction, 0),
        E(LibraryLoadData, 0),
        E(LibraryLoadFromFile, 0),
        E(LibraryUnload, 0),
        E(LibraryGetKernel, 0),
        E(LibraryGetModule, 0),
        E(LibraryGetGlobal, 0),
        E(KernelGetAttribute, 0),
        E(KernelSetAttribute, 0),
        E(KernelGetParamInfo, 1),
        E(OccupancyMaxActiveBlocksPerMultiprocessor, 0),
        E(StreamWaitValue32, 1),
        E(DeviceGetAttribute, 0),
        E(LaunchKernel, 0),
#undef E
    };
    struct keel__cuda_driver d;
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        keel_status_t st = resolve(table[i].name, (void **)((char *)&d + table[i].offset), table[i].optional);
        if (st != KEEL_OK)
            return st;
    }
    keel__cu = d;
    return KEEL_OK;
}
