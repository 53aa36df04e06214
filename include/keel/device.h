/* SPDX-License-Identifier: MIT */
/**
 * @file keel/device.h
 * @brief Backends, devices, their properties, and selection.
 *
 * Keel knows a fixed list of backends ("cpu", "cuda", "hip", plus any plugin
 * found on KEEL_BACKEND_PATH). Each is usable or not, and says why not. A
 * usable backend has one or more devices. The default device is the one that
 * KEEL_BACKEND and KEEL_DEVICE select; any device of any usable backend can
 * also be used explicitly, several at once in one process.
 *
 * Backend and device handles live until keel_finalize() or the process's exit:
 * they are never freed by the caller and stay valid across threads; after
 * keel_finalize() they are stale (KEEL_ERROR_INVALID_HANDLE).
 *
 * Handles of objects the caller destroys (streams, events, modules, kernels,
 * graphs) are checked on every call: NULL, or a handle of another type, is
 * KEEL_ERROR_INVALID_HANDLE, and so is a destroyed one until Keel reuses its
 * memory for a new object of the same type. Do not rely on the latter.
 */
#ifndef KEEL_DEVICE_H
#define KEEL_DEVICE_H

#include <stdint.h>
#include "keel/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct keel_backend keel_backend_t; /**< a backend Keel knows (opaque) */
typedef struct keel_device keel_device_t;   /**< one device of a backend (opaque) */

/** @brief Facts about a backend. Set struct_size = sizeof(keel_backend_info_t) before the call. */
typedef struct keel_backend_info {
    size_t struct_size;        /**< [in] sizeof(keel_backend_info_t) as the caller knows it */
    const char *name;          /**< "cpu", "cuda", "hip", ... */
    const char *description;   /**< one line, e.g. "NVIDIA CUDA 13.0, driver 580.159" */
    const char *plugin_path;   /**< file the plugin came from; "(built in)" for cpu; NULL if none found */
    int usable;                /**< 1 when the backend loaded and probed with at least one device */
    keel_status_t status;      /**< KEEL_OK when usable, otherwise why not */
    const char *reason;        /**< why not usable ("libcuda.so.1 not found"); "" when usable */
    int device_count;          /**< devices it offers (0 when not usable) */
    int abi_version;           /**< plugin ABI version it was built for (0 if never loaded) */
} keel_backend_info_t;

/**
 * @brief Number of backends Keel knows, usable or not.
 * @param[out] count
 */
KEEL_API keel_status_t keel_backend_count(int *count);

/**
 * @brief The directories searched for backend plugins, in order.
 *
 * Those of KEEL_BACKEND_PATH, then libkeel's own directory when it runs from
 * its build tree, then the plugin directory next to libkeel (`keel/` beside
 * it in an install, wherever the install was moved), then the configured
 * one; directories that do not exist are left out, the configured one
 * excepted.
 * @param[out] path colon-separated; valid until process exit.
 * @param[out] count the number of directories (may be NULL).
 */
KEEL_API keel_status_t keel_backend_search_path(const char **path, int *count);

/**
 * @brief How many devices a backend offers (cudaGetDeviceCount).
 * @param[in] backend_name "cpu", "cuda", ...; NULL for the backend of the
 *            default device (KEEL_BACKEND's selection).
 * @param[out] count the devices of the backend; 0 when it is known but not
 *             usable (keel_backend_get_info says why).
 * @return KEEL_ERROR_NOT_FOUND for an unknown name; with NULL, the error of
 *         the selection when no backend is usable.
 */
KEEL_API keel_status_t keel_device_count(const char *backend_name, int *count);

/**
 * @brief The backend at an index in [0, count).
 * @param[out] backend valid until process exit.
 * @return KEEL_ERROR_OUT_OF_RANGE for a bad index.
 */
KEEL_API keel_status_t keel_backend_get(int index, keel_backend_t **backend);

/**
 * @brief The backend of a name ("cpu", "cuda", ...), usable or not.
 * @return KEEL_ERROR_NOT_FOUND (the detail lists the known names).
 */
KEEL_API keel_status_t keel_backend_find(const char *name, keel_backend_t **backend);

/** @brief Fill @p info for @p backend; fields the caller's struct_size does not cover are left alone. */
KEEL_API keel_status_t keel_backend_get_info(keel_backend_t *backend, keel_backend_info_t *info);

/**
 * @brief Device @p index of a usable backend.
 * @return KEEL_ERROR_INVALID_ENVIRONMENT when a KEEL_* variable holds garbage
 *         (as keel_init() reports it, or one of this backend's own variables);
 *         KEEL_ERROR_BACKEND_UNAVAILABLE with the reason for an unusable one;
 *         KEEL_ERROR_NO_DEVICE for an index past its devices.
 */
KEEL_API keel_status_t keel_backend_get_device(keel_backend_t *backend, int index, keel_device_t **device);

/**
 * @brief The default device: the first usable backend of KEEL_BACKEND
 *        (default "cuda,hip,cpu"), device KEEL_DEVICE (default 0) of it.
 * @return the environment or selection error of keel_init() if there is one.
 */
KEEL_API keel_status_t keel_device_default(keel_device_t **device);

/**
 * @brief Select a device by backend name and index, as the API user's choice.
 * Same as keel_backend_find() + keel_backend_get_device().
 */
KEEL_API keel_status_t keel_device_get(const char *backend_name, int index, keel_device_t **device);

/** @brief Kinds of processor a device can be. */
typedef enum keel_device_type {
    KEEL_DEVICE_TYPE_CPU = 1,
    KEEL_DEVICE_TYPE_GPU = 2
} keel_device_type_t;

/** @brief Properties of a device. Set struct_size = sizeof(keel_device_properties_t) before the call. */
typedef struct keel_device_properties {
    size_t struct_size;            /**< [in] sizeof(keel_device_properties_t) as the caller knows it */
    char name[256];                /**< "NVIDIA H200", "cpu0 (Intel Xeon ...)" */
    char vendor[64];               /**< "NVIDIA", "AMD", "GenuineIntel", ... */
    char architecture[64];         /**< "sm_90", "gfx942", "x86_64" */
    char backend[16];              /**< backend name */
    keel_device_type_t type;
    int index;                     /**< index within its backend */
    size_t total_memory;           /**< bytes (for an emulated CPU device: its cap, or the machine's RAM) */
    size_t free_memory;            /**< bytes free now */
    int compute_units;             /**< SMs, CUs, or CPU cores */
    int max_threads_per_block;
    int max_block_dim[3];
    int max_grid_dim[3];
    int warp_size;                 /**< 32 on NVIDIA, 64 on most AMD, 1 on the CPU */
    size_t shared_memory_per_block;/**< bytes of dynamic+static shared memory a block may use */
    int clock_rate_khz;            /**< 0 if unknown */
    int compute_capability_major;  /**< NVIDIA only, else 0 */
    int compute_capability_minor;
    int pci_bus_id;                /**< -1 if not a PCI device */
    int unified_addressing;        /**< 1 if host and device pointers share one address space */
    int managed_memory;            /**< 1 if keel_malloc_managed() is supported */
    int concurrent_managed_access; /**< 1 if host and device may touch managed memory concurrently */
    int stream_priorities;         /**< 1 if stream priorities are honoured */
    int stream_ordered_alloc;      /**< 1 if keel_malloc_async() is pool-backed (else emulated) */
    int async_engines;             /**< copy engines, 0 if unknown */
} keel_device_properties_t;

/** @brief Fill @p props for @p device (free_memory is read now). */
KEEL_API keel_status_t keel_device_get_properties(keel_device_t *device, keel_device_properties_t *props);

/**
 * @brief Free and total memory of a device now, in bytes.
 * @param[out] free_bytes,total_bytes either may be NULL.
 */
KEEL_API keel_status_t keel_device_memory_info(keel_device_t *device, size_t *free_bytes, size_t *total_bytes);

/** @brief The backend a device belongs to. */
KEEL_API keel_status_t keel_device_get_backend(keel_device_t *device, keel_backend_t **backend);

/** @brief Index of the device within its backend. */
KEEL_API keel_status_t keel_device_get_index(keel_device_t *device, int *index);

/** @brief Wait for all work on every stream of the device. */
KEEL_API keel_status_t keel_device_synchronize(keel_device_t *device);

/**
 * @brief Whether @p device can read and write memory of @p peer directly.
 * @param[out] can_access 1 or 0. Devices of different backends give 0.
 */
KEEL_API keel_status_t keel_device_can_access_peer(keel_device_t *device, keel_device_t *peer, int *can_access);

/**
 * @brief Name of a device as "<backend>:<index>" (e.g. "cuda:0"). Static for the
 *        lifetime of the process.
 */
KEEL_API const char *keel_device_name(keel_device_t *device);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_DEVICE_H */
