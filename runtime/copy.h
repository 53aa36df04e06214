/* SPDX-License-Identifier: MIT */
/* What the copy and memset entry points share (runtime/copy.c, runtime/copy_2d.c):
 * each side of a copy resolved against the allocation registry, the device
 * that performs it, and the checks of a stream-ordered one. Internal. */
#ifndef KEEL_CORE_COPY_H
#define KEEL_CORE_COPY_H

#include "runtime/internal.h"

/* One side of a copy or memset, resolved against the registry: known = 1
 * for a live Keel allocation (a), 0 for host memory Keel does not manage. */
typedef struct side {
    keel__alloc_t a;
    int known;
} side_t;

#define CHECK_STREAM(s, fn)                                                                                  \
    do {                                                                                                     \
        KEEL__CHECK_HANDLE(s, KEEL__MAGIC_STREAM, fn, "stream");                                            \
    } while (0)

/* [ptr, ptr + bytes) as role ("dst" or "src") of fn: in one live allocation
 * with room for bytes, or host memory; the end of an allocation, a range
 * running into one and a freed block are refused. */
KEEL_HIDDEN keel_status_t keel__copy_resolve(const char *fn, const char *role, const void *ptr, size_t bytes,
                                             side_t *s);
/* Both sides of a copy, dst first (its error is the one reported), their
 * registry lookups made together. */
KEEL_HIDDEN keel_status_t keel__copy_resolve_pair(const char *fn, void *dst, size_t dst_bytes, side_t *d,
                                                  const void *src, size_t src_bytes, side_t *r);
/* The device that performs a synchronous copy (NULL: both sides host
 * memory) and whether it is a copy between two devices' memory. */
KEEL_HIDDEN keel_status_t keel__copy_device(const char *fn, side_t *dst, side_t *src, struct keel_device **dev,
                                            int *peer);
/* The checks of a copy enqueued on stream: both sides reachable from its
 * device; records the other devices handed a block (keel_free waits). */
KEEL_HIDDEN keel_status_t keel__copy_on_stream(const char *fn, struct keel_stream *stream, side_t *d, side_t *r,
                                               int *peer);
KEEL_HIDDEN void keel__copy_note_reach(const side_t *s, struct keel_device *dev);
/* Refuses a synchronous call on a default stream that is capturing. */
KEEL_HIDDEN keel_status_t keel__copy_refuse_capturing(struct keel_stream *s, const char *fn);
/* A 1D copy on stream s (sync: then waits for it). */
KEEL_HIDDEN keel_status_t keel__copy_run(struct keel_stream *s, void *dst, side_t *d, const void *src, side_t *r,
                                         size_t bytes, int peer, int sync);
/* A memset's target: a live Keel allocation with room for bytes. */
KEEL_HIDDEN keel_status_t keel__memset_target(const char *fn, void *ptr, size_t bytes, side_t *s);
KEEL_HIDDEN keel_status_t keel__memset_on_stream(const char *fn, struct keel_stream *stream, const void *ptr,
                                                 const side_t *s);

#endif /* KEEL_CORE_COPY_H */
