/* SPDX-License-Identifier: MIT */
/* Keel's own GEMM, GEMV and dense layer (runtime/ops_fallback.c): the
 * portable kernels of kernels/portable/blas.kc, which keel_gemm, keel_gemv
 * and keel_dense run where the backend's vendor BLAS is not usable, or
 * where KEEL_BLAS=fallback asks for them. Internal to libkeel. */
#ifndef KEEL_RUNTIME_OPS_FALLBACK_H
#define KEEL_RUNTIME_OPS_FALLBACK_H

#include "runtime/internal.h"
#include "keel/backend_ops.h"

/* KEEL_BLAS: auto (the vendor library where it is usable), fallback (always
 * Keel's kernels), vendor (never). */
enum { KEEL__BLAS_AUTO = 0, KEEL__BLAS_FALLBACK = 1, KEEL__BLAS_VENDOR = 2 };

/* KEEL_BLAS's value, parsed: KEEL_OK with *mode, or
 * KEEL_ERROR_INVALID_ENVIRONMENT with the detail. */
KEEL_HIDDEN keel_status_t keel__env_blas(const char *value, int *mode);
/* The mode keel_init read (KEEL__BLAS_AUTO after a teardown). */
KEEL_HIDDEN void keel__blas_set_mode(int mode);

/* Which implementation an operation of @p stream's device takes when the
 * backend's entry for it is @p entry (NULL when absent): 1 for Keel's
 * kernels, 0 for the entry, -1 for neither (KEEL_BLAS=vendor without a
 * usable vendor library: the error is set, naming fn). */
KEEL_HIDDEN int keel__blas_pick(struct keel_stream *stream, int has_entry, const char *fn);
/* Whether a call the backend's entry refused as not supported runs on
 * Keel's kernels instead (not under KEEL_BLAS=vendor); logs why. */
KEEL_HIDDEN int keel__blas_retry(struct keel_stream *stream, const char *fn);

/* The operations on Keel's kernels, with the arguments in the form the
 * backends get them (keel/backend_ops.h): checked, not empty, GEMM and GEMV
 * column-major. */
KEEL_HIDDEN keel_status_t keel__portable_gemm(struct keel_stream *stream, const keel_gemm_params_t *p,
                                              const char *fn);
KEEL_HIDDEN keel_status_t keel__portable_gemv(struct keel_stream *stream, const keel_gemv_args_t *g,
                                              const char *fn);
KEEL_HIDDEN keel_status_t keel__portable_dense(struct keel_stream *stream, const keel_dense_params_t *p,
                                               const char *fn);

/* keel_finalize: forgets every device's BLAS state (release_objects has
 * released the modules it held, as it releases every module). */
KEEL_HIDDEN void keel__blas_teardown(void);

/* The text of kernels/portable/blas.kc (runtime/blas_kc_text.c, made by
 * config/embed-text.sh). */
KEEL_HIDDEN extern const char keel__blas_kc_text[];

#endif /* KEEL_RUNTIME_OPS_FALLBACK_H */
