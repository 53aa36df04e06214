/* SPDX-License-Identifier: MIT */
/* CPU kernels for test-kernel: built as a module (keel-test-kernels.so) that
 * keel_module_load_file loads, and also compiled into test-kernel itself so
 * that the same descriptors can be registered by pointer. The GPU twins of
 * these kernels are in test-kernel.c (compiled at run time). */
#include <stdatomic.h>
#include "keel/kernel.h"
#include "cpu_kernels.h"

/* y[i] = a * x[i] + y[i] */
static void saxpy(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    int n = *(const int *)args[0];
    float a = *(const float *)args[1];
    const float *x = *(const float *const *)args[2];
    float *y = *(float *const *)args[3];
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        long i = (long)ctx->block_idx.x * ctx->block_dim.x + t.x;
        if (i < n)
            y[i] = a * x[i] + y[i];
    }
}
KEEL_CPU_KERNEL_EXPORT(saxpy, 4, sizeof(int), sizeof(float), sizeof(float *), sizeof(float *));

/* Every thread writes its block and thread indices and the grid and block
 * extents it sees: out[gid * 12 + 0..11]. */
static void write_indices(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    unsigned *out = *(unsigned *const *)args[0];
    const keel_dim3_t g = ctx->grid_dim, b = ctx->block_dim, bi = ctx->block_idx;
    unsigned long block_lin = bi.x + (unsigned long)g.x * (bi.y + (unsigned long)g.y * bi.z);
    unsigned long nthreads = (unsigned long)b.x * b.y * b.z;
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        unsigned long thread_lin = t.x + (unsigned long)b.x * (t.y + (unsigned long)b.y * t.z);
        unsigned *o = out + (block_lin * nthreads + thread_lin) * 12;
        o[0] = bi.x, o[1] = bi.y, o[2] = bi.z;
        o[3] = t.x, o[4] = t.y, o[5] = t.z;
        o[6] = g.x, o[7] = g.y, o[8] = g.z;
        o[9] = b.x, o[10] = b.y, o[11] = b.z;
    }
}
KEEL_CPU_KERNEL_EXPORT(write_indices, 1, sizeof(unsigned *));

/* Each block reverses its slice of x into y through dynamic shared memory
 * (a thread reads what another wrote: needs the barrier between the loops)
 * and writes the slice's sum to sums[block]. */
static void reverse_and_sum(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    int n = *(const int *)args[0];
    const float *x = *(const float *const *)args[1];
    float *y = *(float *const *)args[2];
    double *sums = *(double *const *)args[3];
    float *sh = ctx->shared_mem;
    unsigned bd = ctx->block_dim.x;
    long base = (long)ctx->block_idx.x * bd;
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        sh[t.x] = base + t.x < n ? x[base + t.x] : 0.0f;
    }
    /* The end of the loop above is the barrier: thread t reads what thread bd-1-t wrote. */
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        if (base + t.x < n)
            y[base + t.x] = sh[bd - 1 - t.x];
    }
    double s = 0.0;
    for (unsigned k = 0; k < bd; k++)
        s += sh[k];
    sums[ctx->block_idx.x] = s;
}
KEEL_CPU_KERNEL_EXPORT(reverse_and_sum, 4, sizeof(int), sizeof(float *), sizeof(float *), sizeof(double *));

/* y[i] = p.scale * i + p.offset + p.tag[1]: an argument of odd size passed by value. */
static void struct_arg(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    kt_params_t p = *(const kt_params_t *)args[0];
    int n = *(const int *)args[1];
    double *y = *(double *const *)args[2];
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        long i = (long)ctx->block_idx.x * ctx->block_dim.x + t.x;
        if (i < n)
            y[i] = p.scale * (double)i + p.offset + p.tag[1];
    }
}
KEEL_CPU_KERNEL_EXPORT(struct_arg, 3, sizeof(kt_params_t), sizeof(int), sizeof(double *));

/* A kernel without arguments: counts its threads in a variable of the module. */
static atomic_ulong thread_count;
static void count_threads(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    (void)args;
    unsigned long n = 0;
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        (void)t;
        n++;
    }
    atomic_fetch_add(&thread_count, n);
}
KEEL_CPU_KERNEL_EXPORT(count_threads, 0, 0);

/* Reads (and resets) the count of count_threads. */
static void read_count(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    (void)ctx;
    unsigned long *out = *(unsigned long *const *)args[0];
    *out = atomic_exchange(&thread_count, 0);
}
KEEL_CPU_KERNEL_EXPORT(read_count, 1, sizeof(unsigned long *));
