/* Copies between pageable host memory and a device through pinned staging.
 *
 * The driver copies pageable memory through its own small bounce buffers,
 * one thread, one chunk at a time (about 8 GB/s on an H200 host). Here the
 * copy is cut into chunks that cycle through a few pinned buffers made once
 * per device: while the copy engine moves chunk i, host threads fill (or
 * drain) chunk i+1. The host side of each chunk is itself split across a
 * small pool of threads, since one core cannot keep up with the link. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_internal.h"
#include "cuda_shared.h"

enum {
    STAGING_SLOTS = 4,
    STAGING_CHUNK = 4 << 20,          /* bytes per slot */
    STAGING_MIN_COPY = 2 << 20,       /* below this the driver's own path is as good */
    COPY_MAX_THREADS = 16,
    COPY_MIN_SLICE = 256 << 10        /* below this a slice is not worth a thread */
};

struct keel__cuda_staging {
    pthread_mutex_t lock;             /* one staged copy at a time on a device */
    void *buf[STAGING_SLOTS];
    gpuEvent_t done[STAGING_SLOTS];   /* the last copy engine use of buf[i] */
    int used[STAGING_SLOTS];
};

/* ---- a pool of host threads for large memcpys ---- */

static struct {
    pthread_once_t once;
    pthread_mutex_t job_lock;         /* one job at a time */
    pthread_mutex_t m;
    pthread_cond_t go, done;
    int helpers;                      /* threads besides the caller */
    unsigned long gen;
    char *dst;
    const char *src;
    size_t bytes;
    int pending;
} pool = {.once = PTHREAD_ONCE_INIT,
          .job_lock = PTHREAD_MUTEX_INITIALIZER,
          .m = PTHREAD_MUTEX_INITIALIZER,
          .go = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static void slice_of(size_t bytes, int parts, int k, size_t *off, size_t *len)
{
    size_t per = (bytes / (size_t)parts + 63) & ~(size_t)63;
    size_t a = per * (size_t)k, b = a + per;
    if (a > bytes)
        a = bytes;
    if (b > bytes || k == parts - 1)
        b = bytes;
    *off = a;
    *len = b - a;
}

static void *copy_worker(void *arg)
{
    int me = (int)(intptr_t)arg;      /* 1..helpers; the caller is part 0 */
    unsigned long seen = 0;
    pthread_mutex_lock(&pool.m);
    for (;;) {
        while (pool.gen == seen)
            pthread_cond_wait(&pool.go, &pool.m);
        seen = pool.gen;
        char *dst = pool.dst;
        const char *src = pool.src;
        size_t bytes = pool.bytes, off, len;
        pthread_mutex_unlock(&pool.m);
        slice_of(bytes, pool.helpers + 1, me, &off, &len);
        if (len)
            memcpy(dst + off, src + off, len);
        pthread_mutex_lock(&pool.m);
        if (--pool.pending == 0)
            pthread_cond_signal(&pool.done);
    }
    return NULL;
}

static void pool_start(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int want = ncpu > 1 ? (int)(ncpu / 2) : 1;
    const char *env = getenv("KEEL_CUDA_COPY_THREADS");
    if (env != NULL && atoi(env) > 0)
        want = atoi(env);
    if (want > COPY_MAX_THREADS)
        want = COPY_MAX_THREADS;
    if (want > 8 && env == NULL)
        want = 8;
    int started = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < want; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, copy_worker, (void *)(intptr_t)i) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&pool.m);
    pool.helpers = started;
    pthread_mutex_unlock(&pool.m);
}

/* A workers' index depends on helpers being final before the first job,
 * which holds since pool_start publishes it before any job is posted. */
static void parallel_memcpy(void *dst, const void *src, size_t bytes)
{
    pthread_once(&pool.once, pool_start);
    int helpers = pool.helpers;
    if (helpers == 0 || bytes < 2 * (size_t)COPY_MIN_SLICE) {
        memcpy(dst, src, bytes);
        return;
    }
    pthread_mutex_lock(&pool.job_lock);
    pthread_mutex_lock(&pool.m);
    pool.dst = dst;
    pool.src = src;
    pool.bytes = bytes;
    pool.pending = helpers;
    pool.gen++;
    pthread_cond_broadcast(&pool.go);
    pthread_mutex_unlock(&pool.m);
    size_t off, len;
    slice_of(bytes, helpers + 1, 0, &off, &len);
    memcpy(dst, src, len);
    pthread_mutex_lock(&pool.m);
    while (pool.pending > 0)
        pthread_cond_wait(&pool.done, &pool.m);
    pthread_mutex_unlock(&pool.m);
    pthread_mutex_unlock(&pool.job_lock);
}

/* ---- staging buffers ---- */

static keel_status_t staging_get(keel__cuda_device_t *dev, const char *fn, struct keel__cuda_staging **out)
{
    struct keel__cuda_staging *st = atomic_load_explicit(&dev->staging, memory_order_acquire);
    if (st != NULL) {
        *out = st;
        return KEEL_OK;
    }
    keel_status_t status = KEEL_OK;
    pthread_mutex_lock(&dev->lock);
    st = atomic_load_explicit(&dev->staging, memory_order_relaxed);
    if (st == NULL) {
        st = calloc(1, sizeof *st);
        cudaError_t err = st != NULL ? keel__cuda_use_device(dev) : cudaErrorMemoryAllocation;
        int i = 0;
        for (; err == gpuSuccess && i < STAGING_SLOTS; i++) {
            err = gpuHostAlloc(&st->buf[i], STAGING_CHUNK, gpuHostAllocPortable);
            if (err == gpuSuccess) {
                err = gpuEventCreateWithFlags(&st->done[i], gpuEventDisableTiming);
                if (err != gpuSuccess) {
                    (void)gpuFreeHost(st->buf[i]);
                    st->buf[i] = NULL;
                }
            }
        }
        if (err != gpuSuccess) {
            status = keel__cuda_error(err, fn, "allocating pinned staging buffers");
            for (int j = 0; st != NULL && j < STAGING_SLOTS; j++) {
                if (st->buf[j] != NULL) {
                    (void)gpuFreeHost(st->buf[j]);
                    (void)gpuEventDestroy(st->done[j]);
                }
            }
            free(st);
            st = NULL;
        } else {
            pthread_mutex_init(&st->lock, NULL);
            atomic_store_explicit(&dev->staging, st, memory_order_release);
        }
    }
    pthread_mutex_unlock(&dev->lock);
    if (st != NULL)
        *out = st;
    return status;
}

void keel__cuda_staging_destroy(keel__cuda_device_t *dev)
{
    struct keel__cuda_staging *st = atomic_exchange(&dev->staging, NULL);
    if (st == NULL)
        return;
    for (int i = 0; i < STAGING_SLOTS; i++) {
        (void)gpuEventSynchronize(st->done[i]);
        (void)gpuEventDestroy(st->done[i]);
        (void)gpuFreeHost(st->buf[i]);
    }
    (void)gpuGetLastError();
    pthread_mutex_destroy(&st->lock);
    free(st);
}

int keel__cuda_staging_wanted(keel__cuda_stream_t *s, size_t bytes)
{
    if (bytes < STAGING_MIN_COPY)
        return 0;
    /* A graph must not capture copies out of buffers that later calls reuse;
     * the runtime's own path then reports what capture allows. */
    enum cudaStreamCaptureStatus cs = gpuStreamCaptureStatusNone;
    if (gpuStreamIsCapturing(s->stream, &cs) != gpuSuccess) {
        (void)gpuGetLastError();
        return 0;
    }
    return cs == gpuStreamCaptureStatusNone;
}

keel_status_t keel__cuda_staged_h2d(keel__cuda_stream_t *s, void *dst, const void *src, size_t bytes,
                                    const char *fn)
{
    struct keel__cuda_staging *st;
    keel_status_t status = staging_get(s->dev, fn, &st);
    if (status != KEEL_OK)
        return status;
    pthread_mutex_lock(&st->lock);
    cudaError_t err = gpuSuccess;
    const char *what = NULL;
    size_t done = 0;
    for (int slot = 0; done < bytes; slot = (slot + 1) % STAGING_SLOTS) {
        size_t n = bytes - done < STAGING_CHUNK ? bytes - done : STAGING_CHUNK;
        if (st->used[slot] && (err = gpuEventSynchronize(st->done[slot])) != gpuSuccess) {
            what = "cudaEventSynchronize on a staging buffer";
            break;
        }
        parallel_memcpy(st->buf[slot], (const char *)src + done, n);
        err = gpuMemcpyAsync((char *)dst + done, st->buf[slot], n, gpuMemcpyHostToDevice, s->stream);
        if (err != gpuSuccess) {
            what = "cudaMemcpyAsync from a staging buffer";
            break;
        }
        err = gpuEventRecord(st->done[slot], s->stream);
        if (err != gpuSuccess) {
            what = "cudaEventRecord";
            break;
        }
        st->used[slot] = 1;
        done += n;
    }
    pthread_mutex_unlock(&st->lock);
    return err == gpuSuccess ? KEEL_OK : keel__cuda_error(err, fn, what);
}

keel_status_t keel__cuda_staged_d2h(keel__cuda_stream_t *s, void *dst, const void *src, size_t bytes,
                                    const char *fn)
{
    struct keel__cuda_staging *st;
    keel_status_t status = staging_get(s->dev, fn, &st);
    if (status != KEEL_OK)
        return status;
    pthread_mutex_lock(&st->lock);
    size_t nchunks = (bytes + STAGING_CHUNK - 1) / STAGING_CHUNK;
    cudaError_t err = gpuSuccess;
    const char *what = NULL;
    size_t issued = 0;
    /* Keeps STAGING_SLOTS chunks in flight on the copy engine while the host
     * drains the oldest one. */
    for (size_t i = 0; i < nchunks && err == gpuSuccess; i++) {
        for (; issued < nchunks && issued < i + STAGING_SLOTS; issued++) {
            int slot = (int)(issued % STAGING_SLOTS);
            size_t off = issued * (size_t)STAGING_CHUNK;
            size_t n = bytes - off < STAGING_CHUNK ? bytes - off : STAGING_CHUNK;
            if (st->used[slot] && (err = gpuStreamWaitEvent(s->stream, st->done[slot], 0)) != gpuSuccess) {
                what = "cudaStreamWaitEvent on a staging buffer";
                break;
            }
            err = gpuMemcpyAsync(st->buf[slot], (const char *)src + off, n, gpuMemcpyDeviceToHost, s->stream);
            if (err != gpuSuccess) {
                what = "cudaMemcpyAsync into a staging buffer";
                break;
            }
            err = gpuEventRecord(st->done[slot], s->stream);
            if (err != gpuSuccess) {
                what = "cudaEventRecord";
                break;
            }
            st->used[slot] = 1;
        }
        if (err != gpuSuccess)
            break;
        int slot = (int)(i % STAGING_SLOTS);
        size_t off = i * (size_t)STAGING_CHUNK;
        size_t n = bytes - off < STAGING_CHUNK ? bytes - off : STAGING_CHUNK;
        err = gpuEventSynchronize(st->done[slot]);
        if (err != gpuSuccess) {
            what = "cudaEventSynchronize on a staging buffer";
            break;
        }
        parallel_memcpy((char *)dst + off, st->buf[slot], n);
    }
    pthread_mutex_unlock(&st->lock);
    return err == gpuSuccess ? KEEL_OK : keel__cuda_error(err, fn, what);
}
