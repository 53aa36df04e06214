/* SPDX-License-Identifier: MIT */
/* HIP's NVIDIA platform only: the CUDA driver API functions that HIP's
 * NVIDIA headers call from their inline wrappers (hipModuleLoadData is
 * cuModuleLoadData, hipModuleLaunchKernel cuLaunchKernel, ...), defined here
 * and forwarded to the driver's entry points, which the statically linked
 * CUDA runtime finds (cudaGetDriverEntryPointByVersion). keel-hip.so thus
 * needs no libcuda.so.1 to load: without a driver, probe says so, as the
 * CUDA plugin's does. The plugin exports only keel_backend_init, so these
 * definitions bind inside it and never interpose on a libcuda of the process.
 * (hip_device.c and hip_module.c call cuCtxGetCurrent, cuCtxSetCurrent and
 * cuFuncSetAttribute themselves: HIP wraps none of them for NVIDIA.)
 *
 * The list is what the plugin's sources call through HIP; a HIP call added
 * to them that wraps another driver function fails the link (-z defs) until
 * it is added here. */
#include <string.h>
#include "hip_internal.h"

#define KEEL_HIP_NV_DRIVER_ABI CUDART_VERSION

static struct {
    __typeof__(cuCtxGetCurrent) *CtxGetCurrent;
    __typeof__(cuCtxSetCurrent) *CtxSetCurrent;
    __typeof__(cuDeviceGet) *DeviceGet;
    __typeof__(cuFuncGetAttribute) *FuncGetAttribute;
    __typeof__(cuFuncSetAttribute) *FuncSetAttribute;
    __typeof__(cuLaunchKernel) *LaunchKernel;
    __typeof__(cuModuleGetFunction) *ModuleGetFunction;
    __typeof__(cuModuleGetGlobal) *ModuleGetGlobal;
    __typeof__(cuModuleLoad) *ModuleLoad;
    __typeof__(cuModuleLoadData) *ModuleLoadData;
    __typeof__(cuModuleUnload) *ModuleUnload;
    __typeof__(cuOccupancyMaxActiveBlocksPerMultiprocessor) *OccupancyMaxActiveBlocksPerMultiprocessor;
    __typeof__(cuStreamWaitValue32) *StreamWaitValue32;
} drv;

keel_status_t keel__hip_nv_driver_load(void)
{
    static const struct {
        const char *name;
        size_t offset;
    } table[] = {
#define E(field) {"cu" #field, offsetof(__typeof__(drv), field)}
        E(CtxGetCurrent), E(CtxSetCurrent), E(DeviceGet), E(FuncGetAttribute), E(FuncSetAttribute), E(LaunchKernel),
        E(ModuleGetFunction), E(ModuleGetGlobal), E(ModuleLoad), E(ModuleLoadData),
        E(ModuleUnload), E(OccupancyMaxActiveBlocksPerMultiprocessor), E(StreamWaitValue32),
#undef E
    };
    __typeof__(drv) d;
    memset(&d, 0, sizeof d);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        void *fn = NULL;
        cudaError_t err = cudaGetDriverEntryPointByVersion(table[i].name, &fn, KEEL_HIP_NV_DRIVER_ABI,
                                                           cudaEnableDefault, &q);
        if (err != cudaSuccess || fn == NULL || q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            return keel__gpu_host->set_error(KEEL_ERROR_BACKEND_UNAVAILABLE,
                                              "the NVIDIA driver has no usable %s (%s; CUDA %d.%d ABI asked): "
                                              "update the driver",
                                              table[i].name,
                                              err != cudaSuccess ? cudaGetErrorName(err)
                                              : q == cudaDriverEntryPointVersionNotSufficent ? "version not sufficient"
                                                                                              : "symbol not found",
                                              KEEL_HIP_NV_DRIVER_ABI / 1000, KEEL_HIP_NV_DRIVER_ABI % 1000 / 10);
        }
        memcpy((char *)&d + table[i].offset, &fn, sizeof fn);
    }
    drv = d;
    return KEEL_OK;
}

/* Before probe found the driver, every call is "not initialized". */
#define FORWARD(field, ...) (drv.field != NULL ? drv.field(__VA_ARGS__) : CUDA_ERROR_NOT_INITIALIZED)

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    return FORWARD(CtxGetCurrent, pctx);
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    return FORWARD(CtxSetCurrent, ctx);
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    return FORWARD(DeviceGet, device, ordinal);
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    return FORWARD(FuncGetAttribute, pi, attrib, hfunc);
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    return FORWARD(FuncSetAttribute, hfunc, attrib, value);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    return FORWARD(LaunchKernel, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                   hStream, kernelParams, extra);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    return FORWARD(ModuleGetFunction, hfunc, hmod, name);
}

CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    return FORWARD(ModuleGetGlobal, dptr, bytes, hmod, name);
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    return FORWARD(ModuleLoad, module, fname);
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    return FORWARD(ModuleLoadData, module, image);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    return FORWARD(ModuleUnload, hmod);
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                             size_t dynamicSMemSize)
{
    return FORWARD(OccupancyMaxActiveBlocksPerMultiprocessor, numBlocks, func, blockSize, dynamicSMemSize);
}

CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    return FORWARD(StreamWaitValue32, stream, addr, value, flags);
}
