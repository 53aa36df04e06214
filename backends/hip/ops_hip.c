/* SPDX-License-Identifier: MIT */
/* The HIP operations table (keel/backend_ops.h): the GPU kernels of
 * kernels/gpu (built by hipcc) for the memory-bound operations, HIP's copy
 * engines for copies. GEMM, GEMV and the dense layer go to rocBLAS
 * (ops_blas_hip.c); where librocblas is missing the blas entry says why
 * (hip_blas.c), and the core runs Keel's portable kernels for them. */
#include <math.h>
#include "hip_internal.h"
#include "cuda_shared.h"
#include "keel/backend_ops.h"
#include "kernels/gpu/ops_gpu.h"

gpuStream_t keel__hip_stream(void *ctx)
{
    keel__cuda_stream_t *s = ctx;
    (void)keel__cuda_use_device(s->dev);
    keel__cuda_stream_touch(s);
    return s->stream;
}

keel_status_t keel__hip_launched(gpuError_t err, const char *keel_fn)
{
    return KEEL_CUDA_UNLIKELY(err != gpuSuccess) ? keel__cuda_error(err, keel_fn, "kernel launch") : KEEL_OK;
}

static size_t dsize(keel_dtype_t dt)
{
    return dt == KEEL_F64 ? 8 : dt == KEEL_F32 ? 4 : 2;
}

static keel_status_t hip_fill(void *ctx, keel_dtype_t dt, void *ptr, size_t n, double value)
{
    gpuStream_t s = keel__hip_stream(ctx);
    /* +0.0 is all zero bits in every dtype */
    gpuError_t err = value == 0.0 && !signbit(value) ? gpuMemsetAsync(ptr, 0, n * dsize(dt), s)
                                                     : keel__gpu_fill(s, (int)dt, ptr, n, value);
    return keel__hip_launched(err, "keel_fill");
}

static keel_status_t hip_cast(void *ctx, keel_dtype_t sdt, const void *src, keel_dtype_t ddt, void *dst, size_t n)
{
    if (sdt == ddt && src == dst)
        return KEEL_OK;
    gpuStream_t s = keel__hip_stream(ctx);
    gpuError_t err = sdt == ddt ? gpuMemcpyAsync(dst, src, n * dsize(sdt), gpuMemcpyDefault, s)
                                : keel__gpu_cast(s, (int)sdt, src, (int)ddt, dst, n);
    return keel__hip_launched(err, "keel_cast");
}

static keel_status_t hip_copy_2d(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *src, size_t lds,
                                 void *dst, size_t ldd)
{
    gpuStream_t s = keel__hip_stream(ctx);
    size_t es = dsize(dt);
    gpuError_t err = rows == 1 || (lds == cols && ldd == cols)
                         ? gpuMemcpyAsync(dst, src, rows * cols * es, gpuMemcpyDefault, s)
                         : hipMemcpy2DAsync(dst, ldd * es, src, lds * es, cols * es, rows, gpuMemcpyDefault, s);
    return keel__hip_launched(err, "keel_copy_2d");
}

static keel_status_t hip_transpose(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *src,
                                   size_t lds, void *dst, size_t ldd)
{
    return keel__hip_launched(keel__gpu_transpose(keel__hip_stream(ctx), dsize(dt), rows, cols, src, lds, dst, ldd),
                              "keel_transpose");
}

static keel_status_t hip_unary(void *ctx, keel_unary_op_t op, keel_dtype_t dt, size_t n, const void *x, void *y)
{
    return keel__hip_launched(keel__gpu_unary(keel__hip_stream(ctx), (int)op, (int)dt, n, x, y), "keel_unary");
}

static keel_status_t hip_binary(void *ctx, const keel_binary_args_t *a)
{
    gpuError_t err = keel__gpu_binary(keel__hip_stream(ctx), (int)a->op, (int)a->dtype, (int)a->broadcast, a->rows,
                                      a->cols, a->alpha, a->a, a->lda, a->beta, a->b, a->ldb, a->y, a->ldy);
    return keel__hip_launched(err, "keel_binary");
}

static keel_status_t hip_reduce(void *ctx, keel_reduce_op_t op, keel_dtype_t dt, size_t rows, size_t cols,
                                const void *x, size_t ld, keel_reduce_axis_t axis, void *out)
{
    void *work = NULL;
    size_t work_bytes = 0;
    keel_status_t st = keel__hip_scratch(ctx, &work, &work_bytes);
    if (st != KEEL_OK)
        return st;
    gpuError_t err =
        keel__gpu_reduce(keel__hip_stream(ctx), (int)op, (int)dt, (int)axis, rows, cols, x, ld, out, work, work_bytes);
    return keel__hip_launched(err, "keel_reduce");
}

static keel_status_t hip_argmax_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x, size_t ld,
                                     int64_t *out)
{
    return keel__hip_launched(keel__gpu_argmax_rows(keel__hip_stream(ctx), (int)dt, rows, cols, x, ld, out),
                              "keel_argmax_rows");
}

static keel_status_t hip_softmax_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                      size_t ldx, void *y, size_t ldy, int lg)
{
    gpuError_t err = keel__gpu_softmax_rows(keel__hip_stream(ctx), (int)dt, rows, cols, x, ldx, y, ldy, lg);
    return keel__hip_launched(err, "keel_softmax_rows");
}

static keel_status_t hip_layernorm_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                        size_t ldx, const void *gamma, const void *beta, double eps, void *y,
                                        size_t ldy)
{
    gpuError_t err =
        keel__gpu_layernorm_rows(keel__hip_stream(ctx), (int)dt, rows, cols, x, ldx, gamma, beta, eps, y, ldy);
    return keel__hip_launched(err, "keel_layernorm_rows");
}

static const keel_ops_vtable_t hip_ops = {
    .abi_version = KEEL_OPS_ABI_VERSION,
    .struct_size = sizeof(keel_ops_vtable_t),
    .fill = hip_fill,
    .cast = hip_cast,
    .copy_2d = hip_copy_2d,
    .transpose = hip_transpose,
    .unary = hip_unary,
    .binary = hip_binary,
    .reduce = hip_reduce,
    .argmax_rows = hip_argmax_rows,
    .softmax_rows = hip_softmax_rows,
    .layernorm_rows = hip_layernorm_rows,
    .gemm = keel__hip_gemm,
    .gemv = keel__hip_gemv,
    .dense = keel__hip_dense,
    .blas = keel__hip_blas_info,
};

KEEL_CUDA_HIDDEN const void *keel__cuda_ops_table(void);
const void *keel__cuda_ops_table(void)
{
    return &hip_ops;
}
