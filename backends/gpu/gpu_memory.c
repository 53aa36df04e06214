/* SPDX-License-Identifier: MIT */
/* Memory: allocations of every kind, stream-ordered allocation from the
 * device's pool, memset and copies (pageable ones through gpu_staging.c),
 * for both GPU plugins. */
#include <stdio.h>
#include "gpu_internal.h"

static const char *kind_name(keel_memory_kind_t kind)
{
    switch (kind) {
    case KEEL_MEMORY_DEVICE:
        return "device";
    case KEEL_MEMORY_PINNED:
        return "pinned";
    case KEEL_MEMORY_MANAGED:
        return "managed";
    default:
        return "host";
    }
}

static gpuError_t alloc_once(keel__gpu_device_t *dev, keel_memory_kind_t kind, size_t bytes, void **ptr)
{
    switch (kind) {
    case KEEL_MEMORY_DEVICE:
        return KEEL_GPU_TRY(gpuMalloc(ptr, bytes));
    case KEEL_MEMORY_PINNED:
        /* Portable: usable for fast copies with every device, not just this one. */
        return KEEL_GPU_TRY(gpuHostAlloc(ptr, bytes, gpuHostAllocPortable));
    case KEEL_MEMORY_MANAGED:
        return KEEL_GPU_TRY(gpuMallocManaged(ptr, bytes, gpuMemAttachGlobal));
    default:
        return gpuErrorInvalidValue;
    }
}

static keel_status_t mem_alloc(void *device_ctx, keel_memory_kind_t kind, size_t bytes, void **ptr)
{
    keel__gpu_device_t *dev = device_ctx;
    if (kind == KEEL_MEMORY_MANAGED && !dev->managed_memory)
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                         "the device has no managed memory (" KEEL_GPU_NAME(gpuAttrManagedMemory)
                                         " is 0)");
    gpuError_t err = keel__gpu_use_device(dev);
    void *p = NULL;
    if (err == gpuSuccess)
        err = alloc_once(dev, kind, bytes, &p);
    if (err == gpuErrorMemoryAllocation && kind != KEEL_MEMORY_PINNED && dev->pools_supported) {
        /* The stream-ordered pool keeps freed memory (release threshold at
         * the maximum); give what it holds unused back and try once more. */
        (void)gpuGetLastError();
        if (gpuMemPoolTrimTo(dev->pool, 0) == gpuSuccess)
            err = alloc_once(dev, kind, bytes, &p);
    }
    if (err != gpuSuccess)   /* the core prefixes the call, size, kind and device */
        return keel__gpu_error(err, NULL, kind == KEEL_MEMORY_DEVICE ? KEEL_GPU_NAME(gpuMalloc)
                                           : kind == KEEL_MEMORY_PINNED ? KEEL_GPU_NAME(gpuHostAlloc)
                                                                        : KEEL_GPU_NAME(gpuMallocManaged));
    *ptr = p;
    return KEEL_OK;
}

static keel_status_t mem_free(void *device_ctx, keel_memory_kind_t kind, void *ptr)
{
    keel__gpu_device_t *dev = device_ctx;
    gpuError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = kind == KEEL_MEMORY_PINNED ? gpuFreeHost(ptr) : gpuFree(ptr);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_free", kind_name(kind));
    return KEEL_OK;
}

static keel_status_t mem_alloc_async(void *stream_ctx, size_t bytes, void **ptr)
{
    keel__gpu_stream_t *s = stream_ctx;
    void *p = NULL;
    /* Served from the default pool of the stream's device. */
    gpuError_t err = KEEL_GPU_TRY(gpuMallocAsync(&p, bytes, s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))   /* the core prefixes the call, size and device */
        return keel__gpu_error(err, NULL, KEEL_GPU_NAME(gpuMallocAsync));
    *ptr = p;
    return KEEL_OK;
}

static keel_status_t mem_free_async(void *stream_ctx, void *ptr)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = gpuFreeAsync(ptr, s->stream);
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_free_async", NULL);
    return KEEL_OK;
}

static keel_status_t copy_error(gpuError_t err, const char *fn, keel_memory_kind_t dk, keel_memory_kind_t sk,
                                size_t bytes)
{
    char what[96];
    snprintf(what, sizeof what, "%zu bytes %s to %s", bytes, kind_name(sk), kind_name(dk));
    return keel__gpu_error(err, fn, what);
}

/* Dispatch of one copy: pageable host memory of some size goes through the
 * staging pipeline, everything else to the runtime as it is. *synced says
 * whether the copy is already complete on return. */
static keel_status_t copy(keel__gpu_stream_t *s, void *dst, keel_memory_kind_t dk, const void *src,
                          keel_memory_kind_t sk, size_t bytes, const char *fn, int *synced)
{
    *synced = 0;
    if (sk == KEEL_MEMORY_HOST && dk == KEEL_MEMORY_DEVICE &&
        keel__gpu_pageable_route(s, src, bytes, 0) == KEEL__GPU_COPY_STAGED)
        return keel__gpu_staged_h2d(s, dst, src, bytes, fn);
    if (dk == KEEL_MEMORY_HOST && sk == KEEL_MEMORY_DEVICE) {
        int route = keel__gpu_pageable_route(s, dst, bytes, 1);
        keel_status_t st;
        if (route == KEEL__GPU_COPY_STAGED) {
            *synced = 1;
            return keel__gpu_staged_d2h(s, dst, src, bytes, fn);
        }
        if (route == KEEL__GPU_COPY_BOUNCE && keel__gpu_bounce_d2h(s, dst, src, bytes, fn, &st)) {
            *synced = 1;
            return st;
        }
    }
    gpuError_t err = KEEL_GPU_TRY(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDefault, s->stream));
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return copy_error(err, fn, dk, sk, bytes);
    return KEEL_OK;
}

static keel_status_t mem_memcpy_async(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, const void *src,
                                      keel_memory_kind_t src_kind, size_t bytes)
{
    int synced;
    keel_status_t st = copy(stream_ctx, dst, dst_kind, src, src_kind, bytes, "keel_memcpy_async", &synced);
    keel__gpu_stream_touch(stream_ctx);
    return st;
}

static keel_status_t mem_memcpy_sync(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, const void *src,
                                     keel_memory_kind_t src_kind, size_t bytes)
{
    keel__gpu_stream_t *s = stream_ctx;
    int synced;
    keel_status_t st = copy(s, dst, dst_kind, src, src_kind, bytes, "keel_memcpy", &synced);
    keel__gpu_stream_touch(s);
    if (st != KEEL_OK || synced)
        return st;
    gpuError_t err = gpuStreamSynchronize(s->stream);
    if (err != gpuSuccess)
        return copy_error(err, "keel_memcpy", dst_kind, src_kind, bytes);
    return KEEL_OK;
}

static keel_status_t mem_memset_async(void *stream_ctx, void *dst, int value, size_t bytes)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = KEEL_GPU_TRY(gpuMemsetAsync(dst, value, bytes, s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_memset_async", NULL);
    return KEEL_OK;
}

static keel_status_t mem_memcpy_peer_async(void *stream_ctx, void *dst, void *dst_device_ctx, const void *src,
                                           void *src_device_ctx, size_t bytes)
{
    keel__gpu_stream_t *s = stream_ctx;
    const keel__gpu_device_t *dd = dst_device_ctx, *sd = src_device_ctx;
    gpuError_t err = KEEL_GPU_TRY(gpuMemcpyPeerAsync(dst, dd->ordinal, src, sd->ordinal, bytes, s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess)) {
        char what[96];
        snprintf(what, sizeof what, "%zu bytes from " KEEL_GPU_DEVICE_FMT " to " KEEL_GPU_DEVICE_FMT, bytes,
                 sd->ordinal, dd->ordinal);
        return keel__gpu_error(err, "keel_memcpy_async", what);
    }
    return KEEL_OK;
}

/* Pitched copies go to the runtime as they are, pageable host memory
 * included (its 2D copy stages them itself). */
static keel_status_t mem_memcpy_2d_async(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, size_t dst_pitch,
                                         const void *src, keel_memory_kind_t src_kind, size_t src_pitch, size_t width,
                                         size_t height)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = KEEL_GPU_TRY(gpuMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, gpuMemcpyDefault,
                                                   s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return copy_error(err, "keel_memcpy_2d", dst_kind, src_kind, width * height);
    return KEEL_OK;
}

static keel_status_t mem_memset_2d_async(void *stream_ctx, void *dst, size_t pitch, int value, size_t width,
                                         size_t height)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = KEEL_GPU_TRY(gpuMemset2DAsync(dst, pitch, value, width, height, s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_memset_2d", NULL);
    return KEEL_OK;
}

static keel_status_t mem_host_register(void *device_ctx, void *ptr, size_t bytes)
{
    keel__gpu_device_t *dev = device_ctx;
    gpuError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess) /* portable: fast copies with every device, as keel_malloc_host's memory */
        err = KEEL_GPU_TRY(gpuHostRegister(ptr, bytes, gpuHostRegisterPortable));
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, NULL, KEEL_GPU_NAME(gpuHostRegister));
}

static keel_status_t mem_host_unregister(void *device_ctx, void *ptr)
{
    keel__gpu_device_t *dev = device_ctx;
    gpuError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = gpuHostUnregister(ptr);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, NULL, KEEL_GPU_NAME(gpuHostUnregister));
}

static keel_status_t mem_prefetch_async(void *stream_ctx, const void *ptr, size_t bytes, void *to_device_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    const keel__gpu_device_t *to = to_device_ctx;
    gpuError_t err = KEEL_GPU_TRY(keel__gpu_prefetch(ptr, bytes, to ? to->ordinal : -1, s->stream));
    keel__gpu_stream_touch(s);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, "keel_memory_prefetch_async", gpuPrefetchName);
}

static keel_status_t mem_advise(void *device_ctx, const void *ptr, size_t bytes, int advice, void *target_device_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    const keel__gpu_device_t *target = target_device_ctx;
    gpuError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(keel__gpu_advise(ptr, bytes, advice, target ? target->ordinal : -1));
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, "keel_memory_advise", gpuAdviseName);
}

const keel_memory_vtable_t keel__gpu_memory_vtable = {
    .struct_size = sizeof(keel_memory_vtable_t),
    .alloc = mem_alloc,
    .free = mem_free,
    .alloc_async = mem_alloc_async,
    .free_async = mem_free_async,
    .memcpy_async = mem_memcpy_async,
    .memcpy_sync = mem_memcpy_sync,
    .memset_async = mem_memset_async,
    .memcpy_peer_async = mem_memcpy_peer_async,
    .memcpy_2d_async = mem_memcpy_2d_async,
    .memset_2d_async = mem_memset_2d_async,
    .host_register = mem_host_register,
    .host_unregister = mem_host_unregister,
    .prefetch_async = mem_prefetch_async,
    .advise = mem_advise,
};
