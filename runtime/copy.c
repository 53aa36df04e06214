/* SPDX-License-Identifier: MIT */
/* Copies and memsets: their direction, device and bounds come from the
 * allocation registry. */
#include <string.h>
#include "runtime/copy.h"


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
                               fn, role, ptr, keel__memory_kind_name(a->kind), a->size, (void *)a->base, a->device->name, bytes,
                               dir);
    case KEEL__PTR_RUNS_INTO:
        return keel__set_error(KEEL_ERROR_OUT_OF_RANGE,
                               "%s: %zu bytes %s %s %p run into the %s allocation of %zu bytes at %p on %s from "
                               "outside it",
                               fn, bytes, dir, role, ptr, keel__memory_kind_name(a->kind), a->size, (void *)a->base,
                               a->device->name);
    default:
        if (a->foreign == KEEL__FOREIGN_MODULE)
            return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                                   "%s: %zu bytes %s %s %p reach the variable of %zu bytes at %p of a module on %s, "
                                   "which keel_module_unload unloaded", fn, bytes, dir, role, ptr, a->size,
                                   (void *)a->base, a->device->name);
        if ((uintptr_t)ptr - a->base < a->size)
            return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                                   "%s: %s %p is in the %s block of %zu bytes at %p on %s, which was freed", fn, role,
                                   ptr, keel__memory_kind_name(a->kind), a->size, (void *)a->base, a->device->name);
        return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                               "%s: %zu bytes %s %s %p run into the %s block of %zu bytes at %p on %s, which was freed",
                               fn, bytes, dir, role, ptr, keel__memory_kind_name(a->kind), a->size, (void *)a->base,
                               a->device->name);
    }
}

/* A side whose registry class is c (s->a filled for a live allocation or
 * a refused pointer): host memory, or a live allocation with room for bytes. */
static keel_status_t side_finish(const char *fn, const char *role, const void *ptr, size_t bytes, keel__ptr_class_t c,
                                 side_t *s)
{
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
                               fn, bytes, strcmp(role, "dst") == 0 ? "to" : "from", ptr, keel__memory_kind_name(s->a.kind),
                               s->a.size, (void *)s->a.base, offset, s->a.size - offset);
    return KEEL_OK;
}

keel_status_t keel__copy_resolve(const char *fn, const char *role, const void *ptr, size_t bytes, side_t *s)
{
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %s is NULL", fn, role);
    return side_finish(fn, role, ptr, bytes, keel__registry_classify(ptr, bytes, &s->a), s);
}

keel_status_t keel__copy_resolve_pair(const char *fn, void *dst, size_t dst_bytes, side_t *d, const void *src,
                                      size_t src_bytes, side_t *r)
{
    if (!dst)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: dst is NULL", fn);
    if (!src)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: src is NULL", fn);
    const void *ptrs[2] = {dst, src};
    size_t bytes[2] = {dst_bytes, src_bytes};
    keel__alloc_t a[2];
    keel__ptr_class_t c[2];
    keel__registry_classify_n(ptrs, bytes, 2, a, c);
    d->a = a[0];
    r->a = a[1];
    keel_status_t st = side_finish(fn, "dst", dst, dst_bytes, c[0], d);
    return st != KEEL_OK ? st : side_finish(fn, "src", src, src_bytes, c[1], r);
}

/* Records that a stream of dev is handed the block of s, when dev is not
 * its owner and is not recorded yet; nothing on the common path of a block
 * used on its own device. */
void keel__copy_note_reach(const side_t *s, struct keel_device *dev)
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
keel_status_t keel__copy_device(const char *fn, side_t *dst, side_t *src, struct keel_device **dev, int *peer)
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

keel_status_t keel__copy_run(struct keel_stream *s, void *dst, side_t *d, const void *src, side_t *r, size_t bytes,
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

keel_status_t keel__copy_refuse_capturing(struct keel_stream *s, const char *fn)
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
    if (bytes <= 256) {
        /* A small copy's own memory asked for now, while its pointers are
         * checked (a prefetch never faults, whatever the address). */
        __builtin_prefetch(src);
        __builtin_prefetch(dst, 1);
    }
    if ((st = keel__copy_resolve_pair("keel_memcpy", dst, bytes, &d, src, bytes, &r)) != KEEL_OK)
        return st;
    if (bytes == 0)
        return KEEL_OK;
    struct keel_device *dev;
    int peer;
    if ((st = keel__copy_device("keel_memcpy", &d, &r, &dev, &peer)) != KEEL_OK)
        return st;
    if (!dev) {
        memmove(dst, src, bytes);
        return KEEL_OK;
    }
    if ((st = keel__copy_refuse_capturing(dev->default_stream, "keel_memcpy")) != KEEL_OK)
        return st;
    return keel__copy_run(dev->default_stream, dst, &d, src, &r, bytes, peer, 1);
}

keel_status_t keel__copy_on_stream(const char *fn, struct keel_stream *stream, side_t *d, side_t *r, int *peer)
{
    struct keel_backend *b = stream->device->backend;
    /* The owners as the registry has them: CPU memory seen by another
     * backend is host memory to the copy, but keel_free must still wait. */
    const side_t od = *d, orr = *r;
    as_seen_by(d, b);
    as_seen_by(r, b);
    side_t *sides[2] = {d, r};
    for (int i = 0; i < 2; i++)
        if (sides[i]->known && sides[i]->a.device->backend != b)
            return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: %s is on %s, the stream on %s", fn,
                                   i ? "src" : "dst", sides[i]->a.device->name, stream->device->name);
    *peer = d->known && r->known && d->a.device != r->a.device && d->a.kind == KEEL_MEMORY_DEVICE &&
            r->a.kind == KEEL_MEMORY_DEVICE;
    if (*peer && stream->device != d->a.device && stream->device != r->a.device)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH,
                               "%s: a copy from %s to %s must be enqueued on a stream of one of them, not of %s", fn,
                               r->a.device->name, d->a.device->name, stream->device->name);
    if (!*peer) {
        for (int i = 0; i < 2; i++)
            if (sides[i]->known && sides[i]->a.kind == KEEL_MEMORY_DEVICE && sides[i]->a.device != stream->device)
                return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: %s is device memory of %s, the stream is on %s",
                                       fn, i ? "src" : "dst", sides[i]->a.device->name, stream->device->name);
    }
    keel__copy_note_reach(&od, stream->device);
    keel__copy_note_reach(&orr, stream->device);
    return KEEL_OK;
}

keel_status_t keel_memcpy_async(void *dst, const void *src, size_t bytes, keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_memcpy_async");
    side_t d, r;
    keel_status_t st;
    int peer;
    if ((st = keel__copy_resolve_pair("keel_memcpy_async", dst, bytes, &d, src, bytes, &r)) != KEEL_OK)
        return st;
    if (bytes == 0)
        return KEEL_OK;
    if ((st = keel__copy_on_stream("keel_memcpy_async", stream, &d, &r, &peer)) != KEEL_OK)
        return st;
    return keel__copy_run(stream, dst, &d, src, &r, bytes, peer, 0);
}

keel_status_t keel__memset_target(const char *fn, void *ptr, size_t bytes, side_t *s)
{
    keel_status_t st = keel__copy_resolve(fn, "dst", ptr, bytes, s);
    if (st != KEEL_OK)
        return st;
    if (!s->known)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %p is not in a Keel allocation", fn, ptr);
    return KEEL_OK;
}

keel_status_t keel__memset_on_stream(const char *fn, struct keel_stream *stream, const void *ptr, const side_t *s)
{
    if (s->a.device->backend != stream->device->backend ||
        (s->a.kind == KEEL_MEMORY_DEVICE && s->a.device != stream->device))
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "%s: %p is %s memory of %s, the stream is on %s", fn, ptr,
                               keel__memory_kind_name(s->a.kind), s->a.device->name, stream->device->name);
    keel__copy_note_reach(s, stream->device);
    return KEEL_OK;
}

keel_status_t keel_memset(void *ptr, int value, size_t bytes)
{
    side_t s;
    keel_status_t st = keel__memset_target("keel_memset", ptr, bytes, &s);
    if (st != KEEL_OK || bytes == 0)
        return st;
    struct keel_stream *ds = s.a.device->default_stream;
    if ((st = keel__copy_refuse_capturing(ds, "keel_memset")) != KEEL_OK)
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
    keel_status_t st = keel__memset_target("keel_memset_async", ptr, bytes, &s);
    if (st != KEEL_OK || bytes == 0)
        return st;
    if ((st = keel__memset_on_stream("keel_memset_async", stream, ptr, &s)) != KEEL_OK)
        return st;
    KEEL__FAULT_ENQUEUE("keel_memset_async");
    return stream->device->plugin->memory->memset_async(stream->ctx, ptr, value, bytes);
}
