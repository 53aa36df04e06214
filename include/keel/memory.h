/* SPDX-License-Identifier: MIT */
/**
 * @file keel/memory.h
 * @brief Device, pinned and managed memory; memset; copies; pointer queries.
 *
 * Device memory is a plain pointer in the device's address space: it can be
 * passed to kernels, vendor libraries and DLPack as it is. Keel records every
 * live allocation it made, so copies infer their direction, bad pointers and
 * double frees are reported as errors, and copies past an allocation's end are
 * refused before they reach the device.
 *
 * Memory that Keel did not allocate is "host" memory (pageable). Copies may
 * read or write host memory; Keel cannot check its bounds. A pointer in no
 * live allocation is not host memory, and copies refuse it, when it is the
 * end of a live allocation Keel made (for a nonzero size: KEEL_ERROR_OUT_OF_RANGE;
 * the end of registered or imported memory may begin the application's next buffer),
 * when the range from it runs into a live allocation (KEEL_ERROR_OUT_OF_RANGE),
 * or when it lies in a block Keel freed recently and still remembers
 * (KEEL_ERROR_INVALID_POINTER; see keel_free for which blocks those are).
 *
 * For every copy and memset: a NULL pointer is KEEL_ERROR_INVALID_POINTER;
 * a size of 0 bytes, once the pointers are checked, does nothing.
 */
#ifndef KEEL_MEMORY_H
#define KEEL_MEMORY_H

#include "keel/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef KEEL__STREAM_T_DECLARED /* declared once: C99 allows no repeated typedef */
#define KEEL__STREAM_T_DECLARED
typedef struct keel_stream keel_stream_t; /* see keel/stream.h */
#endif

/** @brief What kind of memory a pointer refers to. */
typedef enum keel_memory_kind {
    KEEL_MEMORY_HOST = 0,    /**< memory Keel neither allocated nor registered: treated as pageable host memory */
    KEEL_MEMORY_UNKNOWN = 0, /**< the same kind as KEEL_MEMORY_HOST, under a name that says what it means */
    KEEL_MEMORY_DEVICE = 1,  /**< device memory (keel_malloc, keel_malloc_async) */
    KEEL_MEMORY_PINNED = 2,  /**< page-locked host memory (keel_malloc_pinned, keel_malloc_host, keel_host_register) */
    KEEL_MEMORY_MANAGED = 3  /**< memory migrating between host and device (keel_malloc_managed) */
} keel_memory_kind_t;

/**
 * @brief Allocate device memory. Synchronous.
 * @param[in] device
 * @param[in] bytes must be > 0 (0 is KEEL_ERROR_INVALID_ARGUMENT).
 * @param[out] ptr written only on success.
 * @return KEEL_ERROR_OUT_OF_MEMORY when the device has no room (recoverable).
 * Ownership: the caller frees with keel_free().
 */
KEEL_API keel_status_t keel_malloc(keel_device_t *device, size_t bytes, void **ptr);

/**
 * @brief Allocate page-locked host memory usable for fast async copies with @p device:
 *        kind KEEL_MEMORY_PINNED (cudaMallocHost).
 * @param[in] bytes must be > 0 (0 is KEEL_ERROR_INVALID_ARGUMENT).
 * @param[out] ptr written only on success.
 * Ownership: the caller frees with keel_free().
 */
KEEL_API keel_status_t keel_malloc_pinned(keel_device_t *device, size_t bytes, void **ptr);

/**
 * @brief The same call as keel_malloc_pinned(), under its first name (kept:
 *        programs that use it keep working). Its memory is KEEL_MEMORY_PINNED,
 *        not KEEL_MEMORY_HOST, which is memory Keel does not know.
 */
KEEL_API keel_status_t keel_malloc_host(keel_device_t *device, size_t bytes, void **ptr);

/**
 * @brief Allocate managed memory, accessible from the host and the device.
 * @return KEEL_ERROR_NOT_SUPPORTED where the device has none.
 * Ownership: the caller frees with keel_free().
 */
KEEL_API keel_status_t keel_malloc_managed(keel_device_t *device, size_t bytes, void **ptr);

/**
 * @brief Free memory from any keel_malloc* call. Synchronous: like cudaFree,
 *        it first waits for all work on the owning device, and on every other
 *        device whose streams Keel handed the block (a peer copy, pinned or
 *        managed memory copied or set on another device's stream, CPU memory
 *        copied by another backend's stream), so no queued copy, memset or
 *        launch of those devices can still touch the memory.
 *
 * The cost of the other devices: the first copy or memset that hands a block
 * to a stream of a device other than its owner takes the registry's lock once
 * to record that device in the block's entry; copies on the owner's streams
 * cost nothing more, and keel_free waits only for devices so recorded. A
 * kernel launched on another device with the pointer among its arguments is
 * not seen (Keel does not read kernel arguments): synchronize that device,
 * or its stream, before freeing.
 *
 * Keel remembers recently freed blocks, so that a copy through a dangling
 * pointer is refused instead of touching freed memory: the last 64 blocks
 * that may be remembered safely. A GPU's device memory can always be; other
 * memory (pinned and managed memory, and every kind on the CPU backend) is
 * plain host memory underneath, whose addresses the system allocator could
 * hand out again, so a block of it of at most 1 MiB, not from
 * keel_malloc_async, stays allocated, unusable, while remembered (at most 16
 * such blocks, 16 MiB; they count as used memory meanwhile, and an
 * allocation that runs out of memory gives them back first). A larger one is
 * freed at once and not remembered.
 *
 * @return KEEL_OK for NULL (a no-op, as free(NULL)). An unknown pointer, an
 *         interior pointer or a second free gives KEEL_ERROR_INVALID_POINTER.
 *         If waiting for a device reports an earlier asynchronous error,
 *         that error is returned and the block stays allocated (free it again).
 */
KEEL_API keel_status_t keel_free(void *ptr);

/**
 * @brief Stream-ordered allocation: the memory may be used by work enqueued on
 *        @p stream after this call (and by other streams after they wait for it).
 * @param[out] ptr written only on success.
 * Ownership: free with keel_free_async() (or keel_free after synchronizing).
 */
KEEL_API keel_status_t keel_malloc_async(keel_stream_t *stream, size_t bytes, void **ptr);

/**
 * @brief Stream-ordered free: the memory is released once the work enqueued
 *        on @p stream before this call is done. Work on other streams, of
 *        this device or another, must be ordered before the call with events,
 *        as for cudaFreeAsync: this call does not wait for it. The pointer is
 *        invalid for new Keel calls at once. The stream may keep the block
 *        (one, of at most 256 MiB) for its next keel_malloc_async of the same
 *        size; a kept block is released when the stream is destroyed, when it
 *        allocates another size, or when an allocation on the device runs out
 *        of memory. Copies refuse the pointer while the stream keeps the
 *        block (and, for a GPU's device memory, while it is remembered).
 */
KEEL_API keel_status_t keel_free_async(void *ptr, keel_stream_t *stream);

/**
 * @brief Set @p bytes bytes at @p ptr to the byte @p value. Synchronous.
 * @p ptr must lie in a Keel allocation with room for @p bytes.
 */
KEEL_API keel_status_t keel_memset(void *ptr, int value, size_t bytes);

/** @brief Stream-ordered memset (see keel_memset). */
KEEL_API keel_status_t keel_memset_async(void *ptr, int value, size_t bytes, keel_stream_t *stream);

/**
 * @brief Copy @p bytes from @p src to @p dst. Synchronous: returns when the
 *        copy is done. The direction comes from the allocation registry;
 *        either side may be host memory. The copy is ordered after the work
 *        already enqueued on the default stream of the device involved.
 * @return KEEL_ERROR_OUT_OF_RANGE when a Keel allocation is too small;
 *         KEEL_ERROR_DEVICE_MISMATCH when the two sides are on devices of
 *         different backends (the CPU backend's memory counts as host memory
 *         to the other backends, so copies between it and a GPU work).
 */
KEEL_API keel_status_t keel_memcpy(void *dst, const void *src, size_t bytes);

/**
 * @brief Stream-ordered copy (see keel_memcpy). Host memory that is not
 *        pinned must stay valid and unchanged until the stream has done the
 *        copy (on some backends the call itself waits for it).
 */
KEEL_API keel_status_t keel_memcpy_async(void *dst, const void *src, size_t bytes, keel_stream_t *stream);

/** @brief keel_malloc_pitch rounds each row up to a multiple of this many bytes. */
#define KEEL_PITCH_ALIGNMENT 256

/**
 * @brief Allocate device memory for @p height rows of @p width bytes, each
 *        row starting @p pitch bytes after the one before (cudaMallocPitch).
 * @param[out] ptr written only on success; free it with keel_free().
 * @param[out] pitch @p width rounded up to a multiple of KEEL_PITCH_ALIGNMENT.
 * @return KEEL_ERROR_INVALID_ARGUMENT for a zero width or height, or a size
 *         that overflows; KEEL_ERROR_OUT_OF_MEMORY as keel_malloc().
 */
KEEL_API keel_status_t keel_malloc_pitch(keel_device_t *device, size_t width, size_t height, void **ptr,
                                         size_t *pitch);

/**
 * @brief Copy @p height rows of @p width bytes, the rows @p src_pitch bytes
 *        apart at @p src and @p dst_pitch bytes apart at @p dst. Synchronous.
 *
 * Either side may be host memory or any Keel allocation, as for keel_memcpy;
 * each side's whole extent, pitch * (height - 1) + width bytes, must lie in
 * its allocation. A width or height of 0 does nothing.
 * @return KEEL_ERROR_INVALID_ARGUMENT when @p width exceeds a pitch (rows
 *         would overlap) or the extent overflows; KEEL_ERROR_OUT_OF_RANGE,
 *         KEEL_ERROR_INVALID_POINTER and KEEL_ERROR_DEVICE_MISMATCH as
 *         keel_memcpy.
 */
KEEL_API keel_status_t keel_memcpy_2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                                      size_t height);

/** @brief Stream-ordered keel_memcpy_2d (the stream rules of keel_memcpy_async). */
KEEL_API keel_status_t keel_memcpy_2d_async(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                            size_t width, size_t height, keel_stream_t *stream);

/**
 * @brief Set @p height rows of @p width bytes, @p pitch bytes apart, to the
 *        byte @p value; the bytes between rows are left alone. Synchronous.
 * @p ptr must lie in a Keel allocation holding the whole extent.
 */
KEEL_API keel_status_t keel_memset_2d(void *ptr, size_t pitch, int value, size_t width, size_t height);

/** @brief Stream-ordered keel_memset_2d. */
KEEL_API keel_status_t keel_memset_2d_async(void *ptr, size_t pitch, int value, size_t width, size_t height,
                                            keel_stream_t *stream);

/**
 * @brief A copy of a box: @p depth slices of @p height rows of @p width bytes.
 *
 * On each side, rows are @p pitch bytes apart and slices @p slice_pitch
 * bytes apart (for a dense array of rows of pitch bytes: pitch * rows per
 * slice). Each side's extent is slice_pitch * (depth - 1) + pitch *
 * (height - 1) + width bytes, which must lie in its allocation.
 */
typedef struct keel_copy_3d {
    void *dst;
    size_t dst_pitch;        /**< bytes from a row of dst to the next, >= width */
    size_t dst_slice_pitch;  /**< bytes from a slice of dst to the next, >= dst_pitch * height */
    const void *src;
    size_t src_pitch;        /**< bytes from a row of src to the next, >= width */
    size_t src_slice_pitch;  /**< bytes from a slice of src to the next, >= src_pitch * height */
    size_t width;            /**< bytes of each row */
    size_t height;           /**< rows of each slice */
    size_t depth;            /**< slices */
} keel_copy_3d_t;

/** @brief Copy a box (cudaMemcpy3D with pitched pointers). Synchronous. A zero extent does nothing. */
KEEL_API keel_status_t keel_memcpy_3d(const keel_copy_3d_t *copy);

/** @brief Stream-ordered keel_memcpy_3d. */
KEEL_API keel_status_t keel_memcpy_3d_async(const keel_copy_3d_t *copy, keel_stream_t *stream);

/**
 * @brief Page-lock @p bytes of the application's host memory at @p ptr
 *        (cudaHostRegister, portable to every device of the backend).
 *
 * Keel's copies then treat the range as pinned memory of @p device: async
 * copies from and to it overlap with other work, and kernels of the
 * backend's devices may address it where the backend maps host memory. The
 * memory stays the application's: keel_free refuses it, and
 * keel_host_unregister gives it back before the application frees it.
 * @return KEEL_ERROR_INVALID_POINTER when the range overlaps a Keel
 *         allocation or a registered range; KEEL_ERROR_NOT_SUPPORTED where
 *         the backend cannot page-lock memory; the vendor's error otherwise.
 */
KEEL_API keel_status_t keel_host_register(keel_device_t *device, void *ptr, size_t bytes);

/**
 * @brief Undo keel_host_register. Waits, as keel_free does, until no queued
 *        work on any device can still use the range.
 * @param ptr the pointer given to keel_host_register.
 * @return KEEL_ERROR_INVALID_POINTER for any other pointer.
 */
KEEL_API keel_status_t keel_host_unregister(void *ptr);

/** @brief What keel_memory_advise tells the backend of managed memory (cudaMemAdvise's values). */
typedef enum keel_memory_advice {
    KEEL_ADVISE_READ_MOSTLY = 1,               /**< mostly read: devices may keep read-only copies */
    KEEL_ADVISE_UNSET_READ_MOSTLY = 2,
    KEEL_ADVISE_PREFERRED_LOCATION = 3,        /**< keep the pages on the given device (NULL: the host) */
    KEEL_ADVISE_UNSET_PREFERRED_LOCATION = 4,
    KEEL_ADVISE_ACCESSED_BY = 5,               /**< map the pages for the given device (NULL: the host) */
    KEEL_ADVISE_UNSET_ACCESSED_BY = 6
} keel_memory_advice_t;

/**
 * @brief Migrate managed memory toward @p to (NULL: the host), in order on
 *        @p stream (cudaMemPrefetchAsync). A hint: the data is correct
 *        wherever it is; a backend without migration (the CPU) checks the
 *        arguments and does nothing.
 * @p ptr .. ptr + bytes must lie in one managed allocation
 * (KEEL_ERROR_INVALID_POINTER otherwise); @p to and @p stream must be of its backend.
 */
KEEL_API keel_status_t keel_memory_prefetch_async(const void *ptr, size_t bytes, keel_device_t *to,
                                                  keel_stream_t *stream);

/**
 * @brief Advise the backend how managed memory is used (cudaMemAdvise).
 *        A hint, checked as keel_memory_prefetch_async is; @p device is the
 *        device the advice names (NULL: the host; ignored by the read-mostly advice).
 */
KEEL_API keel_status_t keel_memory_advise(const void *ptr, size_t bytes, keel_memory_advice_t advice,
                                          keel_device_t *device);

/** @brief Where a pointer lives. Set struct_size = sizeof(keel_pointer_info_t) before the call. */
typedef struct keel_pointer_info {
    size_t struct_size;         /**< [in] sizeof(keel_pointer_info_t) */
    keel_memory_kind_t kind;    /**< KEEL_MEMORY_HOST for memory Keel does not know */
    keel_device_t *device;      /**< owning device; NULL for host memory */
    void *base;                 /**< start of the allocation holding the pointer; NULL for host */
    size_t size;                /**< size of that allocation in bytes; 0 for host */
    size_t offset;              /**< pointer - base */
} keel_pointer_info_t;

/**
 * @brief Which allocation, if any, holds @p ptr.
 * Unknown pointers are not an error: they are reported as KEEL_MEMORY_HOST.
 */
KEEL_API keel_status_t keel_pointer_get_info(const void *ptr, keel_pointer_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_MEMORY_H */
