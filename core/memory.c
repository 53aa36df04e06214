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

static void release_evicted(const keel__alloc_t *ev, int n)
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
    keel__ptr_class_t c = keel__registry_classify(ptr, 0, &a);
    if (c == KEEL__PTR_LIVE)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is inside an allocation of %zu bytes at %p, not its start",
                               fn, ptr, a.size, (void *)a.base);
    if (c == KEEL__PTR_FREED)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p %s the %s block of %zu bytes at %p on %s, which was "
                               "already freed", fn, ptr, a.base == (uintptr_t)ptr ? "is" : "is inside",
                               kind_name(a.kind), a.size, (void *)a.base, a.device->name);
    return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                           "%s: %p is not a live Keel allocation (never allocated by Keel, or already freed)", fn, ptr);
}

static keel_status_t foreign_memory(const char *fn, const void *ptr, const keel__alloc_t *a)
{
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
    if (a.foreign)
        return foreign_memory("keel_free", ptr, &a);
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
    keel__alloc_t ev[KEEL__RETIRE_EVICTS];
    int nev = 0;
    if (a.size <= KEEL__HOLD_MAX_BYTES && !a.stream_ordered) {
        /* Kept allocated while the record remembers it (internal.h). A
         * stream-ordered block is not: its release is ordered on a stream,
         * whose wait could report the errors of unrelated work. */
        keel__registry_retire(&a, KEEL__FREED_HELD, ev, &nev);
        release_evicted(ev, nev);
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
    release_evicted(ev, nev);
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
    release_evicted(ev, nev);
    if (KEEL__UNLIKELY(a.device != stream->device || a.kind != KEEL_MEMORY_DEVICE || a.foreign)) {
        keel__registry_put_back(&a);
        if (a.foreign)
            return foreign_memory("keel_free_async", ptr, &a);
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

/* A pointer in no live allocation that is no host memory either: the end
 * of an allocation, a range that runs into one, or a freed block. */
static keel_status_t not_host_memory(const char *fn, const char *role, const void *ptr, size_t bytes,
                                     keel__ptr_class_t c, const keel__alloc_t *a)
{
    const char *dir = strcmp(role, "dst") == 0 ? "to" : "from";
    switch (c) {
    case KEEL__PTR_PAST_END:
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE,
                               "%s: %s %p is one past the end of the %s allocation of %zu bytes at %p on %s; a copy "
                               "of %zu bytes %s it is outside the allocation",
                               fn, role, ptr, kind_name(a->kind), a->size, (void *)a->base, a->device->name, bytes,
                               dir);
    case KEEL__PTR_RUNS_INTO:
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE,
                               "%s: %zu bytes %s %s %p run into the %s allocation of %zu bytes at %p on %s from "
                               "outside it",
                               fn, bytes, dir, role, ptr, kind_name(a->kind), a->size, (void *)a->base,
                               a->device->name);
    default:
        if ((uintptr_t)ptr - a->base < a->size)
            return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                                   "%s: %s %p is in the %s block of %zu bytes at %p on %s, which was freed", fn, role,
                                   ptr, kind_name(a->kind), a->size, (void *)a->base, a->device->name);
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "%s: %zu bytes %s %s %p run into the %s block of %zu bytes at %p on %s, which was freed",
                               fn, bytes, dir, role, ptr, kind_name(a->kind), a->size, (void *)a->base,
                               a->device->name);
    }
}

static keel_status_t resolve(const char *fn, const char *role, const void *ptr, size_t bytes, side_t *s)
{
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %s is NULL", fn, role);
    keel__ptr_class_t c = keel__registry_classify(ptr, bytes, &s->a);
    s->known = c == KEEL__PTR_LIVE;
    if (!s->known) {
        if (KEEL__UNLIKELY(c != KEEL__PTR_UNKNOWN))
            return not_host_memory(fn, role, ptr, bytes, c, &s->a);
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
    KEEL__FAULT_ENQUEUE(sync ? "keel_memcpy" : "keel_memcpy_async");
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
    KEEL__FAULT_ENQUEUE("keel_memset");
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
    KEEL__FAULT_ENQUEUE("keel_memset_async");
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
