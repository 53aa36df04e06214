/* SPDX-License-Identifier: MIT */
/**
 * @file keel/ops.h
 * @brief Built-in operations: fill, cast, copies, elementwise math,
 *        reductions, softmax, layer norm, GEMM, GEMV and the dense layer.
 *
 * Every operation is enqueued on a stream and works on memory Keel allocated
 * on the stream's device (keel_malloc, keel_malloc_managed, keel_malloc_host
 * of the same device). Shapes, leading dimensions and strides are counted in
 * elements, never bytes. Matrices are row-major unless a layout says
 * otherwise: element (i, j) of a matrix with leading dimension ld is at
 * index i * ld + j.
 *
 * Before anything is enqueued, each call checks its handle, dtypes and sizes,
 * and that every pointer lies in an allocation of the stream's device with
 * room for the whole extent the call touches. A call that fails this check
 * returns an error (with the detail in keel_last_error()) and writes nothing.
 * A call with an empty shape (a zero size) checks its arguments, accepts NULL
 * pointers, and enqueues nothing.
 *
 * Precision: f16 and bf16 are stored in 16 bits and computed in f32
 * (accumulations included); f32 reductions accumulate in at least f32 with a
 * blocked order; f64 computes in f64. NaN and Inf propagate as IEEE 754 says;
 * max and min (elementwise, reductions, argmax) treat NaN as the largest
 * value, so a NaN in the input gives NaN in the result, as NumPy and PyTorch do.
 *
 * Ownership: no call retains a pointer beyond the work it enqueues; the
 * memory must stay allocated until that work is done. All calls are
 * thread-safe; calls on one stream run in the order they were made.
 */
#ifndef KEEL_OPS_H
#define KEEL_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "keel/status.h"
#include "keel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Element types of the built-in operations. */
typedef enum keel_dtype {
    KEEL_F32 = 1,   /**< IEEE binary32 */
    KEEL_F64 = 2,   /**< IEEE binary64 */
    KEEL_F16 = 3,   /**< IEEE binary16 */
    KEEL_BF16 = 4   /**< bfloat16: the high 16 bits of a binary32 */
} keel_dtype_t;

/** @brief Size of one element of @p dtype in bytes; 0 for an unknown dtype. */
KEEL_API size_t keel_dtype_size(keel_dtype_t dtype);

/** @brief Name of a dtype ("f32", "bf16"); "unknown" for others. Static string. */
KEEL_API const char *keel_dtype_name(keel_dtype_t dtype);

/* ------------------------------------------------------------------------ */
/* Fill, cast, copies                                                        */
/* ------------------------------------------------------------------------ */

/**
 * @brief Set @p n elements at @p ptr to @p value (rounded to @p dtype, to nearest even).
 */
KEEL_API keel_status_t keel_fill(keel_stream_t *stream, keel_dtype_t dtype, void *ptr, size_t n, double value);

/**
 * @brief Convert @p n elements from @p src (of @p src_dtype) to @p dst (of
 *        @p dst_dtype), rounding to nearest even; a plain copy when the dtypes
 *        are equal. @p src and @p dst must not overlap unless they are equal
 *        and the dtypes have the same size.
 */
KEEL_API keel_status_t keel_cast(keel_stream_t *stream, keel_dtype_t src_dtype, const void *src,
                                 keel_dtype_t dst_dtype, void *dst, size_t n);

/**
 * @brief Copy a rows x cols block between two row-major matrices of one dtype.
 * @param[in] src_ld,dst_ld leading dimensions, >= cols.
 * The two blocks must not overlap.
 */
KEEL_API keel_status_t keel_copy_2d(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols,
                                    const void *src, size_t src_ld, void *dst, size_t dst_ld);

/**
 * @brief dst (cols x rows) = transpose of src (rows x cols), row-major.
 * @param[in] src_ld >= cols; @p dst_ld >= rows. Not in place.
 */
KEEL_API keel_status_t keel_transpose(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols,
                                      const void *src, size_t src_ld, void *dst, size_t dst_ld);

/* ------------------------------------------------------------------------ */
/* Elementwise                                                               */
/* ------------------------------------------------------------------------ */

/** @brief Elementwise functions of one argument. */
typedef enum keel_unary_op {
    KEEL_UNARY_NEG = 1,
    KEEL_UNARY_ABS = 2,
    KEEL_UNARY_EXP = 3,
    KEEL_UNARY_LOG = 4,
    KEEL_UNARY_SQRT = 5,
    KEEL_UNARY_RELU = 6,       /**< max(x, 0); NaN stays NaN */
    KEEL_UNARY_GELU_ERF = 7,   /**< x/2 (1 + erf(x / sqrt 2)) */
    KEEL_UNARY_GELU = 7,       /**< the same as KEEL_UNARY_GELU_ERF (kept; prefer the name that says the form) */
    KEEL_UNARY_GELU_TANH = 8,  /**< x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    KEEL_UNARY_SILU = 9,       /**< x sigmoid(x) */
    KEEL_UNARY_SIGMOID = 10,   /**< 1 / (1 + exp(-x)) */
    KEEL_UNARY_TANH = 11
} keel_unary_op_t;

/**
 * @brief y[i] = op(x[i]) for i < n. In place (y == x) is allowed.
 */
KEEL_API keel_status_t keel_unary(keel_stream_t *stream, keel_unary_op_t op, keel_dtype_t dtype, size_t n,
                                  const void *x, void *y);

/** @brief Elementwise functions of two arguments. */
typedef enum keel_binary_op {
    KEEL_BINARY_ADD = 1,
    KEEL_BINARY_SUB = 2,
    KEEL_BINARY_MUL = 3,
    KEEL_BINARY_DIV = 4,
    KEEL_BINARY_MAX = 5,   /**< NaN if either is NaN */
    KEEL_BINARY_MIN = 6    /**< NaN if either is NaN */
} keel_binary_op_t;

/** @brief How the second operand of keel_binary() spans the rows x cols result. */
typedef enum keel_broadcast {
    KEEL_BROADCAST_NONE = 0, /**< b is a rows x cols matrix with leading dimension ldb */
    KEEL_BROADCAST_ROW = 1,  /**< b is one row of cols elements, used for every row (a bias per column) */
    KEEL_BROADCAST_COL = 2   /**< b is one column of rows elements, b[i] used across row i */
} keel_broadcast_t;

/**
 * @brief y = op(alpha * a, beta * b) over a rows x cols row-major block.
 *
 * With KEEL_BINARY_ADD this is the scaled sum y = alpha a + beta b; with
 * @p y == @p b (and ldy == ldb) it is axpby, y = alpha a + beta y.
 * @param[in] a rows x cols, leading dimension @p lda (>= cols).
 * @param[in] b as @p broadcast says; @p ldb is used only for KEEL_BROADCAST_NONE.
 * @param[out] y rows x cols, leading dimension @p ldy. It may be @p a or @p b
 *             (same leading dimension); it must not overlap them otherwise.
 */
KEEL_API keel_status_t keel_binary(keel_stream_t *stream, keel_binary_op_t op, keel_dtype_t dtype, size_t rows,
                                   size_t cols, double alpha, const void *a, size_t lda, double beta,
                                   const void *b, size_t ldb, keel_broadcast_t broadcast, void *y, size_t ldy);

/**
 * @brief y[i] = a[i] op b[i] for i < n: the common case of keel_binary() (one
 *        contiguous row, alpha = beta = 1, no broadcast), e.g. a vector add:
 *        keel_binary_vec(s, KEEL_BINARY_ADD, KEEL_F32, n, a, b, y).
 * @param[out] y n elements; it may be @p a or @p b, and must not overlap them otherwise.
 */
KEEL_API keel_status_t keel_binary_vec(keel_stream_t *stream, keel_binary_op_t op, keel_dtype_t dtype, size_t n,
                                       const void *a, const void *b, void *y);

/* ------------------------------------------------------------------------ */
/* Reductions, softmax, layer norm                                           */
/* ------------------------------------------------------------------------ */

/** @brief Reduction functions. */
typedef enum keel_reduce_op {
    KEEL_REDUCE_SUM = 1,
    KEEL_REDUCE_MAX = 2,   /**< NaN if any element is NaN */
    KEEL_REDUCE_MIN = 3,
    KEEL_REDUCE_MEAN = 4,
    KEEL_REDUCE_NORM2 = 5  /**< sqrt(sum x^2) */
} keel_reduce_op_t;

/** @brief What keel_reduce() reduces over. */
typedef enum keel_reduce_axis {
    KEEL_AXIS_ALL = 0,   /**< the whole rows x cols block: out has 1 element */
    KEEL_AXIS_ROWS = 1,  /**< each row: out has rows elements, out[i] = op over x[i, :] */
    KEEL_AXIS_COLS = 2   /**< each column: out has cols elements, out[j] = op over x[:, j] */
} keel_reduce_axis_t;

/**
 * @brief Reduce a rows x cols row-major block (leading dimension @p ld >= cols).
 * @param[out] out of @p dtype, 1, rows or cols elements as @p axis says.
 * A reduction over zero elements is refused (KEEL_ERROR_INVALID_ARGUMENT)
 * when its result is not defined (max, min, mean); sum and norm2 give 0.
 */
KEEL_API keel_status_t keel_reduce(keel_stream_t *stream, keel_reduce_op_t op, keel_dtype_t dtype, size_t rows,
                                   size_t cols, const void *x, size_t ld, keel_reduce_axis_t axis, void *out);

/**
 * @brief out[i] = index of the largest element of row i (the first one on
 *        ties; the first NaN if the row has one). cols must be >= 1.
 * @param[out] out rows int64_t values.
 */
KEEL_API keel_status_t keel_argmax_rows(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols,
                                        const void *x, size_t ld, int64_t *out);

/**
 * @brief Softmax (or log-softmax when @p log_softmax is non-zero) of each row.
 * Computed stably (the row's maximum is subtracted). y may be x (ldy == ldx).
 */
KEEL_API keel_status_t keel_softmax_rows(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols,
                                         const void *x, size_t ldx, void *y, size_t ldy, int log_softmax);

/**
 * @brief Layer norm of each row: y = (x - mean) / sqrt(var + eps) * gamma + beta,
 *        with the biased variance, as PyTorch's layer_norm.
 * @param[in] gamma,beta cols elements of @p dtype each, or NULL for 1 and 0.
 * @param[in] eps > 0 is usual; any finite value >= 0 is accepted.
 * y may be x (ldy == ldx).
 */
KEEL_API keel_status_t keel_layernorm_rows(keel_stream_t *stream, keel_dtype_t dtype, size_t rows, size_t cols,
                                           const void *x, size_t ldx, const void *gamma, const void *beta,
                                           double eps, void *y, size_t ldy);

/* ------------------------------------------------------------------------ */
/* BLAS                                                                      */
/* ------------------------------------------------------------------------ */

/** @brief Storage order of matrices. */
typedef enum keel_layout {
    KEEL_ROW_MAJOR = 0,  /**< (i, j) at i * ld + j, the C convention */
    KEEL_COL_MAJOR = 1   /**< (i, j) at i + j * ld, the BLAS convention */
} keel_layout_t;

/** @brief Whether a matrix operand is used as it is or transposed. */
typedef enum keel_transpose_op {
    KEEL_NO_TRANS = 0,
    KEEL_TRANS = 1
} keel_transpose_op_t;

/** @brief How a GEMM computes. */
typedef enum keel_compute {
    KEEL_COMPUTE_DEFAULT = 0, /**< f64 for f64 data, f32 (never tf32) for the others */
    KEEL_COMPUTE_F32 = 1,     /**< f32 multiply and accumulate; same as DEFAULT for f32/f16/bf16 */
    KEEL_COMPUTE_TF32 = 2,    /**< f32 data, products of tf32-rounded inputs accumulated in f32 where the
                               *   device has tf32 (NVIDIA sm_80+); f32 elsewhere. A permission, not a demand. */
    KEEL_COMPUTE_F64 = 3      /**< f64 data only */
} keel_compute_t;

/**
 * @brief C = alpha op(A) op(B) + beta C, optionally for a batch of matrices.
 *
 * op(A) is m x k, op(B) is k x n, C is m x n, all in @p layout. Supported
 * dtypes: a_type == b_type, and c_type == a_type, or c_type == KEEL_F32 with
 * f16 or bf16 inputs. f16 and bf16 accumulate in f32. When beta is 0, C is
 * not read (NaN in C does not propagate), as BLAS does. alpha and beta must be
 * finite (KEEL_ERROR_INVALID_ARGUMENT otherwise). C must not overlap A or B.
 *
 * Set struct_size = sizeof(keel_gemm_params_t); zero the struct first so
 * fields added later read as their defaults. batch_count 0 means 1; with
 * batch_count > 1 matrix b of the batch starts at A + b * stride_a (in
 * elements; a stride of 0 reuses one matrix), and likewise for B and C
 * (stride_c must keep the C matrices apart).
 */
typedef struct keel_gemm_params {
    size_t struct_size;         /**< sizeof(keel_gemm_params_t) */
    keel_layout_t layout;
    keel_transpose_op_t transa, transb;
    size_t m, n, k;
    double alpha, beta;
    keel_dtype_t a_type, b_type, c_type;
    keel_compute_t compute;
    const void *a;
    size_t lda;
    const void *b;
    size_t ldb;
    void *c;
    size_t ldc;
    size_t batch_count;         /**< 0 or 1: one product */
    size_t stride_a, stride_b, stride_c;
} keel_gemm_params_t;

/** @brief Run a GEMM (see keel_gemm_params_t). */
KEEL_API keel_status_t keel_gemm(keel_stream_t *stream, const keel_gemm_params_t *params);

/**
 * @brief y = alpha op(A) x + beta y, with A m x n in @p layout.
 * @param[in] incx,incy element strides of x and y, >= 1.
 * When beta is 0, y is not read. alpha and beta must be finite; y must not
 * overlap A or x. With an empty A (m or n 0) y becomes beta y.
 */
KEEL_API keel_status_t keel_gemv(keel_stream_t *stream, keel_dtype_t dtype, keel_layout_t layout,
                                 keel_transpose_op_t trans, size_t m, size_t n, double alpha, const void *a,
                                 size_t lda, const void *x, size_t incx, double beta, void *y, size_t incy);

/** @brief Activation of the dense layer. */
typedef enum keel_activation {
    KEEL_ACT_NONE = 0,
    KEEL_ACT_RELU = 1,
    KEEL_ACT_GELU_TANH = 2, /**< the tanh form, as cuBLASLt's GELU epilogue and PyTorch's gelu(approximate="tanh") */
    KEEL_ACT_GELU = 2,      /**< the same as KEEL_ACT_GELU_TANH (kept; prefer the name that says the form:
                                 KEEL_UNARY_GELU is the erf form) */
    KEEL_ACT_GELU_ERF = 3   /**< the erf form, as PyTorch's default gelu */
} keel_activation_t;

/**
 * @brief Y = act(op(W) X + bias): the dense (linear) layer in one call.
 *
 * op(W) is m x k, X is k x n, Y is m x n, all in @p layout and of @p dtype;
 * @p bias (may be NULL) has m elements, bias[i] added to row i of Y (one per
 * output feature). f16 and bf16 accumulate in f32.
 *
 * PyTorch's F.linear(x, weight, b) with x [batch, in], weight [out, in] and
 * y [batch, out], all row-major, is: layout = KEEL_COL_MAJOR, transw =
 * KEEL_TRANS, m = out, n = batch, k = in, w = weight, ldw = in, x = x,
 * ldx = in, y = y, ldy = out. That is the layout the fused GPU paths take.
 *
 * Set struct_size = sizeof(keel_dense_params_t); zero the struct first.
 */
typedef struct keel_dense_params {
    size_t struct_size;         /**< sizeof(keel_dense_params_t) */
    keel_layout_t layout;
    keel_transpose_op_t transw;
    size_t m, n, k;
    keel_dtype_t dtype;
    keel_compute_t compute;     /**< DEFAULT, F32 or TF32 (f32 only) */
    keel_activation_t act;
    const void *w;
    size_t ldw;
    const void *x;
    size_t ldx;
    const void *bias;           /**< m elements of dtype, or NULL */
    void *y;
    size_t ldy;
} keel_dense_params_t;

/** @brief Run the dense layer (see keel_dense_params_t). Y must not overlap W, X or bias. */
KEEL_API keel_status_t keel_dense(keel_stream_t *stream, const keel_dense_params_t *params);

/* ------------------------------------------------------------------------ */
/* Which BLAS runs                                                           */
/* ------------------------------------------------------------------------ */

/**
 * @brief What runs keel_gemm, keel_gemv and keel_dense on a device.
 *
 * The vendor library of the device's backend where it is usable (OpenBLAS
 * on the CPU, cuBLAS and cuBLASLt on CUDA, rocBLAS on HIP, with hipBLASLt's
 * fused epilogues for keel_dense where libhipblaslt is installed). Otherwise Keel's
 * own kernels, written once in the portable kernel language and built for
 * the device at the first call that needs them (the C compiler on the CPU,
 * NVRTC or hipRTC on a GPU; cached on disk like every portable kernel).
 * KEEL_BLAS=fallback makes every device use Keel's kernels, KEEL_BLAS=vendor
 * none (docs/environment.md). A call the vendor library refuses as not
 * supported (a size or dtype it does not take) also runs on Keel's kernels,
 * unless KEEL_BLAS=vendor.
 */
typedef enum keel_blas_kind {
    KEEL_BLAS_NONE = 0,      /**< none: KEEL_BLAS=vendor and the vendor library is not usable; the calls
                              *   answer KEEL_ERROR_NOT_SUPPORTED */
    KEEL_BLAS_VENDOR = 1,    /**< the backend's vendor library */
    KEEL_BLAS_PORTABLE = 2   /**< Keel's portable kernels */
} keel_blas_kind_t;

/**
 * @brief Which implementation keel_gemm, keel_gemv and keel_dense use on
 *        @p device, with a line that says it ("OpenBLAS 0.3.21", "Keel's
 *        portable kernels (KEEL_BLAS=fallback)").
 *
 * Opens the device if it is not open yet, and may open the vendor library
 * (rocBLAS and hipBLASLt are opened at their first use); builds nothing.
 * @param[out] kind may be NULL.
 * @param[out] text a buffer of @p size bytes for the line, always terminated,
 *             cut to fit; may be NULL when @p size is 0.
 */
KEEL_API keel_status_t keel_device_get_blas_info(keel_device_t *device, keel_blas_kind_t *kind, char *text,
                                                 size_t size);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_OPS_H */
