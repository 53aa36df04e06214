/* SPDX-License-Identifier: MIT */
/* The operations table of the GPU plugins (keel/backend_ops.h, gpu_ops.h):
 * hand-written kernels for the memory-bound operations (kernels/gpu, built by
 * nvcc for keel-cuda.so and by hipcc for keel-hip.so), the copy engines for
 * copies. GEMM, GEMV and the dense layer go to the vendor's BLAS through the
 * hooks of gpu_ops.h: cuBLASLt and cuBLAS on CUDA, rocBLAS (and hipBLASLt's
 * epilogues for the dense layer) on HIP, where a missing librocblas makes
 * them NOT_SUPPORTED (backends/hip/hip_blas.c says why); the core treats
 * that like any other backend's refusal. */
#include <math.h>
#include "gpu_ops.h"

static keel_status_t gpu_fill(void *ctx, keel_dtype_t dt, void *ptr, size_t n, double value)
{
    gpuStream_t s = keel__gpu_op_stream(ctx);
    if (value == 0.0 && !signbit(value)) /* +0.0 is all zero bits in every dtype */
        return keel__gpu_launched(gpuMemsetAsync(ptr, 0, n * keel__dtype_size(dt), s), "keel_fill");
    return keel__gpu_launched(keel__gpu_fill(s, (int)dt, ptr, n, value), "keel_fill");
}

static keel_status_t gpu_cast(void *ctx, keel_dtype_t sdt, const void *src, keel_dtype_t ddt, void *dst, size_t n)
{
    gpuStream_t s = keel__gpu_op_stream(ctx);
    if (sdt == ddt) {
        if (src == dst)
            return KEEL_OK;
        return keel__gpu_launched(gpuMemcpyAsync(dst, src, n * keel__dtype_size(sdt), gpuMemcpyDefault, s),
                                  "keel_cast");
    }
    return keel__gpu_launched(keel__gpu_cast(s, (int)sdt, src, (int)ddt, dst, n), "keel_cast");
}

static keel_status_t gpu_copy_2d(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *src, size_t lds,
                                 void *dst, size_t ldd)
{
    gpuStream_t s = keel__gpu_op_stream(ctx);
    size_t es = keel__dtype_size(dt);
    if (rows == 1 || (lds == cols && ldd == cols)) /* one contiguous block (and any ld for one row) */
        return keel__gpu_launched(gpuMemcpyAsync(dst, src, rows * cols * es, gpuMemcpyDefault, s), "keel_copy_2d");
    /* the copy engines take strided copies as they are */
    return keel__gpu_launched(gpuMemcpy2DAsync(dst, ldd * es, src, lds * es, cols * es, rows, gpuMemcpyDefault, s),
                              "keel_copy_2d");
}

static keel_status_t gpu_transpose(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *src,
                                   size_t lds, void *dst, size_t ldd)
{
    return keel__gpu_launched(
        keel__gpu_transpose(keel__gpu_launch_stream(ctx), keel__dtype_size(dt), rows, cols, src, lds, dst, ldd),
        "keel_transpose");
}

static keel_status_t gpu_unary(void *ctx, keel_unary_op_t op, keel_dtype_t dt, size_t n, const void *x, void *y)
{
    return keel__gpu_launched(keel__gpu_unary(keel__gpu_launch_stream(ctx), (int)op, (int)dt, n, x, y), "keel_unary");
}

static keel_status_t gpu_binary(void *ctx, const keel_binary_args_t *a)
{
    gpuError_t err = keel__gpu_binary(keel__gpu_launch_stream(ctx), (int)a->op, (int)a->dtype, (int)a->broadcast,
                                      a->rows, a->cols, a->alpha, a->a, a->lda, a->beta, a->b, a->ldb, a->y, a->ldy);
    return keel__gpu_launched(err, "keel_binary");
}

static keel_status_t gpu_reduce(void *ctx, keel_reduce_op_t op, keel_dtype_t dt, size_t rows, size_t cols,
                                const void *x, size_t ld, keel_reduce_axis_t axis, void *out)
{
    /* Partial results go to scratch that is ordered with everything else on
     * the stream, so no allocation is needed here. */
    void *work = NULL;
    size_t work_bytes = 0;
    keel_status_t st = keel__gpu_ops_scratch(ctx, &work, &work_bytes);
    if (st != KEEL_OK)
        return st;
    gpuError_t err = keel__gpu_reduce(keel__gpu_op_stream(ctx), (int)op, (int)dt, (int)axis, rows, cols, x, ld, out,
                                      work, work_bytes);
    return keel__gpu_launched(err, "keel_reduce");
}

static keel_status_t gpu_argmax_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x, size_t ld,
                                     int64_t *out)
{
    return keel__gpu_launched(keel__gpu_argmax_rows(keel__gpu_op_stream(ctx), (int)dt, rows, cols, x, ld, out),
                              "keel_argmax_rows");
}

static keel_status_t gpu_softmax_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                      size_t ldx, void *y, size_t ldy, int lg)
{
    gpuError_t err = keel__gpu_softmax_rows(keel__gpu_op_stream(ctx), (int)dt, rows, cols, x, ldx, y, ldy, lg);
    return keel__gpu_launched(err, "keel_softmax_rows");
}

static keel_status_t gpu_layernorm_rows(void *ctx, keel_dtype_t dt, size_t rows, size_t cols, const void *x,
                                        size_t ldx, const void *gamma, const void *beta, double eps, void *y,
                                        size_t ldy)
{
    gpuError_t err =
        keel__gpu_layernorm_rows(keel__gpu_op_stream(ctx), (int)dt, rows, cols, x, ldx, gamma, beta, eps, y, ldy);
    return keel__gpu_launched(err, "keel_layernorm_rows");
}

static keel_status_t gpu_gemm(void *ctx, const keel_gemm_params_t *p)
{
    if (p->k == 0) /* C = beta C: no product to run (BLAS versions differ on k = 0) */
        return keel__gpu_launched(keel__gpu_scale(keel__gpu_op_stream(ctx), (int)p->c_type, p->m, p->n, p->c, p->ldc,
                                                  p->batch_count, p->stride_c, p->beta),
                                  "keel_gemm");
    return keel__gpu_blas_gemm(ctx, p);
}

static keel_status_t gpu_gemv(void *ctx, const keel_gemv_args_t *g)
{
    int t = g->trans == KEEL_TRANS;
    size_t xlen = t ? g->m : g->n, ylen = t ? g->n : g->m;
    if (xlen == 0) /* y = beta y; BLAS would leave y alone */
        return keel__gpu_launched(
            keel__gpu_scale(keel__gpu_op_stream(ctx), (int)g->dtype, 1, ylen, g->y, g->incy, 1, 0, g->beta),
            "keel_gemv");
    return keel__gpu_blas_gemv(ctx, g);
}

static const keel_ops_vtable_t gpu_ops = {
    .abi_version = KEEL_OPS_ABI_VERSION,
    .struct_size = sizeof(keel_ops_vtable_t),
    .fill = gpu_fill,
    .cast = gpu_cast,
    .copy_2d = gpu_copy_2d,
    .transpose = gpu_transpose,
    .unary = gpu_unary,
    .binary = gpu_binary,
    .reduce = gpu_reduce,
    .argmax_rows = gpu_argmax_rows,
    .softmax_rows = gpu_softmax_rows,
    .layernorm_rows = gpu_layernorm_rows,
    .gemm = gpu_gemm,
    .gemv = gpu_gemv,
    .dense = keel__gpu_blas_dense,
    .blas = keel__gpu_blas_info,
};

KEEL_GPU_HIDDEN const void *keel__gpu_ops_table(void);
const void *keel__gpu_ops_table(void)
{
    return &gpu_ops;
}
