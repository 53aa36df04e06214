/* SPDX-License-Identifier: MIT */
/* Streams: one worker thread each, running a queue of command records in
 * order. Records are recycled through a per-stream free list, so a steady
 * stream of work allocates nothing. While a stream captures, records go to
 * the capture graph instead of the queue. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>

#include "backends/cpu/cpu_enqueue.h"
#include "backends/cpu/cpu_internal.h"

_Thread_local cpu_stream_t *keel__cpu_tls_stream;

/* ---- records ---- */

int keel__cpu_cmd_reserve(cpu_cmd_t *c, size_t data_bytes)
{
    c->data_size = data_bytes;
    if (data_bytes <= sizeof c->inline_buf) {
        c->data = c->inline_buf;
        return 0;
    }
    if (c->heap_cap < data_bytes) {
        unsigned char *nb = keel__aligned_alloc(16, (data_bytes + 15) & ~(size_t)15);
        if (!nb)
            return -1;
        free(c->heap);
        c->heap = nb;
        c->heap_cap = data_bytes;
    }
    c->data = c->heap;
    return 0;
}

void keel__cpu_cmd_free(cpu_cmd_t *c)
{
    free(c->heap);
    free(c);
}

/* Lock held: a thread about to wait on idle_cv asks to be woken when
 * completed reaches target. */
static void cpu_wake_at_locked(cpu_stream_t *s, uint64_t target)
{
    if (!s->wake_at || target < s->wake_at)
        s->wake_at = target;
}

/* Lock held: wakes the threads on idle_cv (they register again if their
 * target is further). */
static void cpu_wake_all_locked(cpu_stream_t *s)
{
    s->wake_at = 0;
    pthread_cond_broadcast(&s->idle_cv);
}

cpu_cmd_t *keel__cpu_cmd_get(cpu_stream_t *s, size_t data_bytes)
{
    /* The worker itself never waits: it is the one that makes room. */
    if (!s->capture &&
        atomic_load_explicit(&s->submitted, memory_order_relaxed) -
                atomic_load_explicit(&s->completed, memory_order_relaxed) >= KEEL_CPU_QUEUE_DEPTH &&
        !pthread_equal(pthread_self(), s->thread)) {
        /* seq_cst against an inline run's completed bump and its read of
         * idle_waiters: one of the two sees the other (no lost wakeup). */
        atomic_fetch_add(&s->idle_waiters, 1);
        while (!s->capture && atomic_load(&s->submitted) - atomic_load(&s->completed) >= KEEL_CPU_QUEUE_DEPTH) {
            if (KEEL__UNLIKELY(keel__cpu_check))   /* held-back work must run to make room */
                keel__cpu_check_release(s, atomic_load(&s->submitted));
            cpu_wake_at_locked(s, atomic_load(&s->submitted) - KEEL_CPU_QUEUE_DEPTH + 1);
            pthread_cond_wait(&s->idle_cv, &s->lock);
        }
        atomic_fetch_sub(&s->idle_waiters, 1);
    }
    /* KEEL_FAULT stream-enqueue: the command is refused as when no record
     * can be had, which every caller reports as out of memory. */
    if (KEEL__FAULT(KEEL_FAULT_STREAM_ENQUEUE))
        return NULL;
    cpu_cmd_t *c = s->free_list;
    if (c)
        s->free_list = c->next;
    else if (!(c = keel__malloc(sizeof *c)))
        return NULL;
    else {
        c->heap = NULL;
        c->heap_cap = 0;
    }
    c->next = NULL;
    if (keel__cpu_cmd_reserve(c, data_bytes) != 0) {
        c->next = s->free_list;
        s->free_list = c;
        return NULL;
    }
    return c;
}

void keel__cpu_cmd_release_refs(cpu_cmd_t *c)
{
    if (c->type == CPU_CMD_RECORD || c->type == CPU_CMD_WAIT)
        keel__cpu_event_unref(c->u.ev.event);
}

cpu_cmd_t *keel__cpu_cmd_begin(cpu_stream_t *s, int type, size_t data_bytes, const char *fn)
{
    pthread_mutex_lock(&s->lock);
    cpu_cmd_t *c = keel__cpu_cmd_get(s, data_bytes);
    if (!c) {
        pthread_mutex_unlock(&s->lock);
        CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "%s: cpu:%d: out of memory for a command of %zu bytes", fn, s->dev->index,
                data_bytes);
        return NULL;
    }
    c->type = type;
    return c;
}

void keel__cpu_cmd_push_locked(cpu_stream_t *s, cpu_cmd_t *c)
{
    c->next = NULL;
    if (s->capture) {
        cpu_graph_t *g = s->capture;
        if (g->tail)
            g->tail->next = c;
        else
            g->head = c;
        g->tail = c;
        g->count++;
        return;
    }
    if (s->tail)
        s->tail->next = c;
    else
        s->head = c;
    s->tail = c;
    /* An RMW: an inline run may take a ticket at the same time, without the lock. */
    c->ticket = atomic_fetch_add_explicit(&s->submitted, 1, memory_order_acq_rel) + 1;
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_queued(s, c);
    if (s->worker_sleeping)
        pthread_cond_signal(&s->work_cv);
}

void keel__cpu_cmd_commit(cpu_stream_t *s, cpu_cmd_t *c)
{
    keel__cpu_cmd_push_locked(s, c);
    pthread_mutex_unlock(&s->lock);
}

void keel__cpu_cmd_cancel(cpu_stream_t *s, cpu_cmd_t *c)
{
    c->next = s->free_list;
    s->free_list = c;
    pthread_mutex_unlock(&s->lock);
}

/* ---- the worker ---- */

/* Keeps the first failure for the next synchronize: the worker has no caller to return it to. */
void keel__cpu_stream_fail(cpu_stream_t *s, keel_status_t status, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&s->lock);
    if (s->async_status == KEEL_OK) {
        s->async_status = status;
        va_start(ap, fmt);
        vsnprintf(s->async_msg, sizeof s->async_msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Set once, by the teardown at process exit: commands that have not started
 * are skipped from then on, but for what others wait on or what would leak:
 * an event's record completes it, a stream-ordered free frees. */
static atomic_int cpu_exiting;

static void cpu_cmd_run(cpu_stream_t *s, cpu_cmd_t *c);

/* Lock held: runs the queued commands as skipped ones (events complete,
 * blocks go back) and frees their records. */
static void cpu_stream_drop_queue_locked(cpu_stream_t *s)
{
    while (s->head) {
        cpu_cmd_t *c = s->head;
        s->head = c->next;
        cpu_cmd_run(s, c);
        keel__cpu_cmd_free(c);
        atomic_fetch_add(&s->completed, 1);
    }
    s->tail = NULL;
}

void keel__cpu_exit_begin(void)
{
    atomic_store(&cpu_exiting, 1);
    /* On a worker (exit from a host function), nobody else runs this
     * stream's queue: its event records complete now, so that other
     * streams waiting on them can go idle. */
    cpu_stream_t *own = keel__cpu_tls_stream;
    if (own) {
        pthread_mutex_lock(&own->lock);
        cpu_stream_drop_queue_locked(own);
        pthread_mutex_unlock(&own->lock);
    }
}

static int cpu_cmd_skipped(const cpu_cmd_t *c)
{
    return KEEL__UNLIKELY(atomic_load_explicit(&cpu_exiting, memory_order_relaxed)) && c->type != CPU_CMD_RECORD &&
           c->type != CPU_CMD_FREE;
}

static void cpu_cmd_run(cpu_stream_t *s, cpu_cmd_t *c)
{
    switch (cpu_cmd_skipped(c) ? 0 : c->type) {
    case 0:
        break;
    case CPU_CMD_LAUNCH:
        keel__cpu_run_launch(s, c);
        break;
    case CPU_CMD_COPY:
        keel__cpu_copy(c->u.copy.dst, c->u.copy.src, c->u.copy.bytes);
        break;
    case CPU_CMD_SET:
        keel__cpu_set(c->u.set.dst, c->u.set.value, c->u.set.bytes);
        break;
    case CPU_CMD_HOST:
        c->u.host.fn(c->u.host.user_data);
        break;
    case CPU_CMD_RECORD:
        keel__cpu_event_complete(c->u.ev.event, c->u.ev.gen);
        break;
    case CPU_CMD_WAIT:
        if (KEEL__UNLIKELY(keel__cpu_check))   /* held back, the record would never come */
            keel__cpu_check_release_event(c->u.ev.event, c->u.ev.gen);
        keel__cpu_event_wait_gen(c->u.ev.event, c->u.ev.gen);
        break;
    case CPU_CMD_FREE:
        keel__cpu_mem_release(c->u.free.ptr);
        break;
    case CPU_CMD_CALL:
        c->u.call.fn(c->data);
        break;
    }
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_ran(s, c);
    keel__cpu_cmd_release_refs(c);
}

static uint64_t cpu_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Stream lock held. The command at the head took its ticket while an inline
 * run on another thread was in progress: stream order says it waits for that
 * run to end, which is when completed reaches 'before'. */
static void cpu_wait_inline_locked(cpu_stream_t *s, uint64_t before)
{
    pthread_mutex_unlock(&s->lock);
    keel__cpu_spin_reached(&s->completed, before);
    pthread_mutex_lock(&s->lock);
    while (atomic_load(&s->completed) < before) {
        /* seq_cst, as the inline run's bump and its read of the flag: one of
         * the two sees the other, and the run signals under the lock. */
        atomic_store(&s->worker_waits_inline, 1);
        if (atomic_load(&s->completed) < before)
            pthread_cond_wait(&s->work_cv, &s->lock);
        atomic_store(&s->worker_waits_inline, 0);
    }
}

static void *cpu_stream_main(void *p)
{
    cpu_stream_t *s = p;
    keel__cpu_tls_device = s->dev;
    keel__cpu_tls_pool_worker = 0;
    keel__cpu_tls_stream = s;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        /* An inline run moves submitted without queueing anything: spin on
         * (a while, not for ever) so that a command right after it still
         * finds the worker awake. */
        for (uint64_t t0 = 0; !s->head && !s->stop;) {
            uint64_t seen = atomic_load_explicit(&s->submitted, memory_order_relaxed);
            pthread_mutex_unlock(&s->lock);
            int changed = keel__cpu_spin_changed(&s->submitted, seen);
            uint64_t t = cpu_now_ns();
            pthread_mutex_lock(&s->lock);
            if (!t0)
                t0 = t;
            if (!changed || t - t0 > KEEL_CPU_SPIN_NS)
                break;
        }
        while (!s->head && !s->stop) {
            s->worker_sleeping = 1;
            pthread_cond_wait(&s->work_cv, &s->lock);
            s->worker_sleeping = 0;
        }
        cpu_cmd_t *c = s->head;
        if (!c)
            break;   /* stop, and the queue is drained */
        if (KEEL__UNLIKELY(keel__cpu_check))
            keel__cpu_check_gate(s, c->ticket);
        if (atomic_load_explicit(&s->completed, memory_order_acquire) + 1 < c->ticket)
            cpu_wait_inline_locked(s, c->ticket - 1);
        s->head = c->next;
        if (!s->head)
            s->tail = NULL;
        s->running = c;
        pthread_mutex_unlock(&s->lock);
        cpu_cmd_run(s, c);
        pthread_mutex_lock(&s->lock);
        s->running = NULL;
        c->next = s->free_list;
        s->free_list = c;
        uint64_t done = atomic_fetch_add_explicit(&s->completed, 1, memory_order_release) + 1;
        if (atomic_load_explicit(&s->idle_waiters, memory_order_relaxed) && s->wake_at && done >= s->wake_at)
            cpu_wake_all_locked(s);
    }
    pthread_mutex_unlock(&s->lock);
    keel__cpu_thread_scratch_free();
    return NULL;
}

/* ---- entries ---- */

static keel_status_t cpu_stream_create(void *device_ctx, unsigned flags, int priority, void **stream_ctx)
{
    cpu_device_t *d = device_ctx;
    cpu_stream_t *s = keel__calloc(1, sizeof *s);
    if (!s)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_create: cpu:%d: out of memory", d->index);
    s->dev = d;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    pthread_mutex_lock(&d->lock);
    s->id = d->next_stream_id++;
    if (keel__cpu_check)
        keel__cpu_check_stream_init(s);
    int rc = keel__pthread_create(&s->thread, NULL, cpu_stream_main, s);
    if (rc != 0) {
        pthread_mutex_unlock(&d->lock);
        if (keel__cpu_check)
            keel__cpu_check_stream_fini(s);
        pthread_cond_destroy(&s->work_cv);
        pthread_cond_destroy(&s->idle_cv);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return CPU_ERR(KEEL_ERROR_BACKEND, "keel_stream_create: cpu:%d: cannot start the stream's worker thread: %s",
                       d->index, strerror(rc));
    }
#ifdef __GLIBC__
    char name[32];
    snprintf(name, sizeof name, "keel-cpu%d-s%d", d->index, s->id);
    name[15] = '\0';   /* the kernel keeps 15 characters */
    pthread_setname_np(s->thread, name);
#endif
    s->next = d->streams;
    if (d->streams)
        d->streams->prev = s;
    d->streams = s;
    pthread_mutex_unlock(&d->lock);
    *stream_ctx = s;
    return KEEL_OK;
}

/* Waits for the work submitted before the call; reports (once) the first
 * asynchronous failure a command hit. */
keel_status_t keel__cpu_stream_sync(cpu_stream_t *s)
{
    keel_status_t st = KEEL_OK;
    uint64_t target = atomic_load_explicit(&s->submitted, memory_order_acquire);
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_release(s, target);
    keel__cpu_spin_reached(&s->completed, target);
    pthread_mutex_lock(&s->lock);
    if (atomic_load(&s->completed) < target) {
        atomic_fetch_add(&s->idle_waiters, 1);   /* seq_cst: see keel__cpu_inline_end */
        while (atomic_load(&s->completed) < target) {
            cpu_wake_at_locked(s, target);
            pthread_cond_wait(&s->idle_cv, &s->lock);
        }
        atomic_fetch_sub(&s->idle_waiters, 1);
    }
    if (s->async_status != KEEL_OK) {
        st = CPU_ERR(s->async_status, "%s", s->async_msg);
        s->async_status = KEEL_OK;
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* The teardown at exit, on the stream's own worker (a host function or a
 * kernel of the stream called exit): the worker never returns to its loop,
 * so it is not joined; what is queued is run as skipped commands are (events
 * complete, blocks go back) and every record is freed, the one running too. */
static void cpu_stream_abandon_locked(cpu_stream_t *s)
{
    s->stop = 1;
    cpu_stream_drop_queue_locked(s);
    if (s->running) {
        keel__cpu_cmd_free(s->running);
        s->running = NULL;
    }
    /* Threads synchronizing the stream see it done. */
    atomic_store(&s->completed, atomic_load(&s->submitted));
    cpu_wake_all_locked(s);
    pthread_detach(s->thread);
}

/* Waits until no thread is in keel__cpu_stream_sync or a full queue's wait
 * on s: the worker has finished, so each is about to leave. */
static void cpu_stream_wait_waiters(cpu_stream_t *s)
{
    pthread_mutex_lock(&s->lock);
    while (atomic_load(&s->idle_waiters) != 0) {
        pthread_cond_broadcast(&s->idle_cv);
        pthread_mutex_unlock(&s->lock);
        sched_yield();
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
}

void keel__cpu_stream_destroy_now(cpu_stream_t *s)
{
    cpu_device_t *d = s->dev;
    int own = keel__cpu_tls_stream == s;
    if (own) {
        pthread_mutex_lock(&s->lock);
        cpu_stream_abandon_locked(s);
        pthread_mutex_unlock(&s->lock);
        keel__cpu_tls_stream = NULL;
    }
    pthread_mutex_lock(&d->lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        d->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    /* A device synchronize may be waiting on this stream without the device
     * lock; it only waits for work already queued, which the worker runs. */
    while (s->sync_refs != 0)
        pthread_cond_wait(&d->sync_cv, &d->lock);
    pthread_mutex_unlock(&d->lock);

    if (!own) {
        if (keel__cpu_check)
            keel__cpu_check_release(s, UINT64_MAX);   /* the worker drains the queue */
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->work_cv);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
    }
    if (keel__cpu_check)
        keel__cpu_check_stream_fini(s);
    cpu_stream_wait_waiters(s);

    if (s->capture)
        keel__cpu_graph_free(s->capture);
    while (s->free_list) {
        cpu_cmd_t *c = s->free_list;
        s->free_list = c->next;
        keel__cpu_cmd_free(c);
    }
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->idle_cv);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The worker cannot join itself: a host function that destroys its own
 * stream is refused, and the stream stays whole. */
static keel_status_t cpu_stream_destroy(void *stream_ctx)
{
    cpu_stream_t *s = stream_ctx;
    if (keel__cpu_tls_stream == s && !atomic_load(&cpu_exiting))
        return CPU_ERR(KEEL_ERROR_BUSY, "keel_stream_destroy: called from a host function of this stream");
    keel__cpu_stream_destroy_now(s);
    return KEEL_OK;
}

static keel_status_t cpu_stream_synchronize(void *stream_ctx)
{
    cpu_stream_t *s = stream_ctx;
    if (keel__cpu_tls_stream == s)
        return CPU_ERR(KEEL_ERROR_BUSY,
                       "keel_stream_synchronize: called from a host function of this stream (it would wait for itself)");
    return keel__cpu_stream_sync(s);
}

static keel_status_t cpu_stream_query(void *stream_ctx)
{
    cpu_stream_t *s = stream_ctx;
    uint64_t target = atomic_load_explicit(&s->submitted, memory_order_acquire);
    if (KEEL__UNLIKELY(keel__cpu_check))   /* a query lets held-back work run, as a synchronize does */
        keel__cpu_check_release(s, target);
    int idle = atomic_load_explicit(&s->completed, memory_order_acquire) >= target;
    return idle ? KEEL_OK : KEEL_ERROR_NOT_READY;
}

static keel_status_t cpu_stream_wait_event(void *stream_ctx, void *event_ctx)
{
    cpu_stream_t *s = stream_ctx;
    cpu_event_t *e = event_ctx;
    pthread_mutex_lock(&s->lock);
    uint64_t gen = 0;
    if (!s->capture) {
        gen = keel__cpu_event_current_gen(e);
        if (gen == 0) {   /* never recorded: complete, nothing to wait for */
            pthread_mutex_unlock(&s->lock);
            return KEEL_OK;
        }
    }
    cpu_cmd_t *c = keel__cpu_cmd_get(s, 0);
    if (!c) {
        pthread_mutex_unlock(&s->lock);
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_wait_event: cpu:%d: out of memory", s->dev->index);
    }
    c->type = CPU_CMD_WAIT;
    keel__cpu_event_ref(e);
    c->u.ev.event = e;
    c->u.ev.gen = gen;
    keel__cpu_cmd_commit(s, c);
    return KEEL_OK;
}

static keel_status_t cpu_stream_launch_host_func(void *stream_ctx, keel_host_fn_t fn, void *user_data)
{
    cpu_stream_t *s = stream_ctx;
    cpu_cmd_t *c = keel__cpu_cmd_begin(s, CPU_CMD_HOST, 0, "keel_stream_launch_host_func");
    if (!c)
        return KEEL_ERROR_OUT_OF_MEMORY;
    c->u.host.fn = fn;
    c->u.host.user_data = user_data;
    keel__cpu_cmd_commit(s, c);
    return KEEL_OK;
}

static keel_status_t cpu_stream_begin_capture(void *stream_ctx)
{
    cpu_stream_t *s = stream_ctx;
    cpu_graph_t *g = keel__cpu_graph_new(s->dev);
    if (!g)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_stream_begin_capture: cpu:%d: out of memory", s->dev->index);
    pthread_mutex_lock(&s->lock);
    if (s->capture) {
        pthread_mutex_unlock(&s->lock);
        keel__cpu_graph_free(g);
        return CPU_ERR(KEEL_ERROR_BUSY, "keel_stream_begin_capture: the stream is already capturing");
    }
    s->capture = g;
    atomic_store(&s->capturing, 1);
    pthread_mutex_unlock(&s->lock);
    return KEEL_OK;
}

static keel_status_t cpu_stream_end_capture(void *stream_ctx, void **graph_ctx)
{
    cpu_stream_t *s = stream_ctx;
    pthread_mutex_lock(&s->lock);
    cpu_graph_t *g = s->capture;
    s->capture = NULL;
    atomic_store(&s->capturing, 0);
    pthread_mutex_unlock(&s->lock);
    if (!g)
        return CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "keel_stream_end_capture: the stream is not capturing");
    *graph_ctx = g;
    return KEEL_OK;
}

const keel_stream_vtable_t keel__cpu_stream_vtable = {
    .struct_size = sizeof(keel_stream_vtable_t),
    .create = cpu_stream_create,
    .destroy = cpu_stream_destroy,
    .synchronize = cpu_stream_synchronize,
    .query = cpu_stream_query,
    .wait_event = cpu_stream_wait_event,
    .launch_host_func = cpu_stream_launch_host_func,
    .begin_capture = cpu_stream_begin_capture,
    .end_capture = cpu_stream_end_capture,
};

/* ---- cpu_enqueue.h ---- */

keel_status_t keel__cpu_enqueue(void *stream_ctx, void (*fn)(void *payload), const void *payload,
                                size_t payload_size)
{
    cpu_stream_t *s = stream_ctx;
    if (payload_size > KEEL_CPU_ENQUEUE_MAX_PAYLOAD)
        return CPU_ERR(KEEL_ERROR_INTERNAL, "keel__cpu_enqueue: a payload of %zu bytes is over the limit of %d",
                       payload_size, KEEL_CPU_ENQUEUE_MAX_PAYLOAD);
    keel_status_t st;
    if (KEEL__UNLIKELY(keel__cpu_check) && (st = keel__cpu_check_op(s)) != KEEL_OK)
        return st;
    cpu_cmd_t *c = keel__cpu_cmd_begin(s, CPU_CMD_CALL, payload_size, "keel__cpu_enqueue");
    if (c) {
        c->u.call.fn = fn;
        if (payload_size)
            memcpy(c->data, payload, payload_size);
        keel__cpu_cmd_commit(s, c);
    }
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_disarm();
    return c ? KEEL_OK : KEEL_ERROR_OUT_OF_MEMORY;
}

/* ---- inline runs ---- */

/* Takes the stream's next ticket if, and only if, the stream is idle: nothing
 * queued, nothing running, no inline run in progress. submitted == completed
 * implies all three, and every earlier event wait is done too. Commands
 * enqueued while the run is in progress get later tickets, so the worker
 * holds them until keel__cpu_inline_end. */
int keel__cpu_inline_begin(cpu_stream_t *s)
{
    if (atomic_load_explicit(&s->capturing, memory_order_relaxed) || keel__cpu_check)
        return 0;   /* a capture records, it never runs; the checking mode holds work back */
    uint64_t done = atomic_load_explicit(&s->completed, memory_order_acquire);
    uint64_t expect = done;
    return atomic_compare_exchange_strong_explicit(&s->submitted, &expect, done + 1, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

void keel__cpu_inline_end(cpu_stream_t *s)
{
    /* seq_cst: pairs with the waiters' flag store then completed load. */
    atomic_fetch_add(&s->completed, 1);
    if (atomic_load(&s->worker_waits_inline) | atomic_load(&s->idle_waiters)) {
        pthread_mutex_lock(&s->lock);
        pthread_cond_signal(&s->work_cv);
        cpu_wake_all_locked(s);
        pthread_mutex_unlock(&s->lock);
    }
}

/* Runs fn(payload) on the calling thread as the stream's device would: the
 * thread-local device points parallel_for at the stream's pool (the caller
 * may be a user thread, or a worker of another device). */
static void cpu_inline_call(cpu_stream_t *s, void (*fn)(void *payload), void *payload)
{
    cpu_device_t *prev = keel__cpu_tls_device;
    keel__cpu_tls_device = s->dev;
    fn(payload);
    keel__cpu_tls_device = prev;
}

keel_status_t keel__cpu_enqueue_small(void *stream_ctx, void (*fn)(void *payload), void *payload,
                                      size_t payload_size)
{
    cpu_stream_t *s = stream_ctx;
    if (keel__cpu_inline_begin(s)) {
        cpu_inline_call(s, fn, payload);
        keel__cpu_inline_end(s);
        return KEEL_OK;
    }
    return keel__cpu_enqueue(stream_ctx, fn, payload, payload_size);
}

int keel__cpu_device_quiesce(void *device_ctx, const struct timespec *deadline)
{
    cpu_device_t *d = device_ctx;
    if (KEEL__UNLIKELY(keel__cpu_check)) {
        /* The checking mode holds work back until the host waits: let every
         * stream go (what it has not started is skipped). */
        pthread_mutex_lock(&d->lock);
        for (cpu_stream_t *t = d->streams; t; t = t->next) {
            t->sync_refs++;
            pthread_mutex_unlock(&d->lock);
            keel__cpu_check_release(t, UINT64_MAX);
            pthread_mutex_lock(&d->lock);
            if (--t->sync_refs == 0)
                pthread_cond_broadcast(&d->sync_cv);
        }
        pthread_mutex_unlock(&d->lock);
    }
    for (;;) {
        int busy = 0;
        pthread_mutex_lock(&d->lock);
        for (cpu_stream_t *t = d->streams; t && !busy; t = t->next)
            busy = t != keel__cpu_tls_stream &&
                   atomic_load(&t->completed) < atomic_load(&t->submitted);
        pthread_mutex_unlock(&d->lock);
        if (!busy)
            return 0;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
            return -1;
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
}

int keel__cpu_thread_role(void)
{
    return keel__cpu_tls_stream ? 1 : keel__cpu_tls_pool_worker ? 2 : 0;
}
