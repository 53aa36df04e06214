/* SPDX-License-Identifier: MIT */
/* Finding librocblas and the functions keel-hip calls in it (hip_rocblas.h).
 * Plain C and libdl only: test-rocblas-load runs it against fake libraries
 * on machines without ROCm. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "hip_rocblas.h"

/* The functions, by their rocBLAS names, and where each goes in the table. */
static const struct {
    const char *name;
    size_t offset;
} wanted[] = {
#define FN(field) {"rocblas_" #field, offsetof(keel__rocblas_api_t, field)}
    FN(create_handle), FN(destroy_handle), FN(set_stream), FN(set_pointer_mode),
    FN(gemm_ex),       FN(gemm_strided_batched_ex),       FN(sgemv),  FN(dgemv),
#undef FN
};

/* Appends to @p buf (of @p size, always terminated) what fits of @p text. */
static void append(char *buf, size_t size, const char *text)
{
    size_t used = strnlen(buf, size);
    if (used + 1 < size)
        snprintf(buf + used, size - used, "%s", text);
}

int keel__rocblas_load(const char *const *names, keel__rocblas_api_t *api, char *why, size_t why_size)
{
    memset(api, 0, sizeof *api);
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
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        void *fn = dlsym(lib, wanted[i].name);
        if (fn == NULL) {
            snprintf(why, why_size, "%s has no %s", name, wanted[i].name);
            dlclose(lib);
            memset(api, 0, sizeof *api);
            return -1;
        }
        /* POSIX: a function's address from dlsym fits a void *. */
        _Static_assert(sizeof(keel__rb_gemm_ex_fn) == sizeof(void *), "function pointers are void * sized");
        memcpy((char *)api + wanted[i].offset, &fn, sizeof fn);
    }
    api->lib = lib;
    api->lib_name = name;
    return 0;
}

const char *keel__rocblas_status_name(int status)
{
    static const char *const names[KEEL_RB_STATUS_LAST + 1] = {
        "rocblas_status_success",         "rocblas_status_invalid_handle",
        "rocblas_status_not_implemented", "rocblas_status_invalid_pointer",
        "rocblas_status_invalid_size",    "rocblas_status_memory_error",
        "rocblas_status_internal_error",  "rocblas_status_perf_degraded",
        "rocblas_status_size_query_mismatch", "rocblas_status_size_increased",
        "rocblas_status_size_unchanged",  "rocblas_status_invalid_value",
        "rocblas_status_continue",        "rocblas_status_check_numerics_fail",
    };
    return status >= 0 && status <= KEEL_RB_STATUS_LAST ? names[status] : "an unknown rocblas_status";
}
