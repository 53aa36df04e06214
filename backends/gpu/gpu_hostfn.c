/* SPDX-License-Identifier: MIT */
/* Host functions on streams. The reasons below are CUDA's; the HIP plugin
 * runs the same code through hipLaunchHostFunc and hipStreamWaitValue32
 * (vendor_hip.h).
 *
 * cudaLaunchHostFunc runs every host function of a process on one CUDA
 * thread, and a few dozen host functions queued behind one that blocks make
 * further CUDA calls block too: a host function that waits (for a user
 * event, for another stream) would stall unrelated streams or deadlock the
 * thread that was to release it. Keel's streams must not order each other, so
 * here each stream that uses host functions gets its own thread and CUDA
 * never runs user code:
 *   - the stream records an event where the function belongs, then waits
 *     (cuStreamWaitValue32) on a counter in pinned memory;
 *   - the stream's thread waits for the event, runs the function, and sets
 *     the counter to the function's sequence number, releasing the stream.
 * Host functions enqueued one after another, with no other work in between,
 * share one event and one wait: CUDA blocks the enqueuing thread once a few
 * dozen such operations queue behind a stream that waits, and hundreds of
 * host functions behind one that blocks must still enqueue at once. The
 * stream's epoch (keel__gpu_stream_touch) says whether other work came.
 * While a stream is being captured into a graph the function goes to
 * cudaLaunchHostFunc (a graph host node), since sequence numbers baked into a
 * graph could not replay. Where the driver refuses stream memory operations,
 * cudaLaunchHostFunc is used throughout (and says so in the log). */
#include <stdlib.h>
#include <string.h>
#include "gpu_internal.h"

struct host_op {
    keel_host_fn_t fn;
    void *user_data;
    uint32_t batch;                 /* the wait in the stream that it holds */
    gpuEvent_t event;               /* first of a batch: where the batch starts; else NULL */
    struct host_op *next;
};

struct keel__gpu_hostq {
    pthread_mutex_t enqueue_lock;   /* keeps batches and the queue in stream order */
    pthread_mutex_t m;              /* guards what follows */
    pthread_cond_t cv;
    struct host_op *head, *tail;    /* functions not yet run, in order */
    uint32_t last_batch;            /* the newest batch enqueued */
    uint32_t released;              /* the newest batch whose wait was released */
    unsigned batch_epoch;           /* the stream's epoch when last_batch was enqueued */
    int batch_ok;                   /* the running batch's event completed without error */
    gpuEvent_t *events;             /* spare events */
    size_t nevents, capevents;
    int stop;
    int ordinal;                    /* the stream's device */
    pthread_t thread;
    volatile uint32_t *counter;     /* pinned; the stream waits on it */
};

static void event_put(struct keel__gpu_hostq *q, gpuEvent_t e)
{
    if (q->nevents == q->capevents) {
        size_t cap = q->capevents ? 2 * q->capevents : 8;
        gpuEvent_t *n = realloc(q->events, cap * sizeof *n);
        if (n == NULL) {
            (void)gpuEventDestroy(e);
            return;
        }
        q->events = n;
        q->capevents = cap;
    }
    q->events[q->nevents++] = e;
}

static void *host_worker(void *arg)
{
    struct keel__gpu_hostq *q = arg;
    /* So that the runtime calls here never make another device current. */
    (void)gpuSetDevice(q->ordinal);
    pthread_mutex_lock(&q->m);
    for (;;) {
        while (q->head == NULL && !q->stop)
            pthread_cond_wait(&q->cv, &q->m);
        if (q->head == NULL)
            break;
        struct host_op *op = q->head;
        q->head = op->next;
        if (q->head == NULL)
            q->tail = NULL;
        pthread_mutex_unlock(&q->m);
        /* As cudaLaunchHostFunc: the functions are not called once the
         * context has failed; the stream is released either way. */
        if (op->event != NULL)
            q->batch_ok = gpuEventSynchronize(op->event) == gpuSuccess;
        if (q->batch_ok)
            op->fn(op->user_data);
        pthread_mutex_lock(&q->m);
        /* The batch ends when no function of it is left; one enqueued while
         * this one ran joins it (the enqueuer sees it unreleased, under m). */
        if (q->head == NULL || q->head->batch != op->batch) {
            q->released = op->batch;
            __atomic_store_n(q->counter, op->batch, __ATOMIC_RELEASE);
        }
        if (op->event != NULL)
            event_put(q, op->event);
        free(op);
    }
    pthread_mutex_unlock(&q->m);
    return NULL;
}

static void free_ops(struct host_op *op)
{
    while (op != NULL) {
        struct host_op *next = op->next;
        if (op->event != NULL)
            (void)gpuEventDestroy(op->event);
        free(op);
        op = next;
    }
}

static keel_status_t hostq_get(keel__gpu_stream_t *s, struct keel__gpu_hostq **out)
{
    struct keel__gpu_hostq *q = atomic_load_explicit(&s->hostq, memory_order_acquire);
    if (q != NULL) {
        *out = q;
        return KEEL_OK;
    }
    keel_status_t st = KEEL_OK;
    pthread_mutex_lock(&s->lock);
    q = atomic_load_explicit(&s->hostq, memory_order_relaxed);
    if (q == NULL) {
        q = calloc(1, sizeof *q);
        void *counter = NULL;
        gpuError_t err = q != NULL ? keel__gpu_use_device(s->dev) : gpuErrorMemoryAllocation;
        if (err == gpuSuccess)
            err = gpuHostAlloc(&counter, 64, gpuHostAllocPortable | gpuHostAllocMapped);
        if (err == gpuSuccess) {
            /* A wait that is already satisfied: finds out whether this
             * driver and device take stream memory operations at all. */
            *(volatile uint32_t *)counter = 0;
            gpuDrvError_t res = gpuStreamWaitValueGeq(s->stream, counter, 0);
            if (res != gpuDrvSuccess) {
                const char *name = "?";
                gpuDrvGetErrorName(res, &name);
                if (keel__gpu_host->log_enabled(KEEL_LOG_WARN))
                    keel__gpu_host->log(KEEL_LOG_WARN,
                                        KEEL_GPU_DEVICE_FMT ": " gpuStreamWaitValueName " refused (%s): host "
                                        "functions run on " KEEL_GPU_RUNTIME "'s own thread, where a blocking one "
                                        "holds every stream's",
                                        s->dev->ordinal, name);
                atomic_store(&s->dev->stream_wait_value, 0);
                (void)gpuFreeHost(counter);
                free(q);
                pthread_mutex_unlock(&s->lock);
                return KEEL_ERROR_NOT_SUPPORTED; /* not an error: the caller falls back */
            }
        }
        if (err != gpuSuccess) {
            free(q);
            q = NULL;
            st = keel__gpu_error(err, "keel_stream_launch_host_func", "allocating the host-function counter");
        } else {
            q->counter = counter;
            q->ordinal = s->dev->ordinal;
            pthread_mutex_init(&q->enqueue_lock, NULL);
            pthread_mutex_init(&q->m, NULL);
            pthread_cond_init(&q->cv, NULL);
            if (KEEL_GPU_PTHREAD_CREATE(&q->thread, NULL, host_worker, q) != 0) {
                (void)gpuFreeHost(counter);
                pthread_mutex_destroy(&q->enqueue_lock);
                pthread_mutex_destroy(&q->m);
                pthread_cond_destroy(&q->cv);
                free(q);
                q = NULL;
                st = keel__gpu_host->set_error(KEEL_ERROR_BACKEND,
                                               "keel_stream_launch_host_func: cannot start the stream's host thread");
            } else {
                atomic_store_explicit(&s->hostq, q, memory_order_release);
                if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG))
                    keel__gpu_host->log(KEEL_LOG_DEBUG,
                                        KEEL_GPU_DEVICE_FMT ": stream %p runs its host functions on its own thread",
                                        s->dev->ordinal, (void *)s);
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (q != NULL)
        *out = q;
    return st;
}

static keel_status_t event_get(keel__gpu_stream_t *s, struct keel__gpu_hostq *q, gpuEvent_t *out)
{
    pthread_mutex_lock(&q->m);
    gpuEvent_t e = q->nevents ? q->events[--q->nevents] : NULL;
    pthread_mutex_unlock(&q->m);
    if (e == NULL) {
        gpuError_t err = keel__gpu_use_device(s->dev);
        if (err == gpuSuccess)
            err = gpuEventCreateWithFlags(&e, gpuEventDisableTiming | gpuEventBlockingSync);
        if (err != gpuSuccess)
            return keel__gpu_error(err, "keel_stream_launch_host_func", KEEL_GPU_NAME(gpuEventCreateWithFlags));
    }
    *out = e;
    return KEEL_OK;
}

static void enqueue_op(struct keel__gpu_hostq *q, struct host_op *op)
{
    if (q->tail)
        q->tail->next = op;
    else
        q->head = op;
    q->tail = op;
    pthread_cond_signal(&q->cv);
}

keel_status_t keel__gpu_launch_host_func(keel__gpu_stream_t *s, keel_host_fn_t fn, void *user_data)
{
    const char *kfn = "keel_stream_launch_host_func";
    enum gpuStreamCaptureStatus cs = gpuStreamCaptureStatusNone;
    gpuError_t err = gpuStreamIsCapturing(s->stream, &cs);
    if (err != gpuSuccess)
        return keel__gpu_error(err, kfn, KEEL_GPU_NAME(gpuStreamIsCapturing));
    struct keel__gpu_hostq *q = NULL;
    keel_status_t st = KEEL_ERROR_NOT_SUPPORTED;
    if (cs == gpuStreamCaptureStatusNone && atomic_load_explicit(&s->dev->stream_wait_value, memory_order_relaxed))
        st = hostq_get(s, &q);
    if (st == KEEL_ERROR_NOT_SUPPORTED) {
        err = KEEL_GPU_TRY(gpuLaunchHostFunc(s->stream, (gpuHostFn_t)fn, user_data));
        keel__gpu_stream_touch(s);
        return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, kfn, gpuLaunchHostFuncName);
    }
    if (st != KEEL_OK)
        return st;
    struct host_op *op = calloc(1, sizeof *op);
    if (op == NULL)
        return keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "%s: no host memory", kfn);
    op->fn = fn;
    op->user_data = user_data;

    pthread_mutex_lock(&q->enqueue_lock);
    unsigned epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
    pthread_mutex_lock(&q->m);
    if (q->released != q->last_batch && q->batch_epoch == epoch) {
        /* The stream still waits for the newest batch and nothing else was
         * enqueued after it: this function joins it. */
        op->batch = q->last_batch;
        enqueue_op(q, op);
        pthread_mutex_unlock(&q->m);
        pthread_mutex_unlock(&q->enqueue_lock);
        return KEEL_OK;
    }
    pthread_mutex_unlock(&q->m);

    gpuEvent_t event = NULL;
    if ((st = event_get(s, q, &event)) != KEEL_OK) {
        pthread_mutex_unlock(&q->enqueue_lock);
        free(op);
        return st;
    }
    err = gpuEventRecord(event, s->stream);
    gpuDrvError_t res = gpuDrvSuccess;
    if (err == gpuSuccess) {
        uint32_t batch = q->last_batch + 1;
        res = gpuStreamWaitValueGeq(s->stream, q->counter, batch);
        /* Queued even if the wait failed: the event is in the stream, so the
         * function still runs in order; only later work does not wait. */
        op->batch = batch;
        op->event = event;
        pthread_mutex_lock(&q->m);
        q->last_batch = batch;
        q->batch_epoch = res == gpuDrvSuccess ? epoch : epoch - 1u;
        enqueue_op(q, op);
        pthread_mutex_unlock(&q->m);
    }
    pthread_mutex_unlock(&q->enqueue_lock);
    if (err != gpuSuccess) {
        pthread_mutex_lock(&q->m);
        event_put(q, event);
        pthread_mutex_unlock(&q->m);
        free(op);
        return keel__gpu_error(err, kfn, KEEL_GPU_NAME(gpuEventRecord));
    }
    if (res != gpuDrvSuccess)
        return keel__gpu_drv_error(res, kfn, gpuStreamWaitValueName);
    return KEEL_OK;
}

void keel__gpu_hostq_release(keel__gpu_stream_t *s)
{
    struct keel__gpu_hostq *q = atomic_exchange(&s->hostq, NULL);
    if (q == NULL)
        return;
    pthread_mutex_lock(&q->m);
    q->stop = 1;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->m);
    pthread_join(q->thread, NULL);
    free_ops(q->head);
    for (size_t i = 0; i < q->nevents; i++)
        (void)gpuEventDestroy(q->events[i]);
    free(q->events);
    (void)gpuFreeHost((void *)q->counter);
    (void)gpuGetLastError();
    pthread_mutex_destroy(&q->enqueue_lock);
    pthread_mutex_destroy(&q->m);
    pthread_cond_destroy(&q->cv);
    free(q);
}
