/* SPDX-License-Identifier: MIT */
/* Stream-ordered block reuse: the block keel_free_async frees waits on its
 * stream for the next keel_malloc_async of the same size there. Reuse on the
 * stream that freed it is safe without any wait (the stream runs in order),
 * and a steady allocate/free loop then makes no backend call at all. A block
 * of another size, the stream's destruction, or an allocation anywhere on
 * the device that runs out of memory releases the blocks. */
#include "runtime/internal.h"

/* keel__reuse_release of a block the record does not remember as kept. */
static keel_status_t release_unkept(struct keel_stream *s, void *p, int stream_ordered)
{
    struct keel_device *d = s->device;
    const keel_memory_vtable_t *m = d->plugin->memory;
    keel_status_t st = KEEL_OK;
    if (stream_ordered && m->free_async) {
        if ((st = m->free_async(s->ctx, p)) == KEEL_OK)
            return KEEL_OK;
        /* The free could not be enqueued (out of memory for the command):
         * free it as memory that is not stream-ordered, after waiting for
         * the device, rather than lose it. (cudaFree and hipFree take
         * stream-ordered blocks too.) */
        keel__log(KEEL_LOG_DEBUG, "releasing a stream-ordered block of %s: %s; freeing it after a device "
                  "synchronize instead", d->name, keel_last_error());
    }
    /* Not stream-ordered memory: as keel_free, wait for the whole device. */
    keel_status_t synced = d->plugin->device->synchronize(d->ctx);
    if (synced == KEEL_OK && (synced = m->free(d->ctx, KEEL_MEMORY_DEVICE, p)) == KEEL_OK)
        return KEEL_OK;
    return st != KEEL_OK ? st : synced;
}

keel_status_t keel__reuse_release(struct keel_stream *s, void *p, int stream_ordered)
{
    /* The record of freed blocks remembered it as kept; once the backend has
     * it, its addresses may become host memory (internal.h). */
    keel__registry_unkeep((uintptr_t)p);
    return release_unkept(s, p, stream_ordered);
}

/* Puts p into s's slot and the device's list of streams holding a block;
 * 0 when the slot holds one already. Lock held. */
static int link_locked(struct keel_stream *s, void *p, size_t size, int stream_ordered)
{
    struct keel_device *d = s->device;
    if (s->reuse_ptr != NULL)
        return 0;
    __atomic_store_n(&s->reuse_ptr, p, __ATOMIC_RELAXED);
    s->reuse_size = size;
    s->reuse_stream_ordered = stream_ordered;
    s->reuse_next = d->reuse_list;
    s->reuse_pprev = &d->reuse_list;
    if (d->reuse_list)
        d->reuse_list->reuse_pprev = &s->reuse_next;
    d->reuse_list = s;
    return 1;
}

/* Puts a block whose release failed back into s's slot, so that it is
 * released later (or reused) rather than lost; 0 when the slot was taken
 * meanwhile by another thread's keel_free_async on the stream. */
static int relink(struct keel_stream *s, void *p, size_t size, int stream_ordered)
{
    struct keel_device *d = s->device;
    pthread_mutex_lock(&d->reuse_lock);
    int kept = link_locked(s, p, size, stream_ordered);
    pthread_mutex_unlock(&d->reuse_lock);
    if (!kept)
        keel__log(KEEL_LOG_WARN, "a block of %zu bytes of %s could not be released, and its stream holds another: "
                  "it stays allocated", size, d->name);
    return kept;
}

/* Takes s's block out of the slot and the device's list; lock held. */
static void *unlink_locked(struct keel_stream *s, size_t *size, int *stream_ordered)
{
    void *p = s->reuse_ptr;
    if (!p)
        return NULL;
    *size = s->reuse_size;
    *stream_ordered = s->reuse_stream_ordered;
    __atomic_store_n(&s->reuse_ptr, NULL, __ATOMIC_RELAXED);
    *s->reuse_pprev = s->reuse_next;
    if (s->reuse_next)
        s->reuse_next->reuse_pprev = s->reuse_pprev;
    s->reuse_next = NULL;
    s->reuse_pprev = NULL;
    return p;
}

keel_status_t keel__reuse_put(struct keel_stream *s, void *p, size_t size, int stream_ordered)
{
    struct keel_device *d = s->device;
    /* Only stream-ordered blocks: their release is an enqueue, never a wait
     * for the device, so releasing under the lock (keel__reuse_flush) is safe. */
    if (!keel__reuse_keepable(size, stream_ordered))
        return release_unkept(s, p, stream_ordered); /* never remembered as kept */
    pthread_mutex_lock(&d->reuse_lock);
    int kept = link_locked(s, p, size, stream_ordered);
    pthread_mutex_unlock(&d->reuse_lock);
    if (kept)
        return KEEL_OK;
    return keel__reuse_release(s, p, stream_ordered);
}

keel_status_t keel__reuse_take(struct keel_stream *s, size_t size, void **p, int *stream_ordered, int *hit)
{
    struct keel_device *d = s->device;
    size_t held = 0;
    *hit = 0;
    /* A stream that keeps no block (the allocations that cannot be reused)
     * costs no lock. The slot changes only under the lock; read without it,
     * an empty slot means the same as a block put there just after. */
    if (__atomic_load_n(&s->reuse_ptr, __ATOMIC_RELAXED) == NULL)
        return KEEL_OK;
    pthread_mutex_lock(&d->reuse_lock);
    void *b = unlink_locked(s, &held, stream_ordered);
    pthread_mutex_unlock(&d->reuse_lock);
    if (!b)
        return KEEL_OK;
    if (held == size) {
        *p = b;
        *hit = 1;
        return KEEL_OK;
    }
    keel_status_t st = keel__reuse_release(s, b, *stream_ordered);
    if (st != KEEL_OK)
        relink(s, b, held, *stream_ordered);
    return st;
}

keel_status_t keel__reuse_drop(struct keel_stream *s)
{
    size_t size = 0;
    int so = 0;
    pthread_mutex_lock(&s->device->reuse_lock);
    void *b = unlink_locked(s, &size, &so);
    pthread_mutex_unlock(&s->device->reuse_lock);
    keel_status_t st = b ? keel__reuse_release(s, b, so) : KEEL_OK;
    if (st != KEEL_OK) /* the stream stays, and its destruction tries again */
        relink(s, b, size, so);
    return st;
}

keel_status_t keel__reuse_flush(struct keel_device *d, int *released)
{
    keel_status_t first = KEEL_OK;
    *released = 0;
    /* The lock stays held across the releases: a stream being destroyed
     * meanwhile waits in keel__reuse_drop instead of going away under us. */
    /* Blocks whose release failed go back to their streams afterwards. */
    struct keel_stream *failed = NULL;
    pthread_mutex_lock(&d->reuse_lock);
    while (d->reuse_list) {
        struct keel_stream *s = d->reuse_list;
        size_t size = 0;
        int so = 0;
        void *b = unlink_locked(s, &size, &so);
        keel_status_t st = keel__reuse_release(s, b, so);
        if (st == KEEL_OK) {
            *released = 1;
        } else {
            if (first == KEEL_OK)
                first = st;
            __atomic_store_n(&s->reuse_ptr, b, __ATOMIC_RELAXED); /* out of the list, on a list of its own (reuse_next) */
            s->reuse_size = size;
            s->reuse_stream_ordered = so;
            s->reuse_next = failed;
            failed = s;
        }
    }
    while (failed) {
        struct keel_stream *s = failed;
        failed = s->reuse_next;
        s->reuse_next = d->reuse_list;
        s->reuse_pprev = &d->reuse_list;
        if (d->reuse_list)
            d->reuse_list->reuse_pprev = &s->reuse_next;
        d->reuse_list = s;
    }
    pthread_mutex_unlock(&d->reuse_lock);
    if (*released) {
        keel_status_t st = d->plugin->device->synchronize(d->ctx);
        if (first == KEEL_OK)
            first = st;
    }
    return first;
}

void *keel__reuse_steal(struct keel_device *d)
{
    size_t size = 0;
    int so = 0;
    pthread_mutex_lock(&d->reuse_lock);
    void *b = d->reuse_list ? unlink_locked(d->reuse_list, &size, &so) : NULL;
    pthread_mutex_unlock(&d->reuse_lock);
    return b;
}
