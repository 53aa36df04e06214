/* SPDX-License-Identifier: MIT */
/* test-check: the CPU backend's checking mode (KEEL_CPU_CHECK=1, set here
 * before Keel starts). Deliberately broken programs (a missing synchronize
 * before reading a result, a missing event wait between two streams, fresh
 * memory used as if zeroed, memory used after its free) must fail every
 * time: refused with the call that should have come first, or reading data
 * that is stale or poisoned, never the right answer by luck. Each runs
 * REPEAT times on fresh random data. Correct programs must give the right
 * answers. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "fixture.h"

enum { REPEAT = 10, N = 3000 };

static const size_t BYTES = N * sizeof(float);

/* Every byte of p is the checking mode's poison (0xFF). */
static int all_poison(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0xFF)
            return 0;
    return 1;
}

static void saxpy_ref(double *ref, float a, const float *x, const float *y)
{
    for (int i = 0; i < N; i++)
        ref[i] = (double)a * x[i] + y[i];
}

struct data {
    float a, x[N], y[N], out[N];
    double ref[N];
};

static struct data *data_new(void)
{
    struct data *d = malloc(sizeof *d);
    kt_fill_random_f32(&d->a, 1);
    kt_fill_random_f32(d->x, N);
    kt_fill_random_f32(d->y, N);
    kt_poison(d->out, BYTES);
    saxpy_ref(d->ref, d->a, d->x, d->y);
    return d;
}

static void set_flag(void *p)
{
    *(volatile int *)p = 1;
}

/* ---- deferred execution ---- */

KT_DEVICE_TEST(stream_work_waits_for_the_host)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    for (int r = 0; r < REPEAT; r++) {
        volatile int flag = 0;
        KT_OK(keel_stream_launch_host_func(s, set_flag, (void *)&flag));
        usleep(20000);
        ck_assert_msg(flag == 0, "round %d: a host function ran with nobody waiting for its stream", r);
        KT_OK(keel_stream_synchronize(s));
        ck_assert_int_eq(flag, 1);
    }
    /* A query lets the work run: polling it finishes. */
    volatile int flag = 0;
    KT_OK(keel_stream_launch_host_func(s, set_flag, (void *)&flag));
    while (keel_stream_query(s) == KEEL_ERROR_NOT_READY)
        usleep(1000);
    ck_assert_int_eq(flag, 1);
    KT_OK(keel_stream_destroy(s));
}

/* ---- a missing synchronize before reading a result ---- */

KT_DEVICE_TEST(copy_back_without_synchronize_is_refused_every_time)
{
    keel_stream_t *s = NULL;
    keel_kernel_t *k = NULL;
    float *dx = NULL, *dy = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(kt_saxpy_kernel(dev, &k));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dx));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dy));
    for (int r = 0; r < REPEAT; r++) {
        struct data *d = data_new();
        KT_OK(keel_memcpy_async(dx, d->x, BYTES, s));
        KT_OK(keel_memcpy_async(dy, d->y, BYTES, s));
        KT_OK(kt_launch_saxpy(k, s, N, d->a, dx, dy));
        /* The bug: keel_memcpy runs on the default stream, not after s. */
        KT_FAIL(KEEL_ERROR_BUSY, keel_memcpy(d->out, dy, BYTES));
        KT_DETAIL_HAS("keel_memcpy: reads");
        KT_DETAIL_HAS("keel_memcpy_async");
        KT_DETAIL_HAS("keel_stream_synchronize");
        for (size_t i = 0; i < BYTES; i++)   /* the refused copy did nothing */
            ck_assert_int_eq(((unsigned char *)d->out)[i], KT_POISON_BYTE);
        /* The fix. */
        KT_OK(keel_stream_synchronize(s));
        KT_OK(keel_memcpy(d->out, dy, BYTES));
        ck_assert_int_eq(kt_check_f32(d->out, d->ref, N, 1e-6, 1e-6), -1);
        free(d);
    }
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    kt_kernel_put(k);
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(host_read_without_synchronize_sees_stale_data_every_time)
{
    keel_stream_t *s = NULL;
    keel_kernel_t *k = NULL;
    float *x = NULL, *y = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(kt_saxpy_kernel(dev, &k));
    KT_OK(keel_malloc_managed(dev, BYTES, (void **)&x));
    KT_OK(keel_malloc_managed(dev, BYTES, (void **)&y));
    for (int r = 0; r < REPEAT; r++) {
        struct data *d = data_new();
        memcpy(x, d->x, BYTES);
        memcpy(y, d->y, BYTES);
        KT_OK(kt_launch_saxpy(k, s, N, d->a, x, y));
        usleep(2000);
        /* The bug: reading managed memory the kernel writes, without a synchronize. */
        ck_assert_msg(memcmp(y, d->y, BYTES) == 0, "round %d: the kernel ran before the host waited", r);
        KT_OK(keel_stream_synchronize(s));
        ck_assert_int_eq(kt_check_f32(y, d->ref, N, 1e-6, 1e-6), -1);
        free(d);
    }
    KT_OK(keel_free(x));
    KT_OK(keel_free(y));
    kt_kernel_put(k);
    KT_OK(keel_stream_destroy(s));
}

/* ---- a missing event wait between two streams ---- */

KT_DEVICE_TEST(unordered_copies_on_two_streams_are_refused_every_time)
{
    keel_stream_t *s1 = NULL, *s2 = NULL;
    keel_event_t *e = NULL;
    float *dv = NULL, *dsum = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s1));
    KT_OK(keel_stream_create(dev, 0, 0, &s2));
    KT_OK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING, &e));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dv));
    KT_OK(keel_malloc(dev, sizeof(float), (void **)&dsum));
    for (int r = 0; r < REPEAT; r++) {
        struct data *d = data_new();
        /* Read after write: s2 copies back what s1 is still copying in. */
        KT_OK(keel_memcpy_async(dv, d->x, BYTES, s1));
        KT_FAIL(KEEL_ERROR_BUSY, keel_memcpy_async(d->out, dv, BYTES, s2));
        KT_DETAIL_HAS("keel_memcpy_async: reads");
        KT_DETAIL_HAS("keel_stream_wait_event");
        /* A built-in operation reading it is refused too. */
        KT_FAIL(KEEL_ERROR_BUSY, keel_reduce(s2, KEEL_REDUCE_SUM, KEEL_F32, 1, N, dv, N, KEEL_AXIS_ALL, dsum));
        KT_DETAIL_HAS("keel_reduce");
        /* Write after read: s1 reads dv into out, s2 overwrites dv meanwhile. */
        KT_OK(keel_stream_synchronize(s1));
        KT_OK(keel_memcpy_async(d->out, dv, BYTES, s1));
        KT_FAIL(KEEL_ERROR_BUSY, keel_memset_async(dv, 0, BYTES, s2));
        KT_DETAIL_HAS("writes");
        KT_FAIL(KEEL_ERROR_BUSY, keel_fill(s2, KEEL_F32, dv, N, 1.0));
        /* The fix: s2 waits for an event recorded after s1's work. */
        KT_OK(keel_event_record(e, s1));
        KT_OK(keel_stream_wait_event(s2, e));
        KT_OK(keel_fill(s2, KEEL_F32, dv, N, 2.0));
        KT_OK(keel_reduce(s2, KEEL_REDUCE_SUM, KEEL_F32, 1, N, dv, N, KEEL_AXIS_ALL, dsum));
        float sum = 0;
        KT_OK(keel_stream_synchronize(s2));
        KT_OK(keel_memcpy(&sum, dsum, sizeof sum));
        ck_assert_float_eq_tol(sum, 2.0f * N, 1e-3);
        double ref_x[N];
        for (int i = 0; i < N; i++)
            ref_x[i] = d->x[i];
        ck_assert_int_eq(kt_check_f32(d->out, ref_x, N, 0, 0), -1);
        free(d);
    }
    KT_OK(keel_free(dv));
    KT_OK(keel_free(dsum));
    KT_OK(keel_event_destroy(e));
    KT_OK(keel_stream_destroy(s1));
    KT_OK(keel_stream_destroy(s2));
}

/* A GEMM's operands are checked as a copy's are, whatever runs it (the
 * vendor library, or Keel's portable kernels under KEEL_BLAS=fallback:
 * kernels/tests/test-ops-fallback.sh runs this suite that way too): C read
 * on another stream before the GEMM is ordered is refused, as is A
 * overwritten while the GEMM may still read it. */
KT_DEVICE_TEST(unordered_gemm_operands_are_refused)
{
    enum { M = 24, K = 20, NC = 12 };
    keel_stream_t *s1 = NULL, *s2 = NULL;
    keel_event_t *e = NULL;
    float *da = NULL, *db = NULL, *dc = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s1));
    KT_OK(keel_stream_create(dev, 0, 0, &s2));
    KT_OK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING, &e));
    KT_OK(keel_malloc(dev, M * K * sizeof(float), (void **)&da));
    KT_OK(keel_malloc(dev, K * NC * sizeof(float), (void **)&db));
    KT_OK(keel_malloc(dev, M * NC * sizeof(float), (void **)&dc));
    for (int r = 0; r < REPEAT; r++) {
        float ha[M * K], hb[K * NC], hc[M * NC];
        double ref[M * NC];
        kt_fill_random_f32(ha, M * K);
        kt_fill_random_f32(hb, K * NC);
        kt_poison(hc, sizeof hc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < NC; j++) {
                double acc = 0;
                for (int l = 0; l < K; l++)
                    acc += (double)ha[i * K + l] * hb[l * NC + j];
                ref[i * NC + j] = acc;
            }
        KT_OK(keel_memcpy(da, ha, sizeof ha));
        KT_OK(keel_memcpy(db, hb, sizeof hb));
        keel_gemm_params_t p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        p.m = M, p.n = NC, p.k = K, p.alpha = 1.0;
        p.a_type = p.b_type = p.c_type = KEEL_F32;
        p.a = da, p.lda = K, p.b = db, p.ldb = NC, p.c = dc, p.ldc = NC;
        KT_OK(keel_gemm(s1, &p));
        KT_FAIL(KEEL_ERROR_BUSY, keel_memcpy_async(hc, dc, sizeof hc, s2));
        KT_DETAIL_HAS("keel_gemm");
        KT_FAIL(KEEL_ERROR_BUSY, keel_fill(s2, KEEL_F32, da, M * K, 0.0));
        KT_DETAIL_HAS("keel_gemm");
        KT_OK(keel_event_record(e, s1));
        KT_OK(keel_stream_wait_event(s2, e));
        KT_OK(keel_memcpy_async(hc, dc, sizeof hc, s2));
        KT_OK(keel_stream_synchronize(s2));
        ck_assert_int_eq(kt_check_f32(hc, ref, M * NC, 1e-5, 1e-5), -1);
    }
    KT_OK(keel_free(da));
    KT_OK(keel_free(db));
    KT_OK(keel_free(dc));
    KT_OK(keel_event_destroy(e));
    KT_OK(keel_stream_destroy(s1));
    KT_OK(keel_stream_destroy(s2));
}

/* Keel does not know what a kernel writes, so a kernel's output read on
 * another stream is not refused; the stream that reads runs first, every
 * time, so the program reads the old data. */
KT_DEVICE_TEST(kernel_output_read_on_another_stream_is_stale_every_time)
{
    keel_stream_t *s1 = NULL, *s2 = NULL;
    keel_event_t *e = NULL;
    keel_kernel_t *k = NULL;
    float *dx = NULL, *dy = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s1));
    KT_OK(keel_stream_create(dev, 0, 0, &s2));
    KT_OK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING, &e));
    KT_OK(kt_saxpy_kernel(dev, &k));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dx));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dy));
    for (int r = 0; r < 2 * REPEAT; r++) {
        struct data *d = data_new();
        KT_OK(keel_memcpy(dx, d->x, BYTES));
        KT_OK(keel_memcpy(dy, d->y, BYTES));
        KT_OK(kt_launch_saxpy(k, s1, N, d->a, dx, dy));
        KT_OK(keel_memcpy_async(d->out, dy, BYTES, s2));   /* the bug: no wait for s1 */
        /* Half the rounds wait for s2 alone, half for the whole device. */
        KT_OK(r % 2 ? keel_device_synchronize(dev) : keel_stream_synchronize(s2));
        ck_assert_msg(memcmp(d->out, d->y, BYTES) == 0, "round %d: s2 read the kernel's result without a wait", r);
        KT_OK(keel_stream_synchronize(s1));
        /* The fix. */
        kt_poison(d->out, BYTES);
        KT_OK(keel_memcpy(dy, d->y, BYTES));
        KT_OK(kt_launch_saxpy(k, s1, N, d->a, dx, dy));
        KT_OK(keel_event_record(e, s1));
        KT_OK(keel_stream_wait_event(s2, e));
        KT_OK(keel_memcpy_async(d->out, dy, BYTES, s2));
        KT_OK(r % 2 ? keel_device_synchronize(dev) : keel_stream_synchronize(s2));
        ck_assert_int_eq(kt_check_f32(d->out, d->ref, N, 1e-6, 1e-6), -1);
        free(d);
    }
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    kt_kernel_put(k);
    KT_OK(keel_event_destroy(e));
    KT_OK(keel_stream_destroy(s1));
    KT_OK(keel_stream_destroy(s2));
}

/* ---- fresh memory used as if zeroed ---- */

KT_DEVICE_TEST(fresh_memory_is_poisoned_every_time)
{
    keel_stream_t *s = NULL;
    keel_kernel_t *k = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(kt_saxpy_kernel(dev, &k));
    for (int r = 0; r < REPEAT; r++) {
        struct data *d = data_new();
        float *p[4] = {NULL};
        KT_OK(keel_malloc(dev, BYTES, (void **)&p[0]));
        KT_OK(keel_malloc_managed(dev, BYTES, (void **)&p[1]));
        KT_OK(keel_malloc_host(dev, BYTES, (void **)&p[2]));
        KT_OK(keel_malloc_async(s, BYTES, (void **)&p[3]));
        KT_OK(keel_stream_synchronize(s));
        for (int i = 0; i < 4; i++) {
            KT_OK(keel_memcpy(d->out, p[i], BYTES));
            ck_assert_msg(all_poison(d->out, BYTES), "round %d: fresh allocation %d is not poisoned", r, i);
        }
        /* The bug: accumulating into fresh memory as if it were zero. */
        float *dx = p[0], *acc = p[1];
        KT_OK(keel_memcpy(dx, d->x, BYTES));
        KT_OK(kt_launch_saxpy(k, s, N, d->a, dx, acc));
        KT_OK(keel_stream_synchronize(s));
        for (int i = 0; i < N; i++)
            ck_assert_msg(isnan(acc[i]), "round %d: acc[%d] = %g, a sum onto poison", r, i, acc[i]);
        /* A stream-ordered block given back and taken again is poisoned again. */
        KT_OK(keel_memcpy_async(p[3], d->x, BYTES, s));
        KT_OK(keel_free_async(p[3], s));
        KT_OK(keel_malloc_async(s, BYTES, (void **)&p[3]));
        KT_OK(keel_memcpy_async(d->out, p[3], BYTES, s));
        KT_OK(keel_stream_synchronize(s));
        ck_assert_msg(all_poison(d->out, BYTES), "round %d: a reused stream-ordered block kept its data", r);
        KT_OK(keel_free(p[0]));
        KT_OK(keel_free(p[1]));
        KT_OK(keel_free(p[2]));
        KT_OK(keel_free_async(p[3], s));
        free(d);
    }
    KT_OK(keel_stream_synchronize(s));
    kt_kernel_put(k);
    KT_OK(keel_stream_destroy(s));
}

/* ---- memory used after its free ---- */

KT_DEVICE_TEST(freed_memory_is_poisoned_or_refused_every_time)
{
    keel_stream_t *s = NULL;
    keel_kernel_t *k = NULL;
    float *dy = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(kt_saxpy_kernel(dev, &k));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dy));
    for (int r = 0; r < REPEAT; r++) {
        struct data *d = data_new();
        float *dx = NULL, *ax = NULL;
        KT_OK(keel_malloc(dev, BYTES, (void **)&dx));
        KT_OK(keel_memcpy(dx, d->x, BYTES));
        KT_OK(keel_memcpy(dy, d->y, BYTES));
        KT_OK(keel_free(dx));
        /* The bug: a kernel still reads the freed block; Keel's own calls refuse it. */
        KT_OK(kt_launch_saxpy(k, s, N, d->a, dx, dy));
        KT_OK(keel_stream_synchronize(s));
        KT_OK(keel_memcpy(d->out, dy, BYTES));
        for (int i = 0; i < N; i++)
            ck_assert_msg(isnan(d->out[i]), "round %d: y[%d] = %g from freed memory", r, i, d->out[i]);
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_memcpy(d->out, dx, BYTES));
        KT_DETAIL_HAS("freed");
        /* A stream-ordered free: work queued after it on the stream reads poison. */
        KT_OK(keel_malloc_async(s, BYTES, (void **)&ax));
        KT_OK(keel_memcpy_async(ax, d->x, BYTES, s));
        KT_OK(keel_memcpy_async(dy, d->y, BYTES, s));
        KT_OK(keel_free_async(ax, s));
        KT_OK(kt_launch_saxpy(k, s, N, d->a, ax, dy));
        KT_OK(keel_stream_synchronize(s));
        KT_OK(keel_memcpy(d->out, dy, BYTES));
        for (int i = 0; i < N; i++)
            ck_assert_msg(isnan(d->out[i]), "round %d: y[%d] = %g after a stream-ordered free", r, i, d->out[i]);
        free(d);
    }
    KT_OK(keel_free(dy));
    kt_kernel_put(k);
    KT_OK(keel_stream_destroy(s));
}

/* ---- correct programs ---- */

struct verify {
    const float *out;
    const double *ref;
    int ok;
};

static void verify_fn(void *p)
{
    struct verify *v = p;
    v->ok = kt_check_f32(v->out, v->ref, N, 1e-6, 1e-6) == -1;
}

KT_DEVICE_TEST(correct_programs_pass)
{
    keel_stream_t *s[3] = {NULL};
    keel_event_t *e1 = NULL, *e2 = NULL;
    keel_kernel_t *k = NULL;
    for (int i = 0; i < 3; i++)
        KT_OK(keel_stream_create(dev, 0, 0, &s[i]));
    KT_OK(keel_event_create(dev, 0, &e1));
    KT_OK(keel_event_create(dev, KEEL_EVENT_DISABLE_TIMING, &e2));
    KT_OK(kt_saxpy_kernel(dev, &k));
    for (int r = 0; r < REPEAT; r++) {
        struct data *d = data_new();
        float *dx = NULL, *dy = NULL, *dz = NULL, *hy2 = malloc(BYTES);
        KT_OK(keel_malloc_async(s[0], BYTES, (void **)&dx));
        KT_OK(keel_malloc(dev, BYTES, (void **)&dy));
        KT_OK(keel_malloc_host(dev, BYTES, (void **)&dz));
        KT_OK(keel_memcpy_async(dx, d->x, BYTES, s[0]));
        KT_OK(keel_memset_async(dy, 0, BYTES, s[0]));
        KT_OK(keel_memcpy_async(dy, d->y, BYTES, s[0]));
        KT_OK(kt_launch_saxpy(k, s[0], N, d->a, dx, dy));
        KT_OK(keel_event_record(e1, s[0]));
        /* Two consumers of y, each after the event. */
        KT_OK(keel_stream_wait_event(s[1], e1));
        KT_OK(keel_memcpy_async(d->out, dy, BYTES, s[1]));
        struct verify v = {d->out, d->ref, 0};
        KT_OK(keel_stream_launch_host_func(s[1], verify_fn, &v));
        KT_OK(keel_stream_wait_event(s[2], e1));
        KT_OK(keel_binary(s[2], KEEL_BINARY_ADD, KEEL_F32, 1, N, 1.0, dy, N, 0.0, dy, N, KEEL_BROADCAST_NONE, dz, N));
        KT_OK(keel_memcpy_async(hy2, dz, BYTES, s[2]));
        KT_OK(keel_event_record(e2, s[2]));
        /* s[0] frees x after its own work, and y only after both reads. */
        KT_OK(keel_free_async(dx, s[0]));
        KT_OK(keel_stream_wait_event(s[0], e2));
        KT_OK(keel_event_record(e2, s[1]));
        KT_OK(keel_stream_wait_event(s[0], e2));
        KT_OK(keel_event_synchronize(e2));
        KT_OK(keel_device_synchronize(dev));
        ck_assert_msg(v.ok, "round %d: wrong y", r);
        ck_assert_int_eq(kt_check_f32(hy2, d->ref, N, 1e-6, 1e-6), -1);
        ck_assert_int_eq(kt_check_f32(dz, d->ref, N, 1e-6, 1e-6), -1);   /* pinned: the host may read it now */
        float ms = -1;
        KT_OK(keel_event_elapsed_time(e1, e1, &ms));
        KT_OK(keel_free(dy));
        KT_OK(keel_free(dz));
        free(hy2);
        free(d);
    }
    KT_OK(keel_event_destroy(e1));
    KT_OK(keel_event_destroy(e2));
    kt_kernel_put(k);
    for (int i = 0; i < 3; i++)
        KT_OK(keel_stream_destroy(s[i]));
}

KT_DEVICE_TEST(graphs_run_when_waited_for)
{
    keel_stream_t *s = NULL;
    keel_graph_t *g = NULL;
    keel_graph_exec_t *x = NULL;
    float *dv = NULL;
    struct data *d = data_new();
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_malloc(dev, BYTES, (void **)&dv));
    KT_OK(keel_stream_begin_capture(s));
    KT_OK(keel_memcpy_async(dv, d->x, BYTES, s));
    KT_OK(keel_memcpy_async(d->out, dv, BYTES, s));
    KT_OK(keel_stream_end_capture(s, &g));
    KT_OK(keel_graph_instantiate(g, &x));
    for (int r = 0; r < REPEAT; r++) {
        kt_poison(d->out, BYTES);
        KT_OK(keel_graph_launch(x, s));
        usleep(2000);
        ck_assert_msg(((unsigned char *)d->out)[0] == KT_POISON_BYTE, "round %d: the graph ran unwaited", r);
        KT_OK(keel_stream_synchronize(s));
        ck_assert_int_eq(memcmp(d->out, d->x, BYTES), 0);
    }
    KT_OK(keel_graph_exec_destroy(x));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_free(dv));
    KT_OK(keel_stream_destroy(s));
    free(d);
}

static Suite *suite(void)
{
    Suite *s = suite_create("check");
    TCase *tc = kt_tcase_create("check", 120);
    kt_add_device_test(tc, stream_work_waits_for_the_host);
    kt_add_device_test(tc, copy_back_without_synchronize_is_refused_every_time);
    kt_add_device_test(tc, host_read_without_synchronize_sees_stale_data_every_time);
    kt_add_device_test(tc, unordered_copies_on_two_streams_are_refused_every_time);
    kt_add_device_test(tc, unordered_gemm_operands_are_refused);
    kt_add_device_test(tc, kernel_output_read_on_another_stream_is_stale_every_time);
    kt_add_device_test(tc, fresh_memory_is_poisoned_every_time);
    kt_add_device_test(tc, freed_memory_is_poisoned_or_refused_every_time);
    kt_add_device_test(tc, correct_programs_pass);
    kt_add_device_test(tc, graphs_run_when_waited_for);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    /* Only the CPU backend has the mode; Keel reads it once, at start. */
    setenv("KEEL_BACKEND", "cpu", 1);
    setenv("KEEL_CPU_CHECK", "1", 1);
    return kt_main(argc, argv, suite(), 1, 1);
}
