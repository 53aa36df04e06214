/* SPDX-License-Identifier: MIT */
/**
 * @file keel/status.h
 * @brief Status codes, error details, library version and initialization.
 *
 * Every fallible Keel call returns a keel_status_t. KEEL_OK is 0; every other
 * value names one class of failure. The human-readable detail of the last
 * failure on the calling thread is kept in thread-local storage and read with
 * keel_last_error().
 */
#ifndef KEEL_STATUS_H
#define KEEL_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KEEL_API __attribute__((visibility("default")))
#else
#define KEEL_API
#endif

#define KEEL_VERSION_MAJOR 0
#define KEEL_VERSION_MINOR 1
#define KEEL_VERSION_PATCH 0

/** @brief Result of every fallible Keel call. */
typedef enum keel_status {
    KEEL_OK = 0,
    KEEL_ERROR_INVALID_ARGUMENT = 1,   /**< a parameter is out of its domain (NULL out-pointer, bad flag, zero dim) */
    KEEL_ERROR_INVALID_HANDLE = 2,     /**< a NULL, destroyed or wrongly-typed handle */
    KEEL_ERROR_INVALID_POINTER = 3,    /**< a pointer Keel does not know, or of the wrong kind, or freed twice */
    KEEL_ERROR_OUT_OF_RANGE = 4,       /**< an access past the end of an allocation, or an index past a count */
    KEEL_ERROR_OUT_OF_MEMORY = 5,      /**< an allocation failed; later allocations that fit may succeed */
    KEEL_ERROR_NOT_SUPPORTED = 6,      /**< the backend or device does not offer this operation */
    KEEL_ERROR_NOT_READY = 7,          /**< a query found work still pending (not a failure) */
    KEEL_ERROR_NOT_FOUND = 8,          /**< a named backend, kernel, symbol or file was not found */
    KEEL_ERROR_BACKEND_UNAVAILABLE = 9,/**< a backend could not be loaded or probed; the detail says why */
    KEEL_ERROR_NO_DEVICE = 10,         /**< the backend works but has no (such) device */
    KEEL_ERROR_ABI_MISMATCH = 11,      /**< a plugin was built for another plugin ABI version */
    KEEL_ERROR_INVALID_ENVIRONMENT = 12,/**< a KEEL_* environment variable holds an invalid value */
    KEEL_ERROR_DEVICE_MISMATCH = 13,   /**< objects of different devices or backends were combined */
    KEEL_ERROR_LAUNCH_FAILED = 14,     /**< a kernel launch or a kernel itself failed */
    KEEL_ERROR_COMPILE_FAILED = 15,    /**< run-time compilation or module loading failed; the detail has the log */
    KEEL_ERROR_DEVICE_LOST = 16,       /**< the device hit a sticky error and cannot be used further */
    KEEL_ERROR_BACKEND = 17,           /**< a vendor call failed in a way no other code describes */
    KEEL_ERROR_BUSY = 18,              /**< the object is in use (e.g. a stream being captured) */
    KEEL_ERROR_INTERNAL = 19           /**< a bug in Keel; please report it with keel_last_error() */
} keel_status_t;

/** Number of distinct keel_status_t values (one past the largest). */
#define KEEL_STATUS_COUNT 20

/**
 * @brief Short description of a status code ("invalid handle").
 * @param[in] status any value; unknown values give "unknown status".
 * @return a static string; never NULL. Thread-safe.
 */
KEEL_API const char *keel_status_string(keel_status_t status);

/**
 * @brief Symbolic name of a status code ("KEEL_ERROR_INVALID_HANDLE").
 * @return a static string; never NULL. Thread-safe.
 */
KEEL_API const char *keel_status_name(keel_status_t status);

/**
 * @brief Detail of the last failed Keel call on the calling thread.
 *
 * Example: "keel_memcpy: 8192 bytes from 0x7f.. exceed its allocation of 4096
 * bytes". Successful calls do not clear it.
 * @return a thread-local string owned by Keel, valid until the next failing
 *         call on this thread; "" when no call has failed yet.
 */
KEEL_API const char *keel_last_error(void);

/** @brief Status of the last failed Keel call on this thread (KEEL_OK if none). */
KEEL_API keel_status_t keel_last_status(void);

/** @brief Forget the last error of this thread. */
KEEL_API void keel_clear_error(void);

/** @brief Version of the library that is linked, "MAJOR.MINOR.PATCH". Static string. */
KEEL_API const char *keel_version_string(void);

/**
 * @brief Version numbers of the linked library.
 * @param[out] major,minor,patch any may be NULL.
 */
KEEL_API void keel_version(int *major, int *minor, int *patch);

/**
 * @brief Initialize Keel: read the environment, load the backends.
 *
 * Optional: every call initializes Keel on first use. Calling it explicitly
 * gets the environment errors early. Idempotent and thread-safe; the
 * environment is read once, on the first call, and again on the first call
 * after keel_finalize(). Once the process has begun to exit and Keel was torn
 * down (see keel_finalize()), it returns KEEL_ERROR_BACKEND_UNAVAILABLE.
 * @return KEEL_OK; KEEL_ERROR_INVALID_ENVIRONMENT if a KEEL_* variable holds
 *         garbage (the detail names the variable and the valid values);
 *         KEEL_ERROR_BACKEND_UNAVAILABLE if KEEL_BACKEND names backends none
 *         of which can be used (the detail says why each failed);
 *         KEEL_ERROR_NO_DEVICE if KEEL_DEVICE is past the selected backend's
 *         devices. Backend
 *         listing works after either failure, so tools can report.
 */
KEEL_API keel_status_t keel_init(void);

/**
 * @brief Release everything Keel holds: every object, every allocation, every
 * thread, every plugin.
 *
 * Optional: at process exit Keel releases the same by itself (below). In order:
 * - waits for the work queued on every stream of every opened device, host
 *   functions included (a failure of that work is logged at warn, not returned:
 *   synchronize first to see it);
 * - destroys what the application did not: graph execs, graphs, kernels,
 *   modules, events, streams (a capture in progress is abandoned), imported
 *   DLPack tensors (their deleters run) and host registrations (unpinned), and
 *   frees every allocation (device, pinned, managed, stream-ordered) and every
 *   block Keel kept for reuse;
 * - closes every device (its default stream and threads), shuts every backend
 *   down, unloads every plugin (dlclose), frees the allocation registry and the
 *   backend table.
 *
 * Afterwards every handle and pointer Keel gave out is stale: a call with a
 * stream, event, module, kernel, graph, device or backend handle of before
 * returns KEEL_ERROR_INVALID_HANDLE ("destroyed"), and keel_free() of an old
 * pointer KEEL_ERROR_INVALID_POINTER; neither crashes. The memory behind the
 * handles is kept for the rest of the process for that purpose (a few pages,
 * not heap: valgrind and LeakSanitizer do not count it). Keel may be used again
 * after it: keel_init(), or any call that needs Keel, initializes it afresh
 * (reading the environment again, except KEEL_FAULT, read once per process),
 * and hands out new handles (an old handle may then alias a new object of its
 * type, as freed memory does).
 *
 * Thread safety: no other thread may be inside a Keel call, or use a Keel
 * object, while keel_finalize() runs; concurrent calls of keel_finalize() and
 * keel_init() are serialized. Calling it again, or before Keel was ever used,
 * does nothing and returns KEEL_OK. In a child of fork() it calls no backend
 * (the threads are the parent's) and only forgets the parent's objects, so
 * that the child may start Keel afresh.
 *
 * At exit: an exit handler (atexit, registered by the first initialization)
 * runs the same teardown with three differences. Commands still queued on CPU
 * streams are not run (events they record still complete, stream-ordered frees
 * still free): the teardown waits up to 2 s for the commands running, and if one
 * is still running then, or exit was called from a CPU kernel's pool thread,
 * Keel leaves everything to the system rather than hang or free what runs. And
 * a GPU plugin whose devices were opened is left alone: its vendor runtime may
 * already be gone, and the driver reclaims its objects. And the deleters of
 * tensors still imported are not called (their producer may be gone). Exit handlers
 * registered after Keel's first initialization run before it and may use Keel;
 * later calls find it shut down (KEEL_ERROR_BACKEND_UNAVAILABLE, stale handles).
 * In a child of fork() the exit handler does nothing.
 *
 * @return KEEL_OK; KEEL_ERROR_BUSY, with nothing released, when called from a
 *         host function or a kernel that Keel runs (it would wait for itself).
 */
KEEL_API keel_status_t keel_finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_STATUS_H */
