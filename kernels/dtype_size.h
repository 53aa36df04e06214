/* SPDX-License-Identifier: MIT */
/* The size of an element of each dtype of the built-in operations, inline
 * for the core's checks (runtime/ops.c, which exports it as keel_dtype_size)
 * and every backend's operations (kernels/cpu, backends/gpu, backends/cuda,
 * backends/hip), which must not pay a call for it. Internal: not installed. */
#ifndef KEEL_KERNELS_DTYPE_SIZE_H
#define KEEL_KERNELS_DTYPE_SIZE_H

#include <stddef.h>
#include "keel/ops.h"

/* Bytes of one element of @p dtype; 0 for a value that is no dtype. */
static inline __attribute__((always_inline)) size_t keel__dtype_size(keel_dtype_t dtype)
{
    switch (dtype) {
    case KEEL_F32: return 4;
    case KEEL_F64: return 8;
    case KEEL_F16:
    case KEEL_BF16: return 2;
    }
    return 0;
}

#endif /* KEEL_KERNELS_DTYPE_SIZE_H */
