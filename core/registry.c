/* The registry of live allocations: base, size, kind and device of every
 * pointer Keel handed out. A balanced tree (glibc tsearch) ordered by base
 * answers "which allocation holds this address" in O(log n), since
 * allocations never overlap. A reader-writer lock lets lookups run in parallel. */
#include <search.h>
#include <stdlib.h>
#include "core/internal.h"

static void *tree;
static pthread_rwlock_t tree_lock = PTHREAD_RWLOCK_INITIALIZER;

/* Orders by base; a probe of size 0 matches the allocation that contains it. */
static int compare(const void *a, const void *b)
{
    const keel__alloc_t *x = a, *y = b;
    if (x->size == 0 && x->base >= y->base && x->base - y->base < y->size)
        return 0;
    if (y->size == 0 && y->base >= x->base && y->base - x->base < x->size)
        return 0;
    return x->base < y->base ? -1 : x->base > y->base ? 1 : 0;
}

keel_status_t keel__registry_add(void *base, size_t size, keel_memory_kind_t kind, struct keel_device *dev,
                                 int stream_ordered)
{
    keel__alloc_t *a = malloc(sizeof(*a));
    if (!a)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "allocation registry: out of host memory");
    a->base = (uintptr_t)base;
    a->size = size;
    a->kind = kind;
    a->device = dev;
    a->stream_ordered = stream_ordered;
    pthread_rwlock_wrlock(&tree_lock);
    keel__alloc_t **slot = tsearch(a, &tree, compare);
    int dup = slot && *slot != a;
    pthread_rwlock_unlock(&tree_lock);
    if (!slot || dup) {
        free(a);
        return keel__set_error(slot ? KEEL_ERROR_INTERNAL : KEEL_ERROR_OUT_OF_MEMORY,
                               "allocation registry: %s %p", slot ? "backend returned a live address" : "out of host memory",
                               base);
    }
    return KEEL_OK;
}

keel_status_t keel__registry_remove(void *base, keel__alloc_t *out)
{
    keel__alloc_t probe = {(uintptr_t)base, 0, KEEL_MEMORY_HOST, NULL, 0};
    keel__alloc_t *found = NULL, holder = {0, 0, KEEL_MEMORY_HOST, NULL, 0};
    pthread_rwlock_wrlock(&tree_lock);
    keel__alloc_t **slot = tfind(&probe, &tree, compare);
    if (slot && (*slot)->base == (uintptr_t)base) {
        found = *slot;
        tdelete(found, &tree, compare);
    } else if (slot) {
        holder = **slot;
    }
    pthread_rwlock_unlock(&tree_lock);
    if (!found) {
        if (holder.size)
            return keel__set_error(KEEL_ERROR_INVALID_POINTER,
                                   "%p is inside an allocation of %zu bytes at %p, not its start", base,
                                   holder.size, (void *)holder.base);
        return KEEL_ERROR_INVALID_POINTER; /* the caller words the message */
    }
    if (out)
        *out = *found;
    free(found);
    return KEEL_OK;
}

int keel__registry_find(const void *ptr, keel__alloc_t *out)
{
    keel__alloc_t probe = {(uintptr_t)ptr, 0, KEEL_MEMORY_HOST, NULL, 0};
    pthread_rwlock_rdlock(&tree_lock);
    keel__alloc_t **slot = tfind(&probe, &tree, compare);
    if (slot)
        *out = **slot;
    pthread_rwlock_unlock(&tree_lock);
    return slot != NULL;
}
