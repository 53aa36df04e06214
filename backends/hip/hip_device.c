/* SPDX-License-Identifier: MIT */
/* Devices of keel-hip.so: opening one (memory pool, host-function mode), its
 * properties and device-wide operations. HIP's primary contexts are implicit
 * (hipSetDevice), so a device holds none (on HIP's NVIDIA platform it notes
 * the primary context, for the driver's module calls: hip_module.c);
 * properties come from one hipGetDeviceProperties, since several attributes
 * CUDA answers (opt-in shared memory, copy engines) are "CUDA only" in HIP.
 * On NVIDIA those come from the same call (CUDA fills them), and the
 * architecture is sm_XY from the compute capability: gcnArchName is AMD's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "hip_internal.h"


static keel_status_t dev_open(void *backend_ctx, int index, void **device_ctx)
{
    (void)backend_ctx;
    keel__gpu_device_t *dev = calloc(1, sizeof *dev);
    if (dev == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "no host memory");
    dev->ordinal = index;
    hipDeviceProp_t prop;
    memset(&prop, 0, sizeof prop);
    gpuError_t err = hipDeviceGet(&dev->gpudev, index);
    if (err == gpuSuccess)
        err = hipGetDeviceProperties(&prop, index);
    if (err != gpuSuccess) {
        free(dev);
        return keel__gpu_error(err, NULL, "hipGetDeviceProperties");
    }
    pthread_mutex_init(&dev->lock, NULL);
#ifdef __HIP_PLATFORM_NVIDIA__
    /* The primary context, which hipSetDevice makes current: the driver's
     * module API of hip_module.c works in it. */
    err = hipSetDevice(index);
    if (err == gpuSuccess)
        err = hipCUResultTohipError(cuCtxGetCurrent(&dev->primary));
    if (err == gpuSuccess && dev->primary == NULL)
        err = hipErrorInvalidContext;
    if (err != gpuSuccess) {
        pthread_mutex_destroy(&dev->lock);
        free(dev);
        return keel__gpu_error(err, NULL, "making the device's primary context current");
    }
    dev->cc_major = prop.major;
    dev->cc_minor = prop.minor;
    snprintf(dev->arch, sizeof dev->arch, KEEL_GPU_ARCH_PREFIX "%d%d", prop.major, prop.minor);
#else
    /* "gfx90a:sramecc+:xnack-": the architecture is the part before the features. */
    prop.gcnArchName[sizeof prop.gcnArchName - 1] = '\0';
    size_t n = strcspn(prop.gcnArchName, ":");
    if (n >= sizeof dev->arch)
        n = sizeof dev->arch - 1;
    memcpy(dev->arch, prop.gcnArchName, n);
    dev->arch[n] = '\0';
#endif
    dev->managed_memory = prop.managedMemory;
    int v = 0;
    if (gpuDeviceGetAttribute(&v, gpuAttrMemoryPoolsSupported, index) != gpuSuccess)
        v = 0;
    (void)gpuGetLastError();
    dev->pools_supported = v;
    /* Host functions on the stream's own thread through hipStreamWaitValue32,
     * unless KEEL_CUDA_HOST_FUNCS=cuda (the name is shared with the CUDA
     * plugin, whose code this is) asks for the runtime's thread. */
    const char *hf = getenv("KEEL_CUDA_HOST_FUNCS");
    atomic_init(&dev->stream_wait_value, !(hf != NULL && strcasecmp(hf, "cuda") == 0));
    if (dev->pools_supported) {
        uint64_t threshold = UINT64_MAX;
        err = keel__gpu_use_device(dev);
        if (err == gpuSuccess)
            err = gpuDeviceGetDefaultMemPool(&dev->pool, index);
        if (err == gpuSuccess)
            err = gpuMemPoolSetAttribute(dev->pool, gpuMemPoolAttrReleaseThreshold, &threshold);
        if (err != gpuSuccess) {
            pthread_mutex_destroy(&dev->lock);
            free(dev);
            return keel__gpu_error(err, NULL, "setting up the memory pool");
        }
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
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}

static keel_status_t dev_get_properties(void *device_ctx, keel_device_properties_t *p)
{
    const char *fn = "keel_device_get_properties";
    keel__gpu_device_t *dev = device_ctx;
    hipDeviceProp_t prop;
    memset(&prop, 0, sizeof prop);
    gpuError_t err = hipGetDeviceProperties(&prop, dev->ordinal);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, "hipGetDeviceProperties");
    snprintf(p->name, sizeof p->name, "%s", prop.name);
    snprintf(p->vendor, sizeof p->vendor, "%s", KEEL_GPU_VENDOR);
    snprintf(p->architecture, sizeof p->architecture, "%s", dev->arch);
    snprintf(p->backend, sizeof p->backend, "%s", KEEL_GPU_BACKEND_NAME);
    p->type = KEEL_DEVICE_TYPE_GPU;
    p->index = dev->ordinal;
    p->total_memory = prop.totalGlobalMem;
    p->compute_units = prop.multiProcessorCount;
    p->max_threads_per_block = prop.maxThreadsPerBlock;
    for (int i = 0; i < 3; i++) {
        p->max_block_dim[i] = prop.maxThreadsDim[i];
        p->max_grid_dim[i] = prop.maxGridSize[i];
    }
    p->warp_size = prop.warpSize;
    p->clock_rate_khz = prop.clockRate;
#ifdef __HIP_PLATFORM_NVIDIA__
    /* What a block may use once keel_kernel_set_max_dynamic_shared raised
     * the kernel's limit (hip_module.c), as on the CUDA backend. */
    p->shared_memory_per_block = prop.sharedMemPerBlockOptin > prop.sharedMemPerBlock ? prop.sharedMemPerBlockOptin
                                                                                      : prop.sharedMemPerBlock;
    p->compute_capability_major = prop.major;
    p->compute_capability_minor = prop.minor;
    p->unified_addressing = prop.unifiedAddressing;
    p->async_engines = prop.asyncEngineCount;
#else
    /* No opt-in beyond the per-block limit on AMD: the LDS a block may use. */
    p->shared_memory_per_block = prop.sharedMemPerBlock;
    p->compute_capability_major = 0;   /* NVIDIA only (keel/device.h) */
    p->compute_capability_minor = 0;
    p->unified_addressing = 1;         /* every ROCm device shares the host's address space */
    p->async_engines = 0;              /* HIP does not say */
#endif
    p->pci_bus_id = prop.pciBusID;
    p->managed_memory = prop.managedMemory;
    p->concurrent_managed_access = prop.concurrentManagedAccess;
    p->stream_ordered_alloc = dev->pools_supported;
    int least = 0, greatest = 0;
    err = gpuDeviceGetStreamPriorityRange(&least, &greatest);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, "hipDeviceGetStreamPriorityRange");
    p->stream_priorities = least != greatest;
    size_t free_b = 0, total_b = 0;
    err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = gpuMemGetInfo(&free_b, &total_b);
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, "hipMemGetInfo");
    p->free_memory = free_b;
    return KEEL_OK;
}

static keel_status_t dev_synchronize(void *device_ctx)
{
    gpuError_t err = keel__gpu_use_device(device_ctx);
    if (err == gpuSuccess)
        err = gpuDeviceSynchronize();
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, "keel_device_synchronize", NULL);
}

static keel_status_t dev_memory_info(void *device_ctx, size_t *free_bytes, size_t *total_bytes)
{
    gpuError_t err = keel__gpu_use_device(device_ctx);
    if (err == gpuSuccess)
        err = gpuMemGetInfo(free_bytes, total_bytes);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, "keel_device_memory_info", "hipMemGetInfo");
}

static keel_status_t dev_can_access_peer(void *device_ctx, void *peer_device_ctx, int *can_access)
{
    keel__gpu_device_t *dev = device_ctx, *peer = peer_device_ctx;
    int v = dev->ordinal == peer->ordinal;
    if (!v) {
        gpuError_t err = gpuDeviceCanAccessPeer(&v, dev->ordinal, peer->ordinal);
        if (err != gpuSuccess)
            return keel__gpu_error(err, "keel_device_can_access_peer", NULL);
        /* As on CUDA: "can access" means a kernel may touch peer memory now. */
        if (v && (err = keel__gpu_use_device(dev)) == gpuSuccess)
            err = hipDeviceEnablePeerAccess(peer->ordinal, 0);
        if (err != gpuSuccess && err != hipErrorPeerAccessAlreadyEnabled)
            v = 0;
        (void)gpuGetLastError();
    }
    *can_access = v != 0;
    return KEEL_OK;
}

static keel_status_t dev_stream_priority_range(void *device_ctx, int *least, int *greatest)
{
    gpuError_t err = keel__gpu_use_device(device_ctx);
    if (err == gpuSuccess)
        err = gpuDeviceGetStreamPriorityRange(least, greatest);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, "keel_device_stream_priority_range", NULL);
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
