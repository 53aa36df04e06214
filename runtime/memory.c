/* SPDX-License-Identifier: MIT */
/* Public memory API: allocation and freeing through the backend plus the
 * registry, and pointer queries. Copies and memsets are in runtime/copy.c. */
#include <stdio.h>
#include <string.h>
#include "backends/cpu/cpu_check.h"
#include "runtime/copy.h"

const char *keel__memory_kind_name(keel_memory_kind_t k)
{
    switch (k) {
    case KEEL_MEMORY_DEVICE: return "device";
    case KEEL_MEMORY_PINNED: return "pinned host";
    case KEEL_MEMORY_MANAGED: return "managed";
    default: return "host";
    }
}

/* Gives a block that the record of freed blocks held back to its backend.
 * It was waited for when it was freed, and no Keel call has accepted it
 * since, so nothing waits here. There is no caller to report a failure to
 * (the free succeeded long ago): it is logged. */
static void release_held(const keel__alloc_t *a)
{
    struct keel_device *d = a->device;
    keel_status_t st = d->plugin->memory->free(d->ctx, a->kind, (void *)a->base);
    if (st != KEEL_OK)
        keel__log(KEEL_LOG_WARN, "releasing the freed block %p of %s: %s", (void *)a->base, d->name,
                  keel_status_name(st));
}

void keel__release_evicted(const keel__alloc_t *ev, int n)
{
    for (int i = 0; i < n; i++)
        release_held(&ev[i]);
}

/* Gives back every freed block of dev the record holds, so that an
 * allocation that failed can try again; 1 if there was any. */
static int release_all_held(struct keel_device *dev)
{
    keel__alloc_t a;
    int any = 0;
    while (keel__registry_take_held(dev, &a)) {
        release_held(&a);
        any = 1;
    }
    return any;
}

/* After an allocation ran out of memory: gives back the blocks streams keep
 * for reuse (not for pinned memory, which they never hold) and the freed
 * blocks the record holds; 1 if anything went back. */
static int give_back_kept(struct keel_device *dev, keel_memory_kind_t kind)
{
    int released = 0;
    if (kind != KEEL_MEMORY_PINNED && keel__reuse_flush(dev, &released) != KEEL_OK)
        released = 0;
    return release_all_held(dev) | released;
}

/* The backend's alloc entry, which KEEL_FAULT device-alloc fails before
 * it is called (as a device out of memory: the caller prefixes the call,
 * size, kind and device). */
static keel_status_t backend_alloc(struct keel_device *d, keel_memory_kind_t kind, size_t bytes, void **p)
{
    if (KEEL__FAULT(KEEL_FAULT_DEVICE_ALLOC))
        return keel__fault_fail(KEEL_ERROR_OUT_OF_MEMORY, "out of device memory");
    return d->plugin->memory->alloc(d->ctx, kind, bytes, p);
}

static keel_status_t alloc_kind(keel_device_t *device, size_t bytes, void **ptr, keel_memory_kind_t kind,
                                const char *fn)
{
    keel_status_t st = keel__device_ready(device, fn);
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(ptr, fn, "ptr");
    if (bytes == 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: size is 0 bytes", fn);
    void *p = NULL;
    st = backend_alloc(device, kind, bytes, &p);
    if (st == KEEL_ERROR_OUT_OF_MEMORY && give_back_kept(device, kind))
        st = backend_alloc(device, kind, bytes, &p); /* kept and held blocks are back */
    if (st != KEEL_OK)
        return keel__prefix_error(st, "%s: %zu bytes of %s memory on %s", fn, bytes, keel__memory_kind_name(kind), device->name);
    st = keel__registry_add(p, bytes, kind, device, 0);
    if (st != KEEL_OK) {
        device->plugin->memory->free(device->ctx, kind, p);
        return st;
    }
    *ptr = p;
    return KEEL_OK;
}

keel_status_t keel_malloc(keel_device_t *device, size_t bytes, void **ptr)
{
    return alloc_kind(device, bytes, ptr, KEEL_MEMORY_DEVICE, "keel_malloc");
}

keel_status_t keel_malloc_pinned(keel_device_t *device, size_t bytes, void **ptr)
{
    return alloc_kind(device, bytes, ptr, KEEL_MEMORY_PINNED, "keel_malloc_pinned");
}

keel_status_t keel_malloc_host(keel_device_t *device, size_t bytes, void **ptr)
{
    return alloc_kind(device, bytes, ptr, KEEL_MEMORY_PINNED, "keel_malloc_host");
}

keel_status_t keel_malloc_managed(keel_device_t *device, size_t bytes, void **ptr)
{
    return alloc_kind(device, bytes, ptr, KEEL_MEMORY_MANAGED, "keel_malloc_managed");
}

static keel_status_t unknown_pointer(const char *fn, const void *ptr)
{
    keel__alloc_t a;
    keel__ptr_class_t c = keel__registry_classify(ptr, 0, &a);
    if (c == KEEL__PTR_LIVE)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is inside an allocation of %zu bytes at %p, not its start",
                               fn, ptr, a.size, (void *)a.base);
    if (c == KEEL__PTR_FREED && a.foreign == KEEL__FOREIGN_MODULE)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p %s the variable of %zu bytes at %p of a module on "
                               "%s, which keel_module_unload unloaded", fn, ptr,
                               a.base == (uintptr_t)ptr ? "is" : "is inside", a.size, (void *)a.base, a.device->name);
    if (c == KEEL__PTR_FREED)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p %s the %s block of %zu bytes at %p on %s, which was "
                               "already freed", fn, ptr, a.base == (uintptr_t)ptr ? "is" : "is inside",
                               keel__memory_kind_name(a.kind), a.size, (void *)a.base, a.device->name);
    return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                           "%s: %p is not a live Keel allocation (never allocated by Keel, or already freed)", fn, ptr);
}

static keel_status_t foreign_memory(const char *fn, const void *ptr, const keel__alloc_t *a)
{
    if (a->foreign == KEEL__FOREIGN_REGISTERED)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "%s: %p is host memory registered with keel_host_register (%zu bytes for %s); "
                               "keel_host_unregister releases it", fn, ptr, a->size, a->device->name);
    if (a->foreign == KEEL__FOREIGN_MODULE)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "%s: %p is a variable of a module (%zu bytes on %s, from keel_module_get_global); it "
                               "lives as long as its module, until keel_module_unload", fn, ptr, a->size,
                               a->device->name);
    return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                           "%s: %p is memory of another library imported through DLPack (%zu bytes on %s); "
                           "keel_dlpack_release gives it back", fn, ptr, a->size, a->device->name);
}

/* Prefixes a failure of the backend, met while freeing, with what it means for the block. */
static keel_status_t not_freed(keel_status_t st, const char *fn, const void *ptr, const struct keel_device *d)
{
    return keel__prefix_error(st, "%s: %p was not freed (it stays allocated; call again): %s reported", fn, ptr,
                              d->name);
}

/* Waits for the owner of a and for every device in reach; on a failure
 * sets *failed to the device that reported it. */
keel_status_t keel__wait_for_devices(struct keel_device *owner, uint64_t reach, int owner_too,
                                     struct keel_device **failed)
{
    keel_status_t st;
    if (owner_too && (st = owner->plugin->device->synchronize(owner->ctx)) != KEEL_OK) {
        *failed = owner;
        return st;
    }
    reach &= ~keel__reach_bit(owner);
    while (reach) {
        unsigned slot = (unsigned)__builtin_ctzll(reach);
        reach &= reach - 1;
        if (slot == KEEL__REACH_SLOTS) {
            if ((st = keel__synchronize_far_devices(owner, failed)) != KEEL_OK)
                return st;
            continue;
        }
        struct keel_device *d = keel__device_at_slot(slot);
        if (d && (st = d->plugin->device->synchronize(d->ctx)) != KEEL_OK) {
            *failed = d;
            return st;
        }
    }
    return KEEL_OK;
}

keel_status_t keel_free(void *ptr)
{
    if (!ptr)
        return KEEL_OK;
    keel__alloc_t a;
    if (!keel__registry_find(ptr, &a) || a.base != (uintptr_t)ptr)
        return unknown_pointer("keel_free", ptr);
    struct keel_device *d = a.device, *failed = d;
    if (a.foreign)
        return foreign_memory("keel_free", ptr, &a);
    if (atomic_load(&d->default_stream->capturing))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_free: the default stream of %s is capturing a graph; free after "
                               "the capture ends", d->name);
    /* As cudaFree: no queued work may still touch the memory, on the owning
     * device or on any other device whose streams were handed the block.
     * The entry stays in the registry until the block is really gone, so a
     * failure here leaves a block the caller can free again. */
    keel_status_t st = keel__wait_for_devices(d, a.reach, 1, &failed);
    if (st != KEEL_OK)
        return not_freed(st, "keel_free", ptr, failed);
    uint64_t waited = a.reach;
    if (keel__registry_remove(ptr, &a) != KEEL_OK) /* lost a race with another free */
        return unknown_pointer("keel_free", ptr);
    if (KEEL__UNLIKELY(a.reach & ~waited) && /* a copy on another device came in meanwhile */
        (st = keel__wait_for_devices(d, a.reach & ~waited, 0, &failed)) != KEEL_OK) {
        keel__registry_put_back(&a);
        return not_freed(st, "keel_free", ptr, failed);
    }
    keel__alloc_t ev[KEEL__RETIRE_EVICTS];
    int nev = 0;
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_freed(d, ptr, a.size);
    if (a.size <= KEEL__HOLD_MAX_BYTES && !a.stream_ordered) {
        /* Kept allocated while the record remembers it (internal.h). A
         * stream-ordered block is not: its release is ordered on a stream,
         * whose wait could report the errors of unrelated work. */
        keel__registry_retire(&a, KEEL__FREED_HELD, ev, &nev);
        keel__release_evicted(ev, nev);
        return KEEL_OK;
    }
    if (a.stream_ordered && d->plugin->memory->free_async) {
        void *sctx = d->default_stream->ctx;
        st = d->plugin->memory->free_async(sctx, ptr);
        if (st == KEEL_OK)
            st = d->plugin->stream->synchronize(sctx);
    } else {
        st = d->plugin->memory->free(d->ctx, a.kind, ptr);
    }
    if (st != KEEL_OK) {
        keel__registry_put_back(&a);
        return not_freed(st, "keel_free", ptr, d);
    }
    keel__registry_retire(&a, KEEL__FREED_FORGET, ev, &nev);
    keel__release_evicted(ev, nev);
    return KEEL_OK;
}


static keel_status_t alloc_async_once(struct keel_stream *s, size_t bytes, void **p)
{
    struct keel_device *d = s->device;
    const keel_memory_vtable_t *m = d->plugin->memory;
    if (KEEL__FAULT(KEEL_FAULT_DEVICE_ALLOC))
        return keel__fault_fail(KEEL_ERROR_OUT_OF_MEMORY, "out of device memory");
    return m->alloc_async ? m->alloc_async(s->ctx, bytes, p) : m->alloc(d->ctx, KEEL_MEMORY_DEVICE, bytes, p);
}

keel_status_t keel_malloc_async(keel_stream_t *stream, size_t bytes, void **ptr)
{
    CHECK_STREAM(stream, "keel_malloc_async");
    KEEL__CHECK_OUT(ptr, "keel_malloc_async", "ptr");
    if (bytes == 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_malloc_async: size is 0 bytes");
    if (atomic_load(&stream->capturing))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_malloc_async: the stream is capturing a graph; stream-ordered "
                               "allocation is not captured (allocate before the capture)");
    struct keel_device *d = stream->device;
    const keel_memory_vtable_t *m = d->plugin->memory;
    void *p = NULL;
    int hit, stream_ordered;
    keel_status_t st = keel__reuse_take(stream, bytes, &p, &stream_ordered, &hit);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "keel_malloc_async: freeing the block kept for reuse on the stream");
    if (!hit) {
        stream_ordered = m->alloc_async != NULL;
        st = alloc_async_once(stream, bytes, &p);
        if (st == KEEL_ERROR_OUT_OF_MEMORY && give_back_kept(d, KEEL_MEMORY_DEVICE))
            st = alloc_async_once(stream, bytes, &p); /* kept and held blocks are back */
        if (st != KEEL_OK)
            return keel__prefix_error(st, "keel_malloc_async: %zu bytes on %s", bytes, d->name);
    }
    st = keel__registry_add(p, bytes, KEEL_MEMORY_DEVICE, d, stream_ordered);
    if (st != KEEL_OK) {
        /* Kept for the next allocation (the retry of this one) if the
         * stream holds none, else released. */
        char detail[2048];
        snprintf(detail, sizeof detail, "%s", keel_last_error());
        if (keel__reuse_put(stream, p, bytes, stream_ordered) != KEEL_OK)
            keel__log(KEEL_LOG_WARN, "keel_malloc_async: a block of %zu bytes of %s could not be released: %s", bytes,
                      d->name, keel_last_error());
        keel__restore_error(st, detail);
        return st;
    }
    *ptr = p;
    return KEEL_OK;
}

keel_status_t keel_free_async(void *ptr, keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_free_async");
    if (!ptr)
        return KEEL_OK;
    if (atomic_load(&stream->capturing))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_free_async: the stream is capturing a graph; a stream-ordered "
                               "free cannot be captured (each replay would free the block again)");
    /* One registry operation on the hot path: take the entry out (and
     * remember the block as kept for reuse, before the stream may keep it:
     * once kept, another call on the stream may take it back and free it
     * again, and its entry must then replace this one, not the other way
     * round), put it back if the call turns out to be wrong. If the stream
     * does not keep it, keel__reuse_release corrects the record. */
    keel__alloc_t a, ev[KEEL__RETIRE_EVICTS];
    int nev = 0;
    if (keel__registry_remove_kept(ptr, &a, ev, &nev) != KEEL_OK)
        return unknown_pointer("keel_free_async", ptr);
    keel__release_evicted(ev, nev);
    if (KEEL__UNLIKELY(a.device != stream->device || a.kind != KEEL_MEMORY_DEVICE || a.foreign)) {
        keel__registry_put_back(&a);
        if (a.foreign)
            return foreign_memory("keel_free_async", ptr, &a);
        if (a.device != stream->device)
            return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_free_async: %p belongs to %s, the stream to %s",
                                   ptr, a.device->name, stream->device->name);
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "keel_free_async: %p is %s memory; only device memory is freed stream-ordered (use keel_free)",
                               ptr, keel__memory_kind_name(a.kind));
    }
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_freed_async(stream, ptr, a.size);
    keel_status_t st = keel__reuse_put(stream, ptr, a.size, a.stream_ordered);
    if (st != KEEL_OK) {
        keel__registry_put_back(&a);
        return not_freed(st, "keel_free_async", ptr, stream->device);
    }
    return KEEL_OK;
}

keel_status_t keel_pointer_get_info(const void *ptr, keel_pointer_info_t *info)
{
    KEEL__CHECK_OUT(info, "keel_pointer_get_info", "info");
    if (info->struct_size < sizeof(info->struct_size) + sizeof(info->kind))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_pointer_get_info: info->struct_size is %zu; set it to sizeof(keel_pointer_info_t)",
                               info->struct_size);
    keel__alloc_t a;
    keel_pointer_info_t full = {.struct_size = info->struct_size, .kind = KEEL_MEMORY_HOST};
    if (ptr && keel__registry_find(ptr, &a)) {
        full.kind = a.kind;
        full.device = a.device;
        full.base = (void *)a.base;
        full.size = a.size;
        full.offset = (uintptr_t)ptr - a.base;
    }
    memcpy(info, &full, info->struct_size < sizeof(full) ? info->struct_size : sizeof(full));
    return KEEL_OK;
}

void keel__memory_teardown(int (*backend_ok)(const struct keel_device *d))
{
    keel__alloc_t a;
    while (keel__registry_take_any(&a)) {
        struct keel_device *d = a.device;
        /* Another library's memory, or a module's variable (its module went before). */
        if (!backend_ok(d) || a.foreign == KEEL__FOREIGN_DLPACK || a.foreign == KEEL__FOREIGN_MODULE)
            continue;
        keel_status_t st;
        if (a.foreign == KEEL__FOREIGN_REGISTERED) {
            /* The application's memory: only unpinned. */
            keel_status_t (*unreg)(void *, void *) = KEEL__VT(d->plugin->memory, host_unregister);
            st = unreg ? unreg(d->ctx, (void *)a.base) : KEEL_OK;
        } else {
            /* Every stream of the device is idle by now, so even a
             * stream-ordered block goes back at once (as cudaFree takes one). */
            st = d->plugin->memory->free(d->ctx, a.kind, (void *)a.base);
        }
        if (st != KEEL_OK)
            keel__log(KEEL_LOG_WARN, "keel_finalize: releasing %zu bytes of %s memory at %p on %s: %s", a.size,
                      keel__memory_kind_name(a.kind), (void *)a.base, d->name, keel_status_name(st));
    }
}
