/* SPDX-License-Identifier: MIT */
/* Public graph capture and replay. */
#include "runtime/internal.h"

#define STREAM(s, fn) KEEL__CHECK_HANDLE(s, KEEL__MAGIC_STREAM, fn, "stream")

static keel_status_t no_graphs(struct keel_device *d, const char *fn)
{
    return keel__set_error(KEEL_ERROR_NOT_SUPPORTED, "%s: the %s backend does not support graphs", fn, d->backend->name);
}

keel_status_t keel_stream_begin_capture(keel_stream_t *stream)
{
    STREAM(stream, "keel_stream_begin_capture");
    const keel_stream_vtable_t *sv = stream->device->plugin->stream;
    if (!sv->begin_capture || !stream->device->plugin->graph)
        return no_graphs(stream->device, "keel_stream_begin_capture");
    int expected = 0;
    if (!atomic_compare_exchange_strong(&stream->capturing, &expected, 1))
        return keel__set_error(KEEL_ERROR_BUSY, "keel_stream_begin_capture: the stream is already capturing");
    keel_status_t st = sv->begin_capture(stream->ctx);
    if (st != KEEL_OK)
        atomic_store(&stream->capturing, 0);
    return st;
}

keel_status_t keel_stream_end_capture(keel_stream_t *stream, keel_graph_t **graph)
{
    STREAM(stream, "keel_stream_end_capture");
    KEEL__CHECK_OUT(graph, "keel_stream_end_capture", "graph");
    if (!atomic_load(&stream->capturing))
        return keel__set_error(KEEL_ERROR_INVALID_ARGUMENT, "keel_stream_end_capture: the stream is not capturing");
    struct keel_graph *g = keel__handle_alloc(KEEL__MAGIC_GRAPH, sizeof(*g));
    if (!g)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_end_capture: out of host memory");
    void *ctx = NULL;
    keel_status_t st = stream->device->plugin->stream->end_capture(stream->ctx, &ctx);
    atomic_store(&stream->capturing, 0);
    if (st != KEEL_OK) {
        keel__handle_release(g);
        return st;
    }
    g->device = stream->device;
    g->ctx = ctx;
    *graph = g;
    return KEEL_OK;
}

keel_status_t keel_stream_is_capturing(keel_stream_t *stream, int *capturing)
{
    STREAM(stream, "keel_stream_is_capturing");
    KEEL__CHECK_OUT(capturing, "keel_stream_is_capturing", "capturing");
    *capturing = atomic_load(&stream->capturing);
    return KEEL_OK;
}

keel_status_t keel_graph_instantiate(keel_graph_t *graph, keel_graph_exec_t **exec)
{
    KEEL__CHECK_HANDLE(graph, KEEL__MAGIC_GRAPH, "keel_graph_instantiate", "graph");
    KEEL__CHECK_OUT(exec, "keel_graph_instantiate", "exec");
    struct keel_graph_exec *x = keel__handle_alloc(KEEL__MAGIC_GRAPH_EXEC, sizeof(*x));
    if (!x)
        return keel__set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_graph_instantiate: out of host memory");
    void *ctx = NULL;
    keel_status_t st = graph->device->plugin->graph->instantiate(graph->ctx, &ctx);
    if (st != KEEL_OK) {
        keel__handle_release(x);
        return st;
    }
    x->device = graph->device;
    x->ctx = ctx;
    *exec = x;
    return KEEL_OK;
}

keel_status_t keel_graph_launch(keel_graph_exec_t *exec, keel_stream_t *stream)
{
    KEEL__CHECK_HANDLE(exec, KEEL__MAGIC_GRAPH_EXEC, "keel_graph_launch", "graph exec");
    STREAM(stream, "keel_graph_launch");
    if (KEEL__UNLIKELY(exec->device != stream->device))
        return keel__set_error(KEEL_ERROR_DEVICE_MISMATCH, "keel_graph_launch: the graph is of %s, the stream of %s",
                               exec->device->name, stream->device->name);
    KEEL__FAULT_ENQUEUE("keel_graph_launch");
    return exec->device->plugin->graph->launch(exec->ctx, stream->ctx);
}

keel_status_t keel_graph_destroy(keel_graph_t *graph)
{
    KEEL__CHECK_HANDLE(graph, KEEL__MAGIC_GRAPH, "keel_graph_destroy", "graph");
    return keel__graph_forget(graph, 1);
}

keel_status_t keel__graph_forget(struct keel_graph *graph, int backend)
{
    keel_status_t st = backend ? graph->device->plugin->graph->destroy(graph->ctx) : KEEL_OK;
    keel__handle_release(graph);
    return st;
}

keel_status_t keel_graph_exec_destroy(keel_graph_exec_t *exec)
{
    KEEL__CHECK_HANDLE(exec, KEEL__MAGIC_GRAPH_EXEC, "keel_graph_exec_destroy", "graph exec");
    return keel__graph_exec_forget(exec, 1);
}

keel_status_t keel__graph_exec_forget(struct keel_graph_exec *exec, int backend)
{
    keel_status_t st = backend ? exec->device->plugin->graph->exec_destroy(exec->ctx) : KEEL_OK;
    keel__handle_release(exec);
    return st;
}
