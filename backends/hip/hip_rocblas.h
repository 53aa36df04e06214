/* SPDX-License-Identifier: MIT */
/* The part of rocBLAS's C API that keel-hip calls, declared here because
 * Debian 12 packages no rocBLAS (no header, no library): keel-hip opens
 * librocblas with dlopen at first use (hip_rocblas_load.c) and calls it
 * through the table below. Nothing here needs the HIP headers, so the loader
 * is tested on machines without ROCm (backends/hip/test-rocblas-load.c).
 *
 * The values and argument lists are those of the rocBLAS API reference for
 * ROCm 5.x: the "rocBLAS Enumeration" and "rocBLAS Datatypes" pages
 * (rocblas_operation, rocblas_datatype, rocblas_status, rocblas_pointer_mode,
 * rocblas_gemm_algo; rocblas_int is 32-bit, rocblas_stride 64-bit), the
 * "Auxiliary" page (rocblas_create_handle, rocblas_destroy_handle,
 * rocblas_set_stream, rocblas_set_pointer_mode) and the BLAS level 2 and EX
 * pages (rocblas_sgemv, rocblas_dgemv, rocblas_gemm_ex,
 * rocblas_gemm_strided_batched_ex, whose last two arguments are
 * solution_index and flags since rocBLAS 2.x dropped the workspace ones).
 * The enumerations are passed as int, as C passes an enum whose values fit.
 *
 * Checked against rocBLAS's own headers (library/include/internal/
 * rocblas-types.h, rocblas-auxiliary.h, rocblas-functions.h of the 2.4x
 * releases, ROCm 5.x): the values and argument lists below are the same
 * there, and stay so in rocBLAS 3.x and 4.x (ROCm 6), whose gemm_ex still
 * takes its compute type as a rocblas_datatype (rocblas_computetype is only
 * for the 8-bit-float gemm_ex3). Later rocBLAS adds statuses 14 and 15, which
 * keel__rocblas_status_name reports as unknown. With beta == 0, gemm_ex and
 * gemv do not read C (y), so it may hold anything, NaN included. */
#ifndef KEEL_HIP_ROCBLAS_H
#define KEEL_HIP_ROCBLAS_H

#include <stddef.h>
#include <stdint.h>

/* rocblas_handle: an opaque pointer. */
typedef struct keel__rocblas_ctx *keel__rocblas_handle_t;

enum {
    /* rocblas_status */
    KEEL_RB_STATUS_SUCCESS = 0,
    KEEL_RB_STATUS_NOT_IMPLEMENTED = 2,
    KEEL_RB_STATUS_INVALID_SIZE = 4,
    KEEL_RB_STATUS_MEMORY_ERROR = 5,
    KEEL_RB_STATUS_LAST = 13,          /* rocblas_status_check_numerics_fail */
    /* rocblas_operation */
    KEEL_RB_OP_NONE = 111,
    KEEL_RB_OP_TRANSPOSE = 112,
    /* rocblas_datatype (real types only) */
    KEEL_RB_F16 = 150,
    KEEL_RB_F32 = 151,
    KEEL_RB_F64 = 152,
    KEEL_RB_BF16 = 168,
    /* rocblas_pointer_mode: alpha and beta are host pointers */
    KEEL_RB_POINTER_HOST = 0,
    /* rocblas_gemm_algo: rocBLAS picks the kernel (solution_index 0, flags 0) */
    KEEL_RB_GEMM_ALGO_STANDARD = 0,
};

typedef int (*keel__rb_create_handle_fn)(keel__rocblas_handle_t *handle);
typedef int (*keel__rb_destroy_handle_fn)(keel__rocblas_handle_t handle);
/* The stream is a hipStream_t. */
typedef int (*keel__rb_set_stream_fn)(keel__rocblas_handle_t handle, void *stream);
typedef int (*keel__rb_set_pointer_mode_fn)(keel__rocblas_handle_t handle, int mode);
/* D = alpha op(A) op(B) + beta C; scalars in the compute type. */
typedef int (*keel__rb_gemm_ex_fn)(keel__rocblas_handle_t handle, int trans_a, int trans_b, int32_t m, int32_t n,
                                   int32_t k, const void *alpha, const void *a, int a_type, int32_t lda,
                                   const void *b, int b_type, int32_t ldb, const void *beta, const void *c,
                                   int c_type, int32_t ldc, void *d, int d_type, int32_t ldd, int compute_type,
                                   int algo, int32_t solution_index, uint32_t flags);
typedef int (*keel__rb_gemm_strided_batched_ex_fn)(
    keel__rocblas_handle_t handle, int trans_a, int trans_b, int32_t m, int32_t n, int32_t k, const void *alpha,
    const void *a, int a_type, int32_t lda, int64_t stride_a, const void *b, int b_type, int32_t ldb,
    int64_t stride_b, const void *beta, const void *c, int c_type, int32_t ldc, int64_t stride_c, void *d,
    int d_type, int32_t ldd, int64_t stride_d, int32_t batch_count, int compute_type, int algo,
    int32_t solution_index, uint32_t flags);
typedef int (*keel__rb_sgemv_fn)(keel__rocblas_handle_t handle, int trans, int32_t m, int32_t n, const float *alpha,
                                 const float *a, int32_t lda, const float *x, int32_t incx, const float *beta,
                                 float *y, int32_t incy);
typedef int (*keel__rb_dgemv_fn)(keel__rocblas_handle_t handle, int trans, int32_t m, int32_t n,
                                 const double *alpha, const double *a, int32_t lda, const double *x, int32_t incx,
                                 const double *beta, double *y, int32_t incy);

/* The resolved library: every entry is set once keel__rocblas_load succeeds. */
typedef struct keel__rocblas_api {
    void *lib;                         /* the dlopen handle, kept open */
    const char *lib_name;              /* the name it was opened by */
    keel__rb_create_handle_fn create_handle;
    keel__rb_destroy_handle_fn destroy_handle;
    keel__rb_set_stream_fn set_stream;
    keel__rb_set_pointer_mode_fn set_pointer_mode;
    keel__rb_gemm_ex_fn gemm_ex;
    keel__rb_gemm_strided_batched_ex_fn gemm_strided_batched_ex;
    keel__rb_sgemv_fn sgemv;
    keel__rb_dgemv_fn dgemv;
} keel__rocblas_api_t;

/* Opens the first of @p names (NULL-terminated) that dlopen can load and
 * resolves every entry of @p api from it. 0 on success; -1 otherwise, with
 * the reason in @p why: no library loaded (naming each name tried), or the
 * one that loaded lacks a function (naming the library and the function;
 * the library is closed again). */
__attribute__((visibility("hidden"))) int keel__rocblas_load(const char *const *names, keel__rocblas_api_t *api,
                                                             char *why, size_t why_size);

/* The rocblas_status enumerator of @p status ("rocblas_status_invalid_size"),
 * or "an unknown rocblas_status" for a value this header does not know. */
__attribute__((visibility("hidden"))) const char *keel__rocblas_status_name(int status);

#endif /* KEEL_HIP_ROCBLAS_H */
