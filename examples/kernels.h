/* SPDX-License-Identifier: MIT */
/* Kernels of the Keel demo: the portable kernel it uses by default, and the
 * per-backend forms of --native. The CPU versions live in kernels.c, which is
 * both linked into keel-demo (registered by pointer) and built as a loadable
 * CPU module, demo-kernels.so (loaded with keel_module_load_file). */
#ifndef KEEL_DEMO_KERNELS_H
#define KEEL_DEMO_KERNELS_H

#include <keel.h>

/* saxpy(n, a, x, y): y[i] = a * x[i] + y[i] for i < n.
 * Arguments: size_t n, float a, const float *x, float *y. */
extern const keel_cpu_kernel_desc_t keel_cpu_kernel_saxpy;

/* The same kernel written once in Keel's kernel language (docs/kernel-language.md):
 * keel_module_build compiles it for whatever device runs the demo. */
#define KEEL_DEMO_PORTABLE_SOURCE                                                 \
    "keel_kernel void saxpy(int n, float a, const float *x, float *y)\n"          \
    "{\n"                                                                         \
    "    int i = keel_global_x();\n"                                              \
    "    if (i < n)\n"                                                            \
    "        y[i] = a * x[i] + y[i];\n"                                           \
    "}\n"

/* The same kernel in CUDA C (keel-demo --native); HIP's run-time compiler accepts it unchanged. */
#define KEEL_DEMO_GPU_SOURCE                                                      \
    "extern \"C\" __global__ void saxpy(unsigned long n, float a,\n"              \
    "                                   const float *x, float *y)\n"              \
    "{\n"                                                                         \
    "    unsigned long i = (unsigned long)blockIdx.x * blockDim.x + threadIdx.x;\n" \
    "    if (i < n)\n"                                                            \
    "        y[i] = a * x[i] + y[i];\n"                                           \
    "}\n"

#endif
