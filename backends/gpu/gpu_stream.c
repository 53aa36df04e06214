/* SPDX-License-Identifier: MIT */
/* Streams, events, host callbacks (gpu_hostfn.c) and graph capture on a
 * stream, for both GPU plugins. */
#include <stdlib.h>
#include "gpu_internal.h"

static keel_status_t stream_create(void *device_ctx, unsigned flags, int priority, void **stream_ctx)
{
    (void)flags;
    keel__gpu_device_t *dev = device_ctx;
    keel__gpu_stream_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_create: no host memory");
    /* Non-blocking: Keel streams, the default one included, never order
     * themselves implicitly with each other or CUDA's legacy stream. */
    gpuError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(gpuStreamCreateWithPriority(&s->stream, gpuStreamNonBlocking, priority));
    if (err != gpuSuccess) {
        free(s);
        return keel__gpu_error(err, "keel_stream_create", NULL);
    }
    s->dev = dev;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->bounce_lock, NULL);
    *stream_ctx = s;
    return KEEL_OK;
}

static keel_status_t stream_destroy(void *stream_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = gpuStreamSynchronize(s->stream);
    keel__gpu_blas_stream_release(s);
    keel__gpu_hostq_release(s);
    keel__gpu_bounce_release(s);
    gpuError_t err2 = gpuStreamDestroy(s->stream);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->bounce_lock);
    free(s);
    if (err == gpuSuccess)
        err = err2;
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_stream_destroy", NULL);
    return KEEL_OK;
}

static keel_status_t stream_synchronize(void *stream_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = gpuStreamSynchronize(s->stream);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_stream_synchronize", NULL);
    return KEEL_OK;
}

static keel_status_t stream_query(void *stream_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = gpuStreamQuery(s->stream);
    if (err == gpuSuccess)
        return KEEL_OK;
    if (err == gpuErrorNotReady) {
        (void)gpuGetLastError();
        return KEEL_ERROR_NOT_READY;
    }
    return keel__gpu_error(err, "keel_stream_query", NULL);
}

static keel_status_t stream_wait_event(void *stream_ctx, void *event_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_event_t *e = event_ctx;
    /* Works across devices too: CUDA events may be waited on by any device's stream. */
    gpuError_t err = KEEL_GPU_TRY(gpuStreamWaitEvent(s->stream, e->event, 0));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_stream_wait_event", NULL);
    return KEEL_OK;
}

static keel_status_t stream_launch_host_func(void *stream_ctx, keel_host_fn_t fn, void *user_data)
{
    return keel__gpu_launch_host_func(stream_ctx, fn, user_data);
}

static keel_status_t stream_begin_capture(void *stream_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    /* Relaxed: other threads' CUDA calls, and lazily made state such as a
     * BLAS handle's workspace allocated during the capture, stay legal. */
    gpuError_t err = gpuStreamBeginCapture(s->stream, gpuStreamCaptureModeRelaxed);
    keel__gpu_stream_touch(s);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_stream_begin_capture", NULL);
    return KEEL_OK;
}

static keel_status_t stream_end_capture(void *stream_ctx, void **graph_ctx)
{
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_graph_t *g = calloc(1, sizeof *g);
    gpuGraph_t graph = NULL;
    gpuError_t err = gpuStreamEndCapture(s->stream, &graph);
    keel__gpu_stream_touch(s);
    if (err != gpuSuccess || g == NULL) {
        free(g);
        if (err == gpuSuccess) {
            (void)gpuGraphDestroy(graph);
            return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_end_capture: no host memory");
        }
        return keel__gpu_error(err, "keel_stream_end_capture", NULL);
    }
    g->graph = graph;
    g->dev = s->dev;
    *graph_ctx = g;
    return KEEL_OK;
}

static keel_status_t stream_get_native(void *stream_ctx, uintptr_t *native)
{
    *native = (uintptr_t)((keel__gpu_stream_t *)stream_ctx)->stream;
    return KEEL_OK;
}

/* The other stream waits on an event recorded here, which can be destroyed
 * at once: the wait holds what it needs. The handle values 1 and 2 are the
 * runtime's own legacy and per-thread default streams. */
static keel_status_t stream_order_native(void *stream_ctx, uintptr_t native)
{
    keel__gpu_stream_t *s = stream_ctx;
    gpuEvent_t ev;
    gpuError_t err = keel__gpu_use_device(s->dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(gpuEventCreateWithFlags(&ev, gpuEventDisableTiming));
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_stream_order_native", NULL);
    err = KEEL_GPU_TRY(gpuEventRecord(ev, s->stream));
    keel__gpu_stream_touch(s);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(gpuStreamWaitEvent((gpuStream_t)native, ev, 0));
    gpuError_t err2 = gpuEventDestroy(ev);
    if (err == gpuSuccess)
        err = err2;
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_stream_order_native", NULL);
    return KEEL_OK;
}

const keel_stream_vtable_t keel__gpu_stream_vtable = {
    .struct_size = sizeof(keel_stream_vtable_t),
    .create = stream_create,
    .destroy = stream_destroy,
    .synchronize = stream_synchronize,
    .query = stream_query,
    .wait_event = stream_wait_event,
    .launch_host_func = stream_launch_host_func,
    .begin_capture = stream_begin_capture,
    .end_capture = stream_end_capture,
    .get_native = stream_get_native,
    .order_native = stream_order_native,
};

/* ---- events ---- */

static keel_status_t event_create(void *device_ctx, unsigned flags, void **event_ctx)
{
    keel__gpu_device_t *dev = device_ctx;
    keel__gpu_event_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_event_create: no host memory");
    unsigned cf = gpuEventDefault;
    if (flags & KEEL_EVENT_DISABLE_TIMING)
        cf |= gpuEventDisableTiming;
    if (flags & KEEL_EVENT_BLOCKING_SYNC)
        cf |= gpuEventBlockingSync;
    gpuError_t err = keel__gpu_use_device(dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(gpuEventCreateWithFlags(&e->event, cf));
    if (err != gpuSuccess) {
        free(e);
        return keel__gpu_error(err, "keel_event_create", NULL);
    }
    e->dev = dev;
    e->flags = flags;
    *event_ctx = e;
    return KEEL_OK;
}

static keel_status_t event_destroy(void *event_ctx)
{
    keel__gpu_event_t *e = event_ctx;
    /* CUDA defers the release until pending waits on the event are done. */
    gpuError_t err = gpuEventDestroy(e->event);
    free(e);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_event_destroy", NULL);
    return KEEL_OK;
}

static keel_status_t event_record(void *event_ctx, void *stream_ctx)
{
    keel__gpu_event_t *e = event_ctx;
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = KEEL_GPU_TRY(gpuEventRecord(e->event, s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_event_record", NULL);
    if (!atomic_load_explicit(&e->recorded, memory_order_relaxed))
        atomic_store_explicit(&e->recorded, 1, memory_order_release);
    return KEEL_OK;
}

static keel_status_t event_synchronize(void *event_ctx)
{
    keel__gpu_event_t *e = event_ctx;
    gpuError_t err = gpuEventSynchronize(e->event);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_event_synchronize", NULL);
    return KEEL_OK;
}

static keel_status_t event_query(void *event_ctx)
{
    keel__gpu_event_t *e = event_ctx;
    gpuError_t err = gpuEventQuery(e->event);
    if (err == gpuSuccess)
        return KEEL_OK;
    if (err == gpuErrorNotReady) {
        (void)gpuGetLastError();
        return KEEL_ERROR_NOT_READY;
    }
    return keel__gpu_error(err, "keel_event_query", NULL);
}

static keel_status_t event_elapsed_time(void *start_ctx, void *end_ctx, float *ms)
{
    const char *fn = "keel_event_elapsed_time";
    keel__gpu_event_t *a = start_ctx, *b = end_ctx;
    if ((a->flags | b->flags) & KEEL_EVENT_DISABLE_TIMING)
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT,
                                         "%s: the %s event was created with KEEL_EVENT_DISABLE_TIMING", fn,
                                         (a->flags & KEEL_EVENT_DISABLE_TIMING) ? "start" : "end");
    if (!atomic_load_explicit(&a->recorded, memory_order_acquire) ||
        !atomic_load_explicit(&b->recorded, memory_order_acquire))
        return keel__gpu_host->set_error(KEEL_ERROR_INVALID_ARGUMENT, "%s: the %s event was never recorded", fn,
                                         atomic_load(&a->recorded) ? "end" : "start");
    if (a->dev != b->dev)
        return keel__gpu_host->set_error(KEEL_ERROR_DEVICE_MISMATCH,
                                         "%s: events of " KEEL_GPU_DEVICE_FMT " and " KEEL_GPU_DEVICE_FMT, fn,
                                         a->dev->ordinal, b->dev->ordinal);
    float v = 0.0f;
    gpuError_t err = gpuEventElapsedTime(&v, a->event, b->event);
    if (err == gpuErrorNotReady) {
        (void)gpuGetLastError();
        return keel__gpu_host->set_error(KEEL_ERROR_NOT_READY, "%s: an event is still pending", fn);
    }
    if (err != gpuSuccess)
        return keel__gpu_error(err, fn, NULL);
    *ms = v;
    return KEEL_OK;
}

const keel_event_vtable_t keel__gpu_event_vtable = {
    .struct_size = sizeof(keel_event_vtable_t),
    .create = event_create,
    .destroy = event_destroy,
    .record = event_record,
    .synchronize = event_synchronize,
    .query = event_query,
    .elapsed_time = event_elapsed_time,
};
