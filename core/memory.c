/* Public memory API: allocation through the backend plus the registry, and
 * copies whose direction and bounds come from the registry. */
#include <stdio.h>
#include <string.h>
#include "core/internal.h"

static const char *kind_name(keel_memory_kind_t k)
{
    switch (k) {
    case KEEL_MEMORY_DEVICE: return "device";
    case KEEL_MEMORY_PINNED: return "pinned host";
    case KEEL_MEMORY_MANAGED: return "managed";
    default: return "host";
    }
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
    st = device->plugin->memory->alloc(device->ctx, kind, bytes, &p);
    int released = 0;
    if (st == KEEL_ERROR_OUT_OF_MEMORY && kind != KEEL_MEMORY_PINNED &&
        keel__reuse_flush(device, &released) == KEEL_OK && released)
        st = device->plugin->memory->alloc(device->ctx, kind, bytes, &p); /* blocks kept for reuse are back */
    if (st != KEEL_OK)
        return keel__prefix_error(st, "%s: %zu bytes of %s memory on %s", fn, bytes, kind_name(kind), device->name);
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
    if (keel__registry_find(ptr, &a))
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is inside an allocation of %zu bytes at %p, not its start",
                               fn, ptr, a.size, (void *)a.base);
    return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                           "%s: %p is not a live Keel allocation (never allocated by Keel, or already freed)", fn, ptr);
}

/* Prefixes a failure of the backend, met while freeing, with what it means for the block. */
static keel_status_t not_freed(keel_status_t st, const char *fn, const void *ptr, const struct keel_device *d)
{
    return keel__prefix_error(st, "%s: %p was not freed (it stays allocated; call again): %s reported", fn, ptr,
                              d->name);
}

/* Waits for the owner of a and for every device in reach; on a failure
 * sets *failed to the device that reported it. */
static keel_status_t wait_for_devices(struct keel_device *owner, uint64_t reach, int owner_too,
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
    if (atomic_load(&d->default_stream->capturing))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_free: the default stream of %s is capturing a graph; free after "
                               "the capture ends", d->name);
    /* As cudaFree: no queued work may still touch the memory, on the owning
     * device or on any other device whose streams were handed the block.
     * The entry stays in the registry until the block is really gone, so a
     * failure here leaves a block the caller can free again. */
    keel_status_t st = wait_for_devices(d, a.reach, 1, &failed);
    if (st != KEEL_OK)
        return not_freed(st, "keel_free", ptr, failed);
    uint64_t waited = a.reach;
    if (keel__registry_remove(ptr, &a) != KEEL_OK) /* lost a race with another free */
        return unknown_pointer("keel_free", ptr);
    if (KEEL__UNLIKELY(a.reach & ~waited) && /* a copy on another device came in meanwhile */
        (st = wait_for_devices(d, a.reach & ~waited, 0, &failed)) != KEEL_OK) {
        keel__registry_put_back(&a);
        return not_freed(st, "keel_free", ptr, failed);
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
    return KEEL_OK;
}

#define CHECK_STREAM(s, fn)                                                                                  \
    do {                                                                                                     \
        KEEL__CHECK_HANDLE(s, KEEL__MAGIC_STREAM, fn, "stream");                                            \
    } while (0)

static keel_status_t alloc_async_once(struct keel_stream *s, size_t bytes, void **p)
{
    struct keel_device *d = s->device;
    const keel_memory_vtable_t *m = d->plugin->memory;
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
        int released = 0;
        if (st == KEEL_ERROR_OUT_OF_MEMORY && keel__reuse_flush(d, &released) == KEEL_OK && released)
            st = alloc_async_once(stream, bytes, &p); /* blocks kept for reuse are back */
        if (st != KEEL_OK)
            return keel__prefix_error(st, "keel_malloc_async: %zu bytes on %s", bytes, d->name);
    }
    st = keel__registry_add(p, bytes, KEEL_MEMORY_DEVICE, d, stream_ordered);
    if (st != KEEL_OK) {
        keel__reuse_release(stream, p, stream_ordered);
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
    /* One registry operation on the hot path: take the entry out, put it
     * back if the call turns out to be wrong. */
    keel__alloc_t a;
    if (keel__registry_remove(ptr, &a) != KEEL_OK)
        return unknown_pointer("keel_free_async", ptr);
    if (KEEL__UNLIKELY(a.device != stream->device || a.kind != KEEL_MEMORY_DEVICE)) {
        keel__registry_put_back(&a);
        if (a.device != stream->device)
            return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_free_async: %p belongs to %s, the stream to %s",
                                   ptr, a.device->name, stream->device->name);
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "keel_free_async: %p is %s memory; only device memory is freed stream-ordered (use keel_free)",
                               ptr, kind_name(a.kind));
    }
    keel_status_t st = keel__reuse_put(stream, ptr, a.size, a.stream_ordered);
    if (st != KEEL_OK) {
        keel__registry_put_back(&a);
        return not_freed(st, "keel_free_async", ptr, stream->device);
    }
    return KEEL_OK;
}

/* One side of a copy or memset, resolved against the registry. */
typedef struct side {
    keel__alloc_t a;
    int known;
} side_t;

static keel_status_t resolve(const char *fn, const char *role, const void *ptr, size_t bytes, side_t *s)
{
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %s is NULL", fn, role);
    s->known = keel__registry_find(ptr, &s->a);
    if (!s->known) {
        memset(&s->a, 0, sizeof(s->a));
        s->a.kind = KEEL_MEMORY_HOST;
        return KEEL_OK;
    }
    size_t offset = (uintptr_t)ptr - s->a.base;
    if (bytes > s->a.size - offset)
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE,
                               "%s: %zu bytes %s %p run past the end of its %s allocation of %zu bytes at %p (offset %zu, "
                               "%zu bytes left)",
                               fn, bytes, strcmp(role, "dst") == 0 ? "to" : "from", ptr, kind_name(s->a.kind),
                               s->a.size, (void *)s->a.base, offset, s->a.size - offset);
    return KEEL_OK;
}

/* Records that a stream of dev is handed the block of s, when dev is not
 * its owner and is not recorded yet; nothing on the common path of a block
 * used on its own device. */
static inline void note_reach(const side_t *s, struct keel_device *dev)
{
    if (s->known && KEEL__UNLIKELY(s->a.device != dev) && !(s->a.reach & keel__reach_bit(dev)))
        keel__registry_add_reach(s->a.base, dev);
}

/* Memory of the CPU backend is plain host memory to any other backend. */
static void as_seen_by(side_t *s, struct keel_backend *b)
{
    if (s->known && s->a.device->backend != b && s->a.device->backend->builtin) {
        s->known = 0;
        s->a.kind = KEEL_MEMORY_HOST;
    }
}

/* Picks the device that performs a copy and checks the two sides can meet there. */
static keel_status_t copy_device(const char *fn, side_t *dst, side_t *src, struct keel_device **dev, int *peer)
{
    *peer = 0;
    if (dst->known && src->known && dst->a.device->backend != src->a.device->backend) {
        if (!dst->a.device->backend->builtin && !src->a.device->backend->builtin)
            return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH,
                                   "%s: dst is on %s and src on %s; Keel copies between backends only through host memory",
                                   fn, dst->a.device->name, src->a.device->name);
        /* Prefer the non-CPU backend: it sees the CPU side as host memory. */
        *dev = dst->a.device->backend->builtin ? src->a.device : dst->a.device;
    } else if (dst->known && (dst->a.kind == KEEL_MEMORY_DEVICE || !src->known)) {
        *dev = dst->a.device;
    } else {
        *dev = src->known ? src->a.device : NULL;
    }
    if (*dev) {
        as_seen_by(dst, (*dev)->backend);
        as_seen_by(src, (*dev)->backend);
        *peer = dst->known && src->known && dst->a.device != src->a.device && dst->a.kind == KEEL_MEMORY_DEVICE &&
                src->a.kind == KEEL_MEMORY_DEVICE;
    }
    return KEEL_OK;
}

static keel_status_t do_copy(struct keel_stream *s, void *dst, side_t *d, const void *src, side_t *r, size_t bytes,
                             int peer, int sync)
{
    const keel_memory_vtable_t *m = s->device->plugin->memory;
    keel_status_t st;
    if (peer) {
        if (!m->memcpy_peer_async)
            return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "copy between %s and %s: %s has no peer copies",
                                   d->a.device->name, r->a.device->name, s->device->backend->name);
        st = m->memcpy_peer_async(s->ctx, dst, d->a.device->ctx, src, r->a.device->ctx, bytes);
    } else if (sync && m->memcpy_sync) {
        return m->memcpy_sync(s->ctx, dst, d->a.kind, src, r->a.kind, bytes);
    } else {
        st = m->memcpy_async(s->ctx, dst, d->a.kind, src, r->a.kind, bytes);
    }
    if (st == KEEL_OK && sync)
        st = s->device->plugin->stream->synchronize(s->ctx);
    return st;
}

static keel_status_t refuse_capturing(struct keel_stream *s, const char *fn)
{
    if (KEEL__UNLIKELY(atomic_load_explicit(&s->capturing, memory_order_relaxed)))
        return keel__set_error(KEEL_ERROR_BUSY, "%s: the default stream of %s is capturing a graph; synchronous "
                               "calls would break the capture", fn, s->device->name);
    return KEEL_OK;
}

keel_status_t keel_memcpy(void *dst, const void *src, size_t bytes)
{
    side_t d, r;
    keel_status_t st;
    if ((st = resolve("keel_memcpy", "dst", dst, bytes, &d)) != KEEL_OK ||
        (st = resolve("keel_memcpy", "src", src, bytes, &r)) != KEEL_OK)
        return st;
    if (bytes == 0)
        return KEEL_OK;
    struct keel_device *dev;
    int peer;
    if ((st = copy_device("keel_memcpy", &d, &r, &dev, &peer)) != KEEL_OK)
        return st;
    if (!dev) {
        memmove(dst, src, bytes);
        return KEEL_OK;
    }
    if ((st = refuse_capturing(dev->default_stream, "keel_memcpy")) != KEEL_OK)
        return st;
    return do_copy(dev->default_stream, dst, &d, src, &r, bytes, peer, 1);
}

keel_status_t keel_memcpy_async(void *dst, const void *src, size_t bytes, keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_memcpy_async");
    side_t d, r;
    keel_status_t st;
    if ((st = resolve("keel_memcpy_async", "dst", dst, bytes, &d)) != KEEL_OK ||
        (st = resolve("keel_memcpy_async", "src", src, bytes, &r)) != KEEL_OK)
        return st;
    if (bytes == 0)
        return KEEL_OK;
    struct keel_backend *b = stream->device->backend;
    /* The owners as the registry has them: CPU memory seen by another
     * backend is host memory to the copy, but keel_free must still wait. */
    const side_t od = d, orr = r;
    as_seen_by(&d, b);
    as_seen_by(&r, b);
    side_t *sides[2] = {&d, &r};
    for (int i = 0; i < 2; i++)
        if (sides[i]->known && sides[i]->a.device->backend != b)
            return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_memcpy_async: %s is on %s, the stream on %s",
                                   i ? "src" : "dst", sides[i]->a.device->name, stream->device->name);
    int peer = d.known && r.known && d.a.device != r.a.device && d.a.kind == KEEL_MEMORY_DEVICE &&
               r.a.kind == KEEL_MEMORY_DEVICE;
    if (peer && stream->device != d.a.device && stream->device != r.a.device)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH,
                               "keel_memcpy_async: a copy from %s to %s must be enqueued on a stream of one of them, "
                               "not of %s",
                               r.a.device->name, d.a.device->name, stream->device->name);
    if (!peer) {
        for (int i = 0; i < 2; i++)
            if (sides[i]->known && sides[i]->a.kind == KEEL_MEMORY_DEVICE && sides[i]->a.device != stream->device)
                return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH,
                                       "keel_memcpy_async: %s is device memory of %s, the stream is on %s",
                                       i ? "src" : "dst", sides[i]->a.device->name, stream->device->name);
    }
    note_reach(&od, stream->device);
    note_reach(&orr, stream->device);
    return do_copy(stream, dst, &d, src, &r, bytes, peer, 0);
}

static keel_status_t memset_target(const char *fn, void *ptr, size_t bytes, side_t *s)
{
    keel_status_t st = resolve(fn, "dst", ptr, bytes, s);
    if (st != KEEL_OK)
        return st;
    if (!s->known)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is not in a Keel allocation", fn, ptr);
    return KEEL_OK;
}

keel_status_t keel_memset(void *ptr, int value, size_t bytes)
{
    side_t s;
    keel_status_t st = memset_target("keel_memset", ptr, bytes, &s);
    if (st != KEEL_OK || bytes == 0)
        return st;
    struct keel_stream *ds = s.a.device->default_stream;
    if ((st = refuse_capturing(ds, "keel_memset")) != KEEL_OK)
        return st;
    st = s.a.device->plugin->memory->memset_async(ds->ctx, ptr, value, bytes);
    if (st == KEEL_OK)
        st = s.a.device->plugin->stream->synchronize(ds->ctx);
    return st;
}

keel_status_t keel_memset_async(void *ptr, int value, size_t bytes, keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_memset_async");
    side_t s;
    keel_status_t st = memset_target("keel_memset_async", ptr, bytes, &s);
    if (st != KEEL_OK || bytes == 0)
        return st;
    if (s.a.device->backend != stream->device->backend ||
        (s.a.kind == KEEL_MEMORY_DEVICE && s.a.device != stream->device))
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_memset_async: %p is %s memory of %s, the stream is on %s",
                               ptr, kind_name(s.a.kind), s.a.device->name, stream->device->name);
    note_reach(&s, stream->device);
    return stream->device->plugin->memory->memset_async(stream->ctx, ptr, value, bytes);
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
