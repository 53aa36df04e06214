/* SPDX-License-Identifier: MIT */
/* CPU kernels of the Keel demo. A CPU kernel is called once per block and
 * loops over the threads of its block itself; args[i] points at the value of
 * the i-th argument (Keel copied the values at launch). */
#include "kernels.h"

static void saxpy(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    const size_t n = *(const size_t *)args[0];
    const float a = *(const float *)args[1];
    const float *x = *(const float *const *)args[2];
    float *y = *(float *const *)args[3];
    const size_t first = (size_t)ctx->block_idx.x * ctx->block_dim.x;

    KEEL_CPU_FOR_EACH_THREAD(ctx, t) {
        size_t i = first + t.x;
        if (i < n)
            y[i] = a * x[i] + y[i];
    }
}

/* Exported as the symbol keel_cpu_kernel_saxpy: keel_module_load_file() finds
 * the kernel "saxpy" through it, and keel-demo registers it by pointer. */
KEEL_CPU_KERNEL_EXPORT(saxpy, 4, sizeof(size_t), sizeof(float), sizeof(const float *), sizeof(float *));
