/* SPDX-License-Identifier: MIT */
/**
 * @file keel/dlpack.h
 * @brief Zero-copy exchange of arrays with other libraries through DLPack.
 *
 * Keel uses the DLPack header of the system (Debian's libdlpack-dev,
 * <dlpack/dlpack.h>, DLPack 0.6): the unversioned DLManagedTensor, which
 * every DLPack consumer accepts (NumPy, PyTorch, CuPy, JAX).
 *
 * Export: any memory in a live Keel allocation (device, pinned or managed
 * memory, or memory imported here) becomes a DLManagedTensor that points at
 * the same bytes: DLTensor.data is the start of the allocation and
 * byte_offset the distance to element 0. The device type follows the
 * backend and the kind of memory:
 *
 * | backend | device memory      | pinned memory      | managed memory         |
 * |---------|--------------------|--------------------|------------------------|
 * | cpu     | kDLCPU, 0          | kDLCPU, 0          | kDLCPU, 0              |
 * | cuda    | kDLCUDA, index     | kDLCUDAHost, 0     | kDLCUDAManaged, index  |
 * | hip     | kDLROCM, index     | kDLROCMHost, 0     | kDLROCM, index         |
 *
 * (The CPU backend's device memory is host memory, so a host library such
 * as NumPy reads it in place.)
 *
 * Import: a DLManagedTensor of another library is wrapped, not copied. Its
 * bytes are entered into Keel's allocation registry as memory of the given
 * device, so the built-in operations, copies and kernels accept pointers
 * into it; keel_free refuses them. The device type must be one the device
 * can address: kDLCPU, kDLCUDAHost, kDLROCMHost or kDLCUDAManaged on the CPU
 * backend; kDLCUDA (of the same index), kDLCUDAHost or kDLCUDAManaged on
 * CUDA; kDLROCM (of the same index) or kDLROCMHost on HIP.
 *
 * Deleters: the deleter of an exported tensor must be called exactly once,
 * by its consumer; it frees what Keel made and calls the exporter's release
 * function. An imported tensor's deleter is called exactly once, by
 * keel_dlpack_release (never by a failed import: the caller keeps it).
 *
 * Stream ordering (the Python array API's __dlpack__(stream=...)
 * handshake) uses keel_stream_get_native() and keel_stream_order_native()
 * of keel/stream.h: the producer makes the consumer's stream wait for its
 * work, without a host wait.
 */
#ifndef KEEL_DLPACK_H
#define KEEL_DLPACK_H

#include <stdint.h>
#include <dlpack/dlpack.h>
#include "keel/memory.h"
#include "keel/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Most dimensions Keel exports or imports. */
#define KEEL_DLPACK_MAX_NDIM 32

/**
 * @brief What keel_dlpack_export() describes. Zero it, then set
 *        struct_size = sizeof(keel_dlpack_export_params_t).
 */
typedef struct keel_dlpack_export_params {
    size_t struct_size;          /**< sizeof(keel_dlpack_export_params_t) */
    const void *data;            /**< element 0: a pointer into a live Keel allocation */
    int32_t ndim;                /**< 0 (a scalar) to KEEL_DLPACK_MAX_NDIM */
    const int64_t *shape;        /**< ndim extents, each >= 0 */
    const int64_t *strides;      /**< ndim strides in elements, or NULL for compact row-major */
    DLDataType dtype;            /**< lanes >= 1, bits a nonzero multiple of 8 */
    /** Called once by the tensor's deleter (may be NULL): e.g. to free the
     *  memory, or to drop a reference that keeps it alive. */
    void (*release)(void *user_data);
    void *user_data;             /**< passed to release */
} keel_dlpack_export_params_t;

/**
 * @brief Describe Keel memory as a DLPack tensor, without a copy.
 *
 * Every element the shape and strides reach must lie in the allocation
 * that holds @p params->data (an empty shape reaches none).
 * @param[out] tensor written only on success.
 * @return KEEL_ERROR_INVALID_POINTER when data is in no live Keel
 *         allocation; KEEL_ERROR_OUT_OF_RANGE when the elements run past it;
 *         KEEL_ERROR_INVALID_ARGUMENT for a bad shape, stride or dtype;
 *         KEEL_ERROR_NOT_SUPPORTED for a backend DLPack has no device type for.
 * Ownership: the consumer calls (*tensor)->deleter(*tensor) exactly once.
 * The memory must stay allocated until then (release is the place to free it).
 */
KEEL_API keel_status_t keel_dlpack_export(const keel_dlpack_export_params_t *params, DLManagedTensor **tensor);

/** @brief An imported tensor, as keel_dlpack_import() describes it. Read-only. */
typedef struct keel_tensor {
    void *data;                  /**< element 0 (DLTensor.data + byte_offset) */
    int32_t ndim;
    const int64_t *shape;        /**< ndim extents */
    const int64_t *strides;      /**< ndim strides in elements (filled in for a compact tensor) */
    DLDataType dtype;
    keel_device_t *device;       /**< the device it was imported for */
    keel_memory_kind_t kind;     /**< how Keel treats the memory on that device */
    const DLManagedTensor *managed; /**< the producer's tensor */
} keel_tensor_t;

/**
 * @brief Wrap a DLPack tensor of another library for use on @p device.
 *
 * Memory that already lies in a live Keel allocation (a tensor Keel
 * exported, coming back) is used as it is; other memory is entered into the
 * registry for as long as some imported tensor uses it (importing
 * overlapping tensors is fine).
 * @param[out] tensor written only on success.
 * @return KEEL_ERROR_DEVICE_MISMATCH when the device type or id is not one
 *         @p device can address (the detail names both); KEEL_ERROR_INVALID_ARGUMENT
 *         for a NULL data pointer with elements, a bad shape, stride or dtype,
 *         or more than KEEL_DLPACK_MAX_NDIM dimensions; KEEL_ERROR_OUT_OF_RANGE
 *         when the memory overlaps a Keel allocation without lying inside it.
 * Ownership: on success Keel owns @p managed and calls its deleter once,
 * from keel_dlpack_release() (or keel_finalize(), for a tensor left
 * imported; not at process exit, where the producer may be gone); on
 * failure the caller still owns it.
 */
KEEL_API keel_status_t keel_dlpack_import(keel_device_t *device, DLManagedTensor *managed,
                                          const keel_tensor_t **tensor);

/**
 * @brief Release an imported tensor: its memory leaves the registry (when
 *        no other imported tensor uses it) and the producer's deleter runs.
 *        Work that uses the memory must be done first (synchronize).
 * @return KEEL_OK for NULL; KEEL_ERROR_INVALID_HANDLE for a pointer that is
 *         not a live imported tensor.
 */
KEEL_API keel_status_t keel_dlpack_release(const keel_tensor_t *tensor);

/**
 * @brief The DLPack data type of a Keel dtype.
 * @return KEEL_ERROR_INVALID_ARGUMENT for an unknown dtype.
 */
KEEL_API keel_status_t keel_dlpack_dtype(keel_dtype_t dtype, DLDataType *out);

/**
 * @brief The Keel dtype of a DLPack data type (float 16/32/64, bfloat 16, one lane).
 * @return KEEL_ERROR_NOT_SUPPORTED for any other type.
 */
KEEL_API keel_status_t keel_dtype_from_dlpack(DLDataType dtype, keel_dtype_t *out);

/**
 * @brief The DLPack device of memory of @p kind on @p device (the table above).
 * @return KEEL_ERROR_NOT_SUPPORTED for a backend DLPack has no device type for.
 */
KEEL_API keel_status_t keel_dlpack_device(keel_device_t *device, keel_memory_kind_t kind, DLDevice *out);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_DLPACK_H */
