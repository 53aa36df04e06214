/* SPDX-License-Identifier: MIT */
/* Events: each record takes a new generation; a record command, when the
 * stream reaches it, marks its generation complete and stamps the time.
 * Synchronize, query and stream waits look at the generation that was last
 * recorded when they were called, so re-recording moves the marker as on a
 * GPU; each waits for that generation itself, not for any later one. Commands hold references, so destroying an event with work pending on
 * it is safe. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

void keel__cpu_event_ref(cpu_event_t *e)
{
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
}

void keel__cpu_event_unref(cpu_event_t *e)
{
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) {
        if (keel__cpu_check)
            keel__cpu_check_event_fini(e);
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->lock);
        free(e->late);
        free(e);
    }
}

/* Event lock held: room in 'late' for every generation not yet done, the
 * reserved ones and 'more' new ones. */
static int cpu_event_room_locked(cpu_event_t *e, size_t more)
{
    size_t need = (size_t)(e->recorded - e->contig_done) + e->reserved + more;
    if (need <= e->late_cap)
        return 0;
    size_t cap = e->late_cap ? e->late_cap : 4;
    while (cap < need)
        cap *= 2;
    uint64_t *nl = keel__realloc(e->late, cap * sizeof *nl);
    if (!nl)
        return -1;
    e->late = nl;
    e->late_cap = cap;
    return 0;
}

/* Event lock held. Generation 0 stands for "never recorded": done. */
static int cpu_event_done_locked(const cpu_event_t *e, uint64_t gen)
{
    if (gen <= e->contig_done)
        return 1;
    size_t lo = 0, hi = e->nlate;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->late[mid] == gen)
            return 1;
        if (e->late[mid] < gen)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

uint64_t keel__cpu_event_next_gen(cpu_event_t *e)
{
    uint64_t gen = 0;
    pthread_mutex_lock(&e->lock);
    if (cpu_event_room_locked(e, 1) == 0)
        gen = ++e->recorded;
    pthread_mutex_unlock(&e->lock);
    return gen;
}

int keel__cpu_event_reserve(cpu_event_t *e)
{
    pthread_mutex_lock(&e->lock);
    int rc = cpu_event_room_locked(e, 1);
    if (rc == 0)
        e->reserved++;
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void keel__cpu_event_unreserve(cpu_event_t *e)
{
    pthread_mutex_lock(&e->lock);
    e->reserved--;
    pthread_mutex_unlock(&e->lock);
}

uint64_t keel__cpu_event_next_gen_reserved(cpu_event_t *e)
{
    pthread_mutex_lock(&e->lock);
    e->reserved--;
    uint64_t gen = ++e->recorded;
    pthread_mutex_unlock(&e->lock);
    return gen;
}

uint64_t keel__cpu_event_current_gen(cpu_event_t *e)
{
    pthread_mutex_lock(&e->lock);
    uint64_t gen = e->recorded;
    pthread_mutex_unlock(&e->lock);
    return gen;
}

void keel__cpu_event_complete(cpu_event_t *e, uint64_t gen)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&e->lock);
    if (gen == e->contig_done + 1) {
        e->contig_done = gen;
        size_t k = 0;
        while (k < e->nlate && e->late[k] == e->contig_done + 1)
            e->contig_done = e->late[k++];
        if (k) {
            memmove(e->late, e->late + k, (e->nlate - k) * sizeof *e->late);
            e->nlate -= k;
        }
    } else if (gen > e->contig_done && !cpu_event_done_locked(e, gen)) {
        /* Room is guaranteed: see cpu_event_room_locked. */
        size_t i = e->nlate;
        while (i > 0 && e->late[i - 1] > gen) {
            e->late[i] = e->late[i - 1];
            i--;
        }
        e->late[i] = gen;
        e->nlate++;
    }
    /* A record of an older generation finishing late (re-recorded on another
     * stream) must not move the timestamp backwards. */
    if (gen > e->max_done) {
        e->max_done = gen;
        e->done_at = now;
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->lock);
}

void keel__cpu_event_wait_gen(cpu_event_t *e, uint64_t gen)
{
    pthread_mutex_lock(&e->lock);
    while (!cpu_event_done_locked(e, gen))
        pthread_cond_wait(&e->cv, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

static keel_status_t cpu_event_create(void *device_ctx, unsigned flags, void **event_ctx)
{
    cpu_device_t *d = device_ctx;
    cpu_event_t *e = keel__calloc(1, sizeof *e);
    if (!e)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_event_create: cpu:%d: out of memory", d->index);
    e->flags = flags;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cv, NULL);
    *event_ctx = e;
    return KEEL_OK;
}

static keel_status_t cpu_event_destroy(void *event_ctx)
{
    keel__cpu_event_unref(event_ctx);
    return KEEL_OK;
}

static keel_status_t cpu_event_record(void *event_ctx, void *stream_ctx)
{
    cpu_event_t *e = event_ctx;
    cpu_stream_t *s = stream_ctx;
    pthread_mutex_lock(&s->lock);
    cpu_cmd_t *c = keel__cpu_cmd_get(s, 0);
    if (!c) {
        pthread_mutex_unlock(&s->lock);
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_event_record: cpu:%d: out of memory", s->dev->index);
    }
    c->type = CPU_CMD_RECORD;
    keel__cpu_event_ref(e);
    c->u.ev.event = e;
    /* A captured record takes its generation when the graph is launched. The
     * stream lock keeps generations in queue order for this stream. */
    c->u.ev.gen = s->capture ? 0 : keel__cpu_event_next_gen(e);
    if (!s->capture && c->u.ev.gen == 0) {
        keel__cpu_cmd_cancel(s, c);
        keel__cpu_event_unref(e);
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "keel_event_record: cpu:%d: out of memory", s->dev->index);
    }
    keel__cpu_cmd_commit(s, c);
    return KEEL_OK;
}

/* The checking mode holds the recording stream back until now. */
static void cpu_event_release(cpu_event_t *e)
{
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_release_event(e, keel__cpu_event_current_gen(e));
}

static keel_status_t cpu_event_synchronize(void *event_ctx)
{
    cpu_event_t *e = event_ctx;
    cpu_event_release(e);
    /* A reference while waiting: an event destroyed meanwhile (by the
     * teardown at process exit) goes when the last waiter leaves it. */
    keel__cpu_event_ref(e);
    pthread_mutex_lock(&e->lock);
    uint64_t gen = e->recorded;
    while (!cpu_event_done_locked(e, gen))
        pthread_cond_wait(&e->cv, &e->lock);
    pthread_mutex_unlock(&e->lock);
    keel__cpu_event_unref(e);
    return KEEL_OK;
}

static keel_status_t cpu_event_query(void *event_ctx)
{
    cpu_event_t *e = event_ctx;
    cpu_event_release(e);
    pthread_mutex_lock(&e->lock);
    int done = cpu_event_done_locked(e, e->recorded);
    pthread_mutex_unlock(&e->lock);
    return done ? KEEL_OK : KEEL_ERROR_NOT_READY;
}

/* State of one event for elapsed_time: 0 ok (time in *t), else a status. */
static keel_status_t cpu_event_stamp(cpu_event_t *e, const char *which, struct timespec *t)
{
    keel_status_t st = KEEL_OK;
    pthread_mutex_lock(&e->lock);
    if (e->flags & KEEL_EVENT_DISABLE_TIMING)
        st = CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT,
                     "keel_event_elapsed_time: the %s event was created with KEEL_EVENT_DISABLE_TIMING", which);
    else if (e->recorded == 0)
        st = CPU_ERR(KEEL_ERROR_INVALID_ARGUMENT, "keel_event_elapsed_time: the %s event was never recorded", which);
    else if (!cpu_event_done_locked(e, e->recorded))
        st = KEEL_ERROR_NOT_READY;
    else
        *t = e->done_at;
    pthread_mutex_unlock(&e->lock);
    return st;
}

static keel_status_t cpu_event_elapsed_time(void *start_ctx, void *end_ctx, float *ms)
{
    struct timespec a = {0, 0}, b = {0, 0};
    keel_status_t st1 = cpu_event_stamp(start_ctx, "start", &a);
    if (st1 != KEEL_OK && st1 != KEEL_ERROR_NOT_READY)
        return st1;
    keel_status_t st2 = cpu_event_stamp(end_ctx, "end", &b);
    if (st2 != KEEL_OK && st2 != KEEL_ERROR_NOT_READY)
        return st2;
    if (st1 != KEEL_OK || st2 != KEEL_OK)
        return CPU_ERR(KEEL_ERROR_NOT_READY, "keel_event_elapsed_time: the %s event has not completed yet",
                       st1 != KEEL_OK ? "start" : "end");
    double d = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    *ms = (float)d;
    return KEEL_OK;
}

const keel_event_vtable_t keel__cpu_event_vtable = {
    .struct_size = sizeof(keel_event_vtable_t),
    .create = cpu_event_create,
    .destroy = cpu_event_destroy,
    .record = cpu_event_record,
    .synchronize = cpu_event_synchronize,
    .query = cpu_event_query,
    .elapsed_time = cpu_event_elapsed_time,
};
