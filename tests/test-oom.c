/* SPDX-License-Identifier: MIT */
/* test-oom: host allocations that fail inside Keel. This program defines
 * malloc itself; the executable's definition comes first in symbol lookup,
 * so libkeel's calls land here too. It forwards to the next malloc (libc's,
 * or a sanitizer's) except while the calling thread has armed it, when a
 * request of a chosen size fails. The sizes are those of the registry's
 * indexes (runtime/addr_index.h: the first array of each, the arrays they
 * double into), so each test fails exactly the allocation it is about and
 * counts that it did. Runs on the CPU backend: the registry is the core's and the
 * same for every backend. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "fixture.h"
#include "runtime/addr_index.h"

/* The first array of an index of the registry. */
#define FIRST_ARRAY ((size_t)KEEL__AI_MIN_CAPACITY * sizeof(keel__ai_slot_t))

/* Which requests fail while armed: those of exactly `size` after the first
 * `skip` of them, or (grow) every array larger than the first one. */
static _Thread_local struct {
    int armed;
    int grow;
    size_t size;
    unsigned skip;
    unsigned long failed;
} inject;

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);

/* Not instrumented: a sanitizer's runtime calls malloc while it starts,
 * before instrumented code may run. */
#define INTERPOSED_BODY __attribute__((no_sanitize("thread", "address", "undefined")))
/* Default visibility: the build hides symbols by default, and a hidden
 * malloc would not be the one the libraries find. */
#define INTERPOSED __attribute__((visibility("default"))) INTERPOSED_BODY

/* Whether the armed thread's request of n bytes fails. */
INTERPOSED_BODY static int inject_fails(size_t n)
{
    if (!inject.armed)
        return 0;
    size_t first = FIRST_ARRAY;
    int hit = inject.grow ? n > first && n % first == 0 && ((n / first) & (n / first - 1)) == 0 : n == inject.size;
    if (hit && !inject.grow && inject.skip > 0) {
        inject.skip--;
        hit = 0;
    }
    if (hit) {
        inject.failed++;
        errno = ENOMEM;
    }
    return hit;
}

/* calloc too: the indexes' arrays are calloc'ed. */
INTERPOSED void *malloc(size_t n)
{
    if (inject_fails(n))
        return NULL;
    if (!next_malloc)
        *(void **)&next_malloc = dlsym(RTLD_NEXT, "malloc");
    return next_malloc(n);
}

INTERPOSED void *calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    if (inject_fails(count * size))
        return NULL;
    if (!next_calloc)
        *(void **)&next_calloc = dlsym(RTLD_NEXT, "calloc");
    return next_calloc(count, size);
}

static void arm_size(size_t size, unsigned skip)
{
    inject.grow = 0;
    inject.size = size;
    inject.skip = skip;
    inject.failed = 0;
    inject.armed = 1;
}

static void arm_growth(void)
{
    inject.grow = 1;
    inject.failed = 0;
    inject.armed = 1;
}

static unsigned long disarm(void)
{
    inject.armed = 0;
    return inject.failed;
}

static keel_device_t *cpu(void)
{
    keel_device_t *dev = NULL;
    KT_OK(keel_device_get("cpu", 0, &dev));
    /* Opening the device allocates (streams, threads): done before any test arms. */
    void *p = NULL;
    KT_OK(keel_malloc(dev, 64, &p));
    KT_OK(keel_free(p));
    return dev;
}

static void expect_registered(void *p, size_t size)
{
    keel_pointer_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_pointer_get_info(p, &info));
    ck_assert_msg(info.base == p && info.size == size, "%p: registered as %p, %zu bytes; expected %zu", p, info.base,
                  info.size, size);
}

/* A call that allocates on a registry with no live allocation: the registry
 * makes the first array of its index by base, then of its index by block;
 * either may fail. */
static keel_status_t alloc_one(keel_device_t *dev, keel_stream_t *s, int how, void **p)
{
    switch (how) {
    case 0: return keel_malloc(dev, 4096, p);
    case 1: return keel_malloc_host(dev, 4096, p);
    case 2: return keel_malloc_managed(dev, 4096, p);
    default: return keel_malloc_async(s, 4096, p);
    }
}

START_TEST(failed_table_allocation_is_out_of_memory)
{
    keel_device_t *dev = cpu();
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    static const char *const names[] = {"keel_malloc", "keel_malloc_host", "keel_malloc_managed", "keel_malloc_async"};
    static const char *const which_names[] = {"by base", "by block"};
    for (int which = 0; which < 2; which++) {
        for (int how = 0; how < 4; how++) {
            void *p = KT_SENTINEL;
            keel_clear_error();
            arm_size(FIRST_ARRAY, (unsigned)which);
            keel_status_t st = alloc_one(dev, s, how, &p);
            unsigned long failed = disarm();
            ck_assert_msg(failed > 0, "%s: no request of %zu bytes (the index %s's first array) was made", names[how],
                          FIRST_ARRAY, which_names[which]);
            ck_assert_msg(st == KEEL_ERROR_OUT_OF_MEMORY, "%s with the index %s's first array failing -> %s (%s)",
                          names[how], which_names[which], keel_status_name(st), keel_last_error());
            ck_assert_msg(strstr(keel_last_error(), "out of host memory") != NULL, "%s: detail \"%s\"", names[how],
                          keel_last_error());
            ck_assert_ptr_eq(p, KT_SENTINEL);
            /* Nothing half-made is left: the same call works now, and frees. */
            KT_OK(alloc_one(dev, s, how, &p));
            expect_registered(p, 4096);
            KT_OK(how == 3 ? keel_free_async(p, s) : keel_free(p));
        }
    }
    KT_OK(keel_stream_destroy(s));
}
END_TEST

/* An index doubles its array at half full; with that failing, the
 * allocation whose entry needed it fails, the entries made before stay
 * valid, and the registry grows once it can. */
START_TEST(failed_table_growth_is_out_of_memory)
{
    keel_device_t *dev = cpu();
    enum { MAX = 20000, SIZE = 48 };
    void **ptrs = calloc(MAX, sizeof *ptrs);
    ck_assert_ptr_nonnull(ptrs);
    int n = 0;
    keel_status_t st = KEEL_OK;
    void *p = KT_SENTINEL;
    arm_growth();
    while (n < MAX && (st = keel_malloc(dev, SIZE, &p)) == KEEL_OK) {
        ptrs[n++] = p;
        p = KT_SENTINEL;
    }
    unsigned long failed = disarm();
    ck_assert_msg(failed > 0, "%d allocations and the registry never grew an index", n);
    ck_assert_msg(st == KEEL_ERROR_OUT_OF_MEMORY, "allocation %d with the indexes' growth failing -> %s (%s)", n,
                  keel_status_name(st), keel_last_error());
    ck_assert_ptr_eq(p, KT_SENTINEL);
    ck_assert_int_gt(n, 0);
    for (int i = 0; i < n; i++)
        expect_registered(ptrs[i], SIZE);
    /* Disarmed, the table grows and the next allocations go in. */
    for (int i = 0; i < 100 && n < MAX; i++)
        KT_OK(keel_malloc(dev, SIZE, &ptrs[n++]));
    for (int i = 0; i < n; i++) {
        expect_registered(ptrs[i], SIZE);
        KT_OK(keel_free(ptrs[i]));
    }
    free(ptrs);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = kt_tcase_create("registry_table", 120);
    tcase_add_test(tc, failed_table_allocation_is_out_of_memory);
    suite_add_tcase(s, tc);
    tc = kt_tcase_create("registry_growth", 120);
    tcase_add_test(tc, failed_table_growth_is_out_of_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 0, 0);
}
