/* SPDX-License-Identifier: MIT */
/* A small application for tests/test-exit.sh: it uses every kind of Keel
 * object on two emulated CPU devices and then ends in the way its argument
 * names, so that the script can run it under valgrind and see that Keel
 * leaves nothing behind:
 *
 *   finalize        checks its results, calls keel_finalize, returns from main
 *   no-finalize     leaves streams, events, kernels, a module, a graph and
 *                   memory of every kind live, with work queued, and returns
 *   busy-thread     a second thread calls exit() while every stream has work
 *                   queued behind a host function that sleeps, and the main
 *                   thread waits in keel_stream_synchronize
 *   host-fn         a host function calls exit() while the other streams are busy
 *   after-finalize  keel_finalize first (before any use), then the work,
 *                   keel_finalize twice, stale calls, and exit()
 *   handlers        exit handlers registered before and after Keel's: the
 *                   later one still uses Keel, the earlier finds it shut down
 *   fork            with streams busy, two children of fork: one calls
 *                   exit() at once (the parent's threads are not in it:
 *                   nothing may wait for them), the other keel_finalize and
 *                   then the whole work afresh; the parent checks both
 *
 * Besides Keel's own objects, work() pins memory of the program's
 * (keel_host_register), imports a DLPack tensor of "another library" and
 * writes a variable of its module (keel_module_get_global).
 * It prints "ok <mode>" where the mode's checks passed and exits 0; a failed
 * check prints why and exits 1. KEEL_BACKEND=cpu and KEEL_CPU_DEVICES=2 are
 * the script's. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "keel.h"
#include "keel/dlpack.h"

#define N 65536

static void die(const char *what, keel_status_t st)
{
    printf("FAIL %s: %s (%s)\n", what, keel_status_name(st), keel_last_error());
    fflush(stdout);
    _exit(1);
}

#define OK(call)                                 \
    do {                                         \
        keel_status_t st_ = (call);              \
        if (st_ != KEEL_OK)                      \
            die(#call, st_);                     \
    } while (0)

#include "cpu_saxpy.h"

static const char *scale_source = "keel_global float last_a = 1.0f;\n"
                                  "keel_kernel void scale(int n, float a, float *x)\n"
                                  "{\n"
                                  "    int i = keel_global_x();\n"
                                  "    if (i < n)\n"
                                  "        x[i] *= a;\n"
                                  "}\n";

static void sleep_ms(void *ms)
{
    struct timespec t = {0, (long)(size_t)ms * 1000000L};
    nanosleep(&t, NULL);
}

static void exit_now(void *unused)
{
    (void)unused;
    printf("ok host-fn\n");
    fflush(stdout);
    exit(0);
}

/* Everything the program made; left for Keel to release in most modes. */
static keel_device_t *dev[2];
static keel_stream_t *st[3];
static keel_event_t *ev;
static keel_kernel_t *saxpy, *scale;
static keel_module_t *module;
static keel_graph_t *graph;
static keel_graph_exec_t *exec;
static float host_y[N];
static float *x, *y, *pinned, *managed, *async_buf, *other;
static float a;
static double ref[N];

/* Memory that is not Keel's: the program's own, pinned, and a tensor of
 * "another library", imported; both stay the program's (static). */
static float registered[1024], theirs[1024];
static int64_t theirs_shape = 1024;
static DLManagedTensor theirs_managed;
static const keel_tensor_t *imported;

static void random_floats(float *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
}

/* Makes every kind of object, runs y = a x + y, then y *= 2 on stream 0
 * (its result copied to host_y), and queues more work on every stream. */
static void work(void)
{
    OK(keel_device_get("cpu", 0, &dev[0]));
    OK(keel_device_get("cpu", 1, &dev[1]));
    OK(keel_stream_create(dev[0], 0, 0, &st[0]));
    OK(keel_stream_create(dev[0], 0, 0, &st[1]));
    OK(keel_stream_create(dev[1], 0, 0, &st[2]));
    OK(keel_event_create(dev[0], 0, &ev));
    OK(keel_kernel_register_cpu(dev[0], &saxpy_desc, &saxpy));
    OK(keel_module_build(dev[0], scale_source, "scale.kc", NULL, 0, &module));
    OK(keel_module_get_kernel(module, "scale", &scale));
    /* A module variable: a registry entry of its own, left for Keel too. */
    void *last_a = NULL;
    size_t last_a_bytes = 0;
    OK(keel_module_get_global(module, "last_a", &last_a, &last_a_bytes));
    size_t bytes = N * sizeof(float);
    OK(keel_malloc(dev[0], bytes, (void **)&x));
    OK(keel_malloc(dev[0], bytes, (void **)&y));
    OK(keel_malloc_host(dev[0], bytes, (void **)&pinned));
    OK(keel_malloc_managed(dev[1], bytes, (void **)&managed));
    OK(keel_malloc(dev[1], 256, (void **)&other));
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    random_floats(pinned, N, &seed);
    random_floats(host_y, N, &seed);
    a = (float)rand_r(&seed) / (float)RAND_MAX + 0.5f;
    for (int i = 0; i < N; i++)
        ref[i] = 2.0 * ((double)a * pinned[i] + host_y[i]);
    OK(keel_memcpy_async(x, pinned, bytes, st[0]));
    OK(keel_memcpy_async(y, host_y, bytes, st[0]));
    int n = N;
    void *sargs[] = {&n, &a, &x, &y};
    OK(keel_launch_kernel(saxpy, (keel_dim3_t){N / 64, 1, 1}, (keel_dim3_t){64, 1, 1}, 0, st[0], sargs));
    float two = 2.0f;
    void *cargs[] = {&n, &two, &y};
    OK(keel_launch_kernel(scale, (keel_dim3_t){N / 64, 1, 1}, (keel_dim3_t){64, 1, 1}, 0, st[0], cargs));
    OK(keel_memcpy_async(host_y, y, bytes, st[0]));
    OK(keel_memcpy_async(last_a, &a, sizeof a, st[0]));
    OK(keel_event_record(ev, st[0]));
    OK(keel_stream_wait_event(st[1], ev));
    /* A stream-ordered block, and one freed to be kept for reuse. */
    OK(keel_malloc_async(st[1], bytes, (void **)&async_buf));
    void *kept = NULL;
    OK(keel_malloc_async(st[1], 4096, &kept));
    OK(keel_free_async(kept, st[1]));
    OK(keel_memcpy_async(async_buf, x, bytes, st[1]));
    /* A graph of a memset and a launch, captured on stream 2 and run once. */
    OK(keel_stream_begin_capture(st[2]));
    OK(keel_memset_async(managed, 0, bytes, st[2]));
    OK(keel_stream_end_capture(st[2], &graph));
    OK(keel_graph_instantiate(graph, &exec));
    OK(keel_graph_launch(exec, st[2]));
    OK(keel_memcpy_async(other, managed, 256, st[2]));
    keel_status_t hst = keel_host_register(dev[0], registered, sizeof registered);
    if (hst != KEEL_OK && hst != KEEL_ERROR_NOT_SUPPORTED)
        die("keel_host_register", hst);
    theirs_managed.dl_tensor = (DLTensor){.data = theirs, .device = {kDLCPU, 0}, .ndim = 1,
                                          .dtype = {kDLFloat, 32, 1}, .shape = &theirs_shape};
    OK(keel_dlpack_import(dev[1], &theirs_managed, &imported));
    OK(keel_memcpy_async(other, theirs, 256, st[2]));
}

static void check(void)
{
    for (int i = 0; i < N; i++)
        if (fabs(host_y[i] - ref[i]) > 1e-5 * (1.0 + fabs(ref[i]))) {
            printf("FAIL y[%d] = %.8g, expected %.8g\n", i, host_y[i], ref[i]);
            exit(1);
        }
}

/* Host functions that keep every stream busy for a while. */
static void keep_busy(int count, int ms)
{
    for (int i = 0; i < count; i++)
        for (int k = 0; k < 3; k++)
            OK(keel_stream_launch_host_func(st[k], sleep_ms, (void *)(size_t)ms));
}

static void *exit_thread(void *unused)
{
    (void)unused;
    sleep_ms((void *)(size_t)30);
    printf("ok busy-thread\n");
    fflush(stdout);
    exit(0);
}

static keel_stream_t *late_stream;

/* Registered after Keel's handler, so it runs first: Keel still works. */
static void late_handler(void)
{
    keel_status_t s = keel_stream_synchronize(late_stream);
    printf("late handler: %s\n", keel_status_name(s));
    fflush(stdout);
}

/* Registered before Keel's handler, so it runs after it: Keel is shut down. */
static void early_handler(void)
{
    keel_status_t s1 = keel_stream_synchronize(late_stream);
    keel_device_t *d = NULL;
    keel_status_t s2 = keel_device_default(&d);
    void *p = NULL;
    keel_status_t s3 = keel_malloc(dev[0], 64, &p);
    printf("early handler: %s %s %s\n", keel_status_name(s1), keel_status_name(s2), keel_status_name(s3));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "finalize") == 0) {
        work();
        OK(keel_stream_synchronize(st[0]));
        check();
        OK(keel_finalize());
    } else if (strcmp(mode, "no-finalize") == 0) {
        work();
        OK(keel_stream_synchronize(st[0]));
        check();
        keep_busy(2, 5);
    } else if (strcmp(mode, "busy-thread") == 0) {
        work();
        keep_busy(20, 20);
        pthread_t t;
        if (pthread_create(&t, NULL, exit_thread, NULL) != 0)
            return 1;
        keel_stream_synchronize(st[0]);
        /* The exit began while the wait went on: wait for it to end the process. */
        for (;;)
            sleep_ms((void *)(size_t)100);
    } else if (strcmp(mode, "host-fn") == 0) {
        work();
        keep_busy(5, 20);
        OK(keel_stream_launch_host_func(st[0], exit_now, NULL));
        keep_busy(5, 20);
        for (;;)
            sleep_ms((void *)(size_t)100);
    } else if (strcmp(mode, "after-finalize") == 0) {
        OK(keel_finalize());   /* before any use: nothing to do */
        work();
        OK(keel_stream_synchronize(st[0]));
        check();
        OK(keel_finalize());
        OK(keel_finalize());
        keel_status_t s1 = keel_stream_synchronize(st[0]);
        keel_status_t s2 = keel_free(x);
        if (s1 != KEEL_ERROR_INVALID_HANDLE || s2 != KEEL_ERROR_INVALID_POINTER) {
            printf("FAIL stale calls: %s %s\n", keel_status_name(s1), keel_status_name(s2));
            return 1;
        }
        printf("ok after-finalize\n");
        fflush(stdout);
        exit(0);
    } else if (strcmp(mode, "handlers") == 0) {
        atexit(early_handler);
        work();
        OK(keel_stream_synchronize(st[0]));
        check();
        late_stream = st[1];
        atexit(late_handler);
    } else if (strcmp(mode, "fork") == 0) {
        work();
        keep_busy(3, 10);
        fflush(stdout);
        pid_t quick = fork();
        if (quick == 0)
            exit(0);
        pid_t again = fork();
        if (again == 0) {
            /* The parent's blocks stay allocated in the child (Keel forgets
             * them); the program keeps pointing at them. */
            static void *parents[6];
            void *mine[6] = {x, y, pinned, managed, other, async_buf};
            memcpy(parents, mine, sizeof parents);
            OK(keel_finalize());
            work();
            OK(keel_stream_synchronize(st[0]));
            check();
            exit(0);
        }
        int s1 = -1, s2 = -1;
        if (quick < 0 || again < 0 || waitpid(quick, &s1, 0) != quick || waitpid(again, &s2, 0) != again ||
            !WIFEXITED(s1) || WEXITSTATUS(s1) != 0 || !WIFEXITED(s2) || WEXITSTATUS(s2) != 0) {
            printf("FAIL children of fork: status %d and %d\n", s1, s2);
            return 1;
        }
        OK(keel_stream_synchronize(st[0]));
        check();
    } else {
        fprintf(stderr, "usage: %s finalize|no-finalize|busy-thread|host-fn|after-finalize|handlers|fork\n", argv[0]);
        return 2;
    }
    printf("ok %s\n", mode);
    fflush(stdout);
    return 0;
}
