/* SPDX-License-Identifier: MIT */
/* What the CPU backend offers the CPU implementations of the built-in
 * operations (kernels/cpu): running a piece of work in order on a stream, and
 * spreading a loop over the device's worker threads. Internal to libkeel. */
#ifndef KEEL_CPU_ENQUEUE_H
#define KEEL_CPU_ENQUEUE_H

#include <stddef.h>
#include "keel/status.h"

/* Enqueue fn(payload_copy) on the CPU stream whose backend context is
 * stream_ctx. The payload (payload_size bytes, at most 512) is copied into the
 * command, so the caller's memory may go away at once. Captured into a graph
 * when the stream is capturing. */
__attribute__((visibility("hidden")))
keel_status_t keel__cpu_enqueue(void *stream_ctx, void (*fn)(void *payload), const void *payload,
                                size_t payload_size);

/* As keel__cpu_enqueue, for work small enough that handing it to the
 * stream's worker costs more than doing it (the caller judges: about 16k
 * elements or 64 KiB at most). When the stream is idle (nothing queued or
 * running, not capturing) fn(payload) runs at once on the calling thread,
 * on the caller's payload, which fn may modify; it still counts as a
 * command of the stream, so commands enqueued meanwhile from other threads
 * wait for it, and query/synchronize see it. Otherwise the payload is copied
 * and queued as by keel__cpu_enqueue. */
__attribute__((visibility("hidden")))
keel_status_t keel__cpu_enqueue_small(void *stream_ctx, void (*fn)(void *payload), void *payload,
                                      size_t payload_size);

/* The two halves of keel__cpu_enqueue_small's inline run, for a caller that
 * runs its small work itself without a payload or runner in between:
 * keel__cpu_inline_begin returns 1 when the stream was idle (not capturing,
 * nothing queued or running) and the caller now holds the stream's next
 * place in stream order; it then does the work on the calling thread and
 * calls keel__cpu_inline_end. 0: enqueue as usual. The work runs without
 * the thread-local device keel__cpu_enqueue_small sets, so it must not call
 * keel__cpu_parallel_for with more than `grain` items (it would run inline
 * anyway, and only then is the device needed). stream_ctx is the CPU
 * stream's backend context. */
struct cpu_stream;
__attribute__((visibility("hidden"))) int keel__cpu_inline_begin(struct cpu_stream *s);
__attribute__((visibility("hidden"))) void keel__cpu_inline_end(struct cpu_stream *s);

/* Run body(arg, begin, end) over [0, n) in chunks of at least grain items,
 * on the pool of the device that runs the calling command; inline on the
 * calling thread when n <= grain or the pool has one thread. Must be called
 * from inside a function run by keel__cpu_enqueue(_small) (or a CPU kernel). Returns
 * when every chunk is done. */
__attribute__((visibility("hidden")))
void keel__cpu_parallel_for(size_t n, size_t grain, void (*body)(void *arg, size_t begin, size_t end),
                            void *arg);

#endif /* KEEL_CPU_ENQUEUE_H */
