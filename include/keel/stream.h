/* SPDX-License-Identifier: MIT */
/**
 * @file keel/stream.h
 * @brief Streams (in-order queues of device work), events and host callbacks.
 *
 * Work enqueued on one stream runs in order; work on different streams may
 * run concurrently unless ordered with events. Every device has a default
 * stream, created by Keel, that must not be destroyed.
 */
#ifndef KEEL_STREAM_H
#define KEEL_STREAM_H

#include "keel/device.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef KEEL__STREAM_T_DECLARED /* declared once: C99 allows no repeated typedef */
#define KEEL__STREAM_T_DECLARED
typedef struct keel_stream keel_stream_t; /**< an in-order work queue of one device (opaque) */
#endif
typedef struct keel_event keel_event_t;   /**< a marker in a stream (opaque) */

/**
 * @brief keel_stream_create() flags.
 *
 * Keel streams, the default stream included, never order themselves
 * implicitly with one another (as CUDA streams made with
 * cudaStreamNonBlocking): order them with events.
 */
enum keel_stream_flags {
    KEEL_STREAM_DEFAULT = 0 /**< the only value today; other bits are refused */
};

/**
 * @brief Create a stream on @p device.
 * @param[in] flags KEEL_STREAM_* bits; unknown bits are KEEL_ERROR_INVALID_ARGUMENT.
 * @param[in] priority lower numbers are higher priority, as in CUDA; values
 *            outside keel_device_stream_priority_range() are clamped.
 * @param[out] stream written only on success.
 * Ownership: the caller destroys it with keel_stream_destroy().
 */
KEEL_API keel_status_t keel_stream_create(keel_device_t *device, unsigned flags, int priority,
                                          keel_stream_t **stream);

/**
 * @brief Destroy a stream. Work already enqueued still completes; the call
 *        waits for it. The default stream cannot be destroyed
 *        (KEEL_ERROR_INVALID_HANDLE). Called from a host function of the
 *        same stream it is refused with KEEL_ERROR_BUSY and the stream lives on.
 */
KEEL_API keel_status_t keel_stream_destroy(keel_stream_t *stream);

/** @brief The default stream of a device (owned by Keel; never destroy it). */
KEEL_API keel_status_t keel_device_default_stream(keel_device_t *device, keel_stream_t **stream);

/** @brief The range of stream priorities: @p greatest is numerically lowest. */
KEEL_API keel_status_t keel_device_stream_priority_range(keel_device_t *device, int *least, int *greatest);

/** @brief Block until all work enqueued on @p stream is done. Returns the first asynchronous error it met. */
KEEL_API keel_status_t keel_stream_synchronize(keel_stream_t *stream);

/** @brief KEEL_OK if all enqueued work is done, KEEL_ERROR_NOT_READY if not
 *         (a NOT_READY answer leaves keel_last_error() alone). */
KEEL_API keel_status_t keel_stream_query(keel_stream_t *stream);

/** @brief Device of a stream. */
KEEL_API keel_status_t keel_stream_get_device(keel_stream_t *stream, keel_device_t **device);

/** @brief Priority of a stream (after clamping). */
KEEL_API keel_status_t keel_stream_get_priority(keel_stream_t *stream, int *priority);

/** @brief Work after this call on @p stream waits until @p event has completed. The event may be of another stream or another device of the same backend. */
KEEL_API keel_status_t keel_stream_wait_event(keel_stream_t *stream, keel_event_t *event);

/** @brief A host function enqueued on a stream. It must not call Keel functions that wait on
 *         streams: destroying its own stream is refused (KEEL_ERROR_BUSY), and waiting on work
 *         queued behind it can never finish. */
typedef void (*keel_host_fn_t)(void *user_data);

/**
 * @brief Enqueue a call of @p fn(@p user_data) on @p stream: it runs on a
 *        Keel thread after the work before it, and work after it waits for it.
 */
KEEL_API keel_status_t keel_stream_launch_host_func(keel_stream_t *stream, keel_host_fn_t fn, void *user_data);

/**
 * @brief The backend's own handle of @p stream: a cudaStream_t on CUDA, a
 *        hipStream_t on HIP, as an integer (what the Python array API's
 *        __dlpack__(stream=...) takes). Work a vendor library enqueues on it
 *        is ordered with the stream's Keel work.
 * @return KEEL_ERROR_NOT_SUPPORTED on a backend without one (the CPU backend).
 * Ownership: the handle belongs to the Keel stream; do not destroy it.
 */
KEEL_API keel_status_t keel_stream_get_native(keel_stream_t *stream, uintptr_t *native);

/**
 * @brief Make work enqueued later on the backend stream @p native (of the
 *        same backend, e.g. a CuPy or PyTorch stream) wait for the work
 *        enqueued on @p stream so far, without waiting on the host (CUDA:
 *        an event recorded on @p stream and cudaStreamWaitEvent on
 *        @p native). 1 and 2 name CUDA's legacy and per-thread default
 *        streams, 0 HIP's null stream, as in the Python array API.
 * @return KEEL_ERROR_NOT_SUPPORTED on a backend without native streams.
 */
KEEL_API keel_status_t keel_stream_order_native(keel_stream_t *stream, uintptr_t native);

/** @brief keel_event_create() flags. */
enum keel_event_flags {
    KEEL_EVENT_DEFAULT = 0,
    KEEL_EVENT_DISABLE_TIMING = 1u << 0, /**< cheaper; keel_event_elapsed_time() is refused */
    KEEL_EVENT_BLOCKING_SYNC = 1u << 1   /**< keel_event_synchronize() sleeps instead of spinning */
};

/**
 * @brief Create an event on @p device.
 * Ownership: the caller destroys it with keel_event_destroy().
 */
KEEL_API keel_status_t keel_event_create(keel_device_t *device, unsigned flags, keel_event_t **event);

/** @brief Destroy an event. Pending waits on it still complete. */
KEEL_API keel_status_t keel_event_destroy(keel_event_t *event);

/** @brief Capture the work enqueued on @p stream so far; re-recording moves the marker.
 *  @return KEEL_ERROR_DEVICE_MISMATCH if the stream is of another device than the event. */
KEEL_API keel_status_t keel_event_record(keel_event_t *event, keel_stream_t *stream);

/** @brief Block until the work captured by the last record is done (KEEL_OK at once if never recorded). */
KEEL_API keel_status_t keel_event_synchronize(keel_event_t *event);

/** @brief KEEL_OK if the recorded work is done, KEEL_ERROR_NOT_READY if not (leaving keel_last_error() alone). */
KEEL_API keel_status_t keel_event_query(keel_event_t *event);

/**
 * @brief Milliseconds between two completed events of the same device.
 * @return KEEL_ERROR_NOT_READY if either is pending; KEEL_ERROR_INVALID_ARGUMENT if
 *         either was created with KEEL_EVENT_DISABLE_TIMING or never recorded.
 */
KEEL_API keel_status_t keel_event_elapsed_time(keel_event_t *start, keel_event_t *end, float *ms);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_STREAM_H */
