/* SPDX-License-Identifier: MIT */
/* An open-addressing multimap from nonzero uintptr_t keys to pointers, for
 * the allocation registry's indexes (runtime/registry.c).
 *
 * Keys and values sit side by side in one array, probed linearly from a
 * Fibonacci hash of the key: a lookup reads one or two cache lines whatever
 * the number of entries, where a chained table follows a pointer into a
 * separate element per step. A key may be entered several times,
 * with different values. The array doubles at half full; an insert that
 * cannot grow it fails and leaves the index as it was. Deletion shifts the
 * entries that follow back, so no tombstones accumulate; the last removal
 * releases the array. Not thread-safe:
 * the registry holds its lock. */
#ifndef KEEL_ADDR_INDEX_H
#define KEEL_ADDR_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct keel__ai_slot {
    uintptr_t key; /* 0: empty */
    void *value;
} keel__ai_slot_t;

typedef struct keel__addr_index {
    keel__ai_slot_t *slots;
    size_t mask;  /* capacity - 1; capacity is a power of two, 0 slots before the first insert */
    size_t count; /* entries */
    unsigned shift; /* 64 - log2(capacity) */
} keel__addr_index_t;

/* The index's first array: the smallest it allocates (slots). */
#define KEEL__AI_MIN_CAPACITY 64

/* Enters (key, value). 0, or -1 when the array could not grow (nothing changed). */
int keel__ai_insert(keel__addr_index_t *ix, uintptr_t key, void *value);
/* Removes the pair (key, value); 0 when found, -1 when not. */
int keel__ai_remove(keel__addr_index_t *ix, uintptr_t key, const void *value);
/* Releases the array; the index is empty and usable again. */
void keel__ai_clear(keel__addr_index_t *ix);

/* The slot a probe for key starts at. */
static inline size_t keel__ai_home(const keel__addr_index_t *ix, uintptr_t key)
{
    return (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> ix->shift) & ix->mask;
}

/* Iterates over the values entered under key:
 *   for (size_t i = keel__ai_first(ix, key); i != KEEL__AI_END; i = keel__ai_next(ix, key, i))
 *       use(ix->slots[i].value);
 * The index must not change during the loop. */
#define KEEL__AI_END SIZE_MAX

static inline size_t keel__ai_next(const keel__addr_index_t *ix, uintptr_t key, size_t i)
{
    for (i = (i + 1) & ix->mask; ix->slots[i].key; i = (i + 1) & ix->mask)
        if (ix->slots[i].key == key)
            return i;
    return KEEL__AI_END;
}

static inline size_t keel__ai_first(const keel__addr_index_t *ix, uintptr_t key)
{
    if (!ix->count)
        return KEEL__AI_END;
    size_t i = keel__ai_home(ix, key);
    if (ix->slots[i].key == key)
        return i;
    if (!ix->slots[i].key)
        return KEEL__AI_END;
    return keel__ai_next(ix, key, i);
}

/* The first value entered under key, or NULL. */
static inline void *keel__ai_find(const keel__addr_index_t *ix, uintptr_t key)
{
    size_t i = keel__ai_first(ix, key);
    return i == KEEL__AI_END ? NULL : ix->slots[i].value;
}

#endif /* KEEL_ADDR_INDEX_H */
