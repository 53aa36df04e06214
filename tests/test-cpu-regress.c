/* SPDX-License-Identifier: MIT */
/* test-cpu-regress: regressions of the CPU backend found in review: a device
 * synchronize that held the device lock while a host function created a
 * stream (deadlock), event waits released by a later record of the same
 * event on another stream, a stream destroyed (or synchronized) from its own
 * host function, and the dynamic shared memory hint. Each test runs under a
 * watchdog, so a deadlock fails instead of hanging. */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <keel.h>

#define WATCHDOG_S 20

static keel_device_t *dev;

static void setup(void)
{
    alarm(WATCHDOG_S);
    ck_assert_int_eq(keel_device_get("cpu", 0, &dev), KEEL_OK);
}

static void teardown(void)
{
    alarm(0);
}

/* A host function that holds its stream until the test opens the gate. */
static atomic_int gate_open;
static void gate_fn(void *u)
{
    (void)u;
    while (!atomic_load(&gate_open))
        usleep(1000);
}

/* ---- 1. device synchronize while a host function creates or destroys streams ---- */

static atomic_int create_status = -1;
static void create_in_host_fn(void *u)
{
    (void)u;
    keel_stream_t *n;
    usleep(50000);   /* let the main thread get into keel_device_synchronize */
    keel_status_t st = keel_stream_create(dev, 0, 0, &n);
    if (st == KEEL_OK)
        st = keel_stream_destroy(n);
    atomic_store(&create_status, (int)st);
}

START_TEST(device_sync_while_host_fn_creates_stream)
{
    keel_stream_t *s;
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &s), KEEL_OK);
    ck_assert_int_eq(keel_stream_launch_host_func(s, create_in_host_fn, NULL), KEEL_OK);
    ck_assert_int_eq(keel_device_synchronize(dev), KEEL_OK);
    ck_assert_int_eq(atomic_load(&create_status), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(s), KEEL_OK);
}
END_TEST

/* keel_free synchronizes the device too. */
START_TEST(free_while_host_fn_creates_stream)
{
    keel_stream_t *s;
    void *p;
    ck_assert_int_eq(keel_malloc(dev, 256, &p), KEEL_OK);
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &s), KEEL_OK);
    ck_assert_int_eq(keel_stream_launch_host_func(s, create_in_host_fn, NULL), KEEL_OK);
    ck_assert_int_eq(keel_free(p), KEEL_OK);
    ck_assert_int_eq(atomic_load(&create_status), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(s), KEEL_OK);
}
END_TEST

/* A host function destroys another stream, which the device synchronize
 * may be waiting on or about to wait on. */
static keel_stream_t *victim;
static atomic_int destroy_status = -1;
static void destroy_in_host_fn(void *u)
{
    (void)u;
    usleep(50000);
    atomic_store(&destroy_status, (int)keel_stream_destroy(victim));
}

START_TEST(device_sync_while_host_fn_destroys_stream)
{
    for (int round = 0; round < 2; round++) {
        keel_stream_t *s;
        atomic_store(&destroy_status, -1);
        /* Round 0: the victim is created after s (synchronized first, busy
         * for a while); round 1: before s (synchronized after s). */
        if (round == 1)
            ck_assert_int_eq(keel_stream_create(dev, 0, 0, &victim), KEEL_OK);
        ck_assert_int_eq(keel_stream_create(dev, 0, 0, &s), KEEL_OK);
        if (round == 0)
            ck_assert_int_eq(keel_stream_create(dev, 0, 0, &victim), KEEL_OK);
        atomic_store(&gate_open, 0);
        ck_assert_int_eq(keel_stream_launch_host_func(victim, gate_fn, NULL), KEEL_OK);
        ck_assert_int_eq(keel_stream_launch_host_func(s, destroy_in_host_fn, NULL), KEEL_OK);
        /* The victim's destroy drains it: open its gate from a third stream
         * after a while, so every order of waits gets exercised. */
        keel_stream_t *opener;
        ck_assert_int_eq(keel_stream_create(dev, 0, 0, &opener), KEEL_OK);
        ck_assert_int_eq(keel_stream_launch_host_func(opener, create_in_host_fn, NULL), KEEL_OK);
        atomic_store(&gate_open, 1);
        ck_assert_int_eq(keel_device_synchronize(dev), KEEL_OK);
        ck_assert_int_eq(keel_stream_synchronize(s), KEEL_OK);
        ck_assert_int_eq(atomic_load(&destroy_status), KEEL_OK);
        ck_assert_int_eq(keel_stream_destroy(opener), KEEL_OK);
        ck_assert_int_eq(keel_stream_destroy(s), KEEL_OK);
    }
}
END_TEST

/* ---- 2. event generations complete out of order ---- */

static atomic_int a_done, c_ran, c_saw_a_done = -1;
static void a_fn(void *u)
{
    gate_fn(u);
    atomic_store(&a_done, 1);
}
static void c_fn(void *u)
{
    (void)u;
    atomic_store(&c_saw_a_done, atomic_load(&a_done));
    atomic_store(&c_ran, 1);
}

START_TEST(wait_is_for_its_own_record)
{
    keel_stream_t *a, *b, *c;
    keel_event_t *e;
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &a), KEEL_OK);
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &b), KEEL_OK);
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &c), KEEL_OK);
    ck_assert_int_eq(keel_event_create(dev, 0, &e), KEEL_OK);
    atomic_store(&gate_open, 0);
    ck_assert_int_eq(keel_stream_launch_host_func(a, a_fn, NULL), KEEL_OK);
    ck_assert_int_eq(keel_event_record(e, a), KEEL_OK);           /* generation 1: held by the gate */
    ck_assert_int_eq(keel_stream_wait_event(c, e), KEEL_OK);      /* for generation 1 */
    /* Later records on an idle stream complete at once, more of them than
     * the first room for out-of-order generations. */
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(keel_event_record(e, b), KEEL_OK);
    ck_assert_int_eq(keel_stream_synchronize(b), KEEL_OK);
    ck_assert_int_eq(keel_stream_launch_host_func(c, c_fn, NULL), KEEL_OK);
    /* query and synchronize refer to the latest record, which is done. */
    ck_assert_int_eq(keel_event_query(e), KEEL_OK);
    ck_assert_int_eq(keel_event_synchronize(e), KEEL_OK);
    usleep(50000);
    ck_assert_int_eq(atomic_load(&c_ran), 0);
    ck_assert_int_eq(keel_stream_query(c), KEEL_ERROR_NOT_READY);
    atomic_store(&gate_open, 1);
    ck_assert_int_eq(keel_stream_synchronize(c), KEEL_OK);
    ck_assert_int_eq(atomic_load(&c_ran), 1);
    ck_assert_int_eq(atomic_load(&c_saw_a_done), 1);
    /* Everything done: later records keep working from a clean state. */
    ck_assert_int_eq(keel_stream_synchronize(a), KEEL_OK);
    ck_assert_int_eq(keel_event_record(e, a), KEEL_OK);
    ck_assert_int_eq(keel_event_synchronize(e), KEEL_OK);
    ck_assert_int_eq(keel_event_query(e), KEEL_OK);
    ck_assert_int_eq(keel_event_destroy(e), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(a), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(b), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(c), KEEL_OK);
}
END_TEST

/* The latest record pending on a blocked stream: query says not ready even
 * though an older generation is done. */
START_TEST(query_is_for_latest_record)
{
    keel_stream_t *a, *b;
    keel_event_t *e;
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &a), KEEL_OK);
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &b), KEEL_OK);
    ck_assert_int_eq(keel_event_create(dev, 0, &e), KEEL_OK);
    ck_assert_int_eq(keel_event_record(e, b), KEEL_OK);
    ck_assert_int_eq(keel_stream_synchronize(b), KEEL_OK);
    atomic_store(&gate_open, 0);
    ck_assert_int_eq(keel_stream_launch_host_func(a, gate_fn, NULL), KEEL_OK);
    ck_assert_int_eq(keel_event_record(e, a), KEEL_OK);
    ck_assert_int_eq(keel_event_query(e), KEEL_ERROR_NOT_READY);
    atomic_store(&gate_open, 1);
    ck_assert_int_eq(keel_event_synchronize(e), KEEL_OK);
    ck_assert_int_eq(keel_event_query(e), KEEL_OK);
    ck_assert_int_eq(keel_event_destroy(e), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(a), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(b), KEEL_OK);
}
END_TEST

/* A graph's records take their generations at launch (room promised first). */
START_TEST(graph_records_and_waits)
{
    keel_stream_t *s, *w;
    keel_event_t *e;
    keel_graph_t *g;
    keel_graph_exec_t *x;
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &s), KEEL_OK);
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &w), KEEL_OK);
    ck_assert_int_eq(keel_event_create(dev, 0, &e), KEEL_OK);
    ck_assert_int_eq(keel_stream_begin_capture(s), KEEL_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(keel_event_record(e, s), KEEL_OK);
    ck_assert_int_eq(keel_stream_end_capture(s, &g), KEEL_OK);
    ck_assert_int_eq(keel_graph_instantiate(g, &x), KEEL_OK);
    atomic_store(&gate_open, 0);
    ck_assert_int_eq(keel_stream_launch_host_func(s, gate_fn, NULL), KEEL_OK);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(keel_graph_launch(x, s), KEEL_OK);
    ck_assert_int_eq(keel_stream_wait_event(w, e), KEEL_OK);
    ck_assert_int_eq(keel_event_query(e), KEEL_ERROR_NOT_READY);
    ck_assert_int_eq(keel_stream_query(w), KEEL_ERROR_NOT_READY);
    atomic_store(&gate_open, 1);
    ck_assert_int_eq(keel_stream_synchronize(w), KEEL_OK);
    ck_assert_int_eq(keel_event_query(e), KEEL_OK);
    ck_assert_int_eq(keel_graph_exec_destroy(x), KEEL_OK);
    ck_assert_int_eq(keel_graph_destroy(g), KEEL_OK);
    ck_assert_int_eq(keel_event_destroy(e), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(s), KEEL_OK);
    ck_assert_int_eq(keel_stream_destroy(w), KEEL_OK);
}
END_TEST

/* ---- 3. a host function that destroys or synchronizes its own stream ---- */

static keel_stream_t *self_stream;
static atomic_int self_destroy = -1, self_sync = -1, self_dev_sync = -1, self_done;
static void self_fn(void *u)
{
    (void)u;
    atomic_store(&self_sync, (int)keel_stream_synchronize(self_stream));
    atomic_store(&self_dev_sync, (int)keel_device_synchronize(dev));
    atomic_store(&self_destroy, (int)keel_stream_destroy(self_stream));
    atomic_store(&self_done, 1);
}

START_TEST(own_host_fn_destroy_is_refused)
{
    ck_assert_int_eq(keel_stream_create(dev, 0, 0, &self_stream), KEEL_OK);
    ck_assert_int_eq(keel_stream_launch_host_func(self_stream, self_fn, NULL), KEEL_OK);
    /* Not through self_stream: the core may have dropped its handle. */
    while (!atomic_load(&self_done))
        usleep(1000);
    ck_assert_int_eq(keel_device_synchronize(dev), KEEL_OK);
    ck_assert_int_eq(atomic_load(&self_sync), KEEL_ERROR_BUSY);
    ck_assert_int_eq(atomic_load(&self_dev_sync), KEEL_ERROR_BUSY);
    ck_assert_int_eq(atomic_load(&self_destroy), KEEL_ERROR_BUSY);
}
END_TEST

/* ---- 4. the dynamic shared memory hint ---- */

static void kfn(const keel_cpu_kernel_ctx_t *c, void **a)
{
    (void)c;
    (void)a;
}

START_TEST(shared_memory_hint)
{
    keel_stream_t *s;
    keel_kernel_t *k;
    keel_dim3_t one = {1, 1, 1};
    int max;
    ck_assert_int_eq(keel_device_default_stream(dev, &s), KEEL_OK);
    keel_cpu_kernel_desc_t desc = {KEEL_CPU_KERNEL_ABI, "k", kfn, 0, {0}};
    ck_assert_int_eq(keel_kernel_register_cpu(dev, &desc, &k), KEEL_OK);
    ck_assert_int_eq(keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, &max), KEEL_OK);
    /* At the device maximum already: no hint to raise what cannot be raised. */
    ck_assert_int_eq(keel_launch_kernel(k, one, one, (size_t)max + 1, s, NULL), KEEL_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_null(strstr(keel_last_error(), "keel_kernel_set_max_dynamic_shared"));
    ck_assert_int_ne(keel_kernel_set_max_dynamic_shared(k, (size_t)max + 1), KEEL_OK);
    /* Below the maximum: the hint is right. */
    ck_assert_int_eq(keel_kernel_set_max_dynamic_shared(k, 1000), KEEL_OK);
    ck_assert_int_eq(keel_launch_kernel(k, one, one, 2000, s, NULL), KEEL_ERROR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(keel_last_error(), "keel_kernel_set_max_dynamic_shared"));
    ck_assert_int_eq(keel_kernel_set_max_dynamic_shared(k, 2000), KEEL_OK);
    ck_assert_int_eq(keel_launch_kernel(k, one, one, 2000, s, NULL), KEEL_OK);
    ck_assert_int_eq(keel_stream_synchronize(s), KEEL_OK);
    ck_assert_int_eq(keel_kernel_release(k), KEEL_OK);
}
END_TEST

static Suite *suite(void)
{
    Suite *su = suite_create("cpu-regress");
    TCase *tc = tcase_create("cpu");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, WATCHDOG_S + 5);
    tcase_add_test(tc, device_sync_while_host_fn_creates_stream);
    tcase_add_test(tc, free_while_host_fn_creates_stream);
    tcase_add_test(tc, device_sync_while_host_fn_destroys_stream);
    tcase_add_test(tc, wait_is_for_its_own_record);
    tcase_add_test(tc, query_is_for_latest_record);
    tcase_add_test(tc, graph_records_and_waits);
    tcase_add_test(tc, own_host_fn_destroy_is_refused);
    tcase_add_test(tc, shared_memory_hint);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    /* Only the built-in CPU backend is under test. */
    setenv("KEEL_BACKEND", "cpu", 1);
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
