/* SPDX-License-Identifier: MIT */
/* test-addr-index: the registry's open-addressing multimap
 * (runtime/addr_index.c), built into this program, against a plain array
 * of the pairs it should hold: random inserts and removals of keys that
 * collide as allocation addresses do (aligned, clustered, repeated), with
 * every key's values compared after each step, across growth and the
 * release of an emptied array. */
#include <stdint.h>
#include <stdlib.h>
#include "fixture.h"
#include "runtime/addr_index.h"

typedef struct pair {
    uintptr_t key;
    void *value;
} pair_t;

/* The values the index holds under key, as a sorted list, against the reference's. */
static void check_key(const keel__addr_index_t *ix, const pair_t *ref, size_t n, uintptr_t key)
{
    size_t want = 0, got = 0;
    uintptr_t want_sum = 0, got_sum = 0;
    for (size_t i = 0; i < n; i++)
        if (ref[i].key == key) {
            want++;
            want_sum += (uintptr_t)ref[i].value * 2654435761u;
        }
    for (size_t i = keel__ai_first(ix, key); i != KEEL__AI_END; i = keel__ai_next(ix, key, i)) {
        ck_assert_msg(ix->slots[i].key == key, "slot %zu has key %#lx, iterating %#lx", i,
                      (unsigned long)ix->slots[i].key, (unsigned long)key);
        got++;
        got_sum += (uintptr_t)ix->slots[i].value * 2654435761u;
        ck_assert_msg(got <= n, "iteration over %#lx does not end", (unsigned long)key);
    }
    ck_assert_msg(got == want && got_sum == want_sum, "key %#lx: %zu values (sum %#lx), expected %zu (sum %#lx)",
                  (unsigned long)key, got, (unsigned long)got_sum, want, (unsigned long)want_sum);
    ck_assert_msg((keel__ai_find(ix, key) != NULL) == (want > 0), "find(%#lx) disagrees with the iteration",
                  (unsigned long)key);
}

START_TEST(matches_a_reference_under_random_operations)
{
    enum { MAXN = 6000, KEYS = 2500, STEPS = 60000 };
    pair_t *ref = malloc(MAXN * sizeof *ref);
    uintptr_t *keys = malloc(KEYS * sizeof *keys);
    ck_assert_ptr_nonnull(ref);
    ck_assert_ptr_nonnull(keys);
    /* Addresses as allocators hand them out: 256-byte aligned in a few
     * arenas, some far apart, with block keys (low bits) mixed in. */
    for (size_t k = 0; k < KEYS; k++) {
        uint64_t r = kt_rand64();
        uintptr_t arena = (uintptr_t)(0x7f0000000000ull + (r % 4) * 0x100000000ull);
        keys[k] = k % 5 == 4 ? (((uintptr_t)(r >> 8) % 100000) << 6) | 12 : arena + ((r >> 16) % 20000) * 256;
    }
    keel__addr_index_t ix = {0};
    size_t n = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = kt_rand64();
        /* grow to a few thousand, drain to empty now and then */
        int drain = (step / 15000) % 2 == 1;
        if (n < MAXN && (n == 0 || (!drain && r % 3 != 0) || (drain && r % 5 == 0))) {
            uintptr_t key = keys[(r >> 8) % KEYS];
            void *value = (void *)(uintptr_t)(((r >> 32) & 0xffff) * 16 + 16);
            ck_assert_int_eq(keel__ai_insert(&ix, key, value), 0);
            ref[n++] = (pair_t){key, value};
            check_key(&ix, ref, n, key);
        } else {
            size_t at = (size_t)((r >> 8) % n);
            pair_t p = ref[at];
            ck_assert_int_eq(keel__ai_remove(&ix, p.key, p.value), 0);
            ref[at] = ref[--n];
            check_key(&ix, ref, n, p.key);
            /* a pair that is not there is not removed */
            ck_assert_int_eq(keel__ai_remove(&ix, p.key, (void *)(uintptr_t)1), -1);
        }
        ck_assert_uint_eq(ix.count, n);
        if (n == 0)
            ck_assert_ptr_null(ix.slots); /* an emptied index holds no memory */
        else
            ck_assert_msg(2 * ix.count <= ix.mask + 1, "%zu entries in %zu slots", ix.count, ix.mask + 1);
        if (step % 5000 == 0)
            for (size_t k = 0; k < KEYS; k++)
                check_key(&ix, ref, n, keys[k]);
    }
    for (size_t k = 0; k < KEYS; k++)
        check_key(&ix, ref, n, keys[k]);
    keel__ai_clear(&ix);
    ck_assert_uint_eq(ix.count, 0);
    ck_assert_ptr_null(keel__ai_find(&ix, keys[0]));
    ck_assert_int_eq(keel__ai_remove(&ix, keys[0], NULL), -1);
    free(ref);
    free(keys);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("addr-index");
    TCase *tc = kt_tcase_create("multimap", 120);
    tcase_add_test(tc, matches_a_reference_under_random_operations);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 0, 0);
}
