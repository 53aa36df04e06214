/* SPDX-License-Identifier: MIT */
/* keel_finalize: it waits for queued work and then releases everything;
 * handles and pointers of before are stale and refused, never a crash; Keel
 * initializes again afterwards, reading the environment again; a second
 * finalize does nothing; a host function cannot finalize; finalize and init
 * from several threads at once are serialized. On every device under test.
 * (tests/test-exit.sh checks the exit paths under valgrind.) */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <math.h>
#include <stdatomic.h>
#include "fixture.h"
#include "keel/dlpack.h"

/* ---- helpers ---- */

/* Threads of this process (Linux); -1 where /proc is missing. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Whether a mapping of this process names a file containing needle; -1 without /proc. */
static int mapped(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* The backend name and index of a device, to find it again after finalize. */
static void where(keel_device_t *dev, char name[32], int *index)
{
    snprintf(name, 32, "%s", kt_backend_name(dev));
    ck_assert_msg(name[0] != '\0', "%s has no backend", keel_device_name(dev));
    KT_OK(keel_device_get_index(dev, index));
}

/* Finalizes, then measures the threads Keel leaves: none of its own. */
static int baseline_threads(void)
{
    KT_OK(keel_finalize());
    return thread_count();
}

/* After finalize: the fixture's devices again, and device i of them. */
static keel_device_t *again(int i)
{
    kt_devices_refresh();
    keel_device_t *d = kt_device(i);
    ck_assert_msg(d != NULL, "device %d is not found again after keel_finalize", i);
    return d;
}

/* The work of one round: y = a x + y over n random floats, through device
 * memory, read back into out; the float64 reference in ref. */
typedef struct round {
    int n;
    float a;
    float *hx, *hy, *out;
    double *ref;
    void *x, *y;
    keel_kernel_t *k;
} round_t;

static keel_status_t round_start(round_t *r, keel_device_t *dev, keel_stream_t *s, int n)
{
    r->n = n;
    r->hx = malloc(n * sizeof(float));
    r->hy = malloc(n * sizeof(float));
    r->out = malloc(n * sizeof(float));
    r->ref = malloc(n * sizeof(double));
    kt_fill_random_f32(r->hx, (size_t)n);
    kt_fill_random_f32(r->hy, (size_t)n);
    kt_fill_random_f32(&r->a, 1);
    r->a += 1.5f;
    for (int i = 0; i < n; i++)
        r->ref[i] = (double)r->a * r->hx[i] + r->hy[i];
    kt_poison(r->out, n * sizeof(float));
    keel_status_t st = kt_saxpy_kernel(dev, &r->k);
    if (st != KEEL_OK)
        return st;
    KT_OK(keel_malloc(dev, n * sizeof(float), &r->x));
    KT_OK(keel_malloc(dev, n * sizeof(float), &r->y));
    KT_OK(keel_memcpy_async(r->x, r->hx, n * sizeof(float), s));
    KT_OK(keel_memcpy_async(r->y, r->hy, n * sizeof(float), s));
    KT_OK(kt_launch_saxpy(r->k, s, n, r->a, r->x, r->y));
    KT_OK(keel_memcpy_async(r->out, r->y, n * sizeof(float), s));
    return KEEL_OK;
}

static void round_check(round_t *r)
{
    long bad = kt_check_f32(r->out, r->ref, (size_t)r->n, 1e-6, 1e-6);
    ck_assert_msg(bad < 0, "%sy[%ld] = %g, expected %g", kt_where(), bad, bad < 0 ? 0.0 : (double)r->out[bad],
                  bad < 0 ? 0.0 : r->ref[bad]);
}

static void round_free(round_t *r)
{
    free(r->hx);
    free(r->hy);
    free(r->out);
    free(r->ref);
}

#define LOOP_TEST(name) START_TEST(name)
#define NEED_KERNEL(st)                                                                      \
    do {                                                                                     \
        if ((st) != KEEL_OK) {                                                               \
            printf("%s: no saxpy kernel on %s (%s): test skipped\n", __func__,               \
                   keel_device_name(kt_device(_i)), keel_status_name(st));                   \
            return;                                                                          \
        }                                                                                    \
    } while (0)

/* ---- finalize waits for queued work, then releases ---- */

LOOP_TEST(finalize_waits_then_releases)
{
    int base = baseline_threads();
    keel_device_t *dev = again(_i);
    kt_dev = dev;
    char name[32];
    int index;
    where(dev, name, &index);
    keel_stream_t *s = NULL;
    keel_event_t *e = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    KT_OK(keel_event_create(dev, 0, &e));
    /* Everything queues behind a gate that opens 300 ms later, from another
     * thread: keel_finalize returns only after the copy back has run. */
    kt_gate_t *g = kt_gate_new();
    KT_OK(kt_gate_enqueue(g, s));
    /* Opened from the other thread whatever happens here: loading a module
     * on CUDA waits for the device, whose stream the gate holds. */
    ck_assert_int_eq(kt_gate_open_later(g, 300), 0);
    round_t r;
    keel_status_t st = round_start(&r, dev, s, 50000 + (int)(kt_rand64() % 1000));
    if (st != KEEL_OK) {
        kt_gate_free(g);
        round_free(&r);
        NEED_KERNEL(st);
    }
    KT_OK(keel_event_record(e, s));
    KT_OK(keel_finalize());
    ck_assert_msg(kt_gate_is_open(g), "keel_finalize returned before the stream's host function ran");
    round_check(&r);
    kt_gate_free(g);

    /* Stale: every handle says destroyed; the pointers are unknown. */
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_synchronize(s));
    KT_DETAIL_HAS("destroyed");
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_query(s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_destroy(s));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_query(e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_destroy(e));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, kt_launch_saxpy(r.k, s, r.n, r.a, r.x, r.y));
    KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(r.x));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_synchronize(dev));
    KT_DETAIL_HAS("destroyed");
    void *p = KT_SENTINEL;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_malloc(dev, 64, &p));
    ck_assert_ptr_eq(p, KT_SENTINEL);
    kt_kernel_put(r.k);   /* stale too: refused, nothing freed twice */
    /* The stale calls above may have started Keel again (the device's
     * lookup does): finalize once more before counting what is left. */
    int cpu = kt_is_cpu(again(_i));
    KT_OK(keel_finalize());
    if (cpu && base >= 0)
        ck_assert_msg(thread_count() == base, "%d threads after keel_finalize, %d before Keel started",
                      thread_count(), base);
    ck_assert_msg(mapped("keel-fake") != 1, "a plugin of tests/plugins is still mapped after keel_finalize");
    round_free(&r);

    /* And Keel starts again: the same device by name, doing real work. */
    keel_device_t *d2 = NULL;
    KT_OK(keel_device_get(name, index, &d2));
    keel_stream_t *s2 = NULL;
    KT_OK(keel_stream_create(d2, 0, 0, &s2));
    round_t r2;
    KT_OK(round_start(&r2, d2, s2, 4096));
    KT_OK(keel_stream_synchronize(s2));
    round_check(&r2);
    KT_OK(keel_free(r2.x));
    KT_OK(keel_free(r2.y));
    kt_kernel_put(r2.k);
    KT_OK(keel_stream_destroy(s2));
    round_free(&r2);
    again(_i);
}
END_TEST

/* ---- what the application left: every kind, released ---- */

static atomic_int deleted;

static void count_delete(DLManagedTensor *self)
{
    (void)self;
    atomic_fetch_add(&deleted, 1);
}

/* Host functions of several streams run at once. */
static void count_host(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

LOOP_TEST(finalize_releases_what_was_left)
{
    int base = baseline_threads();
    keel_device_t *dev = again(_i);
    kt_dev = dev;
    keel_stream_t *s[3], *capturing = NULL;
    for (int i = 0; i < 3; i++)
        KT_OK(keel_stream_create(dev, 0, 0, &s[i]));
    KT_OK(keel_stream_create(dev, 0, 0, &capturing));
    keel_event_t *e = NULL;
    KT_OK(keel_event_create(dev, 0, &e));
    void *dmem = NULL, *capbuf = NULL, *pinned = NULL, *managed = NULL, *async = NULL, *kept = NULL;
    KT_OK(keel_malloc(dev, 1 << 20, &dmem));
    KT_OK(keel_malloc(dev, 4096, &capbuf));   /* the open capture's own: no race with the graph's memset */
    KT_OK(keel_malloc_host(dev, 4096, &pinned));
    keel_status_t mst = keel_malloc_managed(dev, 8192, &managed);
    if (!kt_unsupported(dev, KT_MANAGED_MEMORY, mst))
        ck_assert_msg(mst == KEEL_OK, "keel_malloc_managed: %s", keel_last_error());
    KT_OK(keel_malloc_async(s[0], 1 << 16, &async));
    KT_OK(keel_malloc_async(s[1], 4096, &kept));
    KT_OK(keel_free_async(kept, s[1]));   /* the stream keeps it for reuse */
    keel_kernel_t *k = NULL;
    keel_status_t kst = kt_saxpy_kernel(dev, &k);
    /* A graph and its exec, and a capture left open. */
    keel_graph_t *graph = NULL;
    keel_graph_exec_t *exec = NULL;
    atomic_int hosts = 0;
    keel_status_t gst = keel_stream_begin_capture(s[2]);
    if (gst == KEEL_OK) {
        KT_OK(keel_memset_async(dmem, 3, 4096, s[2]));
        KT_OK(keel_stream_launch_host_func(s[2], count_host, &hosts));
        KT_OK(keel_stream_end_capture(s[2], &graph));
        KT_OK(keel_graph_instantiate(graph, &exec));
        KT_OK(keel_graph_launch(exec, s[2]));
        KT_OK(keel_stream_begin_capture(capturing));
        KT_OK(keel_memset_async(capbuf, 4, 4096, capturing));
    }
    for (int i = 0; i < 3; i++)
        KT_OK(keel_stream_launch_host_func(s[i], count_host, &hosts));
    KT_OK(keel_event_record(e, s[0]));
    /* Memory that is not Keel's: the application's, pinned, and another
     * library's tensor, imported (on the CPU backend, which takes host
     * memory for both). */
    float *pinned_app = NULL, *theirs = NULL;
    const keel_tensor_t *imported = NULL;
    DLManagedTensor managed_t;
    int64_t shape = 256;
    atomic_store(&deleted, 0);
    if (kt_is_cpu(dev)) {
        pinned_app = malloc(4096);
        keel_status_t hst = keel_host_register(dev, pinned_app, 4096);
        if (!kt_unsupported(dev, KT_HOST_REGISTER, hst))
            ck_assert_msg(hst == KEEL_OK, "keel_host_register: %s", keel_last_error());
        theirs = malloc(shape * sizeof(float));
        kt_fill_random_f32(theirs, (size_t)shape);
        memset(&managed_t, 0, sizeof managed_t);
        managed_t.dl_tensor = (DLTensor){.data = theirs, .device = {kDLCPU, 0}, .ndim = 1,
                                         .dtype = {kDLFloat, 32, 1}, .shape = &shape};
        managed_t.deleter = count_delete;
        KT_OK(keel_dlpack_import(dev, &managed_t, &imported));
        keel_pointer_info_t pi;
        memset(&pi, 0, sizeof pi);
        pi.struct_size = sizeof pi;
        KT_OK(keel_pointer_get_info(theirs + 10, &pi));
        ck_assert_msg(pi.device == dev, "the imported memory is not in the registry");
    }
    KT_OK(keel_finalize());
    if (imported) {
        /* Keel's reference to the other library's tensor was dropped, once. */
        ck_assert_int_eq(atomic_load(&deleted), 1);
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_dlpack_release(imported));
        ck_assert_int_eq(atomic_load(&deleted), 1);
        keel_pointer_info_t pi;
        memset(&pi, 0, sizeof pi);
        pi.struct_size = sizeof pi;
        keel_status_t pst = keel_pointer_get_info(theirs, &pi);
        ck_assert_msg(pst != KEEL_OK || pi.kind == KEEL_MEMORY_HOST, "imported memory still known after finalize");
        /* The memory itself stays the application's, untouched. */
        theirs[0] = 1.0f;
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_host_unregister(pinned_app));
        pinned_app[0] = 2.0f;
    }
    free(pinned_app);
    free(theirs);
    /* Queued work ran: the graph's host function and the three others. */
    ck_assert_int_eq(atomic_load(&hosts), gst == KEEL_OK ? 4 : 3);
    for (int i = 0; i < 3; i++)
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_synchronize(s[i]));
    int cap = -1;
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_stream_is_capturing(capturing, &cap));
    KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_event_synchronize(e));
    if (gst == KEEL_OK) {
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_launch(exec, s[0]));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_destroy(graph));
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_graph_exec_destroy(exec));
    }
    if (kst == KEEL_OK) {
        int v = 0;
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_kernel_get_attribute(k, KEEL_KERNEL_ATTR_MAX_THREADS_PER_BLOCK, &v));
        kt_kernel_put(k);
    }
    void *ptrs[] = {dmem, capbuf, pinned, managed, async, kept};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
        if (!ptrs[i])
            continue;
        keel_pointer_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        keel_status_t pst = keel_pointer_get_info(ptrs[i], &info);
        ck_assert_msg(pst != KEEL_OK || info.kind == KEEL_MEMORY_HOST,
                      "pointer %zu is still known to Keel after keel_finalize", i);
        KT_FAIL(KEEL_ERROR_INVALID_POINTER, keel_free(ptrs[i]));
    }
    if (kt_is_cpu(again(_i)) && base >= 0) {
        KT_OK(keel_finalize());
        ck_assert_msg(thread_count() == base, "%d threads after keel_finalize, %d before", thread_count(), base);
        again(_i);
    }
}
END_TEST

/* ---- initialization again, several times ---- */

LOOP_TEST(init_again)
{
    keel_device_t *dev = kt_device(_i);
    char name[32];
    int index;
    where(dev, name, &index);
    for (int cycle = 0; cycle < 3; cycle++) {
        KT_OK(keel_init());
        keel_device_t *d = NULL;
        KT_OK(keel_device_get(name, index, &d));
        kt_dev = d;
        keel_stream_t *s = NULL;
        KT_OK(keel_stream_create(d, 0, 0, &s));
        round_t r;
        keel_status_t st = round_start(&r, d, s, 1000 + (int)(kt_rand64() % 3000));
        if (st != KEEL_OK) {
            round_free(&r);
            NEED_KERNEL(st);
        }
        KT_OK(keel_stream_synchronize(s));
        round_check(&r);
        /* Half the rounds free what they made, half leave it to finalize. */
        if (cycle % 2 == 0) {
            KT_OK(keel_free(r.x));
            KT_OK(keel_free(r.y));
            kt_kernel_put(r.k);
            KT_OK(keel_stream_destroy(s));
        }
        round_free(&r);
        keel_backend_t *b = NULL;
        KT_OK(keel_device_get_backend(d, &b));
        KT_OK(keel_finalize());
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_device_synchronize(d));
        keel_backend_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        KT_FAIL(KEEL_ERROR_INVALID_HANDLE, keel_backend_get_info(b, &info));
    }
    again(_i);
}
END_TEST

/* ---- a host function cannot finalize (it would wait for itself) ---- */

typedef struct {
    keel_status_t st;
    char detail[256];
} from_host_t;

static void finalize_from_host(void *p)
{
    from_host_t *f = p;
    f->st = keel_finalize();
    snprintf(f->detail, sizeof f->detail, "%s", keel_last_error());
}

LOOP_TEST(finalize_refused_in_host_function)
{
    keel_device_t *dev = kt_device(_i);
    kt_dev = dev;
    if (!kt_is_cpu(dev)) {
        printf("finalize_refused_in_host_function: %s is not a CPU device; the refusal is the CPU backend's: skipped\n",
               keel_device_name(dev));
        return;
    }
    keel_stream_t *s = NULL;
    KT_OK(keel_stream_create(dev, 0, 0, &s));
    from_host_t f = {KEEL_OK, ""};
    KT_OK(keel_stream_launch_host_func(s, finalize_from_host, &f));
    KT_OK(keel_stream_synchronize(s));
    ck_assert_msg(f.st == KEEL_ERROR_BUSY, "keel_finalize in a host function: %s, expected KEEL_ERROR_BUSY",
                  keel_status_name(f.st));
    ck_assert_msg(strstr(f.detail, "host function") != NULL, "detail \"%s\"", f.detail);
    /* Nothing was released: the stream works on. */
    round_t r;
    keel_status_t st = round_start(&r, dev, s, 2048);
    NEED_KERNEL(st);
    KT_OK(keel_stream_synchronize(s));
    round_check(&r);
    KT_OK(keel_free(r.x));
    KT_OK(keel_free(r.y));
    kt_kernel_put(r.k);
    round_free(&r);
    KT_OK(keel_stream_destroy(s));
}
END_TEST

/* ---- not per device ---- */

START_TEST(finalize_twice_and_before_use)
{
    KT_OK(keel_finalize());
    KT_OK(keel_finalize());   /* nothing to do */
    KT_OK(keel_init());
    KT_OK(keel_finalize());
    KT_OK(keel_finalize());
    kt_devices_refresh();
    ck_assert_int_gt(kt_device_count(), 0);
}
END_TEST

static void *init_finalize_loop(void *p)
{
    long fails = 0;
    for (int i = 0; i < 25; i++) {
        /* Only these two: no other call may run beside a keel_finalize. */
        fails += keel_init() != KEEL_OK;
        fails += keel_finalize() != KEEL_OK;
    }
    *(long *)p = fails;
    return NULL;
}

START_TEST(finalize_and_init_from_threads)
{
    enum { T = 4 };
    pthread_t t[T];
    long fails[T];
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, init_finalize_loop, &fails[i]), 0);
    for (int i = 0; i < T; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(fails[i] == 0, "thread %d: %ld failed calls", i, fails[i]);
    }
    KT_OK(keel_init());
    kt_devices_refresh();
    ck_assert_int_gt(kt_device_count(), 0);
    void *p = NULL;
    KT_OK(keel_malloc(kt_device(0), 256, &p));
    KT_OK(keel_free(p));
}
END_TEST

START_TEST(environment_read_again)
{
    const char *old = getenv("KEEL_DEVICE");
    char *saved = old ? strdup(old) : NULL;
    KT_OK(keel_finalize());
    setenv("KEEL_DEVICE", "not-a-number", 1);
    KT_FAIL(KEEL_ERROR_INVALID_ENVIRONMENT, keel_init());
    KT_DETAIL_HAS("KEEL_DEVICE");
    KT_OK(keel_finalize());
    if (saved)
        setenv("KEEL_DEVICE", saved, 1);
    else
        unsetenv("KEEL_DEVICE");
    free(saved);
    KT_OK(keel_init());
    kt_devices_refresh();
    ck_assert_int_gt(kt_device_count(), 0);
}
END_TEST

static Suite *exit_suite(void)
{
    Suite *s = suite_create("exit");
    TCase *tc = kt_tcase_create("finalize", 120);
    tcase_add_loop_test(tc, finalize_waits_then_releases, 0, kt_device_count());
    tcase_add_loop_test(tc, finalize_releases_what_was_left, 0, kt_device_count());
    tcase_add_loop_test(tc, init_again, 0, kt_device_count());
    tcase_add_loop_test(tc, finalize_refused_in_host_function, 0, kt_device_count());
    tcase_add_test(tc, finalize_twice_and_before_use);
    tcase_add_test(tc, finalize_and_init_from_threads);
    tcase_add_test(tc, environment_read_again);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return kt_main(argc, argv, exit_suite(), 1, 1);
}
