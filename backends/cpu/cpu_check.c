/* SPDX-License-Identifier: MIT */
/* The checking mode (KEEL_CPU_CHECK=1; cpu_check.h). Its state lives under
 * one lock, taken last: after a stream's or the device's lock, never with
 * another taken inside it. Nothing here runs when the mode is off.
 *
 * Deferred execution: a stream's worker runs a command only once its
 * ticket is released, which a synchronize, a query, a wait for an event or
 * another stream's wait for an event recorded on it does; so work that the
 * host does not wait for has not run when the host looks, every time.
 *
 * Hazards: each queued command keeps the byte ranges it reads and writes
 * (Keel's copies and memsets exactly; built-in operations by their
 * operands), and each stream what it is ordered after (for each other
 * stream, the last ticket before an event it waits for, transitively). A
 * copy, memset or operation whose ranges meet a queued command of another
 * stream, where one of the two writes and nothing orders the new one after
 * the queued one, is refused with both calls named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/cpu/cpu_internal.h"

int keel__cpu_check;

static pthread_mutex_t ck_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ck_cv = PTHREAD_COND_INITIALIZER;   /* a stream was released */
static cpu_stream_t *ck_live;
static uint64_t ck_next_sid = 1, ck_seq;
static _Atomic uint64_t ck_sync_tokens;

/* The ranges of the call being enqueued on this thread, and the operands a
 * built-in operation's validation noted. */
enum { CK_MAX_RANGES = 8 };
typedef struct ck_ranges {
    int n;
    cpu_access_t a[CK_MAX_RANGES];
} ck_ranges_t;
static _Thread_local ck_ranges_t ck_armed, ck_notes;
static _Thread_local int ck_is_armed;

/* ---- ordering ---- */

static cpu_stream_t *live_stream(uint64_t sid)
{
    for (cpu_stream_t *s = ck_live; s; s = s->ck.next_live)
        if (s->ck.sid == sid)
            return s;
    return NULL;
}

static uint64_t vc_get(const cpu_vclock_t *c, uint64_t sid)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].sid == sid)
            return c->v[i].ticket;
    return 0;
}

/* On a failed allocation the ordering is lost, which can only make a later
 * check report a conflict it should not. */
static void vc_raise(cpu_vclock_t *c, uint64_t sid, uint64_t ticket)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].sid == sid) {
            if (c->v[i].ticket < ticket)
                c->v[i].ticket = ticket;
            return;
        }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        cpu_vc_entry_t *v = keel__realloc(c->v, cap * sizeof *v);
        if (!v)
            return;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = (cpu_vc_entry_t){sid, ticket};
}

/* dst learns what src knows; entries of destroyed streams are dropped. */
static void vc_join(cpu_vclock_t *dst, const cpu_vclock_t *src)
{
    size_t k = 0;
    for (size_t i = 0; i < dst->n; i++)
        if (live_stream(dst->v[i].sid))
            dst->v[k++] = dst->v[i];
    dst->n = k;
    for (size_t i = 0; i < src->n; i++)
        if (live_stream(src->v[i].sid))
            vc_raise(dst, src->v[i].sid, src->v[i].ticket);
}

static void vc_free(cpu_vclock_t *c)
{
    free(c->v);
    *c = (cpu_vclock_t){0};
}

/* ---- streams and events ---- */

void keel__cpu_check_stream_init(cpu_stream_t *s)
{
    pthread_mutex_lock(&ck_lock);
    s->ck.sid = ck_next_sid++;
    s->ck.next_live = ck_live;
    ck_live = s;
    pthread_mutex_unlock(&ck_lock);
}

void keel__cpu_check_stream_fini(cpu_stream_t *s)
{
    pthread_mutex_lock(&ck_lock);
    for (cpu_stream_t **pp = &ck_live; *pp; pp = &(*pp)->ck.next_live)
        if (*pp == s) {
            *pp = s->ck.next_live;
            break;
        }
    pthread_mutex_unlock(&ck_lock);
    vc_free(&s->ck.know);
    free(s->ck.acc);
    s->ck.acc = NULL;
    s->ck.nacc = s->ck.acc_cap = 0;
}

void keel__cpu_check_event_fini(cpu_event_t *e)
{
    for (size_t i = 0; i < e->ck.nrec; i++)
        vc_free(&e->ck.rec[i].know);
    free(e->ck.rec);
    e->ck.rec = NULL;
    e->ck.nrec = e->ck.rec_cap = 0;
}

static cpu_check_rec_t *find_rec(cpu_event_t *e, uint64_t gen)
{
    for (size_t i = 0; i < e->ck.nrec; i++)
        if (e->ck.rec[i].gen == gen)
            return &e->ck.rec[i];
    return NULL;
}

static void add_access(cpu_stream_t *s, const cpu_access_t *a, uint64_t ticket)
{
    if (a->hi <= a->lo)
        return;
    if (s->ck.nacc == s->ck.acc_cap) {
        size_t cap = s->ck.acc_cap ? 2 * s->ck.acc_cap : 16;
        cpu_access_t *n = keel__realloc(s->ck.acc, cap * sizeof *n);
        if (!n)
            return;   /* unchecked, never refused */
        s->ck.acc = n;
        s->ck.acc_cap = cap;
    }
    s->ck.acc[s->ck.nacc] = *a;
    s->ck.acc[s->ck.nacc++].ticket = ticket;
}

static cpu_access_t range(const void *p, size_t bytes, int write, const char *fn)
{
    return (cpu_access_t){0, (uintptr_t)p, (uintptr_t)p + bytes, write, fn};
}

void keel__cpu_check_queued(cpu_stream_t *s, cpu_cmd_t *c)
{
    pthread_mutex_lock(&ck_lock);
    s->ck.last_seq = ++ck_seq;
    if (ck_is_armed) {
        for (int i = 0; i < ck_armed.n; i++)
            add_access(s, &ck_armed.a[i], c->ticket);
    } else if (c->type == CPU_CMD_COPY) {   /* a graph's copy */
        cpu_access_t d = range(c->u.copy.dst, c->u.copy.bytes, 1, "keel_graph_launch (a copy)");
        cpu_access_t r = range(c->u.copy.src, c->u.copy.bytes, 0, "keel_graph_launch (a copy)");
        add_access(s, &d, c->ticket);
        add_access(s, &r, c->ticket);
    } else if (c->type == CPU_CMD_SET) {
        cpu_access_t d = range(c->u.set.dst, c->u.set.bytes, 1, "keel_graph_launch (a memset)");
        add_access(s, &d, c->ticket);
    }
    cpu_event_t *e = c->u.ev.event;
    if (c->type == CPU_CMD_RECORD) {
        cpu_check_event_t *ce = &e->ck;
        if (ce->nrec == ce->rec_cap) {
            size_t cap = ce->rec_cap ? 2 * ce->rec_cap : 4;
            cpu_check_rec_t *n = keel__realloc(ce->rec, cap * sizeof *n);
            if (n) {
                ce->rec = n;
                ce->rec_cap = cap;
            }
        }
        if (ce->nrec < ce->rec_cap) {
            cpu_check_rec_t *r = &ce->rec[ce->nrec++];
            *r = (cpu_check_rec_t){c->u.ev.gen, s->ck.sid, c->ticket, {0}};
            vc_join(&r->know, &s->ck.know);
        }
    } else if (c->type == CPU_CMD_WAIT) {
        /* A record already run needs nothing: what came before it has run too. */
        cpu_check_rec_t *r = find_rec(e, c->u.ev.gen);
        if (r && r->sid != s->ck.sid) {
            vc_raise(&s->ck.know, r->sid, r->ticket);
            vc_join(&s->ck.know, &r->know);
        }
    }
    pthread_mutex_unlock(&ck_lock);
}

void keel__cpu_check_ran(cpu_stream_t *s, cpu_cmd_t *c)
{
    pthread_mutex_lock(&ck_lock);
    size_t k = 0;
    while (k < s->ck.nacc && s->ck.acc[k].ticket <= c->ticket)
        k++;
    if (k) {
        memmove(s->ck.acc, s->ck.acc + k, (s->ck.nacc - k) * sizeof *s->ck.acc);
        s->ck.nacc -= k;
    }
    if (c->type == CPU_CMD_RECORD) {
        cpu_check_event_t *ce = &c->u.ev.event->ck;
        cpu_check_rec_t *r = find_rec(c->u.ev.event, c->u.ev.gen);
        if (r) {
            vc_free(&r->know);
            *r = ce->rec[--ce->nrec];
        }
    }
    pthread_mutex_unlock(&ck_lock);
}

/* ---- deferred execution ---- */

void keel__cpu_check_gate(cpu_stream_t *s, uint64_t ticket)
{
    pthread_mutex_lock(&ck_lock);
    int ready = s->ck.released >= ticket;
    pthread_mutex_unlock(&ck_lock);
    if (ready)
        return;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_lock(&ck_lock);
    while (s->ck.released < ticket)
        pthread_cond_wait(&ck_cv, &ck_lock);
    pthread_mutex_unlock(&ck_lock);
    pthread_mutex_lock(&s->lock);
}

static void release_locked(cpu_stream_t *s, uint64_t ticket)
{
    if (s->ck.released < ticket) {
        s->ck.released = ticket;
        pthread_cond_broadcast(&ck_cv);
    }
}

void keel__cpu_check_release(cpu_stream_t *s, uint64_t ticket)
{
    pthread_mutex_lock(&ck_lock);
    release_locked(s, ticket);
    pthread_mutex_unlock(&ck_lock);
}

void keel__cpu_check_release_event(cpu_event_t *e, uint64_t gen)
{
    pthread_mutex_lock(&ck_lock);
    cpu_check_rec_t *r = find_rec(e, gen);
    cpu_stream_t *s = r ? live_stream(r->sid) : NULL;
    if (s)
        release_locked(s, r->ticket);
    pthread_mutex_unlock(&ck_lock);
}

/* The device's streams one at a time, the one given work last first: of
 * two streams that a missing event wait leaves unordered, the later one
 * (usually the consumer) runs before the earlier one. A token per call
 * marks the streams done; a concurrent call can only make a stream be
 * waited for twice. */
keel_status_t keel__cpu_check_device_sync(cpu_device_t *d)
{
    uint64_t token = atomic_fetch_add(&ck_sync_tokens, 1) + 1;
    keel_status_t first = KEEL_OK;
    pthread_mutex_lock(&d->lock);
    int bound = d->next_stream_id;
    for (;;) {
        cpu_stream_t *pick = NULL;
        pthread_mutex_lock(&ck_lock);
        for (cpu_stream_t *t = d->streams; t; t = t->next)
            if (t->id < bound && t->ck.sync_token != token && (!pick || t->ck.last_seq > pick->ck.last_seq))
                pick = t;
        if (pick)
            pick->ck.sync_token = token;
        pthread_mutex_unlock(&ck_lock);
        if (!pick)
            break;
        keel__cpu_device_sync_one(d, pick, &first);
    }
    pthread_mutex_unlock(&d->lock);
    return first;
}

/* ---- hazards ---- */

static const char *verb(int write)
{
    return write ? "writes" : "reads";
}

/* Checks the ranges of a call on t and arms them for its command. */
static keel_status_t check_ranges(cpu_stream_t *t, const ck_ranges_t *x)
{
    ck_is_armed = 0;
    pthread_mutex_lock(&ck_lock);
    for (cpu_stream_t *s = ck_live; s; s = s->ck.next_live) {
        if (s == t)
            continue;
        uint64_t known = vc_get(&t->ck.know, s->ck.sid);
        for (size_t i = 0; i < s->ck.nacc; i++) {
            const cpu_access_t *r = &s->ck.acc[i];
            if (r->ticket <= known)
                continue;
            for (int j = 0; j < x->n; j++) {
                const cpu_access_t *a = &x->a[j];
                if (a->lo >= r->hi || r->lo >= a->hi || !(a->write || r->write))
                    continue;
                uintptr_t lo = a->lo > r->lo ? a->lo : r->lo, hi = a->hi < r->hi ? a->hi : r->hi;
                int sdev = s->dev->index, sid = s->id;
                const char *rfn = r->fn;
                int rw = r->write;
                pthread_mutex_unlock(&ck_lock);
                keel_status_t st = CPU_ERR(
                    KEEL_ERROR_BUSY,
                    "%s: %s %zu bytes at %p that %s, queued on stream #%d of cpu:%d (#0 is the device's default "
                    "stream), still %s: nothing orders this call after it. Synchronize that stream first "
                    "(keel_stream_synchronize, keel_event_synchronize, keel_device_synchronize), or record an "
                    "event after it and make this call's stream wait for it (keel_stream_wait_event) "
                    "(KEEL_CPU_CHECK)",
                    a->fn, verb(a->write), (size_t)(hi - lo), (void *)lo, rfn, sid, sdev, verb(rw));
                if (keel__cpu_host->log_enabled && keel__cpu_host->log &&
                    keel__cpu_host->log_enabled(KEEL_LOG_ERROR))
                    keel__cpu_host->log(KEEL_LOG_ERROR, "%s", keel_last_error());
                return st;
            }
        }
    }
    pthread_mutex_unlock(&ck_lock);
    ck_armed = *x;
    ck_is_armed = 1;
    return KEEL_OK;
}

keel_status_t keel__cpu_check_copy(cpu_stream_t *s, const char *fn, const void *dst, const void *src, size_t bytes)
{
    ck_ranges_t x = {2, {range(dst, bytes, 1, fn), range(src, bytes, 0, fn)}};
    return check_ranges(s, &x);
}

keel_status_t keel__cpu_check_set(cpu_stream_t *s, const char *fn, const void *dst, size_t bytes)
{
    ck_ranges_t x = {1, {range(dst, bytes, 1, fn)}};
    return check_ranges(s, &x);
}

keel_status_t keel__cpu_check_op(cpu_stream_t *s)
{
    return check_ranges(s, &ck_notes);
}

void keel__cpu_check_disarm(void)
{
    ck_is_armed = 0;
}

/* ---- the core's hooks ---- */

void keel__cpu_check_note_reset(void)
{
    ck_notes.n = 0;
}

/* The operands the built-in operations write, by the names ops.h gives them
 * (C and Y of the GEMM and the dense layer are capitals). */
static int is_output(const char *what)
{
    static const char *const outs[] = {"y", "out", "dst", "ptr", "c"};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (strcasecmp(what, outs[i]) == 0)
            return 1;
    return 0;
}

void keel__cpu_check_note(const char *fn, const char *what, const void *ptr, size_t bytes)
{
    if (ck_notes.n < CK_MAX_RANGES)
        ck_notes.a[ck_notes.n++] = range(ptr, bytes, is_output(what), fn);
}

keel_status_t keel__cpu_check_op_begin(struct keel_stream *stream)
{
    if (!keel__cpu_check || !stream->device->backend->builtin)
        return KEEL_OK;
    return check_ranges(stream->ctx, &ck_notes);
}

void keel__cpu_check_op_end(void)
{
    ck_is_armed = 0;
}

void keel__cpu_check_freed(struct keel_device *d, void *ptr, size_t bytes)
{
    if (keel__cpu_check && d->backend->builtin)
        memset(ptr, KEEL_CPU_CHECK_POISON, bytes);
}

/* Best effort: a memset that cannot be queued leaves the block as it was. */
void keel__cpu_check_freed_async(struct keel_stream *stream, void *ptr, size_t bytes)
{
    if (!keel__cpu_check || !stream->device->backend->builtin)
        return;
    cpu_stream_t *s = stream->ctx;
    cpu_cmd_t *c = keel__cpu_cmd_begin(s, CPU_CMD_SET, 0, "keel_free_async");
    if (!c) {
        keel_clear_error();
        return;
    }
    c->u.set.dst = ptr;
    c->u.set.value = KEEL_CPU_CHECK_POISON;
    c->u.set.bytes = bytes;
    ck_armed = (ck_ranges_t){1, {range(ptr, bytes, 1, "keel_free_async")}};
    ck_is_armed = 1;
    keel__cpu_cmd_commit(s, c);
    ck_is_armed = 0;
}
