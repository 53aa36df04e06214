/* SPDX-License-Identifier: MIT */
/* Devices: opening one (primary context, memory pool), its properties and
 * device-wide operations. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cuda_internal.h"

int keel__cuda_push_primary(const keel__gpu_device_t *dev)
{
    CUcontext cur = NULL;
    if (keel__cu.CtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->primary)
        return 0;
    return keel__cu.CtxPushCurrent(dev->primary) == CUDA_SUCCESS;
}

void keel__cuda_pop_primary(int pushed)
{
    if (pushed) {
        CUcontext ignored;
        (void)keel__cu.CtxPopCurrent(&ignored);
    }
}

static keel_status_t dev_open(void *backend_ctx, int index, void **device_ctx)
{
    (void)backend_ctx;
    /* The core prefixes errors here with the call and the device. */
    const char *fn = NULL;
    keel__gpu_device_t *dev = calloc(1, sizeof *dev);
    if (dev == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "no host memory");
    dev->ordinal = index;
    pthread_mutex_init(&dev->lock, NULL);
    CUresult res = keel__cu.DeviceGet(&dev->gpudev, index);
    if (res == CUDA_SUCCESS)
        res = keel__cu.DevicePrimaryCtxRetain(&dev->primary, dev->gpudev);
    if (res != CUDA_SUCCESS) {
        pthread_mutex_destroy(&dev->lock);
        free(dev);
        return keel__gpu_drv_error(res, fn, "cuDevicePrimaryCtxRetain");
    }
    cudaError_t err = gpuSuccess;
    int v = 0;
    if (err == gpuSuccess)
        err = gpuDeviceGetAttribute(&dev->cc_major, gpuAttrCcMajor, index);
    if (err == gpuSuccess)
        err = gpuDeviceGetAttribute(&dev->cc_minor, gpuAttrCcMinor, index);
    if (err == gpuSuccess)
        err = gpuDeviceGetAttribute(&dev->managed_memory, gpuAttrManagedMemory, index);
    if (err == gpuSuccess)
        err = gpuDeviceGetAttribute(&v, gpuAttrMemoryPoolsSupported, index);
    dev->pools_supported = v;
    /* KEEL_GPU_HOST_FUNCS=cuda: run host functions on CUDA's one thread. */
    const char *hf = keel__gpu_env("KEEL_GPU_HOST_FUNCS");
    atomic_init(&dev->stream_wait_value, keel__cu.StreamWaitValue32 != NULL && !(hf != NULL && strcasecmp(hf, "keel") != 0));
    if (keel__cu.StreamWaitValue32 == NULL && keel__gpu_host->log_enabled(KEEL_LOG_WARN))
        keel__gpu_host->log(KEEL_LOG_WARN, "cuda:%d: the driver has no cuStreamWaitValue32: host functions run on "
                                            "CUDA's own thread", index);
    snprintf(dev->arch, sizeof dev->arch, KEEL_GPU_ARCH_PREFIX "%d%d", dev->cc_major, dev->cc_minor);
    if (err == gpuSuccess && dev->pools_supported) {
        /* Memory freed to the pool stays there: a steady alloc/free loop then
         * never goes back to the driver. keel_malloc trims it on out-of-memory. */
        uint64_t threshold = UINT64_MAX;
        err = gpuDeviceGetDefaultMemPool(&dev->pool, index);
        if (err == gpuSuccess)
            err = gpuMemPoolSetAttribute(dev->pool, gpuMemPoolAttrReleaseThreshold, &threshold);
    }
    if (err != gpuSuccess) {
        (void)keel__cu.DevicePrimaryCtxRelease(dev->gpudev);
        pthread_mutex_destroy(&dev->lock);
        free(dev);
        return keel__gpu_error(err, fn, "reading device attributes");
    }
    *device_ctx = dev;
    return KEEL_OK;
}

static void dev_close(void *device_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    if (dev == NULL)
        return;
    keel__gpu_staging_destroy(dev);
    keel__gpu_blas_device_release(dev);
    (void)keel__cu.DevicePrimaryCtxRelease(dev->gpudev);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}

static keel_status_t dev_get_properties(void *device_ctx, keel_device_properties_t *p)
{
    const char *fn = "keel_device_get_properties";
    keel__gpu_device_t *dev = device_ctx;
    int o = dev->ordinal;
    CUresult res = keel__cu.DeviceGetName(p->name, (int)sizeof p->name, dev->gpudev);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, fn, "cuDeviceGetName");
    size_t total = 0;
    res = keel__cu.DeviceTotalMem(&total, dev->gpudev);
    if (res != CUDA_SUCCESS)
        return keel__gpu_drv_error(res, fn, "cuDeviceTotalMem");
    snprintf(p->vendor, sizeof p->vendor, "%s", KEEL_GPU_VENDOR);
    snprintf(p->architecture, sizeof p->architecture, "%s", dev->arch);
    snprintf(p->backend, sizeof p->backend, "%s", KEEL_GPU_BACKEND_NAME);
    p->type = KEEL_DEVICE_TYPE_GPU;
    p->index = o;
    p->total_memory = total;

    static const struct {
        enum cudaDeviceAttr attr;
        size_t offset;
    } ints[] = {
#define A(a, f) {a, offsetof(keel_device_properties_t, f)}
        A(gpuAttrComputeUnits, compute_units),
        A(gpuAttrMaxThreadsPerBlock, max_threads_per_block),
        A(gpuAttrMaxBlockDimX, max_block_dim[0]),
        A(gpuAttrMaxBlockDimY, max_block_dim[1]),
        A(gpuAttrMaxBlockDimZ, max_block_dim[2]),
        A(gpuAttrMaxGridDimX, max_grid_dim[0]),
        A(gpuAttrMaxGridDimY, max_grid_dim[1]),
        A(gpuAttrMaxGridDimZ, max_grid_dim[2]),
        A(gpuAttrWarpSize, warp_size),
        A(gpuAttrClockRate, clock_rate_khz),
        A(gpuAttrCcMajor, compute_capability_major),
        A(gpuAttrCcMinor, compute_capability_minor),
        A(gpuAttrPciBusId, pci_bus_id),
        A(gpuAttrUnifiedAddressing, unified_addressing),
        A(gpuAttrManagedMemory, managed_memory),
        A(gpuAttrConcurrentManagedAccess, concurrent_managed_access),
        A(gpuAttrMemoryPoolsSupported, stream_ordered_alloc),
        A(gpuAttrAsyncEngineCount, async_engines),
#undef A
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int v = 0;
        cudaError_t err = gpuDeviceGetAttribute(&v, ints[i].attr, o);
        if (err != gpuSuccess)
            return keel__gpu_error(err, fn, "cudaDeviceGetAttribute");
        *(int *)((char *)p + ints[i].offset) = v;
    }
    /* What a block may use once keel_kernel_set_max_dynamic_shared raised
     * its limit (the opt-in maximum), not the 48 KiB default. */
    int shared = 0;
    cudaError_t err = gpuDeviceGetAttribute(&shared, gpuAttrSharedPerBlockOptin, o);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, "cudaDeviceGetAttribute");
    p->shared_memory_per_block = (size_t)shared;
    int least = 0, greatest = 0;
    err = gpuDeviceGetStreamPriorityRange(&least, &greatest);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, "cudaDeviceGetStreamPriorityRange");
    p->stream_priorities = least != greatest;
    size_t free_b = 0, total_b = 0;
    err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = gpuMemGetInfo(&free_b, &total_b);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, "cudaMemGetInfo");
    p->free_memory = free_b;
    return KEEL_OK;
}

static keel_status_t dev_memory_info(void *device_ctx, size_t *free_bytes, size_t *total_bytes)
{
    keel__gpu_device_t *dev = device_ctx;
    cudaError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = gpuMemGetInfo(free_bytes, total_bytes);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_device_memory_info", "cudaMemGetInfo");
    return KEEL_OK;
}

static keel_status_t dev_synchronize(void *device_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    cudaError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = gpuDeviceSynchronize();
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_device_synchronize", NULL);
    return KEEL_OK;
}

static keel_status_t dev_can_access_peer(void *device_ctx, void *peer_device_ctx, int *can_access)
{
    keel__gpu_device_t *dev = device_ctx, *peer = peer_device_ctx;
    if (dev->ordinal == peer->ordinal) {
        *can_access = 1;
        return KEEL_OK;
    }
    int v = 0;
    cudaError_t err = gpuDeviceCanAccessPeer(&v, dev->ordinal, peer->ordinal);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_device_can_access_peer", NULL);
    if (v) {
        /* "Can access" should mean a kernel on dev may touch peer memory now,
         * so access is enabled here, once (enabling twice is harmless). */
        err = keel__gpu_use_device(dev);
        if (err == gpuSuccess)
            err = cudaDeviceEnablePeerAccess(peer->ordinal, 0);
        if (err == cudaErrorPeerAccessAlreadyEnabled)
            err = gpuSuccess;
        (void)cudaGetLastError();
        if (err != gpuSuccess)
            v = 0;
    }
    *can_access = v != 0;
    return KEEL_OK;
}

static keel_status_t dev_stream_priority_range(void *device_ctx, int *least, int *greatest)
{
    keel__gpu_device_t *dev = device_ctx;
    cudaError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = gpuDeviceGetStreamPriorityRange(least, greatest);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_device_stream_priority_range", NULL);
    return KEEL_OK;
}

const keel_device_vtable_t keel__gpu_device_vtable = {
    .struct_size = sizeof(keel_device_vtable_t),
    .open = dev_open,
    .close = dev_close,
    .get_properties = dev_get_properties,
    .memory_info = dev_memory_info,
    .synchronize = dev_synchronize,
    .can_access_peer = dev_can_access_peer,
    .stream_priority_range = dev_stream_priority_range,
};
