/* Handle memory. A destroyed handle is marked dead and parked on a free list
 * instead of being returned to malloc, so a stale handle passed back to Keel
 * reads as "destroyed" rather than as freed memory; a later create of the same
 * size reuses it. Only create and destroy come here, never a hot path. */
#include <stdlib.h>
#include <string.h>
#include "core/internal.h"

struct handle_header {
    size_t size;
    struct handle_header *next; /* free list link while parked */
    max_align_t align[];        /* the handle follows, suitably aligned */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle_header *parked;

void *keel__handle_alloc(uint32_t magic, size_t size)
{
    pthread_mutex_lock(&pool_lock);
    struct handle_header **pp = &parked;
    while (*pp && (*pp)->size != size)
        pp = &(*pp)->next;
    struct handle_header *h = *pp;
    if (h)
        *pp = h->next;
    pthread_mutex_unlock(&pool_lock);
    if (!h) {
        h = keel__malloc(sizeof(*h) + size);
        if (!h)
            return NULL;
        h->size = size;
    }
    h->next = NULL;
    void *obj = h->align;
    memset(obj, 0, size);
    *(uint32_t *)obj = magic;
    return obj;
}

void keel__handle_release(void *obj)
{
    if (!obj)
        return;
    struct handle_header *h = (struct handle_header *)((char *)obj - offsetof(struct handle_header, align));
    memset(obj, 0, h->size);
    *(uint32_t *)obj = KEEL__MAGIC_DEAD;
    pthread_mutex_lock(&pool_lock);
    h->next = parked;
    parked = h;
    pthread_mutex_unlock(&pool_lock);
}
