/* SPDX-License-Identifier: MIT */
/* test-registry: the allocation registry (runtime/registry.c), built into
 * this program, against a plain model of the allocations it should hold.
 * Addresses are made up (the registry never touches the memory), laid out
 * in regions so that the test knows which ranges overlap: each region
 * holds at most one allocation, at the region's start or past it, of a
 * size that keeps it inside. Allocations come and go at random,
 * stream-ordered ones freed as keel_free_async frees them (the entry
 * parked), and the next allocation of a region often lands at the freed
 * base with another size, as a vendor's pool hands out a freed block
 * again: the parked entry is then taken back as it is (the same size
 * class), or released and the allocation entered anew. Every lookup (by base, inside, one past the
 * end; through the registry and through the thread's cache) is checked
 * against the model. */
#include <stdint.h>
#include <stdlib.h>
#include "fixture.h"
#include "runtime/internal.h"

/* The registry reports its errors through libkeel's error state, which is
 * not built in here: the status alone is checked. */
keel_status_t keel__set_error(keel_status_t status, const char *fmt, ...)
{
    (void)fmt;
    return status;
}

enum { REGIONS = 48, STEPS = 40000 };
#define REGION_BYTES ((uintptr_t)8 << 20)
#define ARENA ((uintptr_t)0x7f3000000000ull)

typedef struct region {
    uintptr_t base;   /* of the allocation there, or of the last one */
    size_t size;
    int live, stream_ordered;
} region_t;

static region_t reg[REGIONS];

static uintptr_t region_start(int i)
{
    return ARENA + (uintptr_t)i * REGION_BYTES;
}
static struct keel_device *const dev = (struct keel_device *)&reg; /* a tag: never dereferenced */

/* The live allocation of the model holding addr, or NULL. */
static const region_t *model_holder(uintptr_t addr)
{
    for (int i = 0; i < REGIONS; i++)
        if (reg[i].live && addr - reg[i].base < reg[i].size)
            return &reg[i];
    return NULL;
}

#define DUMMY ((uintptr_t)0x7f2000000000ull)

/* Moves the registry's generation on (a dummy allocation added and
 * removed far from the regions), so that the thread's cache answers
 * nothing and the next lookup goes to the indexes. */
static void forget_cached(void)
{
    keel__alloc_t out;
    ck_assert_int_eq(keel__registry_add((void *)DUMMY, 64, KEEL_MEMORY_HOST, dev, 0), KEEL_OK);
    ck_assert_int_eq(keel__registry_remove((void *)DUMMY, &out), KEEL_OK);
}

static void expect(uintptr_t addr, int found, const keel__alloc_t *got, const char *how)
{
    const region_t *want = model_holder(addr);
    if (!want) {
        ck_assert_msg(!found, "%#lx (%s): found in an allocation of %zu bytes at %#lx, none holds it",
                      (unsigned long)addr, how, got->size, (unsigned long)got->base);
        return;
    }
    ck_assert_msg(found, "%#lx (%s): not found, inside %zu bytes at %#lx", (unsigned long)addr, how, want->size,
                  (unsigned long)want->base);
    ck_assert_msg(got->base == want->base && got->size == want->size && got->stream_ordered == want->stream_ordered,
                  "%#lx (%s): found %zu bytes at %#lx, want %zu at %#lx", (unsigned long)addr, how, got->size,
                  (unsigned long)got->base, want->size, (unsigned long)want->base);
}

/* addr looked up in the indexes (fresh: nothing cached), then again, as
 * the thread's cache answers it now. */
static void check_addr(uintptr_t addr)
{
    keel__alloc_t got;
    forget_cached();
    int found = keel__registry_find((const void *)addr, &got);
    expect(addr, found, &got, "indexes");
    const keel__alloc_t *c = keel__registry_lookup((const void *)addr);
    expect(addr, c != NULL, c, "cache");
}

/* The probes of region i: its start, the allocation's first, middle and
 * last bytes and the byte past it, and the last byte of the region. The
 * first is answered by whatever the thread cached before the last change
 * (which must not answer for a changed registry). */
static void check_region(int i)
{
    uintptr_t start = region_start(i);
    const keel__alloc_t *c = keel__registry_lookup((const void *)(reg[i].base + reg[i].size / 2));
    expect(reg[i].base + reg[i].size / 2, c != NULL, c, "after a change");
    check_addr(start);
    check_addr(reg[i].base);
    check_addr(reg[i].base + reg[i].size / 2);
    check_addr(reg[i].base + reg[i].size - 1);
    check_addr(reg[i].base + reg[i].size);
    check_addr(start + REGION_BYTES - 1);
}

/* A size for an allocation at offset off of a region: small, around a
 * power of two (either side of a level), or anything that fits. */
static size_t pick_size(uintptr_t off)
{
    uint64_t r = kt_rand64();
    size_t room = REGION_BYTES - off, s;
    switch (r % 5) {
    case 0:
        s = 1 + (r >> 8) % 200;
        break;
    case 1:
    case 2: {
        size_t p = (size_t)1 << (10 + (r >> 8) % 13); /* 1 KiB to 4 MiB */
        s = (r >> 16) % 2 ? p : p + 256;
        break;
    }
    default:
        s = 1 + (r >> 8) % room;
        break;
    }
    return s < room ? s : room;
}

START_TEST(matches_a_model_while_blocks_are_parked_and_taken_back)
{
    int parked_reuse = 0, other_size = 0;
    for (int i = 0; i < REGIONS; i++)
        reg[i] = (region_t){.base = region_start(i), .size = 1};
    int last_freed = -1;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = kt_rand64();
        /* Often the region freed last, at its old base: the pool's case. */
        int again = last_freed >= 0 && r % 2 == 0;
        int i = again ? last_freed : (int)((r >> 8) % REGIONS);
        region_t *g = &reg[i];
        uintptr_t start = region_start(i);
        if (!g->live) {
            uintptr_t base = again ? g->base : start + ((r >> 20) % 3 == 0 ? 0 : ((r >> 24) % 4096) * 256);
            size_t size = pick_size(base - start);
            if (again) {
                parked_reuse++;
                other_size += size != g->size;
            }
            int so = (r >> 40) % 4 != 0;
            ck_assert_int_eq(keel__registry_add((void *)base, size, KEEL_MEMORY_DEVICE, dev, so), KEEL_OK);
            *g = (region_t){.base = base, .size = size, .live = 1, .stream_ordered = so};
            last_freed = -1;
        } else if ((r >> 40) % 8 == 0 && g->size > 1) {
            /* Not a base: refused, and nothing changes. */
            keel__alloc_t out;
            ck_assert_int_eq(keel__registry_remove((void *)(g->base + 1), &out), KEEL_ERROR_INVALID_POINTER);
        } else {
            keel__alloc_t out, ev[KEEL__RETIRE_EVICTS];
            int nev = 0;
            if (g->stream_ordered) {
                /* As keel_free_async: removed and remembered as kept, then
                 * released (the record corrected) before the pool may hand
                 * the base out again. */
                ck_assert_int_eq(keel__registry_remove_kept((void *)g->base, &out, ev, &nev), KEEL_OK);
                keel__registry_unkeep(g->base);
            } else {
                ck_assert_int_eq(keel__registry_remove((void *)g->base, &out), KEEL_OK);
            }
            ck_assert_msg(out.base == g->base && out.size == g->size, "removed %zu bytes at %#lx, want %zu at %#lx",
                          out.size, (unsigned long)out.base, g->size, (unsigned long)g->base);
            g->live = 0;
            last_freed = i;
        }
        check_region(i);
        check_region((int)((r >> 48) % REGIONS));
        if (step % 2000 == 0)
            for (int k = 0; k < REGIONS; k++)
                check_region(k);
    }
    for (int k = 0; k < REGIONS; k++)
        check_region(k);
    /* The pool's case came up, mostly with another size. */
    ck_assert_int_gt(parked_reuse, STEPS / 8);
    ck_assert_int_gt(other_size, parked_reuse / 2);
    for (int k = 0; k < REGIONS; k++)
        if (reg[k].live) {
            keel__alloc_t out;
            ck_assert_int_eq(keel__registry_remove((void *)reg[k].base, &out), KEEL_OK);
            reg[k].live = 0;
        }
    for (int k = 0; k < REGIONS; k++)
        check_region(k);
    keel__registry_reset();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("registry");
    TCase *tc = kt_tcase_create("model", 120);
    tcase_add_test(tc, matches_a_model_while_blocks_are_parked_and_taken_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 0, 0);
}
