/* SPDX-License-Identifier: MIT */
/**
 * @file keel/backend_ops.h
 * @brief Plugin ABI of the built-in operations (keel/ops.h).
 *
 * A backend that implements the operations points keel_backend_plugin_t.ops
 * at a static keel_ops_vtable_t. The core has already checked everything
 * keel/ops.h promises before an entry is called: handles, dtypes (each entry
 * gets only the dtypes and combinations ops.h lists), sizes (every extent fits
 * in size_t and in its allocation, on this device), leading dimensions and
 * strides. Empty shapes never reach the backend. Entries enqueue on the
 * stream and return; they report failures to enqueue through
 * host->set_error() and their status. An entry left NULL makes the call
 * return KEEL_ERROR_NOT_SUPPORTED naming the backend, except gemm, gemv and
 * dense: the core runs its own portable kernels for them (below).
 *
 * Keel's own BLAS: where gemm, gemv or dense is NULL, where the blas entry
 * says the backend's vendor library is not usable, where an entry answers
 * KEEL_ERROR_NOT_SUPPORTED, and where KEEL_BLAS=fallback asks for it, the
 * core builds kernels/portable/blas.kc for the device (keel_module_build,
 * through the kernel table) and launches them on the stream instead.
 *
 * Normalization done by the core, so backends see one convention:
 *  - gemm: always column-major (a row-major call arrives with A and B, m and n,
 *    transa and transb swapped), batch_count >= 1, stride_* 0 when batch_count is 1.
 *  - gemv: always column-major (a row-major call arrives as the transposed
 *    column-major one, m and n swapped).
 *  - dense: as the caller gave it (the bias follows rows of Y in both layouts).
 */
#ifndef KEEL_BACKEND_OPS_H
#define KEEL_BACKEND_OPS_H

#include <stdint.h>
#include "keel/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Version of keel_ops_vtable_t; raised when an entry changes incompatibly. */
#define KEEL_OPS_ABI_VERSION 1

/** @brief Arguments of a binary elementwise operation (see keel_binary()). */
typedef struct keel_binary_args {
    keel_binary_op_t op;
    keel_dtype_t dtype;
    keel_broadcast_t broadcast;
    size_t rows, cols;
    double alpha, beta;
    const void *a;
    size_t lda;
    const void *b;
    size_t ldb;           /**< 0 unless broadcast is NONE */
    void *y;
    size_t ldy;
} keel_binary_args_t;

/** @brief Arguments of a column-major GEMV: y = alpha op(A) x + beta y, A m x n. */
typedef struct keel_gemv_args {
    keel_dtype_t dtype;
    keel_transpose_op_t trans;
    size_t m, n;
    double alpha, beta;
    const void *a;
    size_t lda;
    const void *x;
    size_t incx;
    void *y;
    size_t incy;
} keel_gemv_args_t;

/** @brief The operations a backend offers. Every entry is optional. */
typedef struct keel_ops_vtable {
    uint32_t abi_version;   /**< KEEL_OPS_ABI_VERSION */
    uint32_t struct_size;   /**< sizeof(keel_ops_vtable_t) the backend was built with */
    keel_status_t (*fill)(void *stream_ctx, keel_dtype_t dtype, void *ptr, size_t n, double value);
    keel_status_t (*cast)(void *stream_ctx, keel_dtype_t src_dtype, const void *src, keel_dtype_t dst_dtype,
                          void *dst, size_t n);
    keel_status_t (*copy_2d)(void *stream_ctx, keel_dtype_t dtype, size_t rows, size_t cols, const void *src,
                             size_t src_ld, void *dst, size_t dst_ld);
    keel_status_t (*transpose)(void *stream_ctx, keel_dtype_t dtype, size_t rows, size_t cols, const void *src,
                               size_t src_ld, void *dst, size_t dst_ld);
    keel_status_t (*unary)(void *stream_ctx, keel_unary_op_t op, keel_dtype_t dtype, size_t n, const void *x,
                           void *y);
    keel_status_t (*binary)(void *stream_ctx, const keel_binary_args_t *args);
    /** Never called for an empty input: the core fills the zeros of an empty sum or norm itself. */
    keel_status_t (*reduce)(void *stream_ctx, keel_reduce_op_t op, keel_dtype_t dtype, size_t rows, size_t cols,
                            const void *x, size_t ld, keel_reduce_axis_t axis, void *out);
    keel_status_t (*argmax_rows)(void *stream_ctx, keel_dtype_t dtype, size_t rows, size_t cols, const void *x,
                                 size_t ld, int64_t *out);
    keel_status_t (*softmax_rows)(void *stream_ctx, keel_dtype_t dtype, size_t rows, size_t cols, const void *x,
                                  size_t ldx, void *y, size_t ldy, int log_softmax);
    keel_status_t (*layernorm_rows)(void *stream_ctx, keel_dtype_t dtype, size_t rows, size_t cols,
                                    const void *x, size_t ldx, const void *gamma, const void *beta, double eps,
                                    void *y, size_t ldy);
    /** Column-major, batch_count >= 1, struct_size == sizeof(keel_gemm_params_t) of the core. */
    keel_status_t (*gemm)(void *stream_ctx, const keel_gemm_params_t *params);
    keel_status_t (*gemv)(void *stream_ctx, const keel_gemv_args_t *args);
    keel_status_t (*dense)(void *stream_ctx, const keel_dense_params_t *params);
    /**
     * optional: whether gemm, gemv and dense can use the vendor library they
     * are built on, on this device. 1 when they can, with the library's name
     * and version in @p text ("OpenBLAS 0.3.21"); 0 when they cannot, with the
     * reason in @p text ("librocblas.so.0: cannot open shared object file"):
     * the core then runs its portable kernels for them. @p text has @p size
     * bytes; write a terminated string. Called once per device, after open.
     * NULL: the entries that exist are the backend's own and always usable.
     */
    int (*blas)(void *device_ctx, char *text, size_t size);
    void *reserved[7];      /**< NULL */
} keel_ops_vtable_t;

#ifdef __cplusplus
}
#endif

#endif /* KEEL_BACKEND_OPS_H */
