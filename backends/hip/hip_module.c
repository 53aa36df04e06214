/* SPDX-License-Identifier: MIT */
/* Modules and kernels of keel-hip.so through HIP's module API: code objects
 * (hipcc --genco, or hiprtc output) loaded with hipModuleLoadData, kernels
 * found by name and launched with hipModuleLaunchKernel. On HIP's NVIDIA
 * platform the same calls are the driver's module API (cubin, fatbin or PTX
 * images; hiprtc's PTX), and a kernel opts in to more dynamic shared memory
 * than the default 48 KiB as on CUDA. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "hip_internal.h"


#ifdef __HIP_PLATFORM_NVIDIA__
/* The driver's module API works in the calling thread's current context,
 * which the runtime makes current only once a runtime call needs it on that
 * thread: a thread whose first Keel call loads a module or launches a kernel
 * has none. So on NVIDIA the device's primary context (hip_device.c) is made
 * current for each module call. */
static gpuError_t module_context(const keel__gpu_device_t *dev)
{
    CUcontext cur = NULL;
    if (cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->primary)
        return gpuSuccess;
    return hipCUResultTohipError(cuCtxSetCurrent(dev->primary));
}
#define NV_CONTEXT(dev) module_context(dev)
#else
#define module_context keel__gpu_use_device
#define NV_CONTEXT(dev) gpuSuccess
#endif

static keel_status_t finish_load(keel__gpu_device_t *dev, gpuError_t err, hipModule_t mod, const char *fn,
                                 const char *what, void **module_ctx)
{
    if (err != gpuSuccess) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s for %s", what, dev->arch);
        /* An image the loader rejects is a compile failure, whatever the code. */
        keel_status_t st = keel__gpu_status_of((int)err);
        if (st == KEEL_ERROR_INVALID_ARGUMENT || st == KEEL_ERROR_BACKEND)
            st = KEEL_ERROR_COMPILE_FAILED;
        return keel__gpu_drv_error_as(err, st, fn, detail);
    }
    keel__gpu_module_t *m = calloc(1, sizeof *m);
    if (m == NULL) {
        (void)hipModuleUnload(mod);
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: no host memory", fn);
    }
    m->library = mod;
    m->dev = dev;
    *module_ctx = m;
    return KEEL_OK;
}

static keel_status_t load_image(keel__gpu_device_t *dev, const void *image, const char *fn, void **module_ctx)
{
    hipModule_t mod = NULL;
    gpuError_t err = module_context(dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(hipModuleLoadData(&mod, image));
    return finish_load(dev, err, mod, fn, "loading the code object", module_ctx);
}

static keel_status_t mod_load_data(void *device_ctx, const void *image, size_t size, void **module_ctx)
{
    (void)size; /* a code object carries its own length */
    return load_image(device_ctx, image, "keel_module_load_data", module_ctx);
}

static keel_status_t mod_load_file(void *device_ctx, const char *path, void **module_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    if (access(path, R_OK) != 0)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND, "keel_module_load_file: cannot read '%s'", path);
    hipModule_t mod = NULL;
    gpuError_t err = module_context(dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(hipModuleLoad(&mod, path));
    return finish_load(dev, err, mod, "keel_module_load_file", path, module_ctx);
}

static keel_status_t mod_compile(void *device_ctx, const char *source, const char *name,
                                 const char *const *options, int num_options, void **module_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    void *image = NULL;
    size_t size = 0;
    keel_status_t st = keel__hip_rtc_compile(dev, source, name, options, num_options, &image, &size);
    if (st != KEEL_OK)
        return st;
    st = load_image(dev, image, "keel_module_compile", module_ctx);
    free(image);
    return st;
}

static keel_status_t mod_unload(void *module_ctx)
{
    keel__gpu_module_t *m = module_ctx;
    gpuError_t err = NV_CONTEXT(m->dev);
    if (err == gpuSuccess)
        err = hipModuleUnload(m->library);
    free(m);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, "keel_module_unload", NULL);
}

static keel_status_t mod_get_kernel(void *module_ctx, const char *name, void **kernel_ctx)
{
    keel__gpu_module_t *m = module_ctx;
    hipFunction_t f = NULL;
    gpuError_t err = NV_CONTEXT(m->dev);
    if (err == gpuSuccess)
        err = hipModuleGetFunction(&f, m->library, name);
    if (err == hipErrorNotFound || err == hipErrorInvalidValue || err == hipErrorInvalidDeviceFunction) {
        (void)gpuGetLastError();
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND,
                                          "keel_module_get_kernel: the module has no kernel '%s' (extern \"C\" "
                                          "kernels keep their name; C++ ones are mangled)",
                                          name);
    }
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_module_get_kernel", name);
    keel__gpu_kernel_t *k = calloc(1, sizeof *k);
    if (k == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_module_get_kernel: no host memory");
    k->fn = f;
    k->kernel = f;
    k->dev = m->dev;
    *kernel_ctx = k;
    return KEEL_OK;
}

static void kern_release(void *kernel_ctx)
{
    free(kernel_ctx);
}

static keel_status_t kern_launch(void *kernel_ctx, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                                 void *stream_ctx, void **args)
{
    const keel__gpu_kernel_t *k = kernel_ctx;
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = shared_bytes > UINT_MAX ? hipErrorInvalidValue : NV_CONTEXT(k->dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(hipModuleLaunchKernel(k->fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                 (unsigned)shared_bytes, s->stream, args, NULL));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess)) {
        char what[160];
        snprintf(what, sizeof what, "grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of dynamic shared memory on hip:%d",
                 grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, k->dev->ordinal);
        return keel__gpu_error(err, "keel_launch_kernel", what);
    }
    return KEEL_OK;
}

static keel_status_t kern_get_attribute(void *kernel_ctx, keel_kernel_attribute_t attr, int *value)
{
    const char *fn = "keel_kernel_get_attribute";
    const keel__gpu_kernel_t *k = kernel_ctx;
    hipFunction_attribute a;
    switch (attr) {
    case KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK:
        a = HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
        break;
    case KEEL_KERNEL_ATTR_SHARED_SIZE_BYTES:
        a = HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
        break;
    case KEEL_KERNEL_ATTR_NUM_REGS:
        a = HIP_FUNC_ATTRIBUTE_NUM_REGS;
        break;
    case KEEL_KERNEL_ATTR_LOCAL_SIZE_BYTES:
        a = HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
        break;
    case KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        a = HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        break;
    case KEEL_KERNEL_ATTR_NUM_ARGS:
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                          "%s: the hip backend cannot count a kernel's parameters (HIP has no "
                                          "counterpart of cuKernelGetParamInfo)",
                                          fn);
    default:
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: unknown attribute %d", fn, (int)attr);
    }
    int v = 0;
    gpuError_t err = NV_CONTEXT(k->dev);
    if (err == gpuSuccess)
        err = hipFuncGetAttribute(&v, a, k->fn);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, NULL);
    *value = v;
    return KEEL_OK;
}

#ifdef __HIP_PLATFORM_NVIDIA__
/* The kernel's limit raised (or lowered) to @p bytes, up to the device's
 * opt-in limit: HIP 6.0 has no module-kernel form of hipFuncSetAttribute on
 * NVIDIA, so this is the driver call it would wrap. */
static keel_status_t kern_set_max_dynamic_shared(void *kernel_ctx, size_t bytes)
{
    const keel__gpu_kernel_t *k = kernel_ctx;
    if (bytes > INT_MAX)
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                          "keel_kernel_set_max_dynamic_shared: %zu bytes is too many", bytes);
    gpuError_t err = module_context(k->dev);
    if (err == gpuSuccess)
        err = hipCUResultTohipError(cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                       (int)bytes));
    if (err != gpuSuccess) {
        char what[64];
        snprintf(what, sizeof what, "%zu bytes on hip:%d", bytes, k->dev->ordinal);
        return keel__gpu_error(err, "keel_kernel_set_max_dynamic_shared", what);
    }
    return KEEL_OK;
}
#else
static keel_status_t kern_set_max_dynamic_shared(void *kernel_ctx, size_t bytes)
{
    /* AMD has no opt-in: a block may use the device's whole LDS per block
     * from the start, and no more than that. */
    const keel__gpu_kernel_t *k = kernel_ctx;
    int limit = 0;
    gpuError_t err = gpuDeviceGetAttribute(&limit, gpuAttrSharedPerBlock, k->dev->ordinal);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_kernel_set_max_dynamic_shared", NULL);
    if (bytes > (size_t)limit)
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                          "keel_kernel_set_max_dynamic_shared: %zu bytes exceed the %d bytes of "
                                          "shared memory (LDS) a block may use on hip:%d",
                                          bytes, limit, k->dev->ordinal);
    return KEEL_OK;
}
#endif

/* A launch that hipModuleLaunchKernel refuses has no resident blocks: a
 * block past the kernel's threads per block, or more dynamic shared memory
 * than a block may have (kern_set_max_dynamic_shared), is 0 without asking
 * the runtime, as the CUDA plugin answers. On NVIDIA the shared memory limit
 * is the kernel's own attribute, which kern_set_max_dynamic_shared sets. */
static keel_status_t kern_max_active_blocks(void *kernel_ctx, int block_threads, size_t shared_bytes,
                                            int *blocks)
{
    const keel__gpu_kernel_t *k = kernel_ctx;
    int n = 0, max_threads = 0, max_shared = 0;
    gpuError_t err = NV_CONTEXT(k->dev);
    if (err == gpuSuccess)
        err = hipFuncGetAttribute(&max_threads, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn);
#ifdef __HIP_PLATFORM_NVIDIA__
    if (err == gpuSuccess)
        err = hipFuncGetAttribute(&max_shared, HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->fn);
#else
    if (err == gpuSuccess)
        err = gpuDeviceGetAttribute(&max_shared, gpuAttrSharedPerBlock, k->dev->ordinal);
#endif
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_kernel_max_active_blocks", NULL);
    if (block_threads > max_threads || shared_bytes > (size_t)max_shared) {
        *blocks = 0;
        return KEEL_OK;
    }
    err = module_context(k->dev);
    if (err == gpuSuccess)
        err = hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, block_threads, shared_bytes);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_kernel_max_active_blocks", NULL);
    *blocks = n;
    return KEEL_OK;
}

/* A __device__ or __constant__ variable of the code object. */
static keel_status_t mod_get_global(void *module_ctx, const char *name, void **ptr, size_t *bytes)
{
    keel__gpu_module_t *m = module_ctx;
    hipDeviceptr_t dptr = 0;   /* a pointer on AMD, CUDA's integer CUdeviceptr on NVIDIA */
    size_t size = 0;
    gpuError_t err = module_context(m->dev);
    if (err == gpuSuccess)
        err = hipModuleGetGlobal(&dptr, &size, m->library, name);
    if (err == hipErrorNotFound || err == hipErrorInvalidValue || err == hipErrorInvalidSymbol) {
        (void)gpuGetLastError();
        hipFunction_t f = NULL;
        int is_kernel = hipModuleGetFunction(&f, m->library, name) == gpuSuccess;
        (void)gpuGetLastError();
        if (is_kernel)
            return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND,
                                              "keel_module_get_global: '%s' is a kernel of the module, not a "
                                              "variable (look it up with keel_module_get_kernel)", name);
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND,
                                          "keel_module_get_global: the module has no variable '%s' (a __device__ or "
                                          "__constant__ variable at namespace scope keeps its name)", name);
    }
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_module_get_global", name);
    *ptr = (void *)(uintptr_t)dptr;
    *bytes = size;
    return KEEL_OK;
}

const keel_kernel_vtable_t keel__gpu_kernel_vtable = {
    .struct_size = sizeof(keel_kernel_vtable_t),
    .module_load_data = mod_load_data,
    .module_load_file = mod_load_file,
    .module_compile = mod_compile,
    .module_unload = mod_unload,
    .module_get_kernel = mod_get_kernel,
    .kernel_register_cpu = NULL,
    .kernel_release = kern_release,
    .launch = kern_launch,
    .get_attribute = kern_get_attribute,
    .set_max_dynamic_shared = kern_set_max_dynamic_shared,
    .max_active_blocks = kern_max_active_blocks,
    .module_get_global = mod_get_global,
};
