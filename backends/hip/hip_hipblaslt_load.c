/* SPDX-License-Identifier: MIT */
/* Finding libhipblaslt and the functions keel-hip calls in it
 * (hip_hipblaslt.h), through hip_dl.c, and checking that it is a release
 * whose types those declarations match. Plain C and libdl only:
 * test-hipblaslt runs it against fake libraries on machines without ROCm. */
#include <stdio.h>
#include <string.h>
#include "hip_dl.h"
#include "hip_hipblaslt.h"

/* The functions, by their hipBLASLt names, and where each goes in the table. */
static const keel__hip_sym_t wanted[] = {
#define FN(name, field) {"hipblasLt" #name, offsetof(keel__hipblaslt_api_t, field)}
    FN(Create, create),
    FN(Destroy, destroy),
    FN(GetVersion, get_version),
    FN(MatmulDescCreate, desc_create),
    FN(MatmulDescDestroy, desc_destroy),
    FN(MatmulDescSetAttribute, desc_set),
    FN(MatrixLayoutCreate, layout_create),
    FN(MatrixLayoutDestroy, layout_destroy),
    FN(MatmulPreferenceCreate, pref_create),
    FN(MatmulPreferenceDestroy, pref_destroy),
    FN(MatmulPreferenceSetAttribute, pref_set),
    FN(MatmulAlgoGetHeuristic, heuristic),
    FN(Matmul, matmul),
#undef FN
};

int keel__hipblaslt_load(const char *const *names, keel__hipblaslt_api_t *api, char *why, size_t why_size)
{
    return keel__hip_dl_load(names, wanted, sizeof wanted / sizeof wanted[0], api, sizeof *api, &api->lib,
                             &api->lib_name, why, why_size);
}

int keel__hipblaslt_check_version(const keel__hipblaslt_api_t *api, keel__hipblaslt_handle_t handle, int *version,
                                  char *why, size_t why_size)
{
    int v = -1;
    int st = api->get_version(handle, &v);
    if (st != KEEL_HLT_STATUS_SUCCESS) {
        snprintf(why, why_size, "%s: hipblasLtGetVersion: %s (%d)", api->lib_name, keel__hipblaslt_status_name(st),
                 st);
        return 0;
    }
    if (v < KEEL_HLT_VERSION_MIN || v >= KEEL_HLT_VERSION_END) {
        snprintf(why, why_size,
                 "%s is hipBLASLt %d.%d.%d; keel-hip's declarations are those of 0.6 (ROCm 6.0) to 0.x, and "
                 "other releases take other types",
                 api->lib_name, v / 100000, v / 100 % 1000, v % 100);
        return 0;
    }
    *version = v;
    return 1;
}

const char *keel__hipblaslt_status_name(int status)
{
    static const char *const names[KEEL_HLT_STATUS_LAST + 1] = {
        "HIPBLAS_STATUS_SUCCESS",          "HIPBLAS_STATUS_NOT_INITIALIZED",   "HIPBLAS_STATUS_ALLOC_FAILED",
        "HIPBLAS_STATUS_INVALID_VALUE",    "HIPBLAS_STATUS_MAPPING_ERROR",     "HIPBLAS_STATUS_EXECUTION_FAILED",
        "HIPBLAS_STATUS_INTERNAL_ERROR",   "HIPBLAS_STATUS_NOT_SUPPORTED",     "HIPBLAS_STATUS_ARCH_MISMATCH",
        "HIPBLAS_STATUS_HANDLE_IS_NULLPTR", "HIPBLAS_STATUS_INVALID_ENUM",     "HIPBLAS_STATUS_UNKNOWN",
    };
    return status >= 0 && status <= KEEL_HLT_STATUS_LAST ? names[status] : "an unknown hipblasStatus_t";
}
