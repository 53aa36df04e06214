/* SPDX-License-Identifier: MIT */
/* What the tests of keel-hip's library loaders (test-rocblas-load,
 * test-hipblaslt) check alike: that each function of a library landed in
 * its slot of the loader's table (hip_dl.c). */
#ifndef KEEL_TEST_DL_H
#define KEEL_TEST_DL_H

#include <check.h>
#include <dlfcn.h>
#include <string.h>

/* A function's name and the address of its slot in a loaded table. */
typedef struct {
    const char *name;
    const void *slot;
} kt_dl_slot_t;

/* The table entry at @p slot as a plain address. */
static inline void *kt_dl_addr(const void *slot)
{
    void *p;
    memcpy(&p, slot, sizeof p);
    return p;
}

/* Each of the @p n functions is what dlsym finds in @p lib_path. */
static inline void kt_dl_check_slots(const char *lib_path, const kt_dl_slot_t *expect, size_t n)
{
    void *lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "%s: %s", lib_path, dlerror());
    for (size_t i = 0; i < n; i++) {
        void *want = dlsym(lib, expect[i].name);
        ck_assert_msg(want != NULL && kt_dl_addr(expect[i].slot) == want, "%s is not in its slot", expect[i].name);
    }
    dlclose(lib);
}

#endif /* KEEL_TEST_DL_H */
