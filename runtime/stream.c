/* SPDX-License-Identifier: MIT */
/* Public streams, events and host callbacks: handle checks, then the backend. */
#include <stdio.h>
#include "runtime/internal.h"

#define STREAM(s, fn) KEEL__CHECK_HANDLE(s, KEEL__MAGIC_STREAM, fn, "stream")
#define EVENT(e, fn) KEEL__CHECK_HANDLE(e, KEEL__MAGIC_EVENT, fn, "event")

keel_status_t keel_stream_create(keel_device_t *device, unsigned flags, int priority, keel_stream_t **stream)
{
    keel_status_t st = keel__device_ready(device, "keel_stream_create");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(stream, "keel_stream_create", "stream");
    if (flags != 0)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_stream_create: unknown flags 0x%x (only 0 is valid)",
                               flags);
    int least = 0, greatest = 0;
    if (device->plugin->device->stream_priority_range)
        device->plugin->device->stream_priority_range(device->ctx, &least, &greatest);
    /* Lower numbers are higher priority: clamp into [greatest, least]. */
    if (priority < greatest)
        priority = greatest;
    if (priority > least)
        priority = least;
    struct keel_stream *s = keel__handle_alloc(KEEL__MAGIC_STREAM, sizeof(*s));
    if (!s)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_create: out of host memory");
    void *ctx = NULL;
    st = device->plugin->stream->create(device->ctx, flags, priority, &ctx);
    if (st != KEEL_OK) {
        keel__handle_release(s);
        return st;
    }
    s->device = device;
    s->ctx = ctx;
    s->priority = priority;
    *stream = s;
    return KEEL_OK;
}

keel_status_t keel_stream_destroy(keel_stream_t *stream)
{
    STREAM(stream, "keel_stream_destroy");
    if (stream->is_default)
        return keel__set_error(KEEL_ERROR_INVALID_HANDLE,
                               "keel_stream_destroy: the default stream of %s belongs to Keel and cannot be destroyed",
                               stream->device->name);
    if (atomic_load(&stream->capturing))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_stream_destroy: the stream is capturing a graph; end the capture first");
    /* The block kept for reuse goes back first, ordered on this stream. */
    keel_status_t st = keel__reuse_drop(stream);
    if (st != KEEL_OK)
        return keel__prefix_error(st, "keel_stream_destroy: freeing the block kept for reuse on the stream");
    st = stream->device->plugin->stream->destroy(stream->ctx);
    if (st == KEEL_ERROR_BUSY) /* refused (e.g. from its own host function): the stream lives on */
        return st;
    keel__handle_release(stream);
    return st;
}

void keel__stream_forget(struct keel_stream *stream, int backend)
{
    const keel_stream_vtable_t *sv = stream->device->plugin->stream;
    if (backend) {
        if (atomic_load(&stream->capturing) && sv->end_capture) {
            /* The capture is abandoned: its graph never reaches a handle. */
            void *g = NULL;
            if (sv->end_capture(stream->ctx, &g) == KEEL_OK && g && stream->device->plugin->graph)
                stream->device->plugin->graph->destroy(g);
            atomic_store(&stream->capturing, 0);
        }
        keel_status_t st = sv->destroy(stream->ctx);
        if (st != KEEL_OK)
            keel__log(KEEL_LOG_WARN, "keel_finalize: a stream of %s: %s (%s)", stream->device->name,
                      keel_status_name(st), keel_last_error());
    }
    keel__handle_release(stream);
}

keel_status_t keel_device_default_stream(keel_device_t *device, keel_stream_t **stream)
{
    keel_status_t st = keel__device_ready(device, "keel_device_default_stream");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(stream, "keel_device_default_stream", "stream");
    *stream = device->default_stream;
    return KEEL_OK;
}

keel_status_t keel_device_stream_priority_range(keel_device_t *device, int *least, int *greatest)
{
    keel_status_t st = keel__device_ready(device, "keel_device_stream_priority_range");
    if (st != KEEL_OK)
        return st;
    int l = 0, g = 0;
    if (device->plugin->device->stream_priority_range &&
        (st = device->plugin->device->stream_priority_range(device->ctx, &l, &g)) != KEEL_OK)
        return st;
    if (least)
        *least = l;
    if (greatest)
        *greatest = g;
    return KEEL_OK;
}

keel_status_t keel_stream_synchronize(keel_stream_t *stream)
{
    STREAM(stream, "keel_stream_synchronize");
    if (atomic_load_explicit(&stream->capturing, memory_order_relaxed))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_stream_synchronize: the stream is capturing a graph");
    return stream->device->plugin->stream->synchronize(stream->ctx);
}

keel_status_t keel_stream_query(keel_stream_t *stream)
{
    STREAM(stream, "keel_stream_query");
    return stream->device->plugin->stream->query(stream->ctx);
}

keel_status_t keel_stream_get_device(keel_stream_t *stream, keel_device_t **device)
{
    STREAM(stream, "keel_stream_get_device");
    KEEL__CHECK_OUT(device, "keel_stream_get_device", "device");
    *device = stream->device;
    return KEEL_OK;
}

keel_status_t keel_stream_get_priority(keel_stream_t *stream, int *priority)
{
    STREAM(stream, "keel_stream_get_priority");
    KEEL__CHECK_OUT(priority, "keel_stream_get_priority", "priority");
    *priority = stream->priority;
    return KEEL_OK;
}

keel_status_t keel_stream_wait_event(keel_stream_t *stream, keel_event_t *event)
{
    STREAM(stream, "keel_stream_wait_event");
    EVENT(event, "keel_stream_wait_event");
    if (event->device->backend != stream->device->backend)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH,
                               "keel_stream_wait_event: the event is of %s and the stream of %s; waits cross devices "
                               "of one backend only (synchronize the event on the host instead)",
                               event->device->name, stream->device->name);
    KEEL__FAULT_ENQUEUE("keel_stream_wait_event");
    return stream->device->plugin->stream->wait_event(stream->ctx, event->ctx);
}

keel_status_t keel_stream_launch_host_func(keel_stream_t *stream, keel_host_fn_t fn, void *user_data)
{
    STREAM(stream, "keel_stream_launch_host_func");
    if (!fn)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_stream_launch_host_func: fn is NULL");
    KEEL__FAULT_ENQUEUE("keel_stream_launch_host_func");
    return stream->device->plugin->stream->launch_host_func(stream->ctx, fn, user_data);
}

keel_status_t keel_event_create(keel_device_t *device, unsigned flags, keel_event_t **event)
{
    keel_status_t st = keel__device_ready(device, "keel_event_create");
    if (st != KEEL_OK)
        return st;
    KEEL__CHECK_OUT(event, "keel_event_create", "event");
    if (flags & ~(unsigned)(KEEL_EVENT_DISABLE_TIMING | KEEL_EVENT_BLOCKING_SYNC))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_event_create: unknown flags 0x%x", flags);
    struct keel_event *e = keel__handle_alloc(KEEL__MAGIC_EVENT, sizeof(*e));
    if (!e)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_event_create: out of host memory");
    void *ctx = NULL;
    st = device->plugin->event->create(device->ctx, flags, &ctx);
    if (st != KEEL_OK) {
        keel__handle_release(e);
        return st;
    }
    e->device = device;
    e->ctx = ctx;
    e->flags = flags;
    *event = e;
    return KEEL_OK;
}

keel_status_t keel_event_destroy(keel_event_t *event)
{
    EVENT(event, "keel_event_destroy");
    return keel__event_forget(event, 1);
}

keel_status_t keel__event_forget(struct keel_event *event, int backend)
{
    keel_status_t st = backend ? event->device->plugin->event->destroy(event->ctx) : KEEL_OK;
    keel__handle_release(event);
    return st;
}

keel_status_t keel_event_record(keel_event_t *event, keel_stream_t *stream)
{
    EVENT(event, "keel_event_record");
    STREAM(stream, "keel_event_record");
    if (event->device != stream->device)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_event_record: the event is of %s, the stream of %s",
                               event->device->name, stream->device->name);
    KEEL__FAULT_ENQUEUE("keel_event_record");
    return stream->device->plugin->event->record(event->ctx, stream->ctx);
}

keel_status_t keel_event_synchronize(keel_event_t *event)
{
    EVENT(event, "keel_event_synchronize");
    return event->device->plugin->event->synchronize(event->ctx);
}

keel_status_t keel_event_query(keel_event_t *event)
{
    EVENT(event, "keel_event_query");
    return event->device->plugin->event->query(event->ctx);
}

keel_status_t keel_event_elapsed_time(keel_event_t *start, keel_event_t *end, float *ms)
{
    EVENT(start, "keel_event_elapsed_time");
    EVENT(end, "keel_event_elapsed_time");
    KEEL__CHECK_OUT(ms, "keel_event_elapsed_time", "ms");
    if (start->device != end->device)
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_event_elapsed_time: events of %s and %s",
                               start->device->name, end->device->name);
    if ((start->flags | end->flags) & KEEL_EVENT_DISABLE_TIMING)
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT,
                               "keel_event_elapsed_time: an event was created with KEEL_EVENT_DISABLE_TIMING");
    float v = 0;
    keel_status_t st = start->device->plugin->event->elapsed_time(start->ctx, end->ctx, &v);
    if (st == KEEL_OK)
        *ms = v;
    return st;
}

keel_status_t keel_stream_get_native(keel_stream_t *stream, uintptr_t *native)
{
    STREAM(stream, "keel_stream_get_native");
    KEEL__CHECK_OUT(native, "keel_stream_get_native", "native");
    const keel_stream_vtable_t *v = stream->device->plugin->stream;
    keel_status_t (*get_native)(void *, uintptr_t *) = KEEL__VT(v, get_native);
    if (!get_native)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "keel_stream_get_native: the %s backend has no native streams",
                               stream->device->backend->name);
    return get_native(stream->ctx, native);
}

keel_status_t keel_stream_order_native(keel_stream_t *stream, uintptr_t native)
{
    STREAM(stream, "keel_stream_order_native");
    const keel_stream_vtable_t *v = stream->device->plugin->stream;
    keel_status_t (*order_native)(void *, uintptr_t) = KEEL__VT(v, order_native);
    if (!order_native)
        return keel__set_error(KEEL_ERROR_NOT_SUPPORTED,
                               "keel_stream_order_native: the %s backend has no native streams to order",
                               stream->device->backend->name);
    return order_native(stream->ctx, native);
}
