/* The registry of live allocations: base, size, kind and device of every
 * pointer Keel handed out.
 *
 * Two indexes. A hash table on the base address answers the common questions
 * (free, copy from the start of a buffer) in O(1). A balanced tree (glibc
 * tsearch) ordered by base answers "which allocation holds this interior
 * address" in O(log n), since allocations never overlap. The tree is kept
 * lazily: a new allocation waits on a pending list until an interior lookup
 * needs the tree, so a steady allocate/free loop (keel_malloc_async +
 * keel_free_async) never touches it. Nodes are recycled through a free list. */
#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Keys are addresses: one multiply mixes their bits into the high half,
 * which the fold brings down to the low bits uthash takes its bucket from.
 * (uthash's default, Jenkins' hash, costs several times more per lookup.) */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                                      \
    do {                                                                                           \
        uint64_t keel_h_ = (uint64_t)*(const uintptr_t *)(keyptr) * UINT64_C(0x9E3779B97F4A7C15); \
        (hashv) = (unsigned)(keel_h_ >> 32) ^ (unsigned)keel_h_;                                   \
    } while (0)
#include <uthash.h>
#include "core/internal.h"

typedef struct node {
    keel__alloc_t a;
    UT_hash_handle hh;
    int in_tree;
    struct node *prev, *next; /* pending list while !in_tree; free list link */
} node_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node_t *table;   /* uthash on a.base */
static void *tree;      /* tsearch tree of node_t * ordered by a.base */
static node_t *pending; /* allocations not yet in the tree */
static node_t *spare;   /* recycled nodes */

/* Every add and remove bumps the generation (under the lock). A thread keeps
 * the last four allocations it found, tagged with the generation they were
 * read at: while it has not moved, they are still exactly what the registry
 * holds, and a lookup of a pointer inside them needs no lock. */
static atomic_ulong generation = 1;

/* Under the lock: a plain store suffices (writers are serialized), and it
 * costs no locked instruction on the allocate/free path. */
static void bump_generation(void)
{
    atomic_store_explicit(&generation, atomic_load_explicit(&generation, memory_order_relaxed) + 1,
                          memory_order_release);
}
/* Four entries: an operation names up to four buffers (a, b and y of a
 * binary op; x, y, gamma and beta of a layer norm), and a call with three
 * distinct buffers would otherwise evict on every lookup and take the lock
 * each time. The default TLS model on purpose: initial-exec would take
 * static TLS, which glibc may have none left of when libkeel is opened with
 * dlopen late (Python's ctypes after torch: "cannot allocate memory in
 * static TLS block"). */
#define CACHE_WAYS 4
static _Thread_local struct {
    unsigned long generation;
    unsigned next;
    keel__alloc_t a[CACHE_WAYS];
} cache;

/* Orders by base; a probe of size 0 matches the allocation that contains it. */
static int compare(const void *x_, const void *y_)
{
    const keel__alloc_t *x = x_, *y = y_;
    if (x->size == 0 && x->base >= y->base && x->base - y->base < y->size)
        return 0;
    if (y->size == 0 && y->base >= x->base && y->base - x->base < x->size)
        return 0;
    return x->base < y->base ? -1 : x->base > y->base ? 1 : 0;
}

static void pending_unlink(node_t *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        pending = n->next;
    if (n->next)
        n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

/* Moves every pending allocation into the tree. 0, or -1 when out of memory. */
static int flush_pending(void)
{
    while (pending) {
        node_t *n = pending;
        if (!tsearch(&n->a, &tree, compare))
            return -1;
        pending_unlink(n);
        n->in_tree = 1;
    }
    return 0;
}

static void release(node_t *n)
{
    HASH_DEL(table, n);
    if (n->in_tree)
        tdelete(&n->a, &tree, compare);
    else
        pending_unlink(n);
    n->next = spare;
    spare = n;
}

static keel_status_t add(const keel__alloc_t *a)
{
    uintptr_t key = a->base;
    void *base = (void *)key;
    pthread_mutex_lock(&lock);
    node_t *n;
    HASH_FIND(hh, table, &key, sizeof(key), n);
    if (n) {
        pthread_mutex_unlock(&lock);
        return keel__set_error(KEEL_ERROR_INTERNAL, "allocation registry: the backend returned %p, which is still live",
                               base);
    }
    if (spare) {
        n = spare;
        spare = n->next;
    } else if (!(n = malloc(sizeof(*n)))) {
        pthread_mutex_unlock(&lock);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "allocation registry: out of host memory");
    }
    n->a = *a;
    n->in_tree = 0;
    n->prev = NULL;
    n->next = pending;
    if (pending)
        pending->prev = n;
    pending = n;
    HASH_ADD(hh, table, a.base, sizeof(key), n);
    bump_generation();
    pthread_mutex_unlock(&lock);
    return KEEL_OK;
}

keel_status_t keel__registry_add(void *base, size_t size, keel_memory_kind_t kind, struct keel_device *dev,
                                 int stream_ordered)
{
    keel__alloc_t a = {.base = (uintptr_t)base, .size = size, .kind = kind, .device = dev,
                       .stream_ordered = stream_ordered};
    return add(&a);
}

keel_status_t keel__registry_put_back(const keel__alloc_t *a)
{
    return add(a);
}

/* Under the lock: the allocation holding ptr, or NULL (with *oom set when the tree could not grow). */
static node_t *lookup(uintptr_t key, int *oom)
{
    node_t *n;
    HASH_FIND(hh, table, &key, sizeof(key), n);
    if (n)
        return n;
    if (flush_pending() != 0) {
        *oom = 1;
        return NULL;
    }
    keel__alloc_t probe = {.base = key, .kind = KEEL_MEMORY_HOST};
    keel__alloc_t **slot = tfind(&probe, &tree, compare);
    /* a is the node's first member, so the tree's pointer is the node's. */
    return slot ? (node_t *)*slot : NULL;
}

keel_status_t keel__registry_remove(void *base, keel__alloc_t *out)
{
    uintptr_t key = (uintptr_t)base;
    keel__alloc_t holder = {.kind = KEEL_MEMORY_HOST};
    int oom = 0;
    pthread_mutex_lock(&lock);
    node_t *n = lookup(key, &oom);
    if (n && n->a.base == key) {
        if (out)
            *out = n->a;
        release(n);
        bump_generation();
        pthread_mutex_unlock(&lock);
        return KEEL_OK;
    }
    if (n)
        holder = n->a;
    pthread_mutex_unlock(&lock);
    if (oom)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "allocation registry: out of host memory");
    if (holder.size)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%p is inside an allocation of %zu bytes at %p, not its start",
                               base, holder.size, (void *)holder.base);
    return KEEL_ERROR_INVALID_POINTER; /* the caller words the message */
}

/* The lookup under the lock, and the cache refill: out of line, so the hit
 * path below is a leaf that saves no registers. Returns the cache entry. */
static __attribute__((noinline)) const keel__alloc_t *find_locked(uintptr_t key)
{
    int oom = 0;
    keel__alloc_t found;
    pthread_mutex_lock(&lock);
    node_t *n = lookup(key, &oom);
    if (n)
        found = n->a;
    unsigned long g = atomic_load_explicit(&generation, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    if (!n)
        return NULL;
    if (cache.generation != g) {
        memset(cache.a, 0, sizeof(cache.a));
        cache.generation = g;
    }
    keel__alloc_t *e = &cache.a[cache.next];
    *e = found;
    cache.next = (cache.next + 1) % CACHE_WAYS;
    return e;
}

/* The entry is the thread's own copy, so the caller reads it in place: no
 * copy out, whose wide stores the caller's narrow loads right after could
 * not forward from (a stall that cost more than the lookup). */
const keel__alloc_t *keel__registry_lookup(const void *ptr)
{
    uintptr_t key = (uintptr_t)ptr;
    unsigned long g = atomic_load_explicit(&generation, memory_order_acquire);
    if (cache.generation == g) {
        for (int i = 0; i < CACHE_WAYS; i++) {
            if (key - cache.a[i].base < cache.a[i].size)
                return &cache.a[i];
        }
    }
    return find_locked(key);
}

int keel__registry_find(const void *ptr, keel__alloc_t *out)
{
    const keel__alloc_t *a = keel__registry_lookup(ptr);
    if (!a)
        return 0;
    *out = *a;
    return 1;
}

void keel__registry_add_reach(uintptr_t base, struct keel_device *dev)
{
    uint64_t bit = keel__reach_bit(dev);
    node_t *n;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, table, &base, sizeof(base), n);
    if (n && n->a.device != dev && !(n->a.reach & bit)) {
        n->a.reach |= bit;
        /* Copies of the entry in the threads' caches lack the bit. */
        bump_generation();
    }
    pthread_mutex_unlock(&lock);
}
