/* SPDX-License-Identifier: MIT */
/* Releasing everything Keel holds: keel_finalize, and the same teardown at
 * process exit (runtime/init.c calls both with its lock held). The order goes
 * from what the application made to what Keel made for it: graphs, kernels,
 * modules, events, streams, memory, then the devices, the backends and
 * their plugins, and Keel's own tables last. */
#include <string.h>
#include <time.h>
#include "runtime/internal.h"
#include "runtime/ops_fallback.h"

/* How long the teardown at exit waits for the CPU streams to finish the
 * commands they are running (queued ones are skipped); past it, Keel leaves
 * everything as it is rather than hang the exit or free what runs. */
#define EXIT_WAIT_SECONDS 2

static int at_exit_mode, forked_mode;

/* At exit a plugin whose devices were opened is left alone: its vendor's
 * runtime may already have been torn down by its own exit handler (the
 * CUDA runtime registers one when it starts, after Keel's), and a call into
 * it then may fail or crash. The driver reclaims the device objects when
 * the process ends. The built-in CPU backend is always released. */
static int backend_kept(const struct keel_backend *b)
{
    if (forked_mode)
        return b->status == KEEL_OK;
    if (!at_exit_mode || b->builtin || b->status != KEEL_OK)
        return 0;
    for (int i = 0; i < b->device_count; i++)
        if (atomic_load(&b->devices[i].opened))
            return 1;
    return 0;
}

static int backend_ok(const struct keel_device *d)
{
    return !backend_kept(d->backend);
}

/* A handle whose creation has not finished has no device yet; it is not
 * the teardown's (no other Keel call may run meanwhile). */
static int made(void *obj, void *arg)
{
    (void)arg;
    return ((struct keel_stream *)obj)->device != NULL;  /* device follows magic in every handle */
}

static int own_kernel(void *obj, void *arg)
{
    struct keel_kernel *k = obj;
    (void)arg;
    return k->device && !k->module;
}

static int app_stream(void *obj, void *arg)
{
    struct keel_stream *s = obj;
    (void)arg;
    return s->device && !s->is_default;
}

/* Each opened device of the CPU backend idle, but for the stream (if any)
 * whose worker is the calling thread; 0, or -1 when one is still busy at
 * the deadline. */
static int quiesce_cpu(void)
{
    struct keel_backend *cpu = keel__backend_named("cpu");
    if (!cpu || !keel__backend_final(cpu) || cpu->status != KEEL_OK)
        return 0;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += EXIT_WAIT_SECONDS;
    for (int i = 0; i < cpu->device_count; i++) {
        struct keel_device *d = &cpu->devices[i];
        if (atomic_load(&d->opened) && keel__cpu_device_quiesce(d->ctx, &deadline) != 0) {
            keel__log(KEEL_LOG_INFO, "exit: %s is still running a command after %d s; Keel leaves its resources to "
                      "the system", d->name, EXIT_WAIT_SECONDS);
            return -1;
        }
    }
    return 0;
}

/* Waits for the work of every opened device; a failure of that work is
 * logged (nobody is left to report it to). */
static void synchronize_all(void)
{
    for (int i = 0; i < keel__backend_count(); i++) {
        struct keel_backend *b = keel__backend_at(i);
        if (!keel__backend_final(b) || b->status != KEEL_OK)
            continue;
        for (int j = 0; j < b->device_count; j++) {
            struct keel_device *d = &b->devices[j];
            if (!atomic_load(&d->opened))
                continue;
            keel_status_t st = d->plugin->device->synchronize(d->ctx);
            if (st != KEEL_OK)
                keel__log(KEEL_LOG_WARN, "keel_finalize: the work queued on %s failed: %s: %s", d->name,
                          keel_status_name(st), keel_last_error());
        }
    }
}

static void release_objects(void)
{
    void *h;
    while ((h = keel__handle_find_live(KEEL__MAGIC_GRAPH_EXEC, made, NULL)) != NULL) {
        struct keel_graph_exec *x = h;
        keel__graph_exec_forget(x, backend_ok(x->device));
    }
    while ((h = keel__handle_find_live(KEEL__MAGIC_GRAPH, made, NULL)) != NULL) {
        struct keel_graph *g = h;
        keel__graph_forget(g, backend_ok(g->device));
    }
    while ((h = keel__handle_find_live(KEEL__MAGIC_KERNEL, own_kernel, NULL)) != NULL) {
        struct keel_kernel *k = h;
        keel__kernel_forget(k, backend_ok(k->device));
    }
    while ((h = keel__handle_find_live(KEEL__MAGIC_MODULE, made, NULL)) != NULL) {
        struct keel_module *m = h;
        keel__module_forget(m, backend_ok(m->device));
    }
    while ((h = keel__handle_find_live(KEEL__MAGIC_EVENT, made, NULL)) != NULL) {
        struct keel_event *e = h;
        keel__event_forget(e, backend_ok(e->device));
    }
    while ((h = keel__handle_find_live(KEEL__MAGIC_STREAM, app_stream, NULL)) != NULL) {
        struct keel_stream *s = h;
        keel__stream_forget(s, backend_ok(s->device));
    }
}

int keel__teardown(int mode)
{
    at_exit_mode = mode == KEEL__TEARDOWN_EXIT;
    forked_mode = mode == KEEL__TEARDOWN_FORKED;
    if (at_exit_mode) {
        /* A pool helper's kernel is part of a launch whose worker waits for
         * it: that stream will not become idle while this thread exits. */
        if (keel__cpu_thread_role() == 2)
            return -1;
        keel__cpu_exit_begin();
        if (quiesce_cpu() != 0)
            return -1;
    } else if (!forked_mode) {
        synchronize_all();
    }
    /* What is left alone stays reachable from its handle (and no handle is
     * made after the teardown at exit). */
    keel__handle_keep_contents(forked_mode || at_exit_mode);
    keel__devices_flush(backend_ok);
    release_objects();
    keel__module_held_teardown(backend_ok);
    keel__blas_teardown();
    keel__dlpack_teardown(!at_exit_mode && !forked_mode);
    keel__memory_teardown(backend_ok);
    keel__devices_close(backend_ok);
    keel__loader_teardown(backend_kept);
    keel__handle_keep_contents(0);
    keel__registry_reset();
    keel__cpu_thread_scratch_free();
    return 0;
}
