/* SPDX-License-Identifier: MIT */
/* saxpy as a CPU kernel registered by pointer, for the fixture and the test
 * programs that link only libkeel: y[i] = a * x[i] + y[i], one thread per
 * element, with its descriptor saxpy_desc. */
#ifndef KEEL_TESTS_CPU_SAXPY_H
#define KEEL_TESTS_CPU_SAXPY_H

#include "keel.h"

static void saxpy_cpu(const keel_cpu_kernel_ctx_t *ctx, void **args)
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

static const keel_cpu_kernel_desc_t saxpy_desc = {
    KEEL_CPU_KERNEL_ABI, "saxpy", saxpy_cpu, 4, {sizeof(int), sizeof(float), sizeof(float *), sizeof(float *)}};

#endif /* KEEL_TESTS_CPU_SAXPY_H */
