/* SPDX-License-Identifier: MIT */
/* Pitched memory: keel_malloc_pitch, and copies and memsets of rows
 * (2D) and boxes (3D). Each side's whole extent is checked against the
 * registry as one range; the backend's 2D entries do the work, or the core
 * enqueues one row at a time where a backend has none. A box is a 2D copy
 * per slice. */
#include <stdint.h>
#include <string.h>
#include "runtime/copy.h"

keel_status_t keel_malloc_pitch(keel_device_t *device, size_t width, size_t height, void **ptr, size_t *pitch)
{
    KEEL__CHECK_OUT(ptr, "keel_malloc_pitch", "ptr");
    KEEL__CHECK_OUT(pitch, "keel_malloc_pitch", "pitch");
    if (width == 0 || height == 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_malloc_pitch: width %zu x height %zu is empty",
                               width, height);
    if (width > SIZE_MAX - (KEEL_PITCH_ALIGNMENT - 1))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_malloc_pitch: width %zu overflows", width);
    size_t p = (width + KEEL_PITCH_ALIGNMENT - 1) / KEEL_PITCH_ALIGNMENT * KEEL_PITCH_ALIGNMENT;
    if (height > SIZE_MAX / p)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_malloc_pitch: %zu rows of pitch %zu bytes overflow a size_t", height, p);
    void *q = NULL;
    keel_status_t st = keel_malloc(device, p * height, &q);
    if (st != KEEL_OK)
        return st;
    *ptr = q;
    *pitch = p;
    return KEEL_OK;
}

/* pitch * (rows - 1) + width, the bytes a side of rows spans; 0 when the
 * pitch is too small or the size overflows (the error is set). */
static int extent_2d(const char *fn, const char *role, size_t pitch, size_t width, size_t rows, size_t *extent)
{
    if (width > pitch) {
        keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: width %zu bytes is more than the %s pitch %zu: rows would "
                        "overlap", fn, width, role, pitch);
        return 0;
    }
    if (rows - 1 > (SIZE_MAX - width) / pitch) {
        keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: %zu rows of pitch %zu bytes on %s overflow a size_t", fn,
                        rows, pitch, role);
        return 0;
    }
    *extent = pitch * (rows - 1) + width;
    return 1;
}

/* A checked 2D copy: both sides resolved, the device picked (NULL: host to
 * host), peer set. */
typedef struct copy_2d {
    side_t d, r;
    struct keel_device *dev;
    int peer;
} copy_2d_t;

/* The rows of one 2D copy on stream s, through the backend's entry or one
 * row at a time. */
static keel_status_t enqueue_2d(struct keel_stream *s, copy_2d_t *c, void *dst, size_t dpitch, const void *src,
                                size_t spitch, size_t width, size_t height, const char *fn)
{
    if (dpitch == width && spitch == width) /* dense on both sides: one copy */
        return keel__copy_run(s, dst, &c->d, src, &c->r, width * height, c->peer, 0);
    const keel_memory_vtable_t *m = s->device->plugin->memory;
    keel_status_t (*two_d)(void *, void *, keel_memory_kind_t, size_t, const void *, keel_memory_kind_t, size_t,
                           size_t, size_t) = KEEL__VT(m, memcpy_2d_async);
    if (two_d) {
        KEEL__FAULT_ENQUEUE(fn);
        return two_d(s->ctx, dst, c->d.a.kind, dpitch, src, c->r.a.kind, spitch, width, height);
    }
    keel_status_t st = KEEL_OK;
    for (size_t i = 0; i < height && st == KEEL_OK; i++)
        st = keel__copy_run(s, (char *)dst + i * dpitch, &c->d, (const char *)src + i * spitch, &c->r, width,
                            c->peer, 0);
    return st;
}

static void host_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height)
{
    for (size_t i = 0; i < height; i++)
        memmove((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
}

/* Resolves both sides of a box (depth 1 for 2D) and, for an async copy,
 * checks them against the stream. */
static keel_status_t check_box(const char *fn, const keel_copy_3d_t *b, struct keel_stream *stream, copy_2d_t *c)
{
    size_t de, se;
    if (!extent_2d(fn, "dst", b->dst_pitch, b->width, b->height, &de) ||
        !extent_2d(fn, "src", b->src_pitch, b->width, b->height, &se))
        return keel_last_status();
    if (b->depth > 1) {
        const size_t *slice[2] = {&b->dst_slice_pitch, &b->src_slice_pitch};
        size_t *ext[2] = {&de, &se};
        const size_t pitch[2] = {b->dst_pitch, b->src_pitch};
        for (int i = 0; i < 2; i++) {
            const char *role = i ? "src" : "dst";
            if (*slice[i] / pitch[i] < b->height)
                return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                       "%s: the %s slice pitch %zu bytes is less than %zu rows of pitch %zu: slices "
                                       "would overlap", fn, role, *slice[i], b->height, pitch[i]);
            if (b->depth - 1 > (SIZE_MAX - *ext[i]) / *slice[i])
                return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                       "%s: %zu slices of %zu bytes on %s overflow a size_t", fn, b->depth,
                                       *slice[i], role);
            *ext[i] += *slice[i] * (b->depth - 1);
        }
    }
    keel_status_t st;
    if ((st = keel__copy_resolve_pair(fn, b->dst, de, &c->d, b->src, se, &c->r)) != KEEL_OK)
        return st;
    if (stream) {
        c->dev = stream->device;
        return keel__copy_on_stream(fn, stream, &c->d, &c->r, &c->peer);
    }
    return keel__copy_device(fn, &c->d, &c->r, &c->dev, &c->peer);
}

/* Every 2D and 3D copy: checked, then each slice as a 2D copy; the
 * synchronous form on the default stream of the device that performs it. */
static keel_status_t copy_box(const char *fn, const keel_copy_3d_t *b, keel_stream_t *stream)
{
    if (!b->dst || !b->src)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: %s is NULL", fn, b->dst ? "src" : "dst");
    if (b->width == 0 || b->height == 0 || b->depth == 0)
        return KEEL_OK;
    copy_2d_t c;
    keel_status_t st = check_box(fn, b, stream, &c);
    if (st != KEEL_OK)
        return st;
    struct keel_stream *s = stream ? stream : c.dev ? c.dev->default_stream : NULL;
    if (!s) { /* host memory on both sides */
        for (size_t k = 0; k < b->depth; k++)
            host_rows((char *)b->dst + k * b->dst_slice_pitch, b->dst_pitch,
                      (const char *)b->src + k * b->src_slice_pitch, b->src_pitch, b->width, b->height);
        return KEEL_OK;
    }
    if (!stream && (st = keel__copy_refuse_capturing(s, fn)) != KEEL_OK)
        return st;
    for (size_t k = 0; k < b->depth && st == KEEL_OK; k++)
        st = enqueue_2d(s, &c, (char *)b->dst + k * b->dst_slice_pitch, b->dst_pitch,
                        (const char *)b->src + k * b->src_slice_pitch, b->src_pitch, b->width, b->height, fn);
    if (st == KEEL_OK && !stream)
        st = s->device->plugin->stream->synchronize(s->ctx);
    return st;
}

keel_status_t keel_memcpy_2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                             size_t height)
{
    keel_copy_3d_t b = {dst, dst_pitch, 0, src, src_pitch, 0, width, height, 1};
    return copy_box("keel_memcpy_2d", &b, NULL);
}

keel_status_t keel_memcpy_2d_async(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                                   size_t height, keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_memcpy_2d_async");
    keel_copy_3d_t b = {dst, dst_pitch, 0, src, src_pitch, 0, width, height, 1};
    return copy_box("keel_memcpy_2d_async", &b, stream);
}

keel_status_t keel_memcpy_3d(const keel_copy_3d_t *copy)
{
    if (!copy)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_memcpy_3d: copy is NULL");
    return copy_box("keel_memcpy_3d", copy, NULL);
}

keel_status_t keel_memcpy_3d_async(const keel_copy_3d_t *copy, keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_memcpy_3d_async");
    if (!copy)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_memcpy_3d_async: copy is NULL");
    return copy_box("keel_memcpy_3d_async", copy, stream);
}

static keel_status_t set_2d(const char *fn, void *ptr, size_t pitch, int value, size_t width, size_t height,
                            keel_stream_t *stream)
{
    if (!ptr)
        return keel__set_error(KEEL_ERROR_INVALID_POINTER, "%s: ptr is NULL", fn);
    if (width == 0 || height == 0)
        return KEEL_OK;
    size_t extent;
    if (!extent_2d(fn, "ptr", pitch, width, height, &extent))
        return keel_last_status();
    side_t t;
    keel_status_t st = keel__memset_target(fn, ptr, extent, &t);
    if (st != KEEL_OK)
        return st;
    struct keel_stream *s = stream ? stream : t.a.device->default_stream;
    if (stream ? (st = keel__memset_on_stream(fn, stream, ptr, &t)) != KEEL_OK
               : (st = keel__copy_refuse_capturing(s, fn)) != KEEL_OK)
        return st;
    const keel_memory_vtable_t *m = s->device->plugin->memory;
    keel_status_t (*two_d)(void *, void *, size_t, int, size_t, size_t) = KEEL__VT(m, memset_2d_async);
    if (pitch == width) {
        KEEL__FAULT_ENQUEUE(fn);
        st = m->memset_async(s->ctx, ptr, value, width * height);
    } else if (two_d) {
        KEEL__FAULT_ENQUEUE(fn);
        st = two_d(s->ctx, ptr, pitch, value, width, height);
    } else {
        for (size_t i = 0; i < height && st == KEEL_OK; i++) {
            KEEL__FAULT_ENQUEUE(fn);
            st = m->memset_async(s->ctx, (char *)ptr + i * pitch, value, width);
        }
    }
    if (st == KEEL_OK && !stream)
        st = s->device->plugin->stream->synchronize(s->ctx);
    return st;
}

keel_status_t keel_memset_2d(void *ptr, size_t pitch, int value, size_t width, size_t height)
{
    return set_2d("keel_memset_2d", ptr, pitch, value, width, height, NULL);
}

keel_status_t keel_memset_2d_async(void *ptr, size_t pitch, int value, size_t width, size_t height,
                                   keel_stream_t *stream)
{
    CHECK_STREAM(stream, "keel_memset_2d_async");
    return set_2d("keel_memset_2d_async", ptr, pitch, value, width, height, stream);
}
