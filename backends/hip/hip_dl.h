/* SPDX-License-Identifier: MIT */
/* Opening a vendor library that keel-hip does not link (rocBLAS, hipBLASLt)
 * and filling a table of its functions (hip_dl.c). Plain C and libdl: the
 * loaders' tests run it against fake libraries on machines without ROCm. */
#ifndef KEEL_HIP_DL_H
#define KEEL_HIP_DL_H

#include <stddef.h>

/* One function to resolve: its name in the library, and the offset of its
 * slot (a function pointer) in the caller's table. */
typedef struct {
    const char *name;
    size_t offset;
} keel__hip_sym_t;

/* dlopen (RTLD_NOW | RTLD_LOCAL) of the first of @p names (NULL-terminated)
 * that loads; its name in *opened. NULL when none does, with each name's
 * dlerror in @p why, "; "-separated (always terminated, cut to fit). */
__attribute__((visibility("hidden"))) void *keel__hip_dlopen_first(const char *const *names, const char **opened,
                                                                   char *why, size_t why_size);

/* Resolves each of the @p n functions of @p wanted from @p lib (opened as
 * @p lib_name) into its slot of @p table. 0 on success; -1 when one is
 * missing, with "LIB has no FUNCTION" in @p why (the table is then partly
 * written; the caller clears it and closes the library). */
__attribute__((visibility("hidden"))) int keel__hip_dlsym_table(void *lib, const char *lib_name,
                                                                const keel__hip_sym_t *wanted, size_t n,
                                                                void *table, char *why, size_t why_size);

#endif /* KEEL_HIP_DL_H */
