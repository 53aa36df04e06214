/* SPDX-License-Identifier: MIT */
/* test-stream: streams, the default stream, priorities, events, host
 * callbacks, waits across streams and devices, and the error paths of every
 * function of keel/stream.h. Ordering is proven with gates (a host function
 * that holds its stream until the test opens it), never with timing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "fixture.h"

static uint64_t not_a_handle[64];

/* A log of host-function calls, in the order they ran. */
struct order_log {
    pthread_mutex_t lock;
    int n;
    int seq[256];
};

struct order_entry {
    struct order_log *log;
    int value;
};

static void log_append(void *p)
{
    struct order_entry *e = p;
    pthread_mutex_lock(&e->log->lock);
    if (e->log->n < 256)
        e->log->seq[e->log->n++] = e->value;
    pthread_mutex_unlock(&e->log->lock);
}

KT_DEVICE_TEST(stream_create_query_destroy)
{
    keel_stream_t *s = KT_SENTINEL;
    KT_OK(keel_stream_create(dev, KEEL_STREAM_DEFAULT, 0, &s));
    ck_assert_ptr_ne(s, KT_SENTINEL);
    keel_device_t *d = NULL;
    KT_OK(keel_stream_get_device(s, &d));
    ck_assert_ptr_eq(d, dev);
    KT_OK(keel_stream_query(s));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_stream_destroy(s));
    /* Every function refuses the destroyed handle. */
    int prio = 99;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_destroy(s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_synchronize(s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_query(s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_get_device(s, &d));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_get_priority(s, &prio));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_launch_host_func(s, kt_host_sleep, NULL));
    ck_assert_int_eq(prio, 99);
    ck_assert_ptr_eq(d, dev);
}

KT_DEVICE_TEST(stream_create_rejects_bad_input)
{
    keel_stream_t *s = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_create(dev, 1u << 5, 0, &s));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_create(dev, ~0u, 0, &s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_create(NULL, 0, 0, &s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_create((keel_device_t *)not_a_handle, 0, 0, &s));
    ck_assert_ptr_eq(s, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_create(dev, 0, 0, NULL));
    /* Functions taking a stream refuse NULL and non-stream handles. */
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_synchronize(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_query(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_destroy(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_synchronize((keel_stream_t *)not_a_handle));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_synchronize((keel_stream_t *)(void *)dev));
    keel_device_t *d = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_get_device(NULL, &d));
    ck_assert_ptr_eq(d, KT_SENTINEL);
    keel_stream_t *ok = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &ok));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_get_device(ok, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_get_priority(ok, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_launch_host_func(ok, NULL, NULL));
    KT_OK(keel_stream_destroy(ok));
}

KT_DEVICE_TEST(default_stream_is_fixed_and_indestructible)
{
    keel_stream_t *a = NULL, *b = NULL;
    KT_OK(keel_device_default_stream(dev, &a));
    KT_OK(keel_device_default_stream(dev, &b));
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_eq(a, b);
    keel_device_t *d = NULL;
    KT_OK(keel_stream_get_device(a, &d));
    ck_assert_ptr_eq(d, dev);
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_destroy(a));
    KT_OK(keel_stream_synchronize(a)); /* still alive */
    keel_stream_t *keep = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_default_stream(NULL, &keep));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_device_default_stream(dev, NULL));
    ck_assert_ptr_eq(keep, KT_SENTINEL);
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_stream_t *c = NULL;
        KT_OK(keel_device_default_stream(other, &c));
        ck_assert_ptr_ne(c, a);
    }
}

KT_DEVICE_TEST(priorities_are_clamped_to_the_range)
{
    int least = 1000, greatest = 1000;
    KT_OK(keel_device_stream_priority_range(dev, &least, &greatest));
    ck_assert_msg(greatest <= least, "greatest %d > least %d", greatest, least);
    const int asks[] = {least, greatest, least + 100, greatest - 100, (least + greatest) / 2};
    for (size_t i = 0; i < sizeof asks / sizeof asks[0]; i++) {
        keel_stream_t *s = NULL;
        KT_OK(keel_stream_create(dev, 0, asks[i], &s));
        int p = 1000;
        KT_OK(keel_stream_get_priority(s, &p));
        int want = asks[i] > least ? least : asks[i] < greatest ? greatest : asks[i];
        ck_assert_msg(p == want, "%sasked %d in [%d, %d], got %d", kt_where(), asks[i], greatest, least, p);
        KT_OK(keel_stream_destroy(s));
    }
    /* Either output may be NULL. */
    int only = 1000;
    KT_OK(keel_device_stream_priority_range(dev, &only, NULL));
    ck_assert_int_eq(only, least);
    KT_OK(keel_device_stream_priority_range(dev, NULL, &only));
    ck_assert_int_eq(only, greatest);
    KT_OK(keel_device_stream_priority_range(dev, NULL, NULL));
    int keep = 4242;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_stream_priority_range(NULL, &keep, &keep));
    ck_assert_int_eq(keep, 4242);
}

KT_DEVICE_TEST(host_functions_run_in_order_after_earlier_work)
{
    /* static: a failed assertion leaves this frame while the stream may still run */
    enum { NFN = 32 };
    static struct order_log log;
    static struct order_entry e[NFN];
    pthread_mutex_init(&log.lock, NULL);
    log.n = 0;
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    for (int i = 0; i < NFN; i++) {
        e[i].log = &log;
        e[i].value = i;
        KT_OK(keel_stream_launch_host_func(s, log_append, &e[i]));
    }
    /* The gate holds everything: the stream is busy and nothing ran. */
    KT_PENDING(keel_stream_query(s));
    ck_assert_int_eq(log.n, 0);
    kt_gate_open(g);
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_stream_query(s));
    ck_assert_int_eq(log.n, NFN);
    for (int i = 0; i < NFN; i++)
        ck_assert_msg(log.seq[i] == i, "%sposition %d ran %d", kt_where(), i, log.seq[i]);
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
}

/* Copies after a gate have not happened while it is closed: the stream is
 * asynchronous, so code that forgets to synchronize sees stale data. */
KT_DEVICE_TEST(async_copy_waits_behind_a_gate)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    void *d = NULL, *pinned = NULL;
    KT_OK(keel_malloc(dev, 256, &d));
    KT_OK(keel_malloc_host(dev, 256, &pinned));
    unsigned char src[256];
    kt_fill_random_bytes(src, 256);
    KT_OK(keel_memcpy(d, src, 256));
    kt_poison(pinned, 256);
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    KT_OK(keel_memcpy_async(pinned, d, 256, s));
    ck_assert_int_eq(((unsigned char *)pinned)[0], KT_POISON_BYTE);
    KT_PENDING(keel_stream_query(s));
    kt_gate_open(g);
    KT_OK(keel_stream_synchronize(s));
    ck_assert_msg(memcmp(pinned, src, 256) == 0, "%scopy after the gate is wrong", kt_where());
    KT_OK(keel_free(d));
    KT_OK(keel_free(pinned));
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
}

static void set_flag(void *p)
{
    atomic_store((atomic_int *)p, 1);
}

struct check_flag {
    atomic_int *flag;
    atomic_int seen;
};

static void read_flag(void *p)
{
    struct check_flag *c = p;
    atomic_store(&c->seen, atomic_load(c->flag) + 10);
}

static void cross_wait(keel_device_t *da, keel_device_t *db)
{
    keel_stream_t *a = NULL, *b = NULL;
    keel_event_t *e = NULL;
    KT_OK(keel_stream_create(da, 0, 0, &a));
    KT_OK(keel_stream_create(db, 0, 0, &b));
    KT_OK(keel_event_create(da, 0, &e));
    kt_gate_t *g = kt_gate_new();
    static atomic_int flag;
    static struct check_flag c;
    atomic_store(&flag, 0);
    c.flag = &flag;
    atomic_store(&c.seen, 0);
    KT_OK(kt_gate_enqueue(g, a));
    KT_OK(keel_stream_launch_host_func(a, set_flag, &flag));
    KT_OK(keel_event_record(e, a));
    KT_OK(keel_stream_wait_event(b, e));
    KT_OK(keel_stream_launch_host_func(b, read_flag, &c));
    KT_PENDING(keel_event_query(e));
    KT_PENDING(keel_stream_query(b));
    ck_assert_int_eq(atomic_load(&c.seen), 0);
    kt_gate_open(g);
    KT_OK(keel_stream_synchronize(b));
    ck_assert_msg(atomic_load(&c.seen) == 11, "%sstream b ran before the event (seen %d)", kt_where(),
                  atomic_load(&c.seen));
    KT_OK(keel_event_query(e));
    KT_OK(keel_stream_synchronize(a));
    KT_OK(keel_event_destroy(e));
    KT_OK(keel_stream_destroy(a));
    KT_OK(keel_stream_destroy(b));
    kt_gate_free(g);
}

KT_DEVICE_TEST(stream_waits_for_an_event_of_another_stream)
{
    cross_wait(dev, dev);
}

KT_DEVICE_TEST(stream_waits_for_an_event_of_another_device)
{
    keel_device_t *other = kt_other_device(dev);
    if (other == NULL) {
        ck_assert_msg(!(kt_cpu_devices_env() && kt_is_cpu(dev)), "KEEL_CPU_DEVICES is set, yet one CPU device");
        return;
    }
    cross_wait(dev, other);
}

KT_DEVICE_TEST(event_lifecycle_and_states)
{
    keel_event_t *live = NULL;
    KT_OK(keel_event_create(dev, 0, &live));
    keel_event_t *e = KT_SENTINEL;
    KT_OK(keel_event_create(dev, KEEL_EVENT_DEFAULT, &e));
    ck_assert_ptr_ne(e, KT_SENTINEL);
    /* Never recorded: done at once. */
    KT_OK(keel_event_query(e));
    KT_OK(keel_event_synchronize(e));
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    KT_OK(keel_event_record(e, s));
    KT_PENDING(keel_event_query(e));
    kt_gate_open(g);
    KT_OK(keel_event_synchronize(e));
    KT_OK(keel_event_query(e));
    /* Re-recording moves the marker. */
    kt_gate_t *g2 = kt_gate_new();
    KT_OK(kt_gate_enqueue(g2, s));
    KT_OK(keel_event_record(e, s));
    KT_PENDING(keel_event_query(e));
    kt_gate_open(g2);
    KT_OK(keel_event_synchronize(e));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_event_destroy(e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_destroy(e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_query(e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_synchronize(e));
    keel_stream_t *def = NULL;
    KT_OK(keel_device_default_stream(dev, &def));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_record(e, def));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_wait_event(def, e));
    /* live was made before e died: a handle made after could reuse e's memory
     * (the ABA case of every pointer-handle runtime). */
    float ms = -5.0f;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_elapsed_time(e, live, &ms));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_elapsed_time(live, e, &ms));
    ck_assert(ms == -5.0f);
    /* A destroyed stream is refused by the event functions too. */
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_record(live, s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_wait_event(s, live));
    KT_OK(keel_event_destroy(live));
    kt_gate_free(g);
    kt_gate_free(g2);
}

KT_DEVICE_TEST(event_functions_reject_bad_input)
{
    keel_event_t *e = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_event_create(dev, 1u << 7, &e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_create(NULL, 0, &e));
    ck_assert_ptr_eq(e, KT_SENTINEL);
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_event_create(dev, 0, NULL));
    KT_OK(keel_event_create(dev, 0, &e));
    keel_stream_t *def = NULL;
    KT_OK(keel_device_default_stream(dev, &def));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_record(NULL, def));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_record(e, NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_record((keel_event_t *)(void *)def, def));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_query(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_synchronize(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_destroy(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_query((keel_event_t *)not_a_handle));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_wait_event(NULL, e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_wait_event(def, NULL));
    float ms = -5.0f;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_elapsed_time(NULL, e, &ms));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_elapsed_time(e, NULL, &ms));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_event_elapsed_time(e, e, NULL));
    ck_assert(ms == -5.0f);
    KT_OK(keel_event_destroy(e));
}

KT_DEVICE_TEST(elapsed_time_between_recorded_events)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    keel_event_t *a = NULL, *b = NULL, *nt = NULL;
    KT_OK(keel_event_create(dev, 0, &a));
    KT_OK(keel_event_create(dev, 0, &b));
    KT_OK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING | KEEL_EVENT_BLOCKING_SYNC, &nt));
    float ms = -5.0f;
    /* Never recorded. */
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_event_elapsed_time(a, b, &ms));
    kt_gate_t *g = kt_gate_new();
    KT_OK(keel_event_record(a, s));
    KT_OK(kt_gate_enqueue(g, s));
    KT_OK(keel_stream_launch_host_func(s, kt_host_sleep, (void *)(intptr_t)5));
    KT_OK(keel_event_record(b, s));
    KT_OK(keel_event_record(nt, s));
    /* Pending. */
    KT_FAIL(KEEL_ERROR_NOT_READY, keel_event_elapsed_time(a, b, &ms));
    ck_assert(ms == -5.0f);
    kt_gate_open(g);
    KT_OK(keel_event_synchronize(b));
    KT_OK(keel_event_synchronize(nt));
    KT_OK(keel_event_elapsed_time(a, b, &ms));
    ck_assert_msg(ms >= 0.0f, "%selapsed %f ms", kt_where(), ms);
    float back = 0;
    KT_OK(keel_event_elapsed_time(b, a, &back));
    ck_assert_msg(back <= 0.0f, "%selapsed backwards %f ms", kt_where(), back);
    ms = -5.0f;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_event_elapsed_time(a, nt, &ms));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_event_elapsed_time(nt, b, &ms));
    ck_assert(ms == -5.0f);
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_event_t *o = NULL;
        keel_stream_t *os = NULL;
        KT_OK(keel_device_default_stream(other, &os));
        KT_OK(keel_event_create(other, 0, &o));
        KT_OK(keel_event_record(o, os));
        KT_OK(keel_event_synchronize(o));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_event_elapsed_time(a, o, &ms));
        /* An event of another device cannot be recorded on this device's stream. */
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_event_record(o, s));
        KT_OK(keel_event_destroy(o));
    }
    KT_OK(keel_event_destroy(a));
    KT_OK(keel_event_destroy(b));
    KT_OK(keel_event_destroy(nt));
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
}

/* Destroying an event that a stream still waits on: the wait completes. */
KT_DEVICE_TEST(event_destroyed_while_waited_on)
{
    keel_stream_t *a = NULL, *b = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &a));
    KT_OK(keel_stream_create(dev, 0, 0, &b));
    keel_event_t *e = NULL;
    KT_OK(keel_event_create(dev, 0, &e));
    kt_gate_t *g = kt_gate_new();
    static atomic_int flag;
    static struct check_flag c;
    atomic_store(&flag, 0);
    c.flag = &flag;
    atomic_store(&c.seen, 0);
    KT_OK(kt_gate_enqueue(g, a));
    KT_OK(keel_stream_launch_host_func(a, set_flag, &flag));
    KT_OK(keel_event_record(e, a));
    KT_OK(keel_stream_wait_event(b, e));
    KT_OK(keel_stream_launch_host_func(b, read_flag, &c));
    KT_OK(keel_event_destroy(e));
    kt_gate_open(g);
    KT_OK(keel_stream_synchronize(b));
    ck_assert_int_eq(atomic_load(&c.seen), 11);
    KT_OK(keel_stream_destroy(a));
    KT_OK(keel_stream_destroy(b));
    kt_gate_free(g);
}

/* keel_stream_destroy waits for the work already enqueued. */
KT_DEVICE_TEST(stream_destroy_completes_pending_work)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    static atomic_int flag;
    atomic_store(&flag, 0);
    KT_OK(keel_stream_launch_host_func(s, kt_host_sleep, (void *)(intptr_t)20));
    KT_OK(keel_stream_launch_host_func(s, set_flag, &flag));
    KT_OK(keel_stream_destroy(s));
    ck_assert_msg(atomic_load(&flag) == 1, "%swork enqueued before destroy did not run", kt_where());
}

struct sync_all {
    atomic_int done;
};

static void count_done(void *p)
{
    atomic_fetch_add(&((struct sync_all *)p)->done, 1);
}

KT_DEVICE_TEST(device_synchronize_waits_for_every_stream)
{
    enum { NS = 4 };
    keel_stream_t *s[NS];
    static struct sync_all all;
    atomic_store(&all.done, 0);
    for (int i = 0; i < NS; i++) {
        KT_OK(keel_stream_create(dev, 0, 0, &s[i]));
        KT_OK(keel_stream_launch_host_func(s[i], kt_host_sleep, (void *)(intptr_t)(5 * i)));
        KT_OK(keel_stream_launch_host_func(s[i], count_done, &all));
    }
    keel_stream_t *def = NULL;
    KT_OK(keel_device_default_stream(dev, &def));
    KT_OK(keel_stream_launch_host_func(def, kt_host_sleep, (void *)(intptr_t)10));
    KT_OK(keel_stream_launch_host_func(def, count_done, &all));
    KT_OK(keel_device_synchronize(dev));
    ck_assert_int_eq(atomic_load(&all.done), NS + 1);
    for (int i = 0; i < NS; i++)
        KT_OK(keel_stream_destroy(s[i]));
}

/* Streams never order themselves implicitly: a closed gate on one stream does
 * not hold the default stream or another stream. (Their work here is copies
 * and memsets, not host functions: CUDA runs every host function of a
 * context on one thread, so a blocked one holds the others.) */
KT_DEVICE_TEST(streams_do_not_wait_for_each_other)
{
    keel_stream_t *a = NULL, *b = NULL, *def = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &a));
    KT_OK(keel_stream_create(dev, 0, 0, &b));
    KT_OK(keel_device_default_stream(dev, &def));
    void *d1 = NULL, *d2 = NULL;
    KT_OK(keel_malloc(dev, 256, &d1));
    KT_OK(keel_malloc(dev, 256, &d2));
    unsigned char h1[256], h2[256];
    kt_poison(h1, sizeof h1);
    kt_poison(h2, sizeof h2);
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, a));
    KT_OK(keel_memset_async(d1, 0x11, 256, b));
    KT_OK(keel_memcpy_async(h1, d1, 256, b));
    KT_OK(keel_memset_async(d2, 0x22, 256, def));
    KT_OK(keel_memcpy_async(h2, d2, 256, def));
    KT_OK(keel_stream_synchronize(b));
    KT_OK(keel_stream_synchronize(def));
    ck_assert_msg(h1[0] == 0x11 && h1[255] == 0x11, "%sstream b did not run while a was held", kt_where());
    ck_assert_msg(h2[0] == 0x22 && h2[255] == 0x22, "%sthe default stream did not run while a was held", kt_where());
    KT_PENDING(keel_stream_query(a));
    kt_gate_open(g);
    KT_OK(keel_stream_destroy(a));
    KT_OK(keel_stream_destroy(b));
    KT_OK(keel_free(d1));
    KT_OK(keel_free(d2));
    kt_gate_free(g);
}

struct errors_seen {
    keel_status_t status;
    char detail[256];
};

/* A host function may call Keel functions that do not wait on streams; its
 * errors are its thread's. */
static void fail_inside(void *p)
{
    struct errors_seen *e = p;
    e->status = keel_backend_count(NULL);
    snprintf(e->detail, sizeof e->detail, "%s", keel_last_error());
}

KT_DEVICE_TEST(errors_inside_host_functions_stay_on_their_thread)
{
    static struct errors_seen seen;
    memset(&seen, 0, sizeof seen);
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_get_device(NULL, &(keel_device_t *){NULL}));
    char mine[256];
    snprintf(mine, sizeof mine, "%s", keel_last_error());
    KT_OK(keel_stream_launch_host_func(s, fail_inside, &seen));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_int_eq(seen.status, KEEL_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(seen.detail, "keel_backend_count") != NULL, "the host function saw \"%s\"", seen.detail);
    ck_assert_str_eq(keel_last_error(), mine);
    ck_assert_int_eq(keel_last_status(), KEEL_ERROR_INVALID_HANDLE);
    KT_OK(keel_stream_destroy(s));
}

static void count_one(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

/* Enqueueing never waits for the stream: hundreds of host functions queue up
 * behind a held one (a caller that blocks here while it holds the gate would
 * deadlock). Last in the suite: a hang ends in the watchdog, naming it. */
KT_DEVICE_TEST(many_host_functions_queue_behind_a_held_stream)
{
    enum { NFN = 300 };
    static atomic_int n;
    atomic_store(&n, 0);
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    for (int i = 0; i < NFN; i++)
        KT_OK(keel_stream_launch_host_func(s, count_one, &n));
    ck_assert_int_eq(atomic_load(&n), 0);
    kt_gate_open(g);
    KT_OK(keel_stream_synchronize(s));
    ck_assert_int_eq(atomic_load(&n), NFN);
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
}

/* Threads that wait on one held stream for different amounts of work all
 * return once the gate opens. First a producer enqueues 6000 commands, past
 * the CPU backend's queue depth (4096), so that it waits for room; then two
 * threads synchronize after 1000 and 2000 commands, and each returns with at
 * least the work before it done. The CPU worker wakes a waiter only when
 * completions reach what it needs (not after every command): a waiter that
 * failed to say what it needs would never wake, and the watchdog would end
 * the test. */
typedef struct {
    keel_stream_t *s;
    atomic_int *n;
    int count, seen;
    keel_status_t st;
} sync_job_t;

static void *sync_in_thread(void *p)
{
    sync_job_t *j = p;
    j->st = keel_stream_synchronize(j->s);
    j->seen = atomic_load(j->n);
    return NULL;
}

static void *enqueue_in_thread(void *p)
{
    sync_job_t *j = p;
    j->st = KEEL_OK;
    for (int i = 0; i < j->count && j->st == KEEL_OK; i++)
        j->st = keel_stream_launch_host_func(j->s, count_one, j->n);
    return NULL;
}

KT_DEVICE_TEST(waiters_for_different_amounts_of_work_all_return)
{
    static atomic_int n;
    atomic_store(&n, 0);
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    /* a producer held by a full queue */
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    sync_job_t prod = {s, &n, 6000, -1, KEEL_OK};
    pthread_t th[2];
    ck_assert_int_eq(pthread_create(&th[0], NULL, enqueue_in_thread, &prod), 0);
    kt_host_sleep((void *)(intptr_t)50); /* it reaches the full queue */
    ck_assert_msg(atomic_load(&n) == 0, "%s%d host functions ran behind a closed gate", kt_where(), atomic_load(&n));
    kt_gate_open(g);
    ck_assert_int_eq(pthread_join(th[0], NULL), 0);
    ck_assert_msg(prod.st == KEEL_OK, "%sthe producer: %s", kt_where(), keel_status_name(prod.st));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_int_eq(atomic_load(&n), 6000);
    kt_gate_free(g);
    /* two synchronizers at different points */
    atomic_store(&n, 0);
    g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    sync_job_t jobs[2] = {{s, &n, 0, -1, KEEL_OK}, {s, &n, 0, -1, KEEL_OK}};
    for (int w = 0; w < 2; w++) {
        for (int i = 0; i < 1000; i++)
            KT_OK(keel_stream_launch_host_func(s, count_one, &n));
        ck_assert_int_eq(pthread_create(&th[w], NULL, sync_in_thread, &jobs[w]), 0);
    }
    kt_host_sleep((void *)(intptr_t)50); /* they reach their waits */
    kt_gate_open(g);
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(pthread_join(th[w], NULL), 0);
        ck_assert_msg(jobs[w].st == KEEL_OK, "%ssynchronize %d: %s", kt_where(), w, keel_status_name(jobs[w].st));
        ck_assert_msg(jobs[w].seen >= 1000 * (w + 1), "%ssynchronize %d returned after %d of the %d commands before it",
                      kt_where(), w, jobs[w].seen, 1000 * (w + 1));
    }
    KT_OK(keel_stream_destroy(s));
    kt_gate_free(g);
}

KT_DEVICE_TEST(objects_of_different_devices_mismatch)
{
    keel_device_t *other = kt_other_device(dev);
    if (other == NULL) {
        ck_assert_msg(!(kt_cpu_devices_env() && kt_is_cpu(dev)), "KEEL_CPU_DEVICES is set, yet one CPU device");
        return;
    }
    keel_stream_t *s = NULL;
    keel_event_t *e = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_event_create(other, 0, &e));
    KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_event_record(e, s));
    KT_OK(keel_event_destroy(e));
    KT_OK(keel_stream_destroy(s));
}

static Suite *suite(void)
{
    Suite *s = suite_create("stream");
    TCase *tc = kt_tcase_create("stream", 60);
    kt_add_device_test(tc, stream_create_query_destroy);
    kt_add_device_test(tc, stream_create_rejects_bad_input);
    kt_add_device_test(tc, default_stream_is_fixed_and_indestructible);
    kt_add_device_test(tc, priorities_are_clamped_to_the_range);
    kt_add_device_test(tc, host_functions_run_in_order_after_earlier_work);
    kt_add_device_test(tc, async_copy_waits_behind_a_gate);
    kt_add_device_test(tc, stream_waits_for_an_event_of_another_stream);
    kt_add_device_test(tc, stream_waits_for_an_event_of_another_device);
    kt_add_device_test(tc, event_lifecycle_and_states);
    kt_add_device_test(tc, event_functions_reject_bad_input);
    kt_add_device_test(tc, elapsed_time_between_recorded_events);
    kt_add_device_test(tc, event_destroyed_while_waited_on);
    kt_add_device_test(tc, stream_destroy_completes_pending_work);
    kt_add_device_test(tc, device_synchronize_waits_for_every_stream);
    kt_add_device_test(tc, streams_do_not_wait_for_each_other);
    kt_add_device_test(tc, objects_of_different_devices_mismatch);
    kt_add_device_test(tc, errors_inside_host_functions_stay_on_their_thread);
    kt_add_device_test(tc, waiters_for_different_amounts_of_work_all_return);
    kt_add_device_test(tc, many_host_functions_queue_behind_a_held_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
