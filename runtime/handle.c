/* SPDX-License-Identifier: MIT */
/* Handle memory. A destroyed handle is marked dead and parked on a free list
 * instead of being returned, so a stale handle passed back to Keel reads as
 * "destroyed" rather than as freed memory; a later create of the same size
 * reuses it. Only create and destroy come here, never a hot path.
 *
 * Handles live on pages of their own, mapped with mmap and never unmapped:
 * keel_finalize releases every object behind the handles, and a handle the
 * application still holds must read as destroyed afterwards, for the rest of
 * the process. The pages are not heap blocks, so they are no leak that
 * valgrind or LeakSanitizer list; the live handles are kept in a list, which
 * keel_finalize walks to release what the application did not. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "runtime/internal.h"

struct handle_header {
    size_t size;
    struct handle_header *next;               /* free list link while parked */
    struct handle_header *live_prev, *live_next; /* the live list while in use */
    max_align_t align[];                      /* the handle follows, suitably aligned */
};

#define CHUNK_BYTES ((size_t)64 << 10)

/* LeakSanitizer does not scan memory it did not allocate: where it runs,
 * the handle pages are registered as roots, so that what a live handle
 * points to is not reported as leaked. */
extern void __lsan_register_root_region(const void *p, size_t size) __attribute__((weak));

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle_header *parked;
static struct handle_header *live;
static unsigned char *chunk;     /* the part of the newest mapping not handed out yet */
static size_t chunk_left;
static int keep_contents;        /* keel__handle_keep_contents */

/* pool_lock held: n bytes (a multiple of max_align_t) of fresh handle
 * memory. Each is a host allocation for KEEL_FAULT, as when handles came
 * from malloc, whether or not it maps a new page. */
static void *carve_locked(size_t n)
{
    if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC))
        return NULL;
    if (n > chunk_left) {
        size_t map = n > CHUNK_BYTES ? n : CHUNK_BYTES;
        void *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        if (__lsan_register_root_region)
            __lsan_register_root_region(m, map);
        chunk = m;
        chunk_left = map;
    }
    void *p = chunk;
    chunk += n;
    chunk_left -= n;
    return p;
}

void *keel__handle_alloc(uint32_t magic, size_t size)
{
    pthread_mutex_lock(&pool_lock);
    struct handle_header **pp = &parked;
    while (*pp && (*pp)->size != size)
        pp = &(*pp)->next;
    struct handle_header *h = *pp;
    if (h) {
        *pp = h->next;
    } else {
        size_t a = sizeof(max_align_t);
        size_t n = (sizeof(*h) + size + a - 1) / a * a;
        if ((h = carve_locked(n)) != NULL)
            h->size = size;
    }
    if (h) {
        h->next = NULL;
        h->live_prev = NULL;
        h->live_next = live;
        if (live)
            live->live_prev = h;
        live = h;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!h)
        return NULL;
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
    pthread_mutex_lock(&pool_lock);
    if (!keep_contents)
        memset(obj, 0, h->size);
    *(uint32_t *)obj = KEEL__MAGIC_DEAD;
    if (h->live_prev)
        h->live_prev->live_next = h->live_next;
    else
        live = h->live_next;
    if (h->live_next)
        h->live_next->live_prev = h->live_prev;
    h->live_prev = h->live_next = NULL;
    if (!keep_contents) {
        h->next = parked;
        parked = h;
    }
    pthread_mutex_unlock(&pool_lock);
}

void keel__handle_keep_contents(int on)
{
    pthread_mutex_lock(&pool_lock);
    keep_contents = on;
    pthread_mutex_unlock(&pool_lock);
}

void *keel__handle_find_live(uint32_t magic, int (*pick)(void *obj, void *arg), void *arg)
{
    void *found = NULL;
    pthread_mutex_lock(&pool_lock);
    for (struct handle_header *h = live; h && !found; h = h->live_next) {
        void *obj = h->align;
        if (*(uint32_t *)obj == magic && (!pick || pick(obj, arg)))
            found = obj;
    }
    pthread_mutex_unlock(&pool_lock);
    return found;
}
