/* SPDX-License-Identifier: MIT */
/* keel-fault-probe: the program test-fault runs in a child process under
 * KEEL_FAULT. It does what a small application does, one step at a time:
 * initialize, list the backends (which loads every plugin on the search
 * path), create streams and an event, register a CPU kernel (on the CPU
 * backend; a GPU takes that kernel from the portable module instead),
 * build a portable kernel with keel_module_build, allocate device, pinned, managed
 * and stream-ordered memory, then copy, memset (also inside an
 * allocation), launch both kernels, run keel_binary and keel_reduce,
 * record and wait on an event, run a host function; load a module file
 * made by keel-cc (the second argument, optional) and launch its kernel;
 * capture a graph and replay it; check every result; free everything; and
 * with KEEL_CPU_MEMORY_LIMIT set, allocate the whole cap at the end, which
 * fails if a failure lost a block.
 *
 * A step that fails must fail cleanly: a status the site can cause (the
 * first argument names the site: host-alloc, device-alloc, ...; "none"
 * accepts none) and a keel_last_error() detail. Then the probe waits for
 * its streams (a failure of queued work is reported once, and dropped) and
 * runs the step again: with KEEL_FAULT=site:N the fault counts only once,
 * so the retry must succeed, which shows that the runtime is still usable
 * after the failure.
 *
 * Output (stdout): "fault <site>:<call>" per injected fault Keel logged,
 * "step <name> <STATUS> <detail>" per failed step, and at the end
 * "faults <n>". Exit status:
 *   0  every step done (after retries), every result right
 *   2  a step failed uncleanly: an unexpected status, an empty detail, an
 *      out-parameter written by a failing call, or a wrong result
 *   3  a step failed again on its retry (expected only when KEEL_FAULT
 *      fails more than one call: site:N+ or site:p=P)
 *   4  bad usage
 * A crash, a hang or (in the sanitizer build) a leak are the caller's to
 * see. Everything the probe holds is kept in globals, so that an early exit
 * leaves nothing unreachable for LeakSanitizer. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "keel.h"

#define N 8192
#define SENTINEL ((void *)(uintptr_t)0x5eed5eedu)

enum { EXIT_DONE = 0, EXIT_UNCLEAN = 2, EXIT_RETRY_FAILED = 3, EXIT_USAGE = 4 };

static const char *site;
static atomic_int faults;

static keel_device_t *dev;
static keel_stream_t *stream, *side;
static keel_event_t *event;
static keel_kernel_t *saxpy, *scale;
static keel_module_t *module, *file_module;
static keel_kernel_t *file_scale;
static const char *module_file;
static keel_graph_t *graph;
static keel_graph_exec_t *exec;
static void *whole;
static float *x, *y, *pinned, *managed, *async_buf;
static atomic_int host_calls;

/* ---- kernels ---- */

/* y = a x + y, with a block's dynamic shared memory used as a staging
 * buffer, so that a launch needs the thread's scratch memory. */
static void saxpy_cpu(const keel_cpu_kernel_ctx_t *ctx, void **args)
{
    int n = *(const int *)args[0];
    float a = *(const float *)args[1];
    const float *xs = *(const float *const *)args[2];
    float *ys = *(float *const *)args[3];
    float *stage = ctx->shared_mem;
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        long i = (long)ctx->block_idx.x * ctx->block_dim.x + t.x;
        stage[t.x] = i < n ? xs[i] : 0.0f;
    }
    KEEL_CPU_FOR_EACH_THREAD(ctx, t)
    {
        long i = (long)ctx->block_idx.x * ctx->block_dim.x + t.x;
        if (i < n)
            ys[i] = a * stage[t.x] + ys[i];
    }
}

static const keel_cpu_kernel_desc_t saxpy_desc = {
    KEEL_CPU_KERNEL_ABI, "saxpy", saxpy_cpu, 4, {sizeof(int), sizeof(float), sizeof(float *), sizeof(float *)}};

/* scale, and on a GPU the saxpy the CPU device registers (args as
 * saxpy_desc; no shared memory). */
static const char *scale_source =
    "keel_kernel void scale(int n, float a, float *x)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        x[i] *= a;\n"
    "}\n"
    "keel_kernel void axpy(int n, float a, float *x, float *y)\n"
    "{\n"
    "    int i = keel_global_x();\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i];\n"
    "}\n";

/* ---- steps ---- */

static void on_log(keel_log_level_t level, const char *message, void *user)
{
    (void)level;
    (void)user;
    static const char prefix[] = "KEEL_FAULT: call ";
    if (strncmp(message, prefix, sizeof prefix - 1) == 0) {
        unsigned long long call = 0;
        char name[32] = "";
        if (sscanf(message + sizeof prefix - 1, "%llu of %31s", &call, name) == 2)
            printf("fault %s:%llu\n", name, call);
        atomic_fetch_add(&faults, 1);
    }
}

/* Whether @p st is a failure KEEL_FAULT at the probe's site can cause. */
static int expected_status(keel_status_t st)
{
    if (strcmp(site, "host-alloc") == 0)
        /* A kernel's dynamic shared memory that cannot be had fails its launch. */
        return st == KEEL_ERROR_OUT_OF_MEMORY || st == KEEL_ERROR_LAUNCH_FAILED;
    if (strcmp(site, "device-alloc") == 0 || strcmp(site, "stream-enqueue") == 0)
        return st == KEEL_ERROR_OUT_OF_MEMORY;
    if (strcmp(site, "thread-create") == 0)
        return st == KEEL_ERROR_BACKEND;
    if (strcmp(site, "plugin-load") == 0)
        return st == KEEL_ERROR_BACKEND_UNAVAILABLE || st == KEEL_ERROR_COMPILE_FAILED;
    if (strcmp(site, "compile") == 0)
        return st == KEEL_ERROR_COMPILE_FAILED;
    if (strcmp(site, "vendor-call") == 0)
        return st == KEEL_ERROR_BACKEND;
    return 0;
}

/* Every backend's verdict: a plugin whose load KEEL_FAULT failed reads as
 * such, and the next look loads it again. */
static keel_status_t step_backends(void)
{
    int count = 0;
    keel_status_t st = keel_backend_count(&count);
    if (st != KEEL_OK)
        return st;
    for (int i = 0; i < count; i++) {
        keel_backend_t *b;
        keel_backend_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if ((st = keel_backend_get(i, &b)) != KEEL_OK || (st = keel_backend_get_info(b, &info)) != KEEL_OK)
            return st;
        if (!info.usable && info.reason && strstr(info.reason, "injected")) {
            keel_clear_error();
            printf("backend %s: %s\n", info.name, info.reason);
            return info.status;   /* the failure, as keel_backend_get_info does not fail */
        }
    }
    return KEEL_OK;
}

static keel_status_t step_init(void)
{
    return keel_init();
}

static keel_status_t step_device(void)
{
    keel_device_t *d = SENTINEL;
    keel_status_t st = keel_device_default(&d);
    if (st != KEEL_OK && d != SENTINEL) {
        printf("unclean: keel_device_default wrote its out-parameter and failed\n");
        exit(EXIT_UNCLEAN);
    }
    if (st == KEEL_OK)
        dev = d;
    return st;
}

/* Checks that a failing create left its out-parameter alone. */
#define CREATE(call, out, type)                                                                      \
    do {                                                                                             \
        type *made_ = SENTINEL;                                                                      \
        keel_status_t st_ = (call);                                                                  \
        if (st_ != KEEL_OK && made_ != SENTINEL) {                                                   \
            printf("unclean: %s wrote its out-parameter and failed\n", #call);                       \
            exit(EXIT_UNCLEAN);                                                                      \
        }                                                                                            \
        if (st_ == KEEL_OK)                                                                          \
            (out) = made_;                                                                           \
        return st_;                                                                                  \
    } while (0)

static keel_status_t step_stream(void) { CREATE(keel_stream_create(dev, 0, 0, &made_), stream, keel_stream_t); }
static keel_status_t step_side(void) { CREATE(keel_stream_create(dev, 0, 0, &made_), side, keel_stream_t); }
static keel_status_t step_event(void) { CREATE(keel_event_create(dev, 0, &made_), event, keel_event_t); }
static keel_status_t step_register(void)
{
    CREATE(keel_kernel_register_cpu(dev, &saxpy_desc, &made_), saxpy, keel_kernel_t);
}
static keel_status_t step_build(void)
{
    CREATE(keel_module_build(dev, scale_source, "scale.kc", NULL, 0, &made_), module, keel_module_t);
}
static keel_status_t step_get_kernel(void)
{
    CREATE(keel_module_get_kernel(module, "scale", &made_), scale, keel_kernel_t);
}
static keel_status_t step_get_axpy(void)
{
    CREATE(keel_module_get_kernel(module, "axpy", &made_), saxpy, keel_kernel_t);
}

#define ALLOC(call, out)                                                                             \
    do {                                                                                             \
        void *made_ = SENTINEL;                                                                      \
        keel_status_t st_ = (call);                                                                  \
        if (st_ != KEEL_OK && made_ != SENTINEL) {                                                   \
            printf("unclean: %s wrote its out-parameter and failed\n", #call);                       \
            exit(EXIT_UNCLEAN);                                                                      \
        }                                                                                            \
        if (st_ == KEEL_OK)                                                                          \
            (out) = made_;                                                                           \
        return st_;                                                                                  \
    } while (0)

static keel_status_t step_alloc_x(void) { ALLOC(keel_malloc(dev, N * sizeof(float), &made_), x); }
static keel_status_t step_alloc_y(void) { ALLOC(keel_malloc(dev, N * sizeof(float), &made_), y); }
static keel_status_t step_alloc_pinned(void) { ALLOC(keel_malloc_host(dev, N * sizeof(float), &made_), pinned); }
static keel_status_t step_alloc_managed(void) { ALLOC(keel_malloc_managed(dev, N * sizeof(float), &made_), managed); }
static keel_status_t step_alloc_async(void) { ALLOC(keel_malloc_async(stream, N * sizeof(float), &made_), async_buf); }

static void count_host_call(void *p)
{
    atomic_fetch_add((atomic_int *)p, 1);
}

static keel_status_t launch_saxpy(float a, const float *xs, float *ys)
{
    int n = N;
    void *args[] = {&n, &a, &xs, &ys};
    size_t sizes[] = {sizeof n, sizeof a, sizeof xs, sizeof ys};
    keel_dim3_t grid = {N / 64, 1, 1}, block = {64, 1, 1};
    return keel_launch(saxpy, grid, block, 64 * sizeof(float), stream, 4, args, sizes);
}

static keel_status_t launch_scale(float a, float *xs)
{
    int n = N;
    void *args[] = {&n, &a, &xs};
    size_t sizes[] = {sizeof n, sizeof a, sizeof xs};
    keel_dim3_t grid = {N / 128, 1, 1}, block = {128, 1, 1};
    return keel_launch(scale, grid, block, 0, stream, 3, args, sizes);
}

#define TRY(call)                                                                                    \
    do {                                                                                             \
        keel_status_t st_ = (call);                                                                  \
        if (st_ != KEEL_OK)                                                                          \
            return st_;                                                                              \
    } while (0)

/* The work: every result is checked, so a fault that is swallowed without
 * doing the work shows. */
static keel_status_t step_work(void)
{
    for (int i = 0; i < N; i++)
        pinned[i] = (float)i;
    managed[0] = -1.0f;
    int calls_before = atomic_load(&host_calls);
    TRY(keel_memset_async(y + 8, 0x7f, 8 * sizeof(float), stream));        /* inside an allocation */
    TRY(keel_memcpy_async(x, pinned, N * sizeof(float), stream));           /* x = i */
    TRY(keel_memcpy_async(x + 1, pinned + 1, 16 * sizeof(float), stream));  /* the same, from inside */
    TRY(keel_memset_async(y, 0, N * sizeof(float), stream));                /* y = 0 */
    TRY(launch_saxpy(4.0f, x, y));                                          /* y = 4i */
    TRY(launch_scale(0.5f, y));                                             /* y = 2i */
    TRY(keel_binary(stream, KEEL_BINARY_ADD, KEEL_F32, 1, N, 1.0, x, N, 0.5, y, N, KEEL_BROADCAST_NONE,
                    async_buf, N));                                         /* async = 2i */
    TRY(keel_reduce(stream, KEEL_REDUCE_SUM, KEEL_F32, 1, N, x, N, KEEL_AXIS_ALL, managed)); /* sum i */
    TRY(keel_event_record(event, stream));
    TRY(keel_stream_wait_event(side, event));
    TRY(keel_stream_launch_host_func(side, count_host_call, &host_calls));
    TRY(keel_memcpy_async(pinned, async_buf, N * sizeof(float), stream));
    TRY(keel_stream_synchronize(stream));
    TRY(keel_stream_synchronize(side));
    TRY(keel_event_synchronize(event));
    float head[4];
    TRY(keel_memcpy(head, y, sizeof head));                                 /* a synchronous copy */
    for (int i = 0; i < N; i++)
        if (pinned[i] != 2.0f * (float)i) {
            printf("wrong result: pinned[%d] = %g, expected %g\n", i, pinned[i], 2.0 * i);
            exit(EXIT_UNCLEAN);
        }
    double want = (double)N * (N - 1) / 2;
    if (fabs(managed[0] - want) > 1e-3 * want) {
        printf("wrong result: the sum is %.9g, expected %.9g\n", managed[0], want);
        exit(EXIT_UNCLEAN);
    }
    if (head[3] != 6.0f) {
        printf("wrong result: y[3] = %g, expected 6\n", head[3]);
        exit(EXIT_UNCLEAN);
    }
    if (atomic_load(&host_calls) != calls_before + 1) {
        printf("wrong result: the host function ran %d times\n", atomic_load(&host_calls) - calls_before);
        exit(EXIT_UNCLEAN);
    }
    return KEEL_OK;
}

/* A graph of a copy and a launch: y = x, then y = x + y = 2i. A capture
 * that fails midway is ended and its graph dropped, so the retry begins a
 * new one. */
static keel_status_t step_capture(void)
{
    TRY(keel_stream_begin_capture(stream));
    keel_status_t st = keel_memcpy_async(y, x, N * sizeof(float), stream);
    if (st == KEEL_OK)
        st = launch_saxpy(1.0f, x, y);
    keel_graph_t *g = SENTINEL;
    keel_status_t end = keel_stream_end_capture(stream, &g);
    for (int i = 0; i < 3 && end != KEEL_OK; i++) {   /* its own failure is a fault too */
        if (g != SENTINEL) {
            printf("unclean: keel_stream_end_capture wrote its out-parameter and failed\n");
            exit(EXIT_UNCLEAN);
        }
        if (st == KEEL_OK)
            st = end;
        end = keel_stream_end_capture(stream, &g);
    }
    if (end != KEEL_OK)
        return end;
    if (st != KEEL_OK) {
        /* A call that succeeds leaves the last error as it was: the failure's. */
        if (keel_graph_destroy(g) != KEEL_OK)
            printf("capture: keel_graph_destroy: %s\n", keel_last_error());
        return st;
    }
    graph = g;
    return KEEL_OK;
}

static keel_status_t step_instantiate(void)
{
    CREATE(keel_graph_instantiate(graph, &made_), exec, keel_graph_exec_t);
}

static keel_status_t step_replay(void)
{
    TRY(keel_memset_async(y, 0, N * sizeof(float), stream));
    TRY(keel_graph_launch(exec, stream));
    TRY(keel_graph_launch(exec, stream));
    TRY(keel_memcpy_async(pinned, y, N * sizeof(float), stream));
    TRY(keel_stream_synchronize(stream));
    for (int i = 0; i < N; i++)
        if (pinned[i] != 2.0f * (float)i) {
            printf("wrong result: the graph gave y[%d] = %g, expected %g\n", i, pinned[i], 2.0 * i);
            exit(EXIT_UNCLEAN);
        }
    return KEEL_OK;
}

/* With KEEL_CPU_MEMORY_LIMIT, all of the device's memory at once: any
 * block a failure lost still counts against the cap, and this fails. */
static keel_status_t step_all_memory(void)
{
    size_t free_bytes = 0, total = 0;
    TRY(keel_device_memory_info(dev, &free_bytes, &total));
    void *p = SENTINEL;
    keel_status_t st = keel_malloc(dev, total, &p);
    if (st != KEEL_OK) {
        if (p != SENTINEL) {
            printf("unclean: keel_malloc wrote its out-parameter and failed\n");
            exit(EXIT_UNCLEAN);
        }
        return st;
    }
    whole = p;
    return KEEL_OK;
}

/* Frees: a free that fails leaves the block allocated, to be freed again. */
#define RELEASE(call, var)                                                                           \
    do {                                                                                             \
        keel_status_t st_ = (call);                                                                  \
        if (st_ == KEEL_OK)                                                                          \
            (var) = NULL;                                                                            \
        return st_;                                                                                  \
    } while (0)

static keel_status_t step_free_async(void) { RELEASE(keel_free_async(async_buf, stream), async_buf); }
static keel_status_t step_free_x(void) { RELEASE(keel_free(x), x); }
static keel_status_t step_free_y(void) { RELEASE(keel_free(y), y); }
static keel_status_t step_free_pinned(void) { RELEASE(keel_free(pinned), pinned); }
static keel_status_t step_free_managed(void) { RELEASE(keel_free(managed), managed); }
static keel_status_t step_release_kernel(void) { RELEASE(keel_kernel_release(saxpy), saxpy); }
static keel_status_t step_unload(void) { RELEASE(keel_module_unload(module), module); }
static keel_status_t step_destroy_event(void) { RELEASE(keel_event_destroy(event), event); }
static keel_status_t step_destroy_graph(void) { RELEASE(keel_graph_destroy(graph), graph); }
static keel_status_t step_destroy_exec(void) { RELEASE(keel_graph_exec_destroy(exec), exec); }
static keel_status_t step_free_whole(void) { RELEASE(keel_free(whole), whole); }
static keel_status_t step_destroy_stream(void) { RELEASE(keel_stream_destroy(stream), stream); }
static keel_status_t step_destroy_side(void) { RELEASE(keel_stream_destroy(side), side); }

/* A module file made by keel-cc (examples/aot/scale.keelmod): its CPU
 * code, loaded from memory through a file descriptor, or its source. */
static keel_status_t step_load_file(void)
{
    CREATE(keel_module_load_file(dev, module_file, &made_), file_module, keel_module_t);
}
static keel_status_t step_file_kernel(void)
{
    CREATE(keel_module_get_kernel(file_module, "scale", &made_), file_scale, keel_kernel_t);
}

/* y = 3 x with the module file's scale(n, a, x, y). */
static keel_status_t step_file_work(void)
{
    int n = N;
    float a = 3.0f;
    const float *xs = x;
    float *ys = y;
    void *args[] = {&n, &a, &xs, &ys};
    size_t sizes[] = {sizeof n, sizeof a, sizeof xs, sizeof ys};
    keel_dim3_t grid = {N / 256, 1, 1}, block = {256, 1, 1};
    TRY(keel_memset_async(y, 0, N * sizeof(float), stream));
    TRY(keel_launch(file_scale, grid, block, 0, stream, 4, args, sizes));
    TRY(keel_memcpy_async(pinned, y, N * sizeof(float), stream));
    TRY(keel_stream_synchronize(stream));
    for (int i = 0; i < N; i++)
        if (pinned[i] != 3.0f * (float)i) {
            printf("wrong result: the module file's kernel gave y[%d] = %g, expected %g\n", i, pinned[i], 3.0 * i);
            exit(EXIT_UNCLEAN);
        }
    return KEEL_OK;
}

static keel_status_t step_unload_file(void) { RELEASE(keel_module_unload(file_module), file_module); }

/* ---- the run ---- */

/* After a failure: the queued work is waited for, and an asynchronous
 * failure it reported is dropped (it is the same fault). */
static void settle(void)
{
    if (stream)
        (void)keel_stream_synchronize(stream);
    if (side)
        (void)keel_stream_synchronize(side);
    if (dev)
        (void)keel_device_synchronize(dev);
    keel_clear_error();
}

static void step(const char *name, keel_status_t (*fn)(void))
{
    keel_clear_error();
    keel_status_t st = fn();
    if (st == KEEL_OK)
        return;
    const char *detail = keel_last_error();
    printf("step %s %s %s\n", name, keel_status_name(st), detail);
    if (!expected_status(st) && strcmp(name, "backends") != 0) {
        printf("unclean: %s failed with %s, which KEEL_FAULT %s cannot cause\n", name, keel_status_name(st), site);
        exit(EXIT_UNCLEAN);
    }
    if (strcmp(name, "backends") != 0 && (detail[0] == '\0' || keel_last_status() != st)) {
        printf("unclean: %s failed with %s but the last error is %s \"%s\"\n", name, keel_status_name(st),
               keel_status_name(keel_last_status()), detail);
        exit(EXIT_UNCLEAN);
    }
    settle();
    st = fn();
    if (st != KEEL_OK) {
        printf("step %s %s %s (retry)\n", name, keel_status_name(st), keel_last_error());
        printf("faults %d\n", atomic_load(&faults));
        exit(EXIT_RETRY_FAILED);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s <site the faults are at, or none> [module file made by keel-cc]\n", argv[0]);
        return EXIT_USAGE;
    }
    site = argv[1];
    module_file = argc == 3 ? argv[2] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    keel_log_set_callback(on_log, NULL);
    keel_log_set_level(KEEL_LOG_WARN);

    step("init", step_init);
    step("backends", step_backends);
    step("device", step_device);
    step("stream", step_stream);
    step("side", step_side);
    step("event", step_event);
    /* The CPU device registers saxpy as a C function; a GPU takes it from
     * the portable module. */
    keel_backend_t *backend;
    keel_backend_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (keel_device_get_backend(dev, &backend) != KEEL_OK || keel_backend_get_info(backend, &info) != KEEL_OK) {
        printf("unclean: the device's backend: %s\n", keel_last_error());
        return EXIT_UNCLEAN;
    }
    int on_cpu = strcmp(info.name, "cpu") == 0;
    if (on_cpu)
        step("register", step_register);
    step("build", step_build);
    step("get_kernel", step_get_kernel);
    if (!on_cpu)
        step("get_axpy", step_get_axpy);
    step("alloc_x", step_alloc_x);
    step("alloc_y", step_alloc_y);
    step("alloc_pinned", step_alloc_pinned);
    step("alloc_managed", step_alloc_managed);
    step("alloc_async", step_alloc_async);
    step("work", step_work);
    step("work_again", step_work);
    if (module_file) {
        step("load_file", step_load_file);
        step("file_kernel", step_file_kernel);
        step("file_work", step_file_work);
    }
    step("capture", step_capture);
    step("instantiate", step_instantiate);
    step("replay", step_replay);
    step("destroy_graph", step_destroy_graph);
    step("destroy_exec", step_destroy_exec);
    step("free_async", step_free_async);
    step("free_x", step_free_x);
    step("free_y", step_free_y);
    step("free_pinned", step_free_pinned);
    step("free_managed", step_free_managed);
    if (on_cpu)
        step("release_kernel", step_release_kernel);
    step("unload", step_unload);
    if (module_file)
        step("unload_file", step_unload_file);
    step("destroy_event", step_destroy_event);
    step("destroy_stream", step_destroy_stream);
    step("destroy_side", step_destroy_side);
    if (getenv("KEEL_CPU_MEMORY_LIMIT")) {
        step("all_memory", step_all_memory);
        step("free_whole", step_free_whole);
    }
    printf("faults %d\n", atomic_load(&faults));
    return EXIT_DONE;
}
