/* SPDX-License-Identifier: MIT */
/* Modules and kernels through the driver's context-independent libraries
 * (cuLibrary*): a CUkernel launched with cuLaunchKernel runs in the context
 * of the stream it is given, so the launch path needs no context switch, no
 * lookup and no lock: it is one driver call. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "cuda_internal.h"

enum { JIT_LOG_BYTES = 4096 };

/* Loads the library into the device's context now, so that an image with no
 * code for this device fails here and not at the first launch. */
static CUresult load_into_device(keel__gpu_device_t *dev, CUlibrary lib)
{
    int pushed = keel__cuda_push_primary(dev);
    CUmodule mod;
    CUresult res = keel__cu.LibraryGetModule(&mod, lib);
    keel__cuda_pop_primary(pushed);
    return res;
}

static keel_status_t finish_load(keel__gpu_device_t *dev, CUresult res, CUlibrary lib, const char *log,
                                 const char *fn, const char *what, void **module_ctx)
{
    if (res == CUDA_SUCCESS) {
        res = load_into_device(dev, lib);
        if (res != CUDA_SUCCESS)
            (void)keel__cu.LibraryUnload(lib);
    }
    if (res != CUDA_SUCCESS) {
        char detail[JIT_LOG_BYTES + 512];
        snprintf(detail, sizeof detail, "%s for %s%s%s", what, dev->arch, log[0] ? "; JIT log: " : "", log);
        /* An image the loader rejects is a compile failure, whatever the code. */
        keel_status_t st = keel__gpu_status_of((int)res);
        if (st == KEEL_ERROR_INVALID_ARGUMENT || st == KEEL_ERROR_BACKEND)
            st = KEEL_ERROR_COMPILE_FAILED;
        return keel__gpu_drv_error_as(res, st, fn, detail);
    }
    keel__gpu_module_t *m = calloc(1, sizeof *m);
    if (m == NULL) {
        (void)keel__cu.LibraryUnload(lib);
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: no host memory", fn);
    }
    m->library = lib;
    m->dev = dev;
    *module_ctx = m;
    return KEEL_OK;
}

keel_status_t keel__cuda_module_from_image(keel__gpu_device_t *dev, const void *image, const char *fn,
                                           void **module_ctx)
{
    char log[JIT_LOG_BYTES] = "";
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    CUlibrary lib = NULL;
    CUresult res = KEEL_GPU_DRV_TRY(keel__cu.LibraryLoadData(&lib, image, opts, vals, 2, NULL, NULL, 0));
    return finish_load(dev, res, lib, log, fn, "loading the image", module_ctx);
}

static keel_status_t mod_load_data(void *device_ctx, const void *image, size_t size, void **module_ctx)
{
    (void)size; /* cubin, fatbin and PTX carry their own length */
    return keel__cuda_module_from_image(device_ctx, image, "keel_module_load_data", module_ctx);
}

static keel_status_t mod_load_file(void *device_ctx, const char *path, void **module_ctx)
{
    char log[JIT_LOG_BYTES] = "";
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    CUlibrary lib = NULL;
    /* The driver's answer for a missing file varies by version; say it plainly. */
    if (access(path, R_OK) != 0)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND, "keel_module_load_file: %s: %s", path,
                                         strerror(errno));
    CUresult res = KEEL_GPU_DRV_TRY(keel__cu.LibraryLoadFromFile(&lib, path, opts, vals, 2, NULL, NULL, 0));
    if (res == CUDA_ERROR_FILE_NOT_FOUND)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND, "keel_module_load_file: %s: file not found", path);
    char what[600];
    snprintf(what, sizeof what, "loading '%s'", path);
    return finish_load(device_ctx, res, lib, log, "keel_module_load_file", what, module_ctx);
}

static keel_status_t mod_compile(void *device_ctx, const char *source, const char *name,
                                 const char *const *options, int num_options, void **module_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    void *image = NULL;
    size_t size = 0;
    keel_status_t st = keel__cuda_nvrtc_compile(dev, source, name, options, num_options, &image, &size);
    if (st != KEEL_OK)
        return st;
    st = keel__cuda_module_from_image(dev, image, "keel_module_compile", module_ctx);
    free(image);
    return st;
}

static keel_status_t mod_unload(void *module_ctx)
{
    keel__gpu_module_t *m = module_ctx;
    CUresult res = keel__cu.LibraryUnload(m->library);
    free(m);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, "keel_module_unload", NULL);
    return KEEL_OK;
}

static keel_status_t mod_get_kernel(void *module_ctx, const char *name, void **kernel_ctx)
{
    keel__gpu_module_t *m = module_ctx;
    CUkernel k = NULL;
    CUresult res = keel__cu.LibraryGetKernel(&k, m->library, name);
    if (res == CUDA_ERROR_NOT_FOUND || res == CUDA_ERROR_INVALID_VALUE)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND,
                                         "keel_module_get_kernel: the module has no kernel '%s' (extern \"C\" "
                                         "kernels keep their name; C++ ones are mangled)",
                                         name);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, "keel_module_get_kernel", name);
    keel__gpu_kernel_t *kc = calloc(1, sizeof *kc);
    if (kc == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_module_get_kernel: no host memory");
    kc->kernel = k;
    kc->fn = (CUfunction)k;
    kc->dev = m->dev;
    const char *mode = keel__gpu_env("KEEL_CUDA_LAUNCH");
    if (mode != NULL && strcasecmp(mode, "function") == 0) {
        int pushed = keel__cuda_push_primary(m->dev);
        CUfunction f = NULL;
        res = keel__cu.KernelGetFunction(&f, k);
        keel__cuda_pop_primary(pushed);
        if (res != CUDA_SUCCESS) {
            free(kc);
            return keel__gpu_drv_error(res, "keel_module_get_kernel", "cuKernelGetFunction");
        }
        kc->fn = f;
        kc->needs_context = 1;
    }
    *kernel_ctx = kc;
    return KEEL_OK;
}

static void kern_release(void *kernel_ctx)
{
    free(kernel_ctx);
}

static __attribute__((noinline, cold)) keel_status_t launch_error(CUresult res, const keel__gpu_kernel_t *k,
                                                                  keel_dim3_t grid, keel_dim3_t block,
                                                                  size_t shared)
{
    char what[160];
    snprintf(what, sizeof what, "grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of dynamic shared memory on cuda:%d",
             grid.x, grid.y, grid.z, block.x, block.y, block.z, shared, k->dev->ordinal);
    return keel__gpu_drv_error(res, "keel_launch_kernel", what);
}

/* The context this thread last made current for a function-mode launch. If
 * the application switched contexts since, the launch fails and is retried
 * once after a real check. */
static __thread CUcontext launch_ctx;

static __attribute__((noinline)) CUresult launch_in_context(const keel__gpu_kernel_t *k, keel_dim3_t grid,
                                                           keel_dim3_t block, unsigned shared, CUstream stream,
                                                           void **args, int checked)
{
    CUcontext cur = NULL;
    if (checked)
        (void)keel__cu.CtxGetCurrent(&cur);
    else
        cur = launch_ctx;
    if (cur != k->dev->primary) {
        CUresult res = keel__cu.CtxSetCurrent(k->dev->primary);
        if (res != CUDA_SUCCESS)
            return res;
    }
    launch_ctx = k->dev->primary;
    CUresult res = keel__cu.LaunchKernel(k->fn, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared, stream,
                                         args, NULL);
    if (res != CUDA_SUCCESS && !checked)
        return launch_in_context(k, grid, block, shared, stream, args, 1);
    return res;
}

static keel_status_t kern_launch(void *kernel_ctx, keel_dim3_t grid, keel_dim3_t block, size_t shared_bytes,
                                 void *stream_ctx, void **args)
{
    const keel__gpu_kernel_t *k = kernel_ctx;
    keel__gpu_stream_t *s = stream_ctx;
    if (KEEL_GPU_UNLIKELY(shared_bytes > UINT_MAX))
        return launch_error(CUDA_ERROR_INVALID_VALUE, k, grid, block, shared_bytes);
    if (KEEL_GPU_UNLIKELY(k->needs_context)) {
        CUresult res = launch_in_context(k, grid, block, (unsigned)shared_bytes, s->stream, args, 0);
        keel__gpu_stream_touch(s);
        return res == CUDA_SUCCESS ? KEEL_OK : launch_error(res, k, grid, block, shared_bytes);
    }
    CUresult res = KEEL_GPU_DRV_TRY(keel__cu.LaunchKernel(k->fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                          (unsigned)shared_bytes, s->stream, args, NULL));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(res != CUDA_SUCCESS))
        return launch_error(res, k, grid, block, shared_bytes);
    return KEEL_OK;
}

static keel_status_t kern_get_attribute(void *kernel_ctx, keel_kernel_attribute_t attr, int *value)
{
    const char *fn = "keel_kernel_get_attribute";
    const keel__gpu_kernel_t *k = kernel_ctx;
    CUfunction_attribute a;
    switch (attr) {
    case KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK:
        a = CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
        break;
    case KEEL_KERNEL_ATTR_SHARED_SIZE_BYTES:
        a = CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
        break;
    case KEEL_KERNEL_ATTR_NUM_REGS:
        a = CU_FUNC_ATTRIBUTE_NUM_REGS;
        break;
    case KEEL_KERNEL_ATTR_LOCAL_SIZE_BYTES:
        a = CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES;
        break;
    case KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        a = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        break;
    case KEEL_KERNEL_ATTR_NUM_ARGS: {
        if (keel__cu.KernelGetParamInfo == NULL)
            return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                             "%s: the driver has no cuKernelGetParamInfo (CUDA 12.4 or later)", fn);
        /* The driver answers INVALID_VALUE for the first index past the last. */
        int n = 0;
        size_t off, size;
        while (n < KEEL_MAX_KERNEL_ARGS * 64 &&
               keel__cu.KernelGetParamInfo(k->kernel, (size_t)n, &off, &size) == CUDA_SUCCESS)
            n++;
        *value = n;
        return KEEL_OK;
    }
    default:
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: unknown attribute %d", fn, (int)attr);
    }
    int v = 0;
    CUresult res = keel__cu.KernelGetAttribute(&v, a, k->kernel, k->dev->gpudev);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, fn, NULL);
    *value = v;
    return KEEL_OK;
}

static keel_status_t kern_set_max_dynamic_shared(void *kernel_ctx, size_t bytes)
{
    const keel__gpu_kernel_t *k = kernel_ctx;
    if (bytes > INT_MAX)
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                         "keel_kernel_set_max_dynamic_shared: %zu bytes is too many", bytes);
    CUresult res = keel__cu.KernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes,
                                               k->kernel, k->dev->gpudev);
    if (res != CUDA_SUCCESS) {
        char what[64];
        snprintf(what, sizeof what, "%zu bytes on cuda:%d", bytes, k->dev->ordinal);
        return keel__gpu_drv_error(res, "keel_kernel_set_max_dynamic_shared", what);
    }
    return KEEL_OK;
}

/* A launch that cuLaunchKernel refuses has no resident blocks: 0, as the
 * driver answers for most of them. Not for all: dynamic shared memory of
 * 4 GiB or more, or more than a limit the kernel's attribute lowered below
 * the default 48 KiB, gets blocks > 0 from the driver. So the two limits
 * a launch is held to, the kernel's threads per block and its dynamic
 * shared memory attribute, are checked here first. */
static keel_status_t kern_max_active_blocks(void *kernel_ctx, int block_threads, size_t shared_bytes,
                                            int *blocks)
{
    const keel__gpu_kernel_t *k = kernel_ctx;
    int max_threads = 0, max_shared = 0;
    CUresult lim = keel__cu.KernelGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->kernel,
                                               k->dev->gpudev);
    if (lim == CUDA_SUCCESS)
        lim = keel__cu.KernelGetAttribute(&max_shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->kernel,
                                          k->dev->gpudev);
    if (lim != CUDA_SUCCESS)
        return keel__gpu_drv_error(lim, "keel_kernel_max_active_blocks", NULL);
    if (block_threads > max_threads || shared_bytes > (size_t)max_shared) {
        *blocks = 0;
        return KEEL_OK;
    }
    /* A CUkernel is resolved against the current context here. */
    int pushed = keel__cuda_push_primary(k->dev);
    int n = 0;
    CUresult res = keel__cu.OccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, block_threads, shared_bytes);
    keel__cuda_pop_primary(pushed);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, "keel_kernel_max_active_blocks", NULL);
    *blocks = n;
    return KEEL_OK;
}

/* A __device__ or __constant__ variable of the library, in the device's
 * context (the library's globals are loaded into each context apart). */
static keel_status_t mod_get_global(void *module_ctx, const char *name, void **ptr, size_t *bytes)
{
    keel__gpu_module_t *m = module_ctx;
    CUdeviceptr dptr = 0;
    size_t size = 0;
    int pushed = keel__cuda_push_primary(m->dev);
    CUresult res = keel__cu.LibraryGetGlobal(&dptr, &size, m->library, name);
    CUkernel k = NULL;
    int is_kernel = res == CUDA_ERROR_NOT_FOUND && keel__cu.LibraryGetKernel(&k, m->library, name) == CUDA_SUCCESS;
    keel__cuda_pop_primary(pushed);
    if (is_kernel)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND,
                                         "keel_module_get_global: '%s' is a kernel of the module, not a variable "
                                         "(look it up with keel_module_get_kernel)", name);
    if (res == CUDA_ERROR_NOT_FOUND || res == CUDA_ERROR_INVALID_VALUE)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_FOUND,
                                         "keel_module_get_global: the module has no variable '%s' (a __device__ or "
                                         "__constant__ variable at namespace scope keeps its name)", name);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, "keel_module_get_global", name);
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
