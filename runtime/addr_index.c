/* SPDX-License-Identifier: MIT */
/* The registry's open-addressing multimap (see addr_index.h). */
#include "runtime/addr_index.h"
#include <stdlib.h>
#include "runtime/fault.h"

static void place(keel__ai_slot_t *slots, size_t mask, unsigned shift, uintptr_t key, void *value)
{
    size_t i = (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> shift) & mask;
    while (slots[i].key)
        i = (i + 1) & mask;
    slots[i].key = key;
    slots[i].value = value;
}

static int grow(keel__addr_index_t *ix)
{
    size_t cap = ix->slots ? (ix->mask + 1) * 2 : KEEL__AI_MIN_CAPACITY;
    if (cap > SIZE_MAX / sizeof(keel__ai_slot_t))
        return -1;
    keel__ai_slot_t *slots = keel__calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    unsigned log2 = 0;
    while (((size_t)1 << log2) < cap)
        log2++;
    unsigned shift = 64 - log2;
    if (ix->slots) {
        for (size_t i = 0; i <= ix->mask; i++)
            if (ix->slots[i].key)
                place(slots, cap - 1, shift, ix->slots[i].key, ix->slots[i].value);
        free(ix->slots);
    }
    ix->slots = slots;
    ix->mask = cap - 1;
    ix->shift = shift;
    return 0;
}

int keel__ai_insert(keel__addr_index_t *ix, uintptr_t key, void *value)
{
    if ((!ix->slots || 2 * (ix->count + 1) > ix->mask + 1) && grow(ix) != 0)
        return -1;
    place(ix->slots, ix->mask, ix->shift, key, value);
    ix->count++;
    return 0;
}

int keel__ai_remove(keel__addr_index_t *ix, uintptr_t key, const void *value)
{
    size_t i = keel__ai_first(ix, key);
    while (i != KEEL__AI_END && ix->slots[i].value != value)
        i = keel__ai_next(ix, key, i);
    if (i == KEEL__AI_END)
        return -1;
    /* Backward shift: each later entry of the run moves into the hole unless
     * its home lies cyclically in (hole, entry], where it must stay. */
    size_t hole = i;
    for (size_t j = (i + 1) & ix->mask; ix->slots[j].key; j = (j + 1) & ix->mask) {
        size_t home = keel__ai_home(ix, ix->slots[j].key);
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            ix->slots[hole] = ix->slots[j];
            hole = j;
        }
    }
    ix->slots[hole].key = 0;
    ix->slots[hole].value = NULL;
    if (--ix->count == 0)
        keel__ai_clear(ix); /* an empty index holds no memory */
    return 0;
}

void keel__ai_clear(keel__addr_index_t *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
    ix->count = 0;
    ix->shift = 0;
}
