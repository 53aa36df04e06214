/* SPDX-License-Identifier: MIT */
/* The application's host memory made pinned (keel_host_register), and the
 * hints on managed memory (keel_memory_prefetch_async, keel_memory_advise).
 * A registered range is a foreign entry of the allocation registry, of kind
 * PINNED: the copies find it as they find keel_malloc_host's memory. */
#include <stdint.h>
#include "runtime/copy.h"

keel_status_t keel_host_register(keel_device_t *device, void *ptr, size_t bytes)
{
    const char *fn = "keel_host_register";
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: ptr is NULL", fn);
    if (bytes == 0 || bytes > UINTPTR_MAX - (uintptr_t)ptr)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %zu bytes at %p", fn, bytes, ptr);
    struct keel_device *d = device;
    const keel_memory_vtable_t *m = d->plugin->memory;
    keel_status_t (*reg)(void *, void *, size_t) = KEEL__VT(m, host_register);
    keel_status_t (*unreg)(void *, void *) = KEEL__VT(m, host_unregister);
    if (!reg || !unreg)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend cannot page-lock host memory", fn,
                               d->backend->name);
    /* Entered first, so that a range that overlaps Keel's memory is refused
     * before the vendor sees it, and two threads cannot register it twice. */
    keel__alloc_t hit;
    int overlapped = 0;
    st = keel__registry_add_foreign(ptr, bytes, KEEL_MEMORY_PINNED, d, KEEL__FOREIGN_REGISTERED, &hit, &overlapped);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "%s", fn);
    if (overlapped)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "%s: %zu bytes at %p overlap %s memory of %s (%zu bytes at %p)%s", fn, bytes, ptr,
                               keel__memory_kind_name(hit.kind), hit.device->name, hit.size, (void *)hit.base,
                               hit.foreign == KEEL__FOREIGN_REGISTERED ? ", registered already" : "");
    if ((st = reg(d->ctx, ptr, bytes)) != KEEL_OK) {
        keel__registry_remove(ptr, NULL);
        return keel__prefix_error(st, "%s: %zu bytes at %p for %s", fn, bytes, ptr, d->name);
    }
    return KEEL_OK;
}

keel_status_t keel_host_unregister(void *ptr)
{
    const char *fn = "keel_host_unregister";
    keel__alloc_t a;
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: ptr is NULL", fn);
    if (!keel__registry_find(ptr, &a) || a.base != (uintptr_t)ptr || a.foreign != KEEL__FOREIGN_REGISTERED)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is not the start of a range keel_host_register "
                               "registered", fn, ptr);
    struct keel_device *d = a.device, *failed = d;
    keel_status_t st = keel__wait_for_devices(d, a.reach, 1, &failed);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "%s: %p stays registered: %s reported", fn, ptr, failed->name);
    if (keel__registry_remove(ptr, &a) != KEEL_OK) /* another thread unregistered it meanwhile */
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is not registered (any more)", fn, ptr);
    keel_status_t (*unreg)(void *, void *) = KEEL__VT(d->plugin->memory, host_unregister);
    if ((st = unreg(d->ctx, ptr)) != KEEL_OK) {
        keel__registry_put_back(&a);
        return keel__prefix_error(st, "%s: %p stays registered: %s reported", fn, ptr, d->name);
    }
    return KEEL_OK;
}

/* The managed allocation that holds [ptr, ptr + bytes), for a hint. */
static keel_status_t managed_range(const char *fn, const void *ptr, size_t bytes, keel__alloc_t *a)
{
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: ptr is NULL", fn);
    if (bytes == 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: 0 bytes", fn);
    if (!keel__registry_find(ptr, a) || a->kind != KEEL_MEMORY_MANAGED)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is not in managed memory (keel_malloc_managed)",
                               fn, ptr);
    size_t offset = (uintptr_t)ptr - a->base;
    if (bytes > a->size - offset)
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE, "%s: %zu bytes at %p run past the end of the managed "
                               "allocation of %zu bytes at %p", fn, bytes, ptr, a->size, (void *)a->base);
    return KEEL_OK;
}

/* A device named by a hint: NULL (the host) or a device of a's backend. */
static keel_status_t hint_device(const char *fn, keel_device_t *device, const keel__alloc_t *a, void **ctx)
{
    *ctx = NULL;
    if (!device)
        return KEEL_OK;
    KEEL__CHECK_HANDLE(device, KEEL__MAGIC_DEVICE, fn, "device");
    struct keel_device *d = device;
    if (d->backend != a->device->backend)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: the memory is of %s, the device %s", fn,
                               a->device->name, d->name);
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    *ctx = d->ctx;
    return KEEL_OK;
}

keel_status_t keel_memory_prefetch_async(const void *ptr, size_t bytes, keel_device_t *to, keel_stream_t *stream)
{
    const char *fn = "keel_memory_prefetch_async";
    CHECK_STREAM(stream, fn);
    keel__alloc_t a;
    void *to_ctx;
    keel_status_t st;
    if ((st = managed_range(fn, ptr, bytes, &a)) != KEEL_OK || (st = hint_device(fn, to, &a, &to_ctx)) != KEEL_OK)
        return st;
    if (stream->device->backend != a.device->backend)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: the memory is of %s, the stream of %s", fn,
                               a.device->name, stream->device->name);
    keel_status_t (*prefetch)(void *, const void *, size_t, void *) =
        KEEL__VT(stream->device->plugin->memory, prefetch_async);
    if (!prefetch)
        return KEEL_OK;
    keel__copy_note_reach(&(side_t){.a = a, .known = 1}, stream->device);
    KEEL__FAULT_ENQUEUE(fn);
    return prefetch(stream->ctx, ptr, bytes, to_ctx);
}

keel_status_t keel_memory_advise(const void *ptr, size_t bytes, keel_memory_advice_t advice, keel_device_t *device)
{
    const char *fn = "keel_memory_advise";
    if (advice < KEEL_ADVISE_READ_MOSTLY || advice > KEEL_ADVISE_UNSET_ACCESSED_BY)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: advice %d is not a keel_memory_advice_t", fn,
                               (int)advice);
    keel__alloc_t a;
    void *target;
    keel_status_t st;
    if ((st = managed_range(fn, ptr, bytes, &a)) != KEEL_OK || (st = hint_device(fn, device, &a, &target)) != KEEL_OK)
        return st;
    keel_status_t (*advise)(void *, const void *, size_t, int, void *) = KEEL__VT(a.device->plugin->memory, advise);
    return advise ? advise(a.device->ctx, ptr, bytes, (int)advice, target) : KEEL_OK;
}
