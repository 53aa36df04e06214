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

/* Clears @p table (@p table_size bytes), opens the first of @p names
 * (NULL-terminated) that dlopen (RTLD_NOW | RTLD_LOCAL) loads, and resolves
 * each of the @p n functions of @p wanted into its slot. 0 on success, with
 * the library in *lib and the name it was opened by in *opened (both may
 * point into the table); -1 otherwise, with the table cleared again and the
 * reason in @p why (always terminated, cut to fit): no library loaded (each
 * name's dlerror, "; "-separated), or the one that loaded lacks a function
 * ("LIB has no FUNCTION"; it is closed again, and the names after it are
 * not tried). */
__attribute__((visibility("hidden"))) int keel__hip_dl_load(const char *const *names, const keel__hip_sym_t *wanted,
                                                            size_t n, void *table, size_t table_size, void **lib,
                                                            const char **opened, char *why, size_t why_size);

#endif /* KEEL_HIP_DL_H */
