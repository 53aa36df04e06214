/* SPDX-License-Identifier: MIT */
/* test-stress: many threads, each with several streams, running copies,
 * launches, events, cross-stream waits, host callbacks and stream-ordered
 * allocations at once, every result checked against a float64 reference.
 * Meant to be run under TSan too. Threads report failures through
 * kt_thread_fail (fixture.h), and the test thread asserts after joining
 * them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "fixture.h"

enum { NTHREADS = 8, NSTREAMS = 4 };

static int iterations(void)
{
    const char *s = getenv("KEEL_STRESS_ITERATIONS");
    return s && *s ? atoi(s) : 40;
}

static atomic_long checked;

#define TRY(call) KT_THREAD_TRY(call)

static void reset(void)
{
    kt_thread_failures_reset();
    atomic_store(&checked, 0);
}

#define assert_clean(what) KT_ASSERT_NO_THREAD_FAILURES(what)

/* ---- saxpy jobs ---- */

struct job {
    int n;
    float a;
    float *x, *y, *out;
    struct job *next;
};

static struct job *job_new(void)
{
    struct job *j = calloc(1, sizeof *j);
    j->n = 1 + (int)(kt_rand64() % 4096);
    kt_fill_random_f32(&j->a, 1);
    j->x = malloc(j->n * sizeof(float));
    j->y = malloc(j->n * sizeof(float));
    j->out = malloc(j->n * sizeof(float));
    kt_fill_random_f32(j->x, j->n);
    kt_fill_random_f32(j->y, j->n);
    kt_poison(j->out, j->n * sizeof(float));
    return j;
}

static void job_free(struct job *j)
{
    free(j->x);
    free(j->y);
    free(j->out);
    free(j);
}

/* Runs on a Keel thread after the job's copies and launch, in stream order. */
static void job_verify(void *p)
{
    struct job *j = p;
    for (int i = 0; i < j->n; i++) {
        double ref = (double)j->a * j->x[i] + j->y[i];
        double got = j->out[i];
        if (!(got - ref <= 1e-5 + 1e-5 * (ref < 0 ? -ref : ref) && ref - got <= 1e-5 + 1e-5 * (ref < 0 ? -ref : ref))) {
            kt_thread_fail("job n=%d a=%g: out[%d] = %.9g, expected %.9g", j->n, j->a, i, got, ref);
            return;
        }
    }
    atomic_fetch_add(&checked, 1);
}

struct order_check {
    atomic_int stage;
};

static void bump(void *p)
{
    atomic_fetch_add(&((struct order_check *)p)->stage, 1);
}

struct worker {
    int id;
    keel_device_t *dev;
};

static void *saxpy_worker(void *p)
{
    struct worker *w = p;
    keel_stream_t *s[NSTREAMS] = {NULL};
    keel_event_t *e[NSTREAMS] = {NULL};
    keel_kernel_t *k = NULL;
    struct job *jobs = NULL;
    struct order_check oc = {0};
    int expected_bumps = 0;
    TRY(kt_saxpy_kernel(w->dev, &k));
    for (int i = 0; i < NSTREAMS; i++) {
        TRY(keel_stream_create(w->dev, 0, i % 2 ? 0 : -1, &s[i]));
        TRY(keel_event_create(w->dev, i % 2 ? KEEL_EVENT_DISABLE_TIMING : 0, &e[i]));
    }
    int iters = iterations();
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < NSTREAMS; i++) {
            struct job *j = job_new();
            j->next = jobs;
            jobs = j;
            float *dx = NULL, *dy = NULL;
            size_t bytes = j->n * sizeof(float);
            if ((it + i) % 2) {
                TRY(keel_malloc_async(s[i], bytes, (void **)&dx));
                TRY(keel_malloc_async(s[i], bytes, (void **)&dy));
            } else {
                TRY(keel_malloc(w->dev, bytes, (void **)&dx));
                TRY(keel_malloc(w->dev, bytes, (void **)&dy));
            }
            TRY(keel_memcpy_async(dx, j->x, bytes, s[i]));
            TRY(keel_memcpy_async(dy, j->y, bytes, s[i]));
            TRY(kt_launch_saxpy(k, s[i], j->n, j->a, dx, dy));
            TRY(keel_memcpy_async(j->out, dy, bytes, s[i]));
            TRY(keel_stream_launch_host_func(s[i], job_verify, j));
            TRY(keel_free_async(dx, s[i]));
            TRY(keel_free_async(dy, s[i]));
            /* Chain the streams: the next one waits for this one's work so far. */
            TRY(keel_event_record(e[i], s[i]));
            TRY(keel_stream_wait_event(s[(i + 1) % NSTREAMS], e[i]));
            TRY(keel_stream_launch_host_func(s[(i + 1) % NSTREAMS], bump, &oc));
            expected_bumps++;
        }
        if (it % 8 == 7)
            TRY(keel_stream_synchronize(s[it % NSTREAMS]));
    }
out:
    for (int i = 0; i < NSTREAMS; i++)
        if (s[i] && keel_stream_synchronize(s[i]) != KEEL_OK)
            kt_thread_fail("worker %d: keel_stream_synchronize: %s", w->id, keel_last_error());
    if (atomic_load(&oc.stage) != expected_bumps)
        kt_thread_fail("worker %d: %d host callbacks ran, expected %d", w->id, atomic_load(&oc.stage), expected_bumps);
    for (int i = 0; i < NSTREAMS; i++) {
        if (e[i])
            keel_event_destroy(e[i]);
        if (s[i])
            keel_stream_destroy(s[i]);
    }
    kt_kernel_put(k);
    while (jobs) {
        struct job *n = jobs->next;
        job_free(jobs);
        jobs = n;
    }
    return NULL;
}

static void run_workers(void *(*fn)(void *))
{
    pthread_t th[NTHREADS];
    struct worker w[NTHREADS];
    int n = kt_device_count();
    for (int t = 0; t < NTHREADS; t++) {
        w[t].id = t;
        /* Spread over the devices under test, starting with the current one. */
        int base = 0;
        for (int i = 0; i < n; i++)
            if (kt_device(i) == kt_dev)
                base = i;
        w[t].dev = t % 2 == 0 ? kt_dev : kt_device((base + t / 2) % n);
        pthread_create(&th[t], NULL, fn, &w[t]);
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
}

KT_DEVICE_TEST(threads_times_streams_saxpy_chains_are_correct)
{
    (void)dev;
    reset();
    run_workers(saxpy_worker);
    assert_clean("saxpy workers");
    ck_assert_int_eq(atomic_load(&checked), (long)NTHREADS * NSTREAMS * iterations());
}

/* ---- the allocation registry under contention ---- */

static void *alloc_worker(void *p)
{
    struct worker *w = p;
    enum { LIVE = 16 };
    void *live[LIVE] = {NULL};
    size_t sizes[LIVE] = {0};
    unsigned char pattern[512], back[512];
    int rounds = iterations() * 40;
    for (int r = 0; r < rounds; r++) {
        int slot = (int)(kt_rand64() % LIVE);
        if (live[slot]) {
            keel_pointer_info_t info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            size_t off = kt_rand64() % sizes[slot];
            TRY(keel_pointer_get_info((char *)live[slot] + off, &info));
            if (info.base != live[slot] || info.size != sizes[slot] || info.offset != off || info.device != w->dev)
                kt_thread_fail("worker %d: pointer info of %p+%zu: base %p size %zu offset %zu", w->id, live[slot], off,
                     info.base, info.size, info.offset);
            size_t n = sizes[slot] < sizeof pattern ? sizes[slot] : sizeof pattern;
            kt_fill_random_bytes(pattern, n);
            TRY(keel_memcpy(live[slot], pattern, n));
            TRY(keel_memcpy(back, live[slot], n));
            if (memcmp(pattern, back, n) != 0)
                kt_thread_fail("worker %d: round trip through %p differs", w->id, live[slot]);
            TRY(keel_free(live[slot]));
            /* Freed: another thread may get the address again, but not as ours. */
            live[slot] = NULL;
        } else {
            sizes[slot] = 1 + kt_rand64() % 100000;
            keel_status_t st = r % 3 ? keel_malloc(w->dev, sizes[slot], &live[slot])
                                     : keel_malloc_host(w->dev, sizes[slot], &live[slot]);
            if (st != KEEL_OK) {
                kt_thread_fail("worker %d: alloc %zu: %s (%s)", w->id, sizes[slot], keel_status_name(st), keel_last_error());
                live[slot] = NULL;
                goto out;
            }
        }
    }
out:
    for (int i = 0; i < LIVE; i++)
        if (live[i] && keel_free(live[i]) != KEEL_OK)
            kt_thread_fail("worker %d: final free: %s", w->id, keel_last_error());
    return NULL;
}

KT_DEVICE_TEST(registry_survives_concurrent_alloc_free_and_lookups)
{
    (void)dev;
    reset();
    run_workers(alloc_worker);
    assert_clean("alloc workers");
}

/* ---- handle churn: streams and events made and destroyed while in use ---- */

static void *churn_worker(void *p)
{
    struct worker *w = p;
    struct order_check oc = {0};
    int expected = 0;
    keel_stream_t *def = NULL;
    TRY(keel_device_default_stream(w->dev, &def));
    for (int r = 0; r < iterations() * 4; r++) {
        keel_stream_t *a = NULL, *b = NULL;
        keel_event_t *e = NULL;
        TRY(keel_stream_create(w->dev, 0, 0, &a));
        TRY(keel_stream_create(w->dev, 0, 0, &b));
        TRY(keel_event_create(w->dev, KEEL_EVENT_DISABLE_TIMING, &e));
        TRY(keel_stream_launch_host_func(a, bump, &oc));
        TRY(keel_event_record(e, a));
        TRY(keel_stream_wait_event(b, e));
        TRY(keel_stream_wait_event(def, e));
        TRY(keel_event_destroy(e)); /* pending waits still complete */
        TRY(keel_stream_launch_host_func(b, bump, &oc));
        expected += 2;
        TRY(keel_stream_destroy(a));
        TRY(keel_stream_destroy(b));
    }
out:
    if (atomic_load(&oc.stage) != expected)
        kt_thread_fail("worker %d: %d callbacks ran, expected %d", w->id, atomic_load(&oc.stage), expected);
    return NULL;
}

KT_DEVICE_TEST(streams_and_events_churn_across_threads)
{
    (void)dev;
    reset();
    run_workers(churn_worker);
    KT_OK(keel_device_synchronize(dev));
    assert_clean("churn workers");
}

static Suite *suite(void)
{
    Suite *s = suite_create("stress");
    TCase *tc = kt_tcase_create("stress", 240);
    kt_add_device_test(tc, threads_times_streams_saxpy_chains_are_correct);
    kt_add_device_test(tc, registry_survives_concurrent_alloc_free_and_lookups);
    kt_add_device_test(tc, streams_and_events_churn_across_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
