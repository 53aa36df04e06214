/* SPDX-License-Identifier: MIT */
/**
 * @file keel/graph.h
 * @brief Capture a sequence of stream work into a graph and replay it.
 *
 * Between keel_stream_begin_capture() and keel_stream_end_capture(), work
 * enqueued on the stream (launches, copies, memsets, host functions, event
 * waits) is recorded instead of run. The graph is instantiated once and then
 * launched as many times as wanted, on any stream of the same device. CUDA
 * uses CUDA graphs underneath; the CPU backend records and replays.
 */
#ifndef KEEL_GRAPH_H
#define KEEL_GRAPH_H

#include "keel/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct keel_graph keel_graph_t;           /**< a captured sequence of work (opaque) */
typedef struct keel_graph_exec keel_graph_exec_t; /**< an instantiated, launchable graph (opaque) */

/** @brief Start recording the work enqueued on @p stream. While it captures, synchronous calls on it,
 *         keel_malloc_async and keel_free_async on it are refused (KEEL_ERROR_BUSY): allocate the
 *         memory a graph uses before the capture and free it after the graph's last replay. */
KEEL_API keel_status_t keel_stream_begin_capture(keel_stream_t *stream);

/**
 * @brief Stop recording and return what was recorded.
 * Ownership: the caller destroys the graph with keel_graph_destroy().
 */
KEEL_API keel_status_t keel_stream_end_capture(keel_stream_t *stream, keel_graph_t **graph);

/** @brief Whether @p stream is capturing (1) or not (0). */
KEEL_API keel_status_t keel_stream_is_capturing(keel_stream_t *stream, int *capturing);

/** @brief Make a launchable graph. Ownership: destroy with keel_graph_exec_destroy(). */
KEEL_API keel_status_t keel_graph_instantiate(keel_graph_t *graph, keel_graph_exec_t **exec);

/** @brief Enqueue one replay of @p exec on @p stream. */
KEEL_API keel_status_t keel_graph_launch(keel_graph_exec_t *exec, keel_stream_t *stream);

/** @brief Destroy a graph (instantiated copies stay valid). */
KEEL_API keel_status_t keel_graph_destroy(keel_graph_t *graph);

/** @brief Destroy an instantiated graph; pending replays still complete. */
KEEL_API keel_status_t keel_graph_exec_destroy(keel_graph_exec_t *exec);

#ifdef __cplusplus
}
#endif

#endif /* KEEL_GRAPH_H */
