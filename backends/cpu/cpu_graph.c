/* SPDX-License-Identifier: MIT */
/* Graphs: a capture is the list of command records the stream would have
 * run; instantiating copies it; a launch enqueues a copy of every record on
 * the stream, in order and without other work in between, as if the calls
 * had been made again. Event records and waits take their generation at
 * launch, so a replay moves events as the original calls would have. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

cpu_graph_t *keel__cpu_graph_new(cpu_device_t *dev)
{
    cpu_graph_t *g = keel__calloc(1, sizeof *g);
    if (g)
        g->dev = dev;
    return g;
}

void keel__cpu_graph_free(cpu_graph_t *g)
{
    cpu_cmd_t *c = g->head;
    while (c) {
        cpu_cmd_t *next = c->next;
        keel__cpu_cmd_release_refs(c);
        keel__cpu_cmd_free(c);
        c = next;
    }
    free(g);
}

/* Copies the fields and data of src into dst, whose data room is ready. */
static void cpu_cmd_copy(cpu_cmd_t *dst, const cpu_cmd_t *src)
{
    dst->type = src->type;
    dst->u = src->u;
    if (src->data_size)
        memcpy(dst->data, src->data, src->data_size);
}

static keel_status_t cpu_graph_instantiate(void *graph_ctx, void **exec_ctx)
{
    cpu_graph_t *g = graph_ctx;
    cpu_graph_t *x = keel__cpu_graph_new(g->dev);
    if (!x)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_graph_instantiate: out of memory");
    for (const cpu_cmd_t *c = g->head; c; c = c->next) {
        cpu_cmd_t *n = keel__malloc(sizeof *n);
        if (n) {
            n->heap = NULL;
            n->heap_cap = 0;
        }
        if (!n || keel__cpu_cmd_reserve(n, c->data_size) != 0) {
            free(n);
            keel__cpu_graph_free(x);
            return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_graph_instantiate: out of memory copying %zu commands",
                           g->count);
        }
        cpu_cmd_copy(n, c);
        n->next = NULL;
        if (n->type == CPU_CMD_RECORD || n->type == CPU_CMD_WAIT)
            keel__cpu_event_ref(n->u.ev.event);
        if (x->tail)
            x->tail->next = n;
        else
            x->head = n;
        x->tail = n;
        x->count++;
    }
    *exec_ctx = x;
    return KEEL_OK;
}

static keel_status_t cpu_graph_launch(void *exec_ctx, void *stream_ctx)
{
    cpu_graph_t *x = exec_ctx;
    cpu_stream_t *s = stream_ctx;
    pthread_mutex_lock(&s->lock);
    /* Take every record first: an out-of-memory leaves nothing half enqueued. */
    cpu_cmd_t *head = NULL, *tail = NULL;
    for (const cpu_cmd_t *c = x->head; c; c = c->next) {
        cpu_cmd_t *n = keel__cpu_cmd_get(s, c->data_size);
        /* A record's generation must be tracked until it is done: promise the
         * room now, so that taking generations below cannot fail. Every
         * record promises, capturing or not: a capture may begin or end
         * while keel__cpu_cmd_get waits for room in the queue. */
        if (n && c->type == CPU_CMD_RECORD && keel__cpu_event_reserve(c->u.ev.event) != 0) {
            n->next = s->free_list;
            s->free_list = n;
            n = NULL;
        }
        if (!n) {
            while (head) {
                cpu_cmd_t *next = head->next;
                if (head->type == CPU_CMD_RECORD)
                    keel__cpu_event_unreserve(head->u.ev.event);
                head->next = s->free_list;
                s->free_list = head;
                head = next;
            }
            pthread_mutex_unlock(&s->lock);
            return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_graph_launch: cpu:%d: out of memory for %zu commands",
                           s->dev->index, x->count);
        }
        cpu_cmd_copy(n, c);
        n->next = NULL;
        if (tail)
            tail->next = n;
        else
            head = n;
        tail = n;
    }
    while (head) {
        cpu_cmd_t *n = head;
        head = n->next;
        if (n->type == CPU_CMD_RECORD || n->type == CPU_CMD_WAIT) {
            cpu_event_t *e = n->u.ev.event;
            keel__cpu_event_ref(e);
            if (s->capture) {
                n->u.ev.gen = 0;   /* launched into another capture: resolved at that graph's launch */
                if (n->type == CPU_CMD_RECORD)
                    keel__cpu_event_unreserve(e);
            } else if (n->type == CPU_CMD_RECORD)
                n->u.ev.gen = keel__cpu_event_next_gen_reserved(e);
            else
                n->u.ev.gen = keel__cpu_event_current_gen(e);
        }
        keel__cpu_cmd_push_locked(s, n);
    }
    pthread_mutex_unlock(&s->lock);
    return KEEL_OK;
}

static keel_status_t cpu_graph_destroy(void *graph_ctx)
{
    keel__cpu_graph_free(graph_ctx);
    return KEEL_OK;
}

static keel_status_t cpu_graph_exec_destroy(void *exec_ctx)
{
    keel__cpu_graph_free(exec_ctx);
    return KEEL_OK;
}

const keel_graph_vtable_t keel__cpu_graph_vtable = {
    .struct_size = sizeof(keel_graph_vtable_t),
    .instantiate = cpu_graph_instantiate,
    .launch = cpu_graph_launch,
    .destroy = cpu_graph_destroy,
    .exec_destroy = cpu_graph_exec_destroy,
};
