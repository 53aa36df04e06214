/* SPDX-License-Identifier: MIT */
/* Graphs: the vendor's graphs captured from a stream (gpu_stream.c),
 * instantiated and replayed. */
#include <stdlib.h>
#include "gpu_internal.h"

static keel_status_t graph_instantiate(void *graph_ctx, void **exec_ctx)
{
    keel__gpu_graph_t *g = graph_ctx;
    keel__gpu_graph_exec_t *x = calloc(1, sizeof *x);
    if (x == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "keel_graph_instantiate: no host memory");
    /* Auto-free on launch: a graph that captured keel_malloc_async without
     * the matching free can still be replayed. */
    gpuError_t err = keel__gpu_use_device(g->dev);
    if (err == gpuSuccess)
        err = KEEL_GPU_TRY(gpuGraphInstantiate(&x->exec, g->graph));
    if (err != gpuSuccess) {
        free(x);
        return keel__gpu_error(err, "keel_graph_instantiate", NULL);
    }
    x->dev = g->dev;
    *exec_ctx = x;
    return KEEL_OK;
}

static keel_status_t graph_launch(void *exec_ctx, void *stream_ctx)
{
    keel__gpu_graph_exec_t *x = exec_ctx;
    keel__gpu_stream_t *s = stream_ctx;
    gpuError_t err = KEEL_GPU_TRY(gpuGraphLaunch(x->exec, s->stream));
    keel__gpu_stream_touch(s);
    if (KEEL_GPU_UNLIKELY(err != gpuSuccess))
        return keel__gpu_error(err, "keel_graph_launch", NULL);
    return KEEL_OK;
}

static keel_status_t graph_destroy(void *graph_ctx)
{
    keel__gpu_graph_t *g = graph_ctx;
    gpuError_t err = gpuGraphDestroy(g->graph);
    free(g);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_graph_destroy", NULL);
    return KEEL_OK;
}

static keel_status_t graph_exec_destroy(void *exec_ctx)
{
    keel__gpu_graph_exec_t *x = exec_ctx;
    gpuError_t err = gpuGraphExecDestroy(x->exec);
    free(x);
    if (err != gpuSuccess)
        return keel__gpu_error(err, "keel_graph_exec_destroy", NULL);
    return KEEL_OK;
}

const keel_graph_vtable_t keel__gpu_graph_vtable = {
    .struct_size = sizeof(keel_graph_vtable_t),
    .instantiate = graph_instantiate,
    .launch = graph_launch,
    .destroy = graph_destroy,
    .exec_destroy = graph_exec_destroy,
};
