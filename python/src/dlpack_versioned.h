/* SPDX-License-Identifier: MIT */
/* DLPack 1.x's versioned managed tensor, for a dlpack.h that predates it
 * (Debian 12's libdlpack-dev is DLPack 0.6, whose DLTensor it wraps). The
 * layout is the one DLPack 1.0 fixes: a version, the manager's context and
 * deleter, 64 bits of flags, then the tensor. A newer dlpack.h declares it
 * itself (it defines DLPACK_MAJOR_VERSION). */
#ifndef KEELPY_DLPACK_VERSIONED_H
#define KEELPY_DLPACK_VERSIONED_H

#include <stdint.h>
#include <dlpack/dlpack.h>

#ifndef DLPACK_MAJOR_VERSION
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#endif

/* The versions this module speaks when it makes a versioned capsule. */
#define KP_DLPACK_MAJOR 1
#define KP_DLPACK_MINOR 0

#endif
