/* SPDX-License-Identifier: MIT */
/* test-soak: a bounded soak on every device under test. Threads, each with
 * three streams, run rounds of mixed work for a fixed time
 * (KEEL_SOAK_SECONDS, default 8, shared by the devices of the run): device,
 * stream-ordered, pinned and managed allocations, asynchronous copies both
 * ways, memsets, a kernel, built-in operations (keel_binary, keel_reduce),
 * events with cross-stream waits and timing, host functions, and every kind
 * of synchronization. Each round draws fresh random data and checks every
 * result against a float64 reference in host functions; at the end every
 * host function must have run, every round been checked, every handle and
 * allocation released and the device's memory all back.
 * Threads report failures through kt_thread_fail (fixture.h). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include "fixture.h"

enum { NTHREADS = 4, NSTREAMS = 3, MAX_N = 12288, MAX_PENDING = 6 };

static atomic_long rounds_started, rounds_checked, callbacks_expected, callbacks_run;
static atomic_long allocs, frees, handles_made, handles_gone;

#define TRY(call) KT_THREAD_TRY(call)

static double soak_seconds(void)
{
    const char *s = getenv("KEEL_SOAK_SECONDS");
    double v = s && *s ? atof(s) : 8.0;
    return v > 0 ? v : 8.0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int close_enough(double got, double ref, double scale)
{
    double tol = 1e-5 * (scale > 1 ? scale : 1) + 1e-5 * fabs(ref);
    return fabs(got - ref) <= tol; /* false for NaN */
}

/* ---- one round of work and its checks ---- */

enum kind { K_DEVICE, K_ASYNC, K_PINNED, K_MANAGED, K_COUNT };
static const char *const kind_names[K_COUNT] = {"device", "stream-ordered", "pinned", "managed"};

struct round {
    int n, m, rows, cols;
    enum kind kind;
    float a, beta;
    float *hx, *hy;          /* inputs */
    float *hout, *hyout;     /* results: z = (a x + y') + beta x, and y = a x + y' */
    float hsum;              /* sum of z, by keel_reduce */
    float *dx, *dy, *dz, *dsum;
    atomic_int done;         /* host functions that checked it (2 when complete) */
    struct round *next;
};

/* y' is y with its elements from m on cleared by the memset. */
static double ref_y(const struct round *r, int i)
{
    return (double)r->a * r->hx[i] + (i < r->m ? (double)r->hy[i] : 0.0);
}

/* On stream 1, after the binary op, the reduction and both copies back. */
static void check_z(void *p)
{
    struct round *r = p;
    double sum = 0, scale = 0;
    for (int i = 0; i < r->n; i++) {
        double z = ref_y(r, i) + (double)r->beta * r->hx[i];
        sum += z;
        scale += fabs(z);
        if (!close_enough(r->hout[i], z, 1)) {
            kt_thread_fail("%s round n=%d m=%d: z[%d] = %.9g, expected %.9g", kind_names[r->kind], r->n, r->m, i,
                      r->hout[i], z);
            break;
        }
    }
    if (!close_enough(r->hsum, sum, scale))
        kt_thread_fail("%s round n=%d: sum of z = %.9g, expected %.9g", kind_names[r->kind], r->n, r->hsum, sum);
    atomic_fetch_add(&callbacks_run, 1);
    if (atomic_fetch_add(&r->done, 1) == 1)
        atomic_fetch_add(&rounds_checked, 1);
}

/* On stream 2, after its copy of y. */
static void check_y(void *p)
{
    struct round *r = p;
    for (int i = 0; i < r->n; i++)
        if (!close_enough(r->hyout[i], ref_y(r, i), 1)) {
            kt_thread_fail("%s round n=%d m=%d: y[%d] = %.9g, expected %.9g", kind_names[r->kind], r->n, r->m, i,
                      r->hyout[i], ref_y(r, i));
            break;
        }
    atomic_fetch_add(&callbacks_run, 1);
    if (atomic_fetch_add(&r->done, 1) == 1)
        atomic_fetch_add(&rounds_checked, 1);
}

static struct round *round_new(void)
{
    struct round *r = calloc(1, sizeof *r);
    r->rows = 1 + (int)(kt_rand64() % 8);
    r->cols = 1 + (int)(kt_rand64() % (MAX_N / 8));
    r->n = r->rows * r->cols;
    r->m = (int)(kt_rand64() % (unsigned)(r->n + 1));
    r->kind = (enum kind)(kt_rand64() % K_COUNT);
    kt_fill_random_f32(&r->a, 1);
    kt_fill_random_f32(&r->beta, 1);
    size_t bytes = (size_t)r->n * sizeof(float);
    r->hx = malloc(bytes);
    r->hy = malloc(bytes);
    r->hout = malloc(bytes);
    r->hyout = malloc(bytes);
    kt_fill_random_f32(r->hx, r->n);
    kt_fill_random_f32(r->hy, r->n);
    kt_poison(r->hout, bytes);
    kt_poison(r->hyout, bytes);
    kt_poison(&r->hsum, sizeof r->hsum);
    return r;
}

static void round_free(struct round *r)
{
    free(r->hx);
    free(r->hy);
    free(r->hout);
    free(r->hyout);
    free(r);
}

static keel_status_t alloc_kind(keel_device_t *dev, keel_stream_t *s, enum kind k, size_t bytes, float **p)
{
    keel_status_t st;
    switch (k) {
    case K_DEVICE: st = keel_malloc(dev, bytes, (void **)p); break;
    case K_ASYNC: st = keel_malloc_async(s, bytes, (void **)p); break;
    case K_PINNED: st = keel_malloc_host(dev, bytes, (void **)p); break;
    default: st = keel_malloc_managed(dev, bytes, (void **)p); break;
    }
    if (st == KEEL_OK)
        atomic_fetch_add(&allocs, 1);
    return st;
}

static keel_status_t free_kind(enum kind k, keel_stream_t *s, float **p)
{
    if (!*p)
        return KEEL_OK;
    keel_status_t st = k == K_ASYNC ? keel_free_async(*p, s) : keel_free(*p);
    if (st == KEEL_OK) {
        atomic_fetch_add(&frees, 1);
        *p = NULL;
    }
    return st;
}

struct worker {
    int id;
    keel_device_t *dev;
    double until;
};

/* Frees the device memory of r (stream-ordered frees go on stream 1, which
 * waited for stream 2's last use of y), then, once both checks ran, the
 * round itself. */
static keel_status_t round_release_device(struct round *r, keel_stream_t **s)
{
    keel_status_t st;
    if ((st = free_kind(r->kind, s[1], &r->dx)) != KEEL_OK || (st = free_kind(r->kind, s[1], &r->dy)) != KEEL_OK ||
        (st = free_kind(K_DEVICE, s[1], &r->dz)) != KEEL_OK || (st = free_kind(K_DEVICE, s[1], &r->dsum)) != KEEL_OK)
        return st;
    return KEEL_OK;
}

/* Rounds whose checks have run are freed; 1 if some are still pending. */
static int reap(struct round **list)
{
    int pending = 0;
    for (struct round **pp = list; *pp;) {
        struct round *r = *pp;
        if (atomic_load(&r->done) == 2 && !r->dx && !r->dy && !r->dz && !r->dsum) {
            *pp = r->next;
            round_free(r);
        } else {
            pending++;
            pp = &r->next;
        }
    }
    return pending;
}

static void *soak_worker(void *p)
{
    struct worker *w = p;
    keel_stream_t *s[NSTREAMS] = {NULL};
    keel_event_t *e_y = NULL, *e_read = NULL, *t0 = NULL, *t1 = NULL;
    keel_kernel_t *k = NULL;
    struct round *list = NULL;
    TRY(kt_saxpy_kernel(w->dev, &k));
    for (int i = 0; i < NSTREAMS; i++) {
        TRY(keel_stream_create(w->dev, 0, 0, &s[i]));
        atomic_fetch_add(&handles_made, 1);
    }
    keel_event_t **evs[] = {&e_y, &e_read, &t0, &t1};
    for (int i = 0; i < 4; i++) {
        TRY(keel_event_create(w->dev, i < 2 ? KEEL_EVENT_DISABLE_TIMING : 0, evs[i]));
        atomic_fetch_add(&handles_made, 1);
    }
    while (now_s() < w->until) {
        struct round *r = round_new();
        r->next = list;
        list = r;
        atomic_fetch_add(&rounds_started, 1);
        size_t bytes = (size_t)r->n * sizeof(float);
        TRY(alloc_kind(w->dev, s[0], r->kind, bytes, &r->dx));
        TRY(alloc_kind(w->dev, s[0], r->kind, bytes, &r->dy));
        TRY(alloc_kind(w->dev, s[0], K_DEVICE, bytes, &r->dz));
        TRY(alloc_kind(w->dev, s[0], K_DEVICE, sizeof(float), &r->dsum));
        /* Stream 0: y' = y on [0, m), 0 after; y = a x + y'. */
        TRY(keel_event_record(t0, s[0]));
        TRY(keel_memcpy_async(r->dx, r->hx, bytes, s[0]));
        TRY(keel_memset_async(r->dy, 0, bytes, s[0]));
        if (r->m)
            TRY(keel_memcpy_async(r->dy, r->hy, (size_t)r->m * sizeof(float), s[0]));
        TRY(kt_launch_saxpy(k, s[0], r->n, r->a, r->dx, r->dy));
        TRY(keel_event_record(t1, s[0]));
        TRY(keel_event_record(e_y, s[0]));
        /* Stream 1: z = y + beta x, its sum, both back to the host, checked. */
        TRY(keel_stream_wait_event(s[1], e_y));
        TRY(keel_binary(s[1], KEEL_BINARY_ADD, KEEL_F32, (size_t)r->rows, (size_t)r->cols, 1.0, r->dy,
                        (size_t)r->cols, r->beta, r->dx, (size_t)r->cols, KEEL_BROADCAST_NONE, r->dz,
                        (size_t)r->cols));
        TRY(keel_reduce(s[1], KEEL_REDUCE_SUM, KEEL_F32, (size_t)r->rows, (size_t)r->cols, r->dz,
                        (size_t)r->cols, KEEL_AXIS_ALL, r->dsum));
        TRY(keel_memcpy_async(r->hout, r->dz, bytes, s[1]));
        TRY(keel_memcpy_async(&r->hsum, r->dsum, sizeof(float), s[1]));
        TRY(keel_stream_launch_host_func(s[1], check_z, r));
        atomic_fetch_add(&callbacks_expected, 1);
        /* Stream 2: y back to the host, checked; stream 1 waits for that read before y may go. */
        TRY(keel_stream_wait_event(s[2], e_y));
        TRY(keel_memcpy_async(r->hyout, r->dy, bytes, s[2]));
        TRY(keel_stream_launch_host_func(s[2], check_y, r));
        atomic_fetch_add(&callbacks_expected, 1);
        TRY(keel_event_record(e_read, s[2]));
        TRY(keel_stream_wait_event(s[1], e_read));
        /* Free now (keel_free waits for the device itself; stream-ordered
         * frees follow stream 1's work), or after a later synchronization. */
        uint64_t pick = kt_rand64() % 6;
        if (pick < 2)
            TRY(round_release_device(r, s));
        switch (pick % 3) {
        case 0:
            TRY(keel_stream_synchronize(s[1]));
            TRY(keel_stream_synchronize(s[2]));
            break;
        case 1:
            TRY(keel_event_synchronize(e_read));
            TRY(keel_stream_synchronize(s[1]));
            break;
        default:
            if (keel_stream_query(s[1]) == KEEL_OK && keel_stream_query(s[2]) == KEEL_OK && atomic_load(&r->done) != 2)
                kt_thread_fail("worker %d: both streams idle before their host functions ran", w->id);
            break;
        }
        if (keel_event_query(t1) == KEEL_OK) {
            float ms = -1;
            TRY(keel_event_elapsed_time(t0, t1, &ms));
            if (!(ms >= 0))
                kt_thread_fail("worker %d: elapsed time %g ms between events in stream order", w->id, ms);
        }
        for (struct round *q = list; q; q = q->next)
            if (atomic_load(&q->done) == 2)
                TRY(round_release_device(q, s));
        if (reap(&list) > MAX_PENDING) {
            TRY(keel_device_synchronize(w->dev));
            for (struct round *q = list; q; q = q->next)
                TRY(round_release_device(q, s));
            TRY(keel_device_synchronize(w->dev));
            reap(&list);
        }
    }
out:
    if (keel_device_synchronize(w->dev) != KEEL_OK)
        kt_thread_fail("worker %d: keel_device_synchronize: %s", w->id, keel_last_error());
    for (struct round *q = list; q; q = q->next)
        if (round_release_device(q, s) != KEEL_OK)
            kt_thread_fail("worker %d: free: %s", w->id, keel_last_error());
    if (keel_device_synchronize(w->dev) != KEEL_OK)
        kt_thread_fail("worker %d: keel_device_synchronize: %s", w->id, keel_last_error());
    if (reap(&list) != 0)
        kt_thread_fail("worker %d: rounds left unchecked after synchronizing the device", w->id);
    for (int i = 0; i < 4; i++)
        if (*evs[i] && keel_event_destroy(*evs[i]) == KEEL_OK)
            atomic_fetch_add(&handles_gone, 1);
    for (int i = 0; i < NSTREAMS; i++)
        if (s[i] && keel_stream_destroy(s[i]) == KEEL_OK)
            atomic_fetch_add(&handles_gone, 1);
    kt_kernel_put(k);
    while (list) {
        struct round *n = list->next;
        round_free(list);
        list = n;
    }
    return NULL;
}

static void reset(void)
{
    kt_thread_failures_reset();
    atomic_long *counters[] = {&rounds_started, &rounds_checked, &callbacks_expected, &callbacks_run,
                               &allocs, &frees, &handles_made, &handles_gone};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        atomic_store(counters[i], 0);
}

static void run_workers(keel_device_t *dev, double seconds)
{
    pthread_t th[NTHREADS];
    struct worker w[NTHREADS];
    double until = now_s() + seconds;
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (struct worker){i, dev, until};
        ck_assert_int_eq(pthread_create(&th[i], NULL, soak_worker, &w[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    KT_ASSERT_NO_THREAD_FAILURES("soak workers");
}

KT_DEVICE_TEST(mixed_work_for_a_fixed_time_is_correct_and_leaves_nothing)
{
    double t = soak_seconds() / kt_device_count();
    /* A GPU runtime sets up what it keeps for the context's life (library
     * workspaces, the local-memory reserve) on first use: a short round of
     * the same work first, so that the memory compared is Keel's. */
    if (!kt_is_cpu(dev)) {
        reset();
        run_workers(dev, t / 8);
    }
    reset();
    size_t free0 = 0, total = 0;
    KT_OK(keel_device_memory_info(dev, &free0, &total));
    run_workers(dev, t);
    long started = atomic_load(&rounds_started);
    fprintf(stderr, "soak on %s: %.1f s, %d threads x %d streams, %ld rounds checked, %ld allocations\n",
            keel_device_name(dev), t, NTHREADS, NSTREAMS, atomic_load(&rounds_checked), atomic_load(&allocs));
    ck_assert_msg(started >= NTHREADS, "%sonly %ld rounds ran in %.1f s", kt_where(), started, t);
    ck_assert_int_eq(atomic_load(&rounds_checked), started);
    ck_assert_int_eq(atomic_load(&callbacks_run), atomic_load(&callbacks_expected));
    ck_assert_int_eq(atomic_load(&frees), atomic_load(&allocs));
    ck_assert_int_eq(atomic_load(&handles_gone), atomic_load(&handles_made));
    ck_assert_int_eq(atomic_load(&handles_made), NTHREADS * (NSTREAMS + 4));
    /* Every byte back: on a capped CPU device the whole cap must be free
     * again (Keel gives back the freed blocks it keeps when an allocation
     * needs them); elsewhere free memory must be about where it was. */
    if (kt_is_cpu(dev) && getenv("KEEL_CPU_MEMORY_LIMIT")) {
        void *all = NULL;
        KT_OK(keel_malloc(dev, total, &all));
        KT_OK(keel_free(all));
    } else {
        /* A GPU's stream-ordered pool keeps what it was given back until
         * memory runs short: an allocation larger than the device makes
         * Keel release the pool's unused memory and the blocks it keeps,
         * and fail recoverably; then everything must be back. */
        size_t free1 = 0, total_mem = 0;
        KT_OK(keel_device_memory_info(dev, &free1, &total_mem));
        if (!kt_is_cpu(dev)) { /* the host's memory may be overcommitted: no such test there */
            void *huge = NULL;
            KT_FAIL(KEEL_ERROR_OUT_OF_MEMORY, keel_malloc(dev, total_mem + (total_mem >> 1), &huge));
            KT_OK(keel_device_memory_info(dev, &free1, NULL));
        }
        ck_assert_msg(free1 + (64u << 20) >= free0, "%sfree memory went from %zu to %zu bytes", kt_where(), free0,
                      free1);
    }
}

static Suite *suite(void)
{
    Suite *s = suite_create("soak");
    TCase *tc = kt_tcase_create("soak", 0);
    kt_add_device_test(tc, mixed_work_for_a_fixed_time_is_correct_and_leaves_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    /* A cap makes the CPU devices' memory countable (the leak check above). */
    setenv("KEEL_CPU_MEMORY_LIMIT", "256M", 0);
    return kt_main(argc, argv, suite(), 1, 1);
}
