/* SPDX-License-Identifier: MIT */
/* Finding librocblas and the functions keel-hip calls in it (hip_rocblas.h),
 * through hip_dl.c. Plain C and libdl only: test-rocblas-load runs it
 * against fake libraries on machines without ROCm. */
#include "hip_dl.h"
#include "hip_rocblas.h"

/* The functions, by their rocBLAS names, and where each goes in the table. */
static const keel__hip_sym_t wanted[] = {
#define FN(field) {"rocblas_" #field, offsetof(keel__rocblas_api_t, field)}
    FN(create_handle), FN(destroy_handle), FN(set_stream), FN(set_pointer_mode),
    FN(gemm_ex),       FN(gemm_strided_batched_ex),       FN(sgemv),  FN(dgemv),
#undef FN
};

int keel__rocblas_load(const char *const *names, keel__rocblas_api_t *api, char *why, size_t why_size)
{
    return keel__hip_dl_load(names, wanted, sizeof wanted / sizeof wanted[0], api, sizeof *api, &api->lib,
                             &api->lib_name, why, why_size);
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
