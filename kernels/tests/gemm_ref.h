/* SPDX-License-Identifier: MIT */
/* The float64 reference of keel_gemm the kernel tests share
 * (test-ops.c, test-blas-portable.c): where element (i, j) of a stored
 * matrix is, how many elements a stored matrix spans, and one entry of
 * op(A) op(B) with the magnitude its tolerance scales with. Header-only. */
#ifndef KEEL_KERNELS_TESTS_GEMM_REF_H
#define KEEL_KERNELS_TESTS_GEMM_REF_H

#include <math.h>
#include <stddef.h>
#include "keel/ops.h"

/* The index of element (i, j) of a matrix stored in layout with leading dimension ld. */
static inline size_t gemm_ref_idx(keel_layout_t layout, size_t ld, size_t i, size_t j)
{
    return layout == KEEL_ROW_MAJOR ? i * ld + j : i + j * ld;
}

/* Element (i, j) of the stored matrix m. */
static inline double gemm_ref_at(const double *m, keel_layout_t layout, size_t ld, size_t i, size_t j)
{
    return m[gemm_ref_idx(layout, ld, i, j)];
}

/* The elements an r x c matrix with leading dimension ld spans (0 when it is empty). */
static inline size_t gemm_ref_extent(keel_layout_t layout, size_t r, size_t c, size_t ld)
{
    if (!r || !c)
        return 0;
    return layout == KEEL_ROW_MAJOR ? (r - 1) * ld + c : (c - 1) * ld + r;
}

/* Entry (i, j) of op(A) op(B) in float64, op transposing where ta or tb
 * is set, over the inner dimension k; *mag is the sum of the magnitudes of
 * its terms, which a rounding tolerance scales with. */
static inline double gemm_ref_entry(const double *A, size_t lda, int ta, const double *B, size_t ldb, int tb,
                                    keel_layout_t layout, size_t k, size_t i, size_t j, double *mag)
{
    double acc = 0, m = 0;
    for (size_t l = 0; l < k; l++) {
        double x = ta ? gemm_ref_at(A, layout, lda, l, i) : gemm_ref_at(A, layout, lda, i, l);
        double y = tb ? gemm_ref_at(B, layout, ldb, j, l) : gemm_ref_at(B, layout, ldb, l, j);
        acc += x * y;
        m += fabs(x * y);
    }
    *mag = m;
    return acc;
}

#endif /* KEEL_KERNELS_TESTS_GEMM_REF_H */
