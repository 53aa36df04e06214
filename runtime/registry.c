/* SPDX-License-Identifier: MIT */
/* The registry of live allocations: base, size, kind and device of every
 * pointer Keel handed out.
 *
 * Every call checks its pointers here, so a lookup must cost the same with
 * one live allocation as with a million. Two open-addressing indexes
 * (runtime/addr_index.h) answer it in a bounded number of probes:
 *   - by base: the allocation that starts at an address;
 *   - by block: an allocation of size s belongs to level L, the smallest
 *     power of two >= s (at least 2^KEEL__LEVEL_MIN), and is entered under
 *     each aligned 2^L block it touches: one or two, since s <= 2^L. The
 *     allocation holding an interior address p is among those entered under
 *     p's block at some level in use, and at each level a block meets at
 *     most three allocations (they do not overlap and are larger than half
 *     the block; below 2^KEEL__LEVEL_MIN, a few more). A lookup probes one
 *     block per level in use: at most a few dozen, whatever the count.
 * A balanced tree (glibc tsearch) ordered by base is kept only for the
 * questions about ranges (does [p, p + n) meet an allocation: registering
 * foreign memory, explaining a refused pointer). It is kept lazily: a new
 * allocation waits on a pending list until such a question needs the tree,
 * so the lookups and a steady allocate/free loop never touch it. Nodes are
 * recycled through a free list.
 *
 * A stream-ordered block that is freed is parked rather than taken out:
 * its node stays in the indexes, marked, and lookups pass over it. The
 * next allocation at the same base and level (a stream allocating and
 * freeing a temporary gets the same block from the vendor's pool) takes
 * the node back as it is, so the pair touches the node and the parking
 * array, not the index slots, the lists and the counts that an entry and a
 * removal write: between vendor calls, which evict the registry's lines,
 * each line is a miss. At most PARK_SLOTS nodes are parked; an allocation
 * that overlaps one, a question about ranges, the free of the last live
 * allocation and the teardown release them for good.
 *
 * Beside the live allocations, a small record of recently freed blocks
 * (see internal.h for which blocks it may hold) lets a copy tell a freed
 * pointer from host memory. It is consulted only for a pointer that is in
 * no live allocation, under the same lock as that lookup. */
#include <search.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/addr_index.h"
#include "runtime/internal.h"

/* The smallest level: allocations of up to 64 bytes share it. */
#define KEEL__LEVEL_MIN 6

typedef struct node {
    keel__alloc_t a;
    int in_tree;
    int parked;                 /* freed, kept in the indexes (see above) */
    struct node *prev, *next;   /* pending list while !in_tree; free list link */
    struct node *lprev, *lnext; /* every live allocation */
} node_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static keel__addr_index_t by_base;  /* base -> node */
static keel__addr_index_t by_block; /* level and block -> node (see above) */
static uint64_t levels_used;        /* bit L: some allocation is of level L */
static size_t level_count[64];
static node_t *live;    /* every live allocation, newest first */
static void *tree;      /* tsearch tree of node_t * ordered by a.base */
static node_t *pending; /* allocations not yet in the tree */
static node_t *spare;   /* recycled nodes */
#define PARK_SLOTS 4
static node_t *parked[PARK_SLOTS];
static unsigned nparked;

/* Every add and remove bumps the generation (under the lock). A thread keeps
 * the last sixteen allocations it found, tagged with the generation they were
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
/* Sixteen entries: an operation names up to four buffers (a, b and y of a
 * binary op; x, y, gamma and beta of a layer norm), and a program works on
 * a handful of buffers at a time; fewer entries than that would evict on
 * most lookups and take the lock each time. The bases and sizes are kept
 * apart from the records so that the search is one branch-free pass over
 * two short arrays (a hit's position is not predictable). The default TLS
 * model on purpose: initial-exec would take static TLS, which glibc may have
 * none left of when libkeel is opened with dlopen late (Python's ctypes
 * after torch: "cannot allocate memory in static TLS block"). */
#define CACHE_WAYS 16
typedef struct lookup_cache {
    unsigned long generation;
    unsigned next;
    /* Aligned for whole-vector loads (GCC splits unaligned ones in two). */
    _Alignas(32) uintptr_t base[CACHE_WAYS];
    _Alignas(32) size_t size[CACHE_WAYS]; /* 0: an empty entry */
    keel__alloc_t a[CACHE_WAYS];
} lookup_cache_t;
static _Thread_local lookup_cache_t cache;

/* The calling thread's cache. With the general TLS model the address of a
 * thread-local variable is a call to __tls_get_addr, which GCC recomputes
 * at each use rather than keep in a register (in the search loop: once per
 * entry). The empty asm hides where the pointer came from, so it is
 * computed once. */
static inline lookup_cache_t *my_cache(void)
{
    lookup_cache_t *c = &cache;
    __asm__("" : "+r"(c));
    return c;
}

/* On x86-64 the search also comes in AVX2, four entries per compare,
 * taken where the CPU has it (asked once): 4.7 ns a search against 7.5 to
 * 8.7 ns for the baseline loop, whose sixteen selects form one chain. A
 * flag rather than an ifunc, which ThreadSanitizer cannot run. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CACHE_AVX2 1

/* The entries holding key among four (bit i: entry i of the four): key -
 * base < size, unsigned, as a signed compare of both sides with the top bit
 * flipped (z: the sizes with it flipped already). */
__attribute__((target("avx2"), always_inline)) static inline unsigned four_mask(__m256i k, __m256i b, __m256i z)
{
    const __m256i top = _mm256_set1_epi64x(INT64_MIN);
    return (unsigned)_mm256_movemask_pd(
        _mm256_castsi256_pd(_mm256_cmpgt_epi64(z, _mm256_xor_si256(_mm256_sub_epi64(k, b), top))));
}

/* The entries of c holding each of n keys (n <= 4), the sixteen entries
 * loaded once and kept in registers (named vectors: arrays of them went
 * through the stack): 1 with out[i] the highest matching entry, as the
 * baseline loop, when every key is there, else 0. */
__attribute__((target("avx2"))) static int cache_hits_avx2(const lookup_cache_t *c, const uintptr_t *keys, int n,
                                                           int *out)
{
    _Static_assert(CACHE_WAYS == 16, "four vectors of entries");
    const __m256i top = _mm256_set1_epi64x(INT64_MIN);
    const __m256i *bv = (const __m256i *)c->base, *zv = (const __m256i *)c->size;
    const __m256i b0 = _mm256_load_si256(bv), b1 = _mm256_load_si256(bv + 1), b2 = _mm256_load_si256(bv + 2),
                  b3 = _mm256_load_si256(bv + 3);
    const __m256i z0 = _mm256_xor_si256(_mm256_load_si256(zv), top),
                  z1 = _mm256_xor_si256(_mm256_load_si256(zv + 1), top),
                  z2 = _mm256_xor_si256(_mm256_load_si256(zv + 2), top),
                  z3 = _mm256_xor_si256(_mm256_load_si256(zv + 3), top);
    for (int i = 0; i < n; i++) {
        const __m256i k = _mm256_set1_epi64x((long long)keys[i]);
        unsigned m = four_mask(k, b0, z0) | four_mask(k, b1, z1) << 4 | four_mask(k, b2, z2) << 8 |
                     four_mask(k, b3, z3) << 12;
        if (!m)
            return 0;
        out[i] = 31 - __builtin_clz(m);
    }
    return 1;
}

static atomic_int cache_avx2 = -1; /* -1: not asked yet */

static int cpu_has_avx2(void)
{
    int v = atomic_load_explicit(&cache_avx2, memory_order_relaxed);
    if (KEEL__UNLIKELY(v < 0)) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        atomic_store_explicit(&cache_avx2, v, memory_order_relaxed);
    }
    return v;
}
#endif

/* The entry of c holding key, or -1. */
static inline int cache_hit(const lookup_cache_t *c, uintptr_t key)
{
#ifdef CACHE_AVX2
    int h;
    if (cpu_has_avx2())
        return cache_hits_avx2(c, &key, 1, &h) ? h : -1;
#endif
    int hit = -1;
    for (int i = 0; i < CACHE_WAYS; i++)
        hit = key - c->base[i] < c->size[i] ? i : hit;
    return hit;
}

/* The record of freed blocks: a ring, newest at freed_next - 1. A base
 * has at most one entry (keel__registry_retire drops the older one), and
 * freed_base mirrors the bases so that the search for one is a tight loop. */
typedef struct freed {
    keel__alloc_t a;
    keel__freed_state_t state; /* KEEL__FREED_FORGET: an empty slot */
} freed_t;
static freed_t freed[KEEL__FREED_SLOTS];
static uintptr_t freed_base[KEEL__FREED_SLOTS]; /* 0 exactly where the slot is empty (KEEL__FREED_FORGET) */
/* How many slots hold a base of each hash (a counting filter of one cache
 * line): the search for a base that no slot holds, the usual case, reads
 * one count instead of the whole array. */
#define FREED_HASH_BITS 6
static uint8_t freed_hash_count[1u << FREED_HASH_BITS];

static unsigned freed_hash(uintptr_t base)
{
    return (unsigned)(((uint64_t)base * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - FREED_HASH_BITS));
}
static unsigned freed_next;
static unsigned freed_held;

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

/* Orders a probe range (first argument, size > 0) against allocations:
 * 0 when they overlap. Allocations never overlap one another, so this is
 * consistent with the tree's order by base. */
static int compare_overlap(const void *probe_, const void *y_)
{
    const keel__alloc_t *p = probe_, *y = y_;
    if (p->base + p->size <= y->base)
        return -1;
    if (p->base >= y->base + y->size)
        return 1;
    return 0;
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

/* Moves every pending allocation into the tree. 0, or -1 when out of
 * memory (tsearch allocates a node per entry): the allocations it could
 * not move stay pending, where the lookups below search them one by one. */
static int flush_pending(void)
{
    while (pending) {
        node_t *n = pending;
        if (KEEL__FAULT(KEEL_FAULT_HOST_ALLOC) || !tsearch(&n->a, &tree, compare))
            return -1;
        pending_unlink(n);
        n->in_tree = 1;
    }
    return 0;
}

/* ---- the indexes (all under the lock) ---- */

static unsigned level_of(size_t size)
{
    unsigned l = KEEL__LEVEL_MIN;
    while (l < 63 && ((size_t)1 << l) < size)
        l++;
    return l;
}

static uintptr_t block_key(unsigned level, uintptr_t addr)
{
    return ((addr >> level) << KEEL__LEVEL_MIN) | level;
}

/* The last block of n's level that n touches (its first is block_key(l, base)). */
static uintptr_t last_block_key(const node_t *n, unsigned l)
{
    uintptr_t last = n->a.size ? n->a.base + (n->a.size - 1) : n->a.base;
    return block_key(l, last);
}

/* Enters n in both indexes and the live list: 0, or -1 out of memory (then
 * it is in none). */
static int index_add(node_t *n)
{
    unsigned l = level_of(n->a.size);
    uintptr_t b0 = block_key(l, n->a.base), b1 = last_block_key(n, l);
    if (keel__ai_insert(&by_base, n->a.base, n) != 0)
        return -1;
    if (keel__ai_insert(&by_block, b0, n) != 0) {
        keel__ai_remove(&by_base, n->a.base, n);
        return -1;
    }
    if (b1 != b0 && keel__ai_insert(&by_block, b1, n) != 0) {
        keel__ai_remove(&by_block, b0, n);
        keel__ai_remove(&by_base, n->a.base, n);
        return -1;
    }
    level_count[l]++;
    levels_used |= UINT64_C(1) << l;
    n->lprev = NULL;
    n->lnext = live;
    if (live)
        live->lprev = n;
    live = n;
    return 0;
}

static void index_remove(node_t *n)
{
    unsigned l = level_of(n->a.size);
    uintptr_t b0 = block_key(l, n->a.base), b1 = last_block_key(n, l);
    keel__ai_remove(&by_base, n->a.base, n);
    keel__ai_remove(&by_block, b0, n);
    if (b1 != b0)
        keel__ai_remove(&by_block, b1, n);
    if (--level_count[l] == 0)
        levels_used &= ~(UINT64_C(1) << l);
    if (n->lprev)
        n->lprev->lnext = n->lnext;
    else
        live = n->lnext;
    if (n->lnext)
        n->lnext->lprev = n->lprev;
    n->lprev = n->lnext = NULL;
}

/* The live allocation starting at base, or NULL. */
static node_t *find_base(uintptr_t base)
{
    node_t *n = keel__ai_find(&by_base, base);
    return n && !n->parked ? n : NULL;
}

/* The live allocation holding addr, or NULL: its base, else one block per
 * level in use. */
static node_t *find_holder(uintptr_t addr)
{
    node_t *n = find_base(addr);
    if (n)
        return n;
    for (uint64_t m = levels_used; m; m &= m - 1) {
        unsigned l = (unsigned)__builtin_ctzll(m);
        uintptr_t key = block_key(l, addr);
        for (size_t i = keel__ai_first(&by_block, key); i != KEEL__AI_END; i = keel__ai_next(&by_block, key, i)) {
            node_t *c = by_block.slots[i].value;
            if (addr - c->a.base < c->a.size && !c->parked)
                return c;
        }
    }
    return NULL;
}

static void release(node_t *n)
{
    index_remove(n);
    if (n->in_tree)
        tdelete(&n->a, &tree, compare);
    else
        pending_unlink(n);
    n->next = spare;
    spare = n;
}

/* ---- parked nodes (all under the lock) ---- */

/* Takes parked[i] out of the array (the last one moves into its place). */
static node_t *unpark(unsigned i)
{
    node_t *n = parked[i];
    parked[i] = parked[--nparked];
    n->parked = 0;
    return n;
}

/* Releases every parked node: before a question about ranges, which the
 * tree answers over every node it holds, and before the teardown. No
 * lookup answers with a parked node, so no thread's cache changes. */
static void release_parked(void)
{
    while (nparked)
        release(unpark(nparked - 1));
}

/* Parks n, which remove_entry took out of the live allocations; when the
 * array is full, the node in its first slot goes for good. */
static void park(node_t *n)
{
    if (nparked == PARK_SLOTS)
        release(unpark(0));
    n->parked = 1;
    parked[nparked++] = n;
}

/* For an allocation a about to be added: the parked node it can take back
 * (same base, same level and blocks, so its index entries hold), out of
 * the array; every other parked node that overlaps a is released, so that
 * no two nodes ever overlap. NULL when none fits. */
static node_t *take_parked(const keel__alloc_t *a)
{
    unsigned l = level_of(a->size);
    uintptr_t end = a->base + a->size;
    node_t *fit = NULL;
    for (unsigned i = 0; i < nparked;) {
        node_t *p = parked[i];
        if (!fit && p->a.base == a->base && level_of(p->a.size) == l &&
            last_block_key(p, l) == block_key(l, end - 1)) {
            fit = p;
            i++;
        } else if (p->a.base < end && a->base < p->a.base + p->a.size) {
            release(unpark(i)); /* parked[i] is now another node */
        } else {
            i++;
        }
    }
    if (fit)
        for (unsigned i = 0; i < nparked; i++)
            if (parked[i] == fit)
                return unpark(i);
    return NULL;
}

/* ---- the record of freed blocks (all under the lock) ---- */

static void freed_clear(unsigned i)
{
    if (freed[i].state == KEEL__FREED_HELD)
        freed_held--;
    freed[i].state = KEEL__FREED_FORGET;
    if (freed_base[i])
        freed_hash_count[freed_hash(freed_base[i])]--;
    freed_base[i] = 0;
}

/* The slot written last. */
static unsigned freed_newest(void)
{
    return (freed_next + KEEL__FREED_SLOTS - 1) % KEEL__FREED_SLOTS;
}

static void freed_set_base(unsigned i, uintptr_t base)
{
    freed_base[i] = base;
    freed_hash_count[freed_hash(base)]++;
}

/* The slot holding base, the newest looked at first (the block freed last
 * is often the one asked about: a stream reusing or releasing one block),
 * or -1. */
static int freed_find_base(uintptr_t base)
{
    unsigned newest = freed_newest();
    if (freed_base[newest] == base)
        return (int)newest;
    if (!freed_hash_count[freed_hash(base)])
        return -1;
    for (unsigned i = 0; i < KEEL__FREED_SLOTS; i++)
        if (freed_base[i] == base)
            return (int)i;
    return -1;
}

static void retire_locked(const keel__alloc_t *a, keel__freed_state_t state,
                          keel__alloc_t evicted[KEEL__RETIRE_EVICTS], int *nevicted)
{
    *nevicted = 0;
    unsigned newest = freed_newest();
    int at = freed_find_base(a->base);
    if (at >= 0) {
        /* A held entry of the same base cannot be there (a held block is
         * still allocated, so no allocation can have its base); should one
         * be, it is released rather than lost. */
        if (freed[at].state == KEEL__FREED_HELD)
            evicted[(*nevicted)++] = freed[at].a;
        freed_clear((unsigned)at);
    }
    if (state != KEEL__FREED_FORGET) {
        unsigned i = at == (int)newest ? newest : freed_next;
        if (i == freed_next) {
            if (freed[i].state == KEEL__FREED_HELD)
                evicted[(*nevicted)++] = freed[i].a;
            freed_clear(i);
            freed_next = (freed_next + 1) % KEEL__FREED_SLOTS;
        }
        freed[i].a = *a;
        freed[i].a.reach = 0;
        freed[i].state = state;
        freed_set_base(i, a->base);
        if (state == KEEL__FREED_HELD && ++freed_held > KEEL__HOLD_MAX_BLOCKS) {
            /* Too many held: the oldest held one goes back (and is forgotten). */
            for (unsigned k = 0; k < KEEL__FREED_SLOTS; k++) {
                unsigned j = (freed_next + k) % KEEL__FREED_SLOTS;
                if (freed[j].state == KEEL__FREED_HELD && j != i) {
                    evicted[(*nevicted)++] = freed[j].a;
                    freed_clear(j);
                    break;
                }
            }
        }
    }
}

static keel_status_t add(const keel__alloc_t *a)
{
    uintptr_t key = a->base;
    void *base = (void *)key;
    pthread_mutex_lock(&lock);
    node_t *n = nparked ? take_parked(a) : NULL;
    if (n) {
        n->a = *a; /* base and blocks as before: the indexes and the tree hold */
        bump_generation();
        pthread_mutex_unlock(&lock);
        return KEEL_OK;
    }
    n = find_base(key);
    if (n) {
        pthread_mutex_unlock(&lock);
        return keel__set_error(KEEL_ERROR_INTERNAL, "allocation registry: the backend returned %p, which is still live",
                               base);
    }
    if (spare) {
        n = spare;
        spare = n->next;
    } else if (!(n = keel__malloc(sizeof(*n)))) {
        pthread_mutex_unlock(&lock);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY,
                               "allocation registry: out of host memory to record %zu bytes at %p", a->size, base);
    }
    n->a = *a;
    n->parked = 0;
    if (index_add(n) != 0) {
        n->next = spare;
        spare = n;
        pthread_mutex_unlock(&lock);
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY,
                               "allocation registry: out of host memory to record %zu bytes at %p", a->size, base);
    }
    n->in_tree = 0;
    n->prev = NULL;
    n->next = pending;
    if (pending)
        pending->prev = n;
    pending = n;
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
    keel_status_t st = add(a);
    if (st == KEEL_OK) {
        /* It is live again: what the record says of its base no longer holds. */
        keel__alloc_t ev[KEEL__RETIRE_EVICTS];
        int nev = 0;
        pthread_mutex_lock(&lock);
        retire_locked(a, KEEL__FREED_FORGET, ev, &nev);
        pthread_mutex_unlock(&lock);
    }
    return st;
}

/* Under the lock: a pending allocation overlapping [key, end), or NULL;
 * searched only when the tree could not take them (out of memory). */
static node_t *pending_overlapping(uintptr_t key, uintptr_t end)
{
    for (node_t *n = pending; n; n = n->next)
        if (key < n->a.base + n->a.size && n->a.base < end)
            return n;
    return NULL;
}

/* Under the lock: the allocation holding ptr, or NULL. */
static node_t *lookup(uintptr_t key)
{
    return find_holder(key);
}

keel_status_t keel__registry_add_foreign(void *base, size_t size, keel_memory_kind_t kind, struct keel_device *dev,
                                         int origin, keel__alloc_t *overlap, int *overlapped)
{
    uintptr_t key = (uintptr_t)base;
    pthread_mutex_lock(&lock);
    release_parked();
    int flushed = flush_pending() == 0;
    keel__alloc_t probe = {.base = key, .size = size};
    keel__alloc_t **slot = tfind(&probe, &tree, compare_overlap);
    const keel__alloc_t *hit = slot ? *slot : NULL;
    node_t *n;
    if (!hit && !flushed && (n = pending_overlapping(key, key + size)) != NULL)
        hit = &n->a;
    if (hit)
        *overlap = *hit;
    pthread_mutex_unlock(&lock);
    *overlapped = hit != NULL;
    if (hit)
        return KEEL_OK;
    keel__alloc_t a = {.base = key, .size = size, .kind = kind, .device = dev, .foreign = origin};
    return keel__registry_put_back(&a);
}

/* With evicted, the removed block is remembered as kept in the same step
 * when a stream may keep it. */
static keel_status_t remove_entry(void *base, keel__alloc_t *out, keel__alloc_t *evicted, int *nevicted)
{
    uintptr_t key = (uintptr_t)base;
    keel__alloc_t holder = {.kind = KEEL_MEMORY_HOST};
    pthread_mutex_lock(&lock);
    node_t *n = lookup(key);
    if (n && n->a.base == key) {
        if (out)
            *out = n->a;
        if (evicted && keel__reuse_keepable(n->a.size, n->a.stream_ordered))
            retire_locked(&n->a, KEEL__FREED_KEPT, evicted, nevicted);
        /* When the last live allocation goes, the parked ones go too: a
         * registry with no live allocation holds no memory. */
        if (n->a.stream_ordered && !n->a.foreign && by_base.count > nparked + 1) {
            park(n);
        } else {
            release(n);
            if (by_base.count == nparked)
                release_parked();
        }
        bump_generation();
        pthread_mutex_unlock(&lock);
        return KEEL_OK;
    }
    if (n)
        holder = n->a;
    pthread_mutex_unlock(&lock);
    if (holder.size)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%p is inside an allocation of %zu bytes at %p, not its start",
                               base, holder.size, (void *)holder.base);
    return KEEL_ERROR_INVALID_POINTER; /* the caller words the message */
}

keel_status_t keel__registry_remove(void *base, keel__alloc_t *out)
{
    return remove_entry(base, out, NULL, NULL);
}

keel_status_t keel__registry_remove_kept(void *base, keel__alloc_t *out, keel__alloc_t evicted[KEEL__RETIRE_EVICTS],
                                         int *nevicted)
{
    *nevicted = 0;
    return remove_entry(base, out, evicted, nevicted);
}

/* Under the lock: the newest freed entry that overlaps [key, end), or NULL. */
static const freed_t *freed_overlapping(uintptr_t key, uintptr_t end)
{
    for (unsigned i = 1; i <= KEEL__FREED_SLOTS; i++) {
        const freed_t *f = &freed[(freed_next + KEEL__FREED_SLOTS - i) % KEEL__FREED_SLOTS];
        if (f->state != KEEL__FREED_FORGET && key < f->a.base + f->a.size && f->a.base < end)
            return f;
    }
    return NULL;
}

/* Under the lock, for a pointer in no live allocation: why (see
 * keel__ptr_class_t). A freed block that holds key itself comes first, then
 * the allocation key is the end of, then one the range runs into, then a
 * freed block it runs into. */
static keel__ptr_class_t explain_locked(uintptr_t key, size_t bytes, keel__alloc_t *out)
{
    uintptr_t end = bytes > UINTPTR_MAX - key ? UINTPTR_MAX : key + bytes;
    const freed_t *f = freed_overlapping(key, key + 1);
    if (f) {
        *out = f->a;
        return KEEL__PTR_FREED;
    }
    if (bytes == 0)
        return KEEL__PTR_UNKNOWN;
    /* One search for [key - 1, end): an allocation holding key - 1 ends at
     * key (key itself is in none), any other overlaps [key, end). */
    uintptr_t from = key > 0 ? key - 1 : 0;
    release_parked();
    int flushed = flush_pending() == 0;
    keel__alloc_t probe = {.base = from, .size = end - from};
    keel__alloc_t **slot = tfind(&probe, &tree, compare_overlap);
    const keel__alloc_t *hit = slot ? *slot : NULL;
    node_t *n;
    if (!hit && !flushed && (n = pending_overlapping(from, end)) != NULL)
        hit = &n->a;
    if (hit && hit->foreign && hit->base + hit->size == key) {
        /* The end of memory Keel did not allocate (registered, imported)
         * is where the application's next buffer may well begin: only a
         * range that runs into an allocation counts. */
        probe = (keel__alloc_t){.base = key, .size = end - key};
        slot = tfind(&probe, &tree, compare_overlap);
        hit = slot ? *slot : NULL;
        if (!hit && !flushed && (n = pending_overlapping(key, end)) != NULL)
            hit = &n->a;
    }
    if (hit) {
        *out = *hit;
        return out->base + out->size == key ? KEEL__PTR_PAST_END : KEEL__PTR_RUNS_INTO;
    }
    if ((f = freed_overlapping(key, end)) != NULL) {
        *out = f->a;
        return KEEL__PTR_FREED;
    }
    return KEEL__PTR_UNKNOWN;
}

/* Under the lock: asks for the index slots a lookup of key reads first
 * (its base's, and its block's at each level in use, at most eight), so
 * that the lookups of several pointers wait for memory once, together,
 * rather than one after the other. */
static void prefetch_holder(uintptr_t key)
{
    if (by_base.count)
        __builtin_prefetch(&by_base.slots[keel__ai_home(&by_base, key)]);
    if (!by_block.count)
        return;
    int k = 0;
    for (uint64_t m = levels_used; m && k < 8; m &= m - 1, k++)
        __builtin_prefetch(&by_block.slots[keel__ai_home(&by_block, block_key((unsigned)__builtin_ctzll(m), key))]);
}

/* Puts a copy of a into the calling thread's cache, read at generation g;
 * returns the entry. */
static const keel__alloc_t *cache_fill(const keel__alloc_t *a, unsigned long g)
{
    lookup_cache_t *c = my_cache();
    if (c->generation != g) {
        memset(c->size, 0, sizeof(c->size));
        c->generation = g;
    }
    unsigned w = c->next;
    c->a[w] = *a;
    c->base[w] = a->base;
    c->size[w] = a->size;
    c->next = (w + 1) % CACHE_WAYS;
    return &c->a[w];
}

/* The lookups of n keys (n <= 4) under one hold of the lock, and the cache
 * refill: out of line, so the hit paths below are leaves that save no
 * registers. found[i] is the cache entry of keys[i], or NULL; with why, a
 * key it does not find is explained in why[i] and near[i] (bytes[i]: the
 * range from it). */
static __attribute__((noinline)) void find_locked_n(const uintptr_t *keys, const size_t *bytes, int n,
                                                    const keel__alloc_t **found, keel__ptr_class_t *why,
                                                    keel__alloc_t *near)
{
    keel__alloc_t rec[4];
    node_t *hit[4];
    pthread_mutex_lock(&lock);
    if (n > 1)
        for (int i = 0; i < n; i++)
            prefetch_holder(keys[i]);
    for (int i = 0; i < n; i++)
        if ((hit[i] = lookup(keys[i])) != NULL)
            rec[i] = hit[i]->a;
    if (why)
        for (int i = 0; i < n; i++)
            if (!hit[i])
                why[i] = explain_locked(keys[i], bytes[i], &near[i]);
    unsigned long g = atomic_load_explicit(&generation, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++)
        found[i] = hit[i] ? cache_fill(&rec[i], g) : NULL;
}

static const keel__alloc_t *find_locked(uintptr_t key)
{
    const keel__alloc_t *a;
    find_locked_n(&key, NULL, 1, &a, NULL, NULL);
    return a;
}

/* The entry is the thread's own copy, so the caller reads it in place: no
 * copy out, whose wide stores the caller's narrow loads right after could
 * not forward from (a stall that cost more than the lookup). */
const keel__alloc_t *keel__registry_lookup(const void *ptr)
{
    uintptr_t key = (uintptr_t)ptr;
    unsigned long g = atomic_load_explicit(&generation, memory_order_acquire);
    lookup_cache_t *c = my_cache();
    if (c->generation == g) {
        int i = cache_hit(c, key);
        if (i >= 0)
            return &c->a[i];
    }
    return find_locked(key);
}

int keel__registry_lookup_cached(const void *const *ptrs, int n, const keel__alloc_t **out)
{
    unsigned long g = atomic_load_explicit(&generation, memory_order_acquire);
    lookup_cache_t *c = my_cache();
    if (c->generation != g)
        return 0;
    uintptr_t keys[4];
    int h[4];
    for (int i = 0; i < n; i++)
        keys[i] = (uintptr_t)ptrs[i];
#ifdef CACHE_AVX2
    if (cpu_has_avx2()) {
        if (!cache_hits_avx2(c, keys, n, h))
            return 0;
    } else
#endif
        for (int i = 0; i < n; i++)
            if ((h[i] = cache_hit(c, keys[i])) < 0)
                return 0;
    for (int i = 0; i < n; i++)
        out[i] = &c->a[h[i]];
    return 1;
}

int keel__registry_find(const void *ptr, keel__alloc_t *out)
{
    const keel__alloc_t *a = keel__registry_lookup(ptr);
    if (!a)
        return 0;
    *out = *a;
    return 1;
}

void keel__registry_classify_n(const void *const *ptrs, const size_t *bytes, int n, keel__alloc_t *out,
                               keel__ptr_class_t *cls)
{
    const keel__alloc_t *cached[4];
    if (keel__registry_lookup_cached(ptrs, n, cached)) { /* every pointer in one search of the cache */
        for (int i = 0; i < n; i++) {
            out[i] = *cached[i];
            cls[i] = KEEL__PTR_LIVE;
        }
        return;
    }
    unsigned long g = atomic_load_explicit(&generation, memory_order_acquire);
    lookup_cache_t *c = my_cache();
    uintptr_t keys[4];
    size_t len[4];
    int slot[4], misses = 0;
    for (int i = 0; i < n; i++) {
        uintptr_t key = (uintptr_t)ptrs[i];
        int h = c->generation == g ? cache_hit(c, key) : -1;
        if (h >= 0) {
            out[i] = c->a[h];
            cls[i] = KEEL__PTR_LIVE;
        } else {
            keys[misses] = key;
            len[misses] = bytes[i];
            slot[misses++] = i;
        }
    }
    if (!misses)
        return;
    const keel__alloc_t *found[4];
    keel__ptr_class_t why[4];
    keel__alloc_t near[4];
    find_locked_n(keys, len, misses, found, why, near);
    for (int j = 0; j < misses; j++) {
        int i = slot[j];
        if (found[j]) {
            out[i] = *found[j];
            cls[i] = KEEL__PTR_LIVE;
        } else if ((cls[i] = why[j]) != KEEL__PTR_UNKNOWN) {
            out[i] = near[j];
        }
    }
}

keel__ptr_class_t keel__registry_classify(const void *ptr, size_t bytes, keel__alloc_t *out)
{
    keel__ptr_class_t c;
    keel__registry_classify_n(&ptr, &bytes, 1, out, &c);
    return c;
}

void keel__registry_add_reach(uintptr_t base, struct keel_device *dev)
{
    uint64_t bit = keel__reach_bit(dev);
    pthread_mutex_lock(&lock);
    node_t *n = find_base(base);
    if (n && n->a.device != dev && !(n->a.reach & bit)) {
        n->a.reach |= bit;
        /* Copies of the entry in the threads' caches lack the bit. */
        bump_generation();
    }
    pthread_mutex_unlock(&lock);
}

void keel__registry_retire(const keel__alloc_t *a, keel__freed_state_t state,
                           keel__alloc_t evicted[KEEL__RETIRE_EVICTS], int *nevicted)
{
    pthread_mutex_lock(&lock);
    retire_locked(a, state, evicted, nevicted);
    pthread_mutex_unlock(&lock);
}

void keel__registry_unkeep(uintptr_t base)
{
    pthread_mutex_lock(&lock);
    int at = freed_find_base(base);
    if (at >= 0 && freed[at].state == KEEL__FREED_KEPT)
        freed_clear((unsigned)at);
    pthread_mutex_unlock(&lock);
}

int keel__registry_take_held(struct keel_device *dev, keel__alloc_t *out)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < KEEL__FREED_SLOTS && !found; i++) {
        if (freed[i].state == KEEL__FREED_HELD && freed[i].a.device == dev) {
            *out = freed[i].a;
            freed_clear(i);
            found = 1;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

int keel__registry_take_any(keel__alloc_t *out)
{
    int found = 0;
    pthread_mutex_lock(&lock);
    release_parked();
    node_t *n = live;
    if (n) {
        *out = n->a;
        release(n);
        bump_generation();
        found = 1;
    } else {
        for (unsigned i = 0; i < KEEL__FREED_SLOTS && !found; i++) {
            if (freed[i].state == KEEL__FREED_HELD) {
                *out = freed[i].a;
                freed_clear(i);
                found = 1;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void keel__registry_reset(void)
{
    pthread_mutex_lock(&lock);
    release_parked();
    while (live)
        release(live);
    keel__ai_clear(&by_base);
    keel__ai_clear(&by_block);
    while (spare) {
        node_t *n = spare;
        spare = n->next;
        free(n);
    }
    for (unsigned i = 0; i < KEEL__FREED_SLOTS; i++)
        freed_clear(i);
    freed_next = 0;
    /* Every thread's cached copies of allocations go stale with this. */
    bump_generation();
    pthread_mutex_unlock(&lock);
}
