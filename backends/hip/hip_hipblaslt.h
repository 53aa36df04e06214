/* SPDX-License-Identifier: MIT */
/* The part of hipBLASLt's C API that keel-hip calls for the dense layer's
 * fused epilogues, declared here because Debian packages no hipBLASLt (and
 * its header, hipblaslt.h, includes C++ headers): keel-hip opens
 * libhipblaslt with dlopen at the first dense call (hip_hipblaslt_load.c)
 * and calls it through the table below. Nothing here needs the HIP headers,
 * so the loader and the plans are tested on machines without ROCm, against
 * a fake library (backends/hip/test-hipblaslt.c, fake_hipblaslt.c).
 *
 * The values, prototypes and struct layouts are those of hipBLASLt's own
 * header, library/include/hipblaslt.h, of the releases 0.6.0 (ROCm 6.0)
 * through 0.11.0 (the ROCm 6.x line, tags rocm-6.0.0 ... rocm-6.2.2 and the
 * 0.11 development branch of github.com/ROCm/hipBLASLt), which agree on
 * everything below:
 *   hipblasLtEpilogue_t (DEFAULT 1, RELU 2, BIAS 4, RELU_BIAS 6, GELU 32,
 *   GELU_BIAS 36; its GELU is the tanh form: Tensile's activation constants
 *   are sqrt(2/pi) and 0.044715), hipblasLtMatmulDescAttributes_t (TRANSA 0,
 *   TRANSB 1, EPILOGUE 2, BIAS_POINTER 3, BIAS_DATA_TYPE 4; the library
 *   reads an int32_t for each enumeration and a void * for the pointer),
 *   hipblasLtMatmulPreferenceAttributes_t (MAX_WORKSPACE_BYTES 1, a
 *   uint64_t), hipblasLtMatmulAlgo_t (uint8_t data[16] and a size_t
 *   max_workspace_bytes) and hipblasLtMatmulHeuristicResult_t (algo, size_t
 *   workspaceSize, hipblasStatus_t state, float wavesCount, int
 *   reserved[4]), and the functions hipblasLtCreate, hipblasLtDestroy,
 *   hipblasLtGetVersion (major * 100000 + minor * 100 + patch),
 *   hipblasLtMatmulDescCreate/Destroy/SetAttribute,
 *   hipblasLtMatrixLayoutCreate/Destroy, hipblasLtMatmulPreferenceCreate/
 *   Destroy/SetAttribute, hipblasLtMatmulAlgoGetHeuristic, hipblasLtMatmul.
 * The types it takes from elsewhere: hipblasStatus_t (SUCCESS 0 ... UNKNOWN
 * 11), hipblasOperation_t (N 111, T 112) and hipblasComputeType_t (32F 2)
 * from hipblas.h of hipBLAS 2.x (ROCm 6.0 to 6.2) and hipblas-common.h
 * (ROCm 6.3 on), which agree; hipDataType (HIP_R_32F 0, HIP_R_64F 1,
 * HIP_R_16F 2, HIP_R_16BF 14) from HIP 6's include/hip/library_types.h.
 * The enumerations are passed as int, as C passes an enum whose values fit.
 *
 * hipBLASLt 0.3 (ROCm 5.7) and older take other types in the same places
 * (hipblasDatatype_t, whose f32 is 151, and hipblasLtComputeType_t, whose
 * f32 is 300) and lay the algorithm out differently, under the same soname,
 * and 1.0 (ROCm 7) was not checked: keel__hipblaslt_check_version accepts
 * 0.6 to 0.x only. hipBLASLt's matmul takes column-major data only (its
 * ORDER attribute is read by hipblasLtMatrixTransform alone). */
#ifndef KEEL_HIP_HIPBLASLT_H
#define KEEL_HIP_HIPBLASLT_H

#include <stddef.h>
#include <stdint.h>

/* hipblasLtHandle_t and the descriptors: opaque pointers. */
typedef void *keel__hipblaslt_handle_t;
typedef struct keel__hlt_desc *keel__hlt_desc_t;     /* hipblasLtMatmulDesc_t */
typedef struct keel__hlt_layout *keel__hlt_layout_t; /* hipblasLtMatrixLayout_t */
typedef struct keel__hlt_pref *keel__hlt_pref_t;     /* hipblasLtMatmulPreference_t */

enum {
    /* hipblasStatus_t */
    KEEL_HLT_STATUS_SUCCESS = 0,
    KEEL_HLT_STATUS_NOT_INITIALIZED = 1,
    KEEL_HLT_STATUS_ALLOC_FAILED = 2,
    KEEL_HLT_STATUS_INVALID_VALUE = 3,
    KEEL_HLT_STATUS_EXECUTION_FAILED = 5,
    KEEL_HLT_STATUS_NOT_SUPPORTED = 7,
    KEEL_HLT_STATUS_ARCH_MISMATCH = 8,
    KEEL_HLT_STATUS_LAST = 11,          /* HIPBLAS_STATUS_UNKNOWN */
    /* hipblasOperation_t */
    KEEL_HLT_OP_N = 111,
    KEEL_HLT_OP_T = 112,
    /* hipblasComputeType_t */
    KEEL_HLT_COMPUTE_32F = 2,
    /* hipDataType (real types only) */
    KEEL_HLT_R_32F = 0,
    KEEL_HLT_R_64F = 1,
    KEEL_HLT_R_16F = 2,
    KEEL_HLT_R_16BF = 14,
    /* hipblasLtEpilogue_t */
    KEEL_HLT_EPILOGUE_DEFAULT = 1,
    KEEL_HLT_EPILOGUE_RELU = 2,
    KEEL_HLT_EPILOGUE_BIAS = 4,
    KEEL_HLT_EPILOGUE_RELU_BIAS = 6,
    KEEL_HLT_EPILOGUE_GELU = 32,
    KEEL_HLT_EPILOGUE_GELU_BIAS = 36,
    /* hipblasLtMatmulDescAttributes_t */
    KEEL_HLT_DESC_TRANSA = 0,
    KEEL_HLT_DESC_TRANSB = 1,
    KEEL_HLT_DESC_EPILOGUE = 2,
    KEEL_HLT_DESC_BIAS_POINTER = 3,
    KEEL_HLT_DESC_BIAS_DATA_TYPE = 4,
    /* hipblasLtMatmulPreferenceAttributes_t */
    KEEL_HLT_PREF_MAX_WORKSPACE_BYTES = 1,
    /* hipblasLtGetVersion's encoding: the releases whose declarations these are */
    KEEL_HLT_VERSION_MIN = 600,         /* 0.6.0, ROCm 6.0 */
    KEEL_HLT_VERSION_END = 100000,      /* 1.0.0, not checked */
};

/* hipblasLtMatmulAlgo_t */
typedef struct {
    uint8_t data[16];
    size_t max_workspace_bytes;
} keel__hlt_algo_t;

/* hipblasLtMatmulHeuristicResult_t */
typedef struct {
    keel__hlt_algo_t algo;
    size_t workspace_size;
    int state;                          /* a hipblasStatus_t */
    float waves_count;
    int reserved[4];
} keel__hlt_heuristic_t;

_Static_assert(sizeof(keel__hlt_algo_t) == 24 && sizeof(keel__hlt_heuristic_t) == 56,
               "hipBLASLt 0.6-0.11's layouts on LP64");

typedef int (*keel__hlt_create_fn)(keel__hipblaslt_handle_t *handle);
typedef int (*keel__hlt_destroy_fn)(keel__hipblaslt_handle_t handle);
typedef int (*keel__hlt_get_version_fn)(keel__hipblaslt_handle_t handle, int *version);
typedef int (*keel__hlt_desc_create_fn)(keel__hlt_desc_t *desc, int compute_type, int scale_type);
typedef int (*keel__hlt_desc_destroy_fn)(keel__hlt_desc_t desc);
typedef int (*keel__hlt_desc_set_fn)(keel__hlt_desc_t desc, int attr, const void *buf, size_t size);
typedef int (*keel__hlt_layout_create_fn)(keel__hlt_layout_t *layout, int type, uint64_t rows, uint64_t cols,
                                          int64_t ld);
typedef int (*keel__hlt_layout_destroy_fn)(keel__hlt_layout_t layout);
typedef int (*keel__hlt_pref_create_fn)(keel__hlt_pref_t *pref);
typedef int (*keel__hlt_pref_destroy_fn)(keel__hlt_pref_t pref);
typedef int (*keel__hlt_pref_set_fn)(keel__hlt_pref_t pref, int attr, const void *buf, size_t size);
typedef int (*keel__hlt_heuristic_fn)(keel__hipblaslt_handle_t handle, keel__hlt_desc_t desc, keel__hlt_layout_t a,
                                      keel__hlt_layout_t b, keel__hlt_layout_t c, keel__hlt_layout_t d,
                                      keel__hlt_pref_t pref, int requested, keel__hlt_heuristic_t *results,
                                      int *returned);
/* D = alpha op(A) op(B) + beta C, then the epilogue; scalars of the scale
 * type on the host; the stream is a hipStream_t. */
typedef int (*keel__hlt_matmul_fn)(keel__hipblaslt_handle_t handle, keel__hlt_desc_t desc, const void *alpha,
                                   const void *a, keel__hlt_layout_t la, const void *b, keel__hlt_layout_t lb,
                                   const void *beta, const void *c, keel__hlt_layout_t lc, void *d,
                                   keel__hlt_layout_t ld, const keel__hlt_algo_t *algo, void *workspace,
                                   size_t workspace_bytes, void *stream);

/* The resolved library: every entry is set once keel__hipblaslt_load succeeds. */
typedef struct keel__hipblaslt_api {
    void *lib;                          /* the dlopen handle, kept open */
    const char *lib_name;               /* the name it was opened by */
    keel__hlt_create_fn create;
    keel__hlt_destroy_fn destroy;
    keel__hlt_get_version_fn get_version;
    keel__hlt_desc_create_fn desc_create;
    keel__hlt_desc_destroy_fn desc_destroy;
    keel__hlt_desc_set_fn desc_set;
    keel__hlt_layout_create_fn layout_create;
    keel__hlt_layout_destroy_fn layout_destroy;
    keel__hlt_pref_create_fn pref_create;
    keel__hlt_pref_destroy_fn pref_destroy;
    keel__hlt_pref_set_fn pref_set;
    keel__hlt_heuristic_fn heuristic;
    keel__hlt_matmul_fn matmul;
} keel__hipblaslt_api_t;

#define KEEL_HLT_HIDDEN __attribute__((visibility("hidden")))

/* Opens the first of @p names (NULL-terminated) that dlopen can load and
 * resolves every entry of @p api from it. 0 on success; -1 otherwise, with
 * the reason in @p why: no library loaded (naming each name tried), or the
 * one that loaded lacks a function (naming the library and the function;
 * the library is closed again). */
KEEL_HLT_HIDDEN int keel__hipblaslt_load(const char *const *names, keel__hipblaslt_api_t *api, char *why,
                                         size_t why_size);

/* Whether the library behind @p handle is a release these declarations
 * fit: 1, with its hipblasLtGetVersion value in *version; 0 with the reason
 * in @p why (the version it reported, or the failed call). */
KEEL_HLT_HIDDEN int keel__hipblaslt_check_version(const keel__hipblaslt_api_t *api, keel__hipblaslt_handle_t handle,
                                                  int *version, char *why, size_t why_size);

/* The hipblasStatus_t enumerator of @p status ("HIPBLAS_STATUS_NOT_SUPPORTED"),
 * or "an unknown hipblasStatus_t" for a value this header does not know. */
KEEL_HLT_HIDDEN const char *keel__hipblaslt_status_name(int status);

#endif /* KEEL_HIP_HIPBLASLT_H */
