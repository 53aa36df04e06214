/* SPDX-License-Identifier: MIT */
/* hip_dl.h: finding a vendor library and its functions at run time. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "hip_dl.h"

/* Appends to @p buf (of @p size, always terminated) what fits of @p text. */
static void append(char *buf, size_t size, const char *text)
{
    size_t used = strnlen(buf, size);
    if (used + 1 < size)
        snprintf(buf + used, size - used, "%s", text);
}

int keel__hip_dl_load(const char *const *names, const keel__hip_sym_t *wanted, size_t n, void *table,
                      size_t table_size, void **lib_out, const char **opened, char *why, size_t why_size)
{
    memset(table, 0, table_size);
    if (why_size > 0)
        why[0] = '\0';
    void *lib = NULL;
    const char *name = NULL;
    for (size_t i = 0; names[i] != NULL && lib == NULL; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib != NULL) {
            name = names[i];
        } else {
            const char *err = dlerror();
            append(why, why_size, i > 0 ? "; " : "");
            append(why, why_size, err != NULL ? err : names[i]);
        }
    }
    if (lib == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        void *fn = dlsym(lib, wanted[i].name);
        if (fn == NULL) {
            snprintf(why, why_size, "%s has no %s", name, wanted[i].name);
            dlclose(lib);
            memset(table, 0, table_size);
            return -1;
        }
        /* POSIX: a function's address from dlsym fits a void *, and the
         * tables' slots are function pointers of that size. */
        _Static_assert(sizeof(void (*)(void)) == sizeof(void *), "function pointers are void * sized");
        memcpy((char *)table + wanted[i].offset, &fn, sizeof fn);
    }
    *lib_out = lib;
    *opened = name;
    return 0;
}
