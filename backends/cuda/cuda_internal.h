/* SPDX-License-Identifier: MIT */
/* Internal declarations of keel-cuda.so beyond the GPU plugins' shared ones
 * (backends/gpu/gpu_internal.h) and the driver table (cuda_driver.h, which
 * vendor_cuda.h includes): the primary contexts, run-time compilation,
 * modules, the cuBLAS and cuBLASLt handles of the built-in operations, and the
 * cuBLASLt algorithm setting. Nothing here leaves the plugin. */
#ifndef KEEL_CUDA_INTERNAL_H
#define KEEL_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cublasLt.h>
#include "backends/gpu/gpu_internal.h"

/* KEEL_CUDA_LT_ALGO: "tune" (the default: cuBLASLt plans time the
 * heuristic's candidates, cuda_lt_plan.c), or N: every plan runs candidate
 * N (the last when there are fewer), untimed, for runs that must pick the
 * same algorithm every time and for tests of each candidate a plan may
 * pick. Checked at probe (backends/gpu/gpu_env.c). */
#define KEEL_CUDA_LT_ALGO_MAX 7

/* Make the device's primary context current for a driver call that needs
 * one (occupancy). Returns 1 when it pushed, so the caller pops. cuda_device.c. */
KEEL_GPU_HIDDEN int keel__cuda_push_primary(const keel__gpu_device_t *dev);
KEEL_GPU_HIDDEN void keel__cuda_pop_primary(int pushed);

/* ---- run-time compilation (cuda_nvrtc.c) ---- */
/* Compile @p source for @p dev to a cubin (or PTX when the options ask for a
 * virtual architecture), through the on-disk cache. *image is malloc'd. */
KEEL_GPU_HIDDEN keel_status_t keel__cuda_nvrtc_compile(const keel__gpu_device_t *dev, const char *source,
                                                       const char *name, const char *const *options,
                                                       int num_options, void **image, size_t *size);
/* Load a cubin/fatbin/PTX image as a module (cuda_module.c). */
KEEL_GPU_HIDDEN keel_status_t keel__cuda_module_from_image(keel__gpu_device_t *dev, const void *image,
                                                           const char *keel_fn, void **module_ctx);

/* ---- BLAS handles (cuda_blas.c) ----
 * Lazily created vendor handles: a cuBLAS handle and its workspace per
 * stream (one handle shared by several streams is not thread-safe), a
 * cuBLASLt handle per device with a workspace per stream (bytes reported
 * through *workspace_bytes). Thread-safe. On failure they set the error
 * through the host API and return its status. */
KEEL_GPU_HIDDEN keel_status_t keel__cuda_cublas(void *stream_ctx, cublasHandle_t *handle);
KEEL_GPU_HIDDEN keel_status_t keel__cuda_cublaslt(void *stream_ctx, cublasLtHandle_t *handle, void **workspace,
                                                  size_t *workspace_bytes);

#endif /* KEEL_CUDA_INTERNAL_H */
