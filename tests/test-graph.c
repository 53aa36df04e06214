/* SPDX-License-Identifier: MIT */
/* test-graph: capture stream work into a graph, instantiate it and replay it,
 * and the error paths of every function of keel/graph.h. */
#include <stdatomic.h>
#include <stdlib.h>
#include "fixture.h"

static uint64_t not_a_handle[64];

static void count_call(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

/* Begins a capture, or returns 0 when the backend has no graphs. */
static int begin_or_skip(keel_stream_t *s)
{
    keel_status_t st = keel_stream_begin_capture(s);
    if (kt_unsupported(kt_dev, KT_GRAPHS, st))
        return 0;
    ck_assert_msg(st == KEEL_OK, "%skeel_stream_begin_capture -> %s (%s)", kt_where(), keel_status_name(st),
                  keel_last_error());
    return 1;
}

KT_DEVICE_TEST(captured_work_runs_only_when_replayed)
{
    enum { N = 3001 };
    keel_kernel_t *k = NULL;
    KT_OK(kt_saxpy_kernel(dev, &k));
    keel_stream_t *s = NULL, *s2 = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_stream_create(dev, 0, 0, &s2));
    float *in = NULL, *out = NULL, *dx = NULL, *dy = NULL;
    KT_OK(keel_malloc_host(dev, N * sizeof(float), (void **)&in));
    KT_OK(keel_malloc_host(dev, N * sizeof(float), (void **)&out));
    KT_OK(keel_malloc(dev, N * sizeof(float), (void **)&dx));
    KT_OK(keel_malloc(dev, N * sizeof(float), (void **)&dy));
    double *ref = malloc(N * sizeof(double));
    float y0[N];
    kt_fill_random_f32(y0, N);
    KT_OK(keel_memcpy(dy, y0, sizeof y0));
    for (int i = 0; i < N; i++)
        ref[i] = y0[i];
    kt_poison(out, N * sizeof(float));
    static atomic_int calls;
    atomic_store(&calls, 0);
    const float a = 0.75f;

    if (!begin_or_skip(s)) {
        kt_kernel_put(k);
        return;
    }
    int cap = -1;
    KT_OK(keel_stream_is_capturing(s, &cap));
    ck_assert_int_eq(cap, 1);
    KT_OK(keel_stream_is_capturing(s2, &cap));
    ck_assert_int_eq(cap, 0);
    KT_OK(keel_memcpy_async(dx, in, N * sizeof(float), s));
    KT_OK(kt_launch_saxpy(k, s, N, a, dx, dy));
    KT_OK(keel_memcpy_async(out, dy, N * sizeof(float), s));
    KT_OK(keel_stream_launch_host_func(s, count_call, &calls));
    /* Synchronous calls on a capturing stream are refused. */
    KT_FAIL(KEEL_ERROR_BUSY, keel_stream_synchronize(s));
    keel_graph_t *g = KT_SENTINEL;
    KT_OK(keel_stream_end_capture(s, &g));
    ck_assert_ptr_ne(g, KT_SENTINEL);
    KT_OK(keel_stream_is_capturing(s, &cap));
    ck_assert_int_eq(cap, 0);
    KT_OK(keel_stream_synchronize(s));
    /* Nothing ran during the capture. */
    ck_assert_int_eq(atomic_load(&calls), 0);
    ck_assert_int_eq(((unsigned char *)out)[0], KT_POISON_BYTE);
    float yback[N];
    KT_OK(keel_memcpy(yback, dy, sizeof yback));
    ck_assert_msg(memcmp(yback, y0, sizeof y0) == 0, "%sthe captured kernel ran during capture", kt_where());

    keel_graph_exec_t *ex = KT_SENTINEL;
    KT_OK(keel_graph_instantiate(g, &ex));
    ck_assert_ptr_ne(ex, KT_SENTINEL);
    /* The instantiated graph outlives its graph. */
    KT_OK(keel_graph_destroy(g));
    const int reps = 5;
    for (int r = 0; r < reps; r++) {
        /* New input each time: the graph copies from the buffer, not a snapshot of it. */
        kt_fill_random_f32(in, N);
        kt_poison(out, N * sizeof(float));
        KT_OK(keel_graph_launch(ex, r % 2 ? s : s2));
        KT_OK(keel_stream_synchronize(r % 2 ? s : s2));
        for (int i = 0; i < N; i++)
            ref[i] = (double)(float)((double)a * in[i] + ref[i]);
        long bad = kt_check_f32(out, ref, N, 1e-5, 1e-6);
        ck_assert_msg(bad < 0, "%sreplay %d: out[%ld] = %g, expected %g", kt_where(), r, bad, bad < 0 ? 0 : out[bad],
                      bad < 0 ? 0 : ref[bad]);
        ck_assert_int_eq(atomic_load(&calls), r + 1);
    }
    /* Replays back to back on one stream run in order, each once. */
    KT_OK(keel_graph_launch(ex, s2));
    KT_OK(keel_graph_launch(ex, s2));
    KT_OK(keel_graph_launch(ex, s2));
    KT_OK(keel_stream_synchronize(s2));
    ck_assert_int_eq(atomic_load(&calls), reps + 3);
    KT_OK(keel_graph_exec_destroy(ex));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_exec_destroy(ex));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_launch(ex, s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_destroy(g));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_instantiate(g, &ex));
    KT_OK(keel_free(in));
    KT_OK(keel_free(out));
    KT_OK(keel_free(dx));
    KT_OK(keel_free(dy));
    KT_OK(keel_stream_destroy(s));
    KT_OK(keel_stream_destroy(s2));
    kt_kernel_put(k);
    free(ref);
}

KT_DEVICE_TEST(captured_memsets_and_copies_replay)
{
    enum { N = 4096 };
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    unsigned char *host = NULL;
    void *d1 = NULL, *d2 = NULL;
    KT_OK(keel_malloc_host(dev, N, (void **)&host));
    KT_OK(keel_malloc(dev, N, &d1));
    KT_OK(keel_malloc(dev, N, &d2));
    if (!begin_or_skip(s))
        return;
    KT_OK(keel_memset_async(d1, 0x21, N, s));
    KT_OK(keel_memset_async((char *)d1 + 100, 0x42, 200, s));
    KT_OK(keel_memcpy_async(d2, d1, N, s));
    KT_OK(keel_memcpy_async(host, d2, N, s));
    keel_graph_t *g = NULL;
    KT_OK(keel_stream_end_capture(s, &g));
    keel_graph_exec_t *ex = NULL;
    KT_OK(keel_graph_instantiate(g, &ex));
    for (int r = 0; r < 3; r++) {
        kt_poison(host, N);
        KT_OK(keel_memset(d1, 0, N));
        KT_OK(keel_memset(d2, 0, N));
        KT_OK(keel_graph_launch(ex, s));
        KT_OK(keel_stream_synchronize(s));
        for (int i = 0; i < N; i++) {
            unsigned char want = (i >= 100 && i < 300) ? 0x42 : 0x21;
            ck_assert_msg(host[i] == want, "%sreplay %d: byte %d is %#x, expected %#x", kt_where(), r, i, host[i],
                          want);
        }
    }
    /* A second instantiation of the same graph is independent. */
    keel_graph_exec_t *ex2 = NULL;
    KT_OK(keel_graph_instantiate(g, &ex2));
    KT_OK(keel_graph_exec_destroy(ex));
    kt_poison(host, N);
    KT_OK(keel_graph_launch(ex2, s));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_int_eq(host[0], 0x21);
    KT_OK(keel_graph_exec_destroy(ex2));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_free(host));
    KT_OK(keel_free(d1));
    KT_OK(keel_free(d2));
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(empty_capture_gives_a_graph_that_does_nothing)
{
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    if (!begin_or_skip(s))
        return;
    keel_graph_t *g = NULL;
    KT_OK(keel_stream_end_capture(s, &g));
    keel_graph_exec_t *ex = NULL;
    KT_OK(keel_graph_instantiate(g, &ex));
    KT_OK(keel_graph_launch(ex, s));
    KT_OK(keel_stream_synchronize(s));
    KT_OK(keel_graph_exec_destroy(ex));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_stream_destroy(s));
}

/* Synchronous calls that run on a capturing default stream are refused. */
KT_DEVICE_TEST(synchronous_calls_on_a_capturing_default_stream_are_busy)
{
    keel_stream_t *def = NULL;
    KT_OK(keel_device_default_stream(dev, &def));
    void *d = NULL;
    unsigned char host[64];
    KT_OK(keel_malloc(dev, 64, &d));
    if (!begin_or_skip(def)) {
        KT_OK(keel_free(d));
        return;
    }
    KT_FAIL(KEEL_ERROR_BUSY, keel_memcpy(d, host, 64));
    KT_FAIL(KEEL_ERROR_BUSY, keel_memset(d, 0, 64));
    KT_FAIL(KEEL_ERROR_BUSY, keel_stream_synchronize(def));
    /* Freeing waits for the device's default stream: refused, the memory still live. */
    KT_FAIL(KEEL_ERROR_BUSY, keel_free(d));
    keel_pointer_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KT_OK(keel_pointer_get_info(d, &info));
    ck_assert_int_eq(info.kind, KEEL_MEMORY_DEVICE);
    /* A stream-ordered free cannot be captured (each replay would free again). */
    KT_FAIL(KEEL_ERROR_BUSY, keel_free_async(d, def));
    KT_OK(keel_pointer_get_info(d, &info));
    ck_assert_int_eq(info.kind, KEEL_MEMORY_DEVICE);
    keel_graph_t *g = NULL;
    KT_OK(keel_stream_end_capture(def, &g));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_memset(d, 0, 64));
    KT_OK(keel_free(d));
}

KT_DEVICE_TEST(capture_functions_reject_bad_input)
{
    keel_stream_t *s = NULL, *dead = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_stream_create(dev, 0, 0, &dead));
    KT_OK(keel_stream_destroy(dead));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_begin_capture(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_begin_capture(dead));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_begin_capture((keel_stream_t *)not_a_handle));
    keel_graph_t *g = KT_SENTINEL;
    int cap = 42;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_end_capture(NULL, &g));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_end_capture(dead, &g));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_is_capturing(NULL, &cap));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_is_capturing(dead, &cap));
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_is_capturing(s, NULL));
    ck_assert_int_eq(cap, 42);
    /* Ending a capture that never began. */
    keel_clear_error();
    keel_status_t st = keel_stream_end_capture(s, &g);
    ck_assert_msg(st != KEEL_OK, "%send_capture without begin_capture succeeded", kt_where());
    ck_assert_msg(keel_last_error()[0] != '\0', "%send_capture without begin left no detail", kt_where());
    ck_assert_ptr_eq(g, KT_SENTINEL);
    if (begin_or_skip(s)) {
        KT_FAIL(KEEL_ERROR_BUSY, keel_stream_begin_capture(s));
        KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_stream_end_capture(s, NULL));
        /* The refused end left the capture on. */
        KT_OK(keel_stream_is_capturing(s, &cap));
        ck_assert_int_eq(cap, 1);
        KT_OK(keel_stream_end_capture(s, &g));
        KT_OK(keel_graph_destroy(g));
    }
    keel_graph_exec_t *ex = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_instantiate(NULL, &ex));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_instantiate((keel_graph_t *)not_a_handle, &ex));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_launch(NULL, s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_destroy(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_exec_destroy(NULL));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_exec_destroy((keel_graph_exec_t *)(void *)s));
    ck_assert_ptr_eq(ex, KT_SENTINEL);
    KT_OK(keel_stream_destroy(s));
}

KT_DEVICE_TEST(graph_launch_checks_the_stream)
{
    keel_stream_t *s = NULL, *dead = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    if (!begin_or_skip(s))
        return;
    keel_graph_t *g = NULL;
    KT_OK(keel_stream_end_capture(s, &g));
    keel_graph_exec_t *ex = NULL;
    KT_FAIL(KEEL_ERROR_INVALID_ARGUMENT, keel_graph_instantiate(g, NULL));
    KT_OK(keel_graph_instantiate(g, &ex));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_launch(ex, NULL));
    KT_OK(keel_stream_create(dev, 0, 0, &dead));
    KT_OK(keel_stream_destroy(dead));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_launch(ex, dead));
    keel_device_t *other = kt_other_device(dev);
    if (other) {
        keel_stream_t *os = NULL;
        KT_OK(keel_device_default_stream(other, &os));
        KT_FAIL(KEEL_ERROR_DEVICE_MISMATCH, keel_graph_launch(ex, os));
    } else {
        ck_assert_msg(!(kt_cpu_devices_env() && kt_is_cpu(dev)), "KEEL_CPU_DEVICES is set, yet one CPU device");
    }
    KT_OK(keel_graph_exec_destroy(ex));
    KT_OK(keel_graph_destroy(g));
    KT_OK(keel_stream_destroy(s));
}

static Suite *suite(void)
{
    Suite *s = suite_create("graph");
    TCase *tc = kt_tcase_create("graph", 60);
    kt_add_device_test(tc, captured_work_runs_only_when_replayed);
    kt_add_device_test(tc, captured_memsets_and_copies_replay);
    kt_add_device_test(tc, empty_capture_gives_a_graph_that_does_nothing);
    kt_add_device_test(tc, synchronous_calls_on_a_capturing_default_stream_are_busy);
    kt_add_device_test(tc, capture_functions_reject_bad_input);
    kt_add_device_test(tc, graph_launch_checks_the_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, suite(), 1, 1);
}
