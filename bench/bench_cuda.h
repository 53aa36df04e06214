/* SPDX-License-Identifier: MIT */
/* The check of a CUDA runtime call (and of a cuBLAS call, where cublas_v2.h
 * was included first) for the CUDA benchmarks: a failure stops the
 * benchmark with exit status 3, as CHECK of bench_util.h does for Keel. */
#ifndef KEEL_BENCH_CUDA_H
#define KEEL_BENCH_CUDA_H

#include <cuda_runtime.h>
#include "bench/bench_util.h"

#define CK_CUDA(call)                                                                                          \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_),  \
                    cudaGetErrorString(e_));                                                                   \
            exit(3);                                                                                           \
        }                                                                                                      \
    } while (0)

#ifdef CUBLAS_VER_MAJOR
#define CK_BLAS(call)                                                                                          \
    do {                                                                                                       \
        cublasStatus_t b_ = (call);                                                                            \
        if (b_ != CUBLAS_STATUS_SUCCESS) {                                                                     \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(b_));  \
            exit(3);                                                                                           \
        }                                                                                                      \
    } while (0)
#endif

#endif /* KEEL_BENCH_CUDA_H */
