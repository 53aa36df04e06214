/* SPDX-License-Identifier: MIT */
/* Copies between pageable host memory and a device through pinned staging.
 *
 * The driver copies pageable memory through its own small bounce buffers,
 * one thread, one chunk at a time (about 8 GB/s on an H200 host). Here the
 * copy is cut into chunks that cycle through a few pinned buffers made once
 * per device: while the copy engine moves chunk i, host threads fill (or
 * drain) chunk i+1. The host side of each chunk is itself split across a
 * small pool of threads, since one core cannot keep up with the link.
 * Device-to-host copies under 2 MiB go through a pinned buffer of their
 * stream's own instead (below); smaller host-to-device ones, and host
 * memory that is not pageable, take the driver's path. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "gpu_internal.h"

enum {
    STAGING_SLOTS = 4,
    STAGING_CHUNK_DEFAULT = 4 << 20,  /* bytes per slot; KEEL_GPU_STAGING_CHUNK_KB overrides */
    STAGING_MIN_COPY = 2 << 20,       /* smaller copies: keel__gpu_pageable_route */
    COPY_MAX_THREADS = 16
};

struct keel__gpu_staging {
    pthread_mutex_t lock;             /* one staged copy at a time on a device */
    size_t chunk;
    void *buf[STAGING_SLOTS];
    gpuEvent_t done[STAGING_SLOTS];   /* the last copy engine use of buf[i] */
    int used[STAGING_SLOTS];
};

/* ---- a pool of host threads for large memcpys ----
 *
 * A staged copy posts one job per chunk, every hundred microseconds or so.
 * Waking sleeping threads costs tens of microseconds in a virtual machine,
 * so helpers spin for a while after a job before they sleep. A job is cut
 * into pieces that the caller and the helpers claim one at a time: the
 * caller starts at once, a helper joins when it is awake, and the job ends
 * when its last piece is copied, without waiting for a helper that woke
 * late or not at all.
 *
 * The job's fields are published like a sequence lock: gen is odd while
 * the caller writes them and even once they hold. A helper that saw an even
 * gen counts itself inside and reads gen again; the caller, after making
 * gen odd, waits until nobody is inside. Either the helper sees the odd gen
 * and leaves, or the caller sees it inside and waits (both are seq_cst). */

enum { SPIN_NS = 500000, PIECE = 256 << 10 };

static struct {
    pthread_once_t once;
    pthread_mutex_t job_lock;         /* one job at a time */
    pthread_mutex_t m;                /* for sleeping helpers */
    pthread_cond_t go;
    atomic_int sleepers;
    int helpers;                      /* threads besides the caller; fixed once started */
    atomic_ulong gen;                 /* odd while the job's fields are written */
    atomic_int inside;                /* helpers that may read the job's fields */
    char *dst;
    const char *src;
    size_t bytes;
    size_t pieces;
    atomic_size_t next;               /* the next piece to claim */
    atomic_size_t copied;             /* pieces done */
} pool = {.once = PTHREAD_ONCE_INIT,
          .job_lock = PTHREAD_MUTEX_INITIALIZER,
          .m = PTHREAD_MUTEX_INITIALIZER,
          .go = PTHREAD_COND_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until gen is even and not seen; returns it. */
static unsigned long wait_for_job(unsigned long seen)
{
    uint64_t until = now_ns() + SPIN_NS;
    unsigned spins = 0;
    for (;;) {
        unsigned long g = atomic_load_explicit(&pool.gen, memory_order_acquire);
        if (g != seen && !(g & 1))
            return g;
        cpu_relax();
        /* Yielding now and then keeps an oversubscribed machine moving. */
        if (++spins % 256 == 0) {
            if (now_ns() > until)
                break;
            sched_yield();
        }
    }
    pthread_mutex_lock(&pool.m);
    atomic_fetch_add(&pool.sleepers, 1);
    unsigned long g;
    while ((g = atomic_load(&pool.gen)) == seen || (g & 1))
        pthread_cond_wait(&pool.go, &pool.m);
    atomic_fetch_sub(&pool.sleepers, 1);
    pthread_mutex_unlock(&pool.m);
    return g;
}

/* Claims and copies pieces of the current job until none is left. */
static void copy_pieces(void)
{
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&pool.next, 1, memory_order_relaxed);
        if (i >= pool.pieces)
            return;
        size_t off = i * PIECE, len = pool.bytes - off < PIECE ? pool.bytes - off : PIECE;
        memcpy(pool.dst + off, pool.src + off, len);
        atomic_fetch_add_explicit(&pool.copied, 1, memory_order_release);
    }
}

static void *copy_worker(void *arg)
{
    (void)arg;
    unsigned long seen = 0;
    for (;;) {
        unsigned long g = wait_for_job(seen);
        atomic_fetch_add(&pool.inside, 1);
        if (atomic_load(&pool.gen) == g) /* still that job: its fields hold */
            copy_pieces();
        atomic_fetch_sub_explicit(&pool.inside, 1, memory_order_release);
        seen = g;
    }
    return NULL;
}

static size_t env_size(const char *name, size_t dflt, size_t lo, size_t hi)
{
    const char *v = keel__gpu_env(name); /* checked before probe */
    if (v == NULL)
        return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end != '\0' || x < lo || x > hi)
        return dflt;
    return (size_t)x;
}

static void pool_start(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* Half the cores, at most 8: enough to outrun the link on the hosts
     * measured, without taking the machine. KEEL_GPU_COPY_THREADS overrides. */
    size_t want = ncpu > 1 ? (size_t)ncpu / 2 : 1;
    if (want > 8)
        want = 8;
    want = env_size("KEEL_GPU_COPY_THREADS", want, 1, COPY_MAX_THREADS);
    int started = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < (int)want; i++) {
        pthread_t t;
        if (KEEL_GPU_PTHREAD_CREATE(&t, &attr, copy_worker, NULL) != 0)
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    /* Fewer threads than asked for copy fewer pieces each: the job needs
     * none of them in particular. Set once, before the first job. */
    pool.helpers = started;
}

static void parallel_memcpy(void *dst, const void *src, size_t bytes)
{
    pthread_once(&pool.once, pool_start);
    if (pool.helpers == 0 || bytes < 2 * (size_t)PIECE) {
        memcpy(dst, src, bytes);
        return;
    }
    pthread_mutex_lock(&pool.job_lock);
    atomic_fetch_add(&pool.gen, 1); /* odd: helpers keep out */
    for (unsigned spins = 1; atomic_load(&pool.inside) > 0; spins++) {
        cpu_relax(); /* a helper leaving the last job, or backing off */
        if (spins % 256 == 0)
            sched_yield();
    }
    pool.dst = dst;
    pool.src = src;
    pool.bytes = bytes;
    pool.pieces = (bytes + PIECE - 1) / PIECE;
    atomic_store_explicit(&pool.next, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.copied, 0, memory_order_relaxed);
    atomic_fetch_add(&pool.gen, 1); /* even: published */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.m);
        pthread_cond_broadcast(&pool.go);
        pthread_mutex_unlock(&pool.m);
    }
    copy_pieces();
    /* The pieces others claimed: copied soon, as their threads are running. */
    for (unsigned spins = 1; atomic_load_explicit(&pool.copied, memory_order_acquire) < pool.pieces; spins++) {
        cpu_relax();
        if (spins % 256 == 0)
            sched_yield();
    }
    pthread_mutex_unlock(&pool.job_lock);
}

/* ---- staging buffers ---- */

static keel_status_t staging_get(keel__gpu_device_t *dev, const char *fn, struct keel__gpu_staging **out)
{
    struct keel__gpu_staging *st = atomic_load_explicit(&dev->staging, memory_order_acquire);
    if (st != NULL) {
        *out = st;
        return KEEL_OK;
    }
    keel_status_t status = KEEL_OK;
    pthread_mutex_lock(&dev->lock);
    st = atomic_load_explicit(&dev->staging, memory_order_relaxed);
    if (st == NULL) {
        st = calloc(1, sizeof *st);
        gpuError_t err = st != NULL ? keel__gpu_use_device(dev) : gpuErrorMemoryAllocation;
        int i = 0;
        if (st != NULL)
            st->chunk = env_size("KEEL_GPU_STAGING_CHUNK_KB", STAGING_CHUNK_DEFAULT >> 10, 256, 256 << 10) << 10;
        for (; err == gpuSuccess && i < STAGING_SLOTS; i++) {
            err = gpuHostAlloc(&st->buf[i], st->chunk, gpuHostAllocPortable);
            if (err == gpuSuccess) {
                err = gpuEventCreateWithFlags(&st->done[i], gpuEventDisableTiming);
                if (err != gpuSuccess) {
                    (void)gpuFreeHost(st->buf[i]);
                    st->buf[i] = NULL;
                }
            }
        }
        if (err != gpuSuccess) {
            status = keel__gpu_error(err, fn, "allocating pinned staging buffers");
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

void keel__gpu_staging_destroy(keel__gpu_device_t *dev)
{
    struct keel__gpu_staging *st = atomic_exchange(&dev->staging, NULL);
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

/* Whether host memory Keel does not know is pageable host memory: it may
 * be another library's device, managed or pinned memory, which only the
 * driver's path copies (a host memcpy into device memory would fault).
 * CUDA reports plain host memory as unregistered. HIP's answer for it
 * changed between releases, so HIP keeps the copy's host side as it is. */
static int host_is_pageable(keel__gpu_stream_t *s, const void *p)
{
#ifndef KEEL_GPU_HIP
    struct cudaPointerAttributes a;
    /* The query acts on the current device: the stream's, not device 0's
     * context made current as a side effect. */
    if (keel__gpu_use_device(s->dev) != cudaSuccess || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeUnregistered;
#else
    (void)s;
    (void)p;
    return 1;
#endif
}

int keel__gpu_pageable_route(keel__gpu_stream_t *s, const void *host, size_t bytes, int d2h)
{
#ifdef KEEL_GPU_HIP
    if (bytes < STAGING_MIN_COPY) /* the bounce buffer is measured on CUDA only */
        return KEEL__GPU_COPY_DRIVER;
#endif
    if (bytes < STAGING_MIN_COPY && !d2h)
        return KEEL__GPU_COPY_DRIVER;
    /* A graph must not capture copies out of buffers that later calls reuse;
     * the runtime's own path then reports what capture allows. */
    enum gpuStreamCaptureStatus cs = gpuStreamCaptureStatusNone;
    if (gpuStreamIsCapturing(s->stream, &cs) != gpuSuccess) {
        (void)gpuGetLastError();
        return KEEL__GPU_COPY_DRIVER;
    }
    if (cs != gpuStreamCaptureStatusNone || !host_is_pageable(s, host))
        return KEEL__GPU_COPY_DRIVER;
    return bytes >= STAGING_MIN_COPY ? KEEL__GPU_COPY_STAGED : KEEL__GPU_COPY_BOUNCE;
}

/* ---- small device-to-host copies: a pinned buffer of the stream's own ----
 *
 * The driver copies pageable memory through its own bounce buffers; for a
 * device-to-host copy under 2 MiB, a pinned buffer that belongs to the
 * stream does it faster (docs/performance.md), and, being the stream's,
 * neither waits for other streams' staged copies nor takes the device's
 * staging lock. It grows to the largest such copy (a power of two from
 * 64 KiB, under 2 MiB) and goes with the stream. */
enum { BOUNCE_MIN = 64 << 10 };

int keel__gpu_bounce_d2h(keel__gpu_stream_t *s, void *dst, const void *src, size_t bytes, const char *fn,
                         keel_status_t *status)
{
    pthread_mutex_lock(&s->bounce_lock);
    if (s->bounce_size < bytes) {
        size_t want = BOUNCE_MIN;
        while (want < bytes)
            want *= 2;
        void *p = NULL;
        if (keel__gpu_use_device(s->dev) != gpuSuccess ||
            KEEL_GPU_TRY(gpuHostAlloc(&p, want, gpuHostAllocPortable)) != gpuSuccess) {
            (void)gpuGetLastError(); /* out of pinned memory: the driver's path instead */
            keel__gpu_fault_pending = 0; /* an injected failure, taken care of */
            pthread_mutex_unlock(&s->bounce_lock);
            return 0;
        }
        if (s->bounce != NULL)
            (void)gpuFreeHost(s->bounce);
        s->bounce = p;
        s->bounce_size = want;
    }
    gpuError_t err = gpuMemcpyAsync(s->bounce, src, bytes, gpuMemcpyDeviceToHost, s->stream);
    const char *what = KEEL_GPU_NAME(gpuMemcpyAsync) " into the stream's pinned buffer";
    if (err == gpuSuccess) {
        err = gpuStreamSynchronize(s->stream);
        what = KEEL_GPU_NAME(gpuStreamSynchronize);
    }
    if (err == gpuSuccess)
        memcpy(dst, s->bounce, bytes);
    pthread_mutex_unlock(&s->bounce_lock);
    *status = err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, fn, what);
    return 1;
}

void keel__gpu_bounce_release(keel__gpu_stream_t *s)
{
    if (s->bounce != NULL)
        (void)gpuFreeHost(s->bounce);
    s->bounce = NULL;
    s->bounce_size = 0;
}

keel_status_t keel__gpu_staged_h2d(keel__gpu_stream_t *s, void *dst, const void *src, size_t bytes,
                                   const char *fn)
{
    struct keel__gpu_staging *st;
    keel_status_t status = staging_get(s->dev, fn, &st);
    if (status != KEEL_OK)
        return status;
    pthread_mutex_lock(&st->lock);
    gpuError_t err = gpuSuccess;
    const char *what = NULL;
    size_t done = 0;
    for (int slot = 0; done < bytes; slot = (slot + 1) % STAGING_SLOTS) {
        size_t n = bytes - done < st->chunk ? bytes - done : st->chunk;
        if (st->used[slot] && (err = gpuEventSynchronize(st->done[slot])) != gpuSuccess) {
            what = KEEL_GPU_NAME(gpuEventSynchronize) " on a staging buffer";
            break;
        }
        parallel_memcpy(st->buf[slot], (const char *)src + done, n);
        err = gpuMemcpyAsync((char *)dst + done, st->buf[slot], n, gpuMemcpyHostToDevice, s->stream);
        if (err != gpuSuccess) {
            what = KEEL_GPU_NAME(gpuMemcpyAsync) " from a staging buffer";
            break;
        }
        err = gpuEventRecord(st->done[slot], s->stream);
        if (err != gpuSuccess) {
            what = KEEL_GPU_NAME(gpuEventRecord);
            break;
        }
        st->used[slot] = 1;
        done += n;
    }
    pthread_mutex_unlock(&st->lock);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, fn, what);
}

keel_status_t keel__gpu_staged_d2h(keel__gpu_stream_t *s, void *dst, const void *src, size_t bytes,
                                   const char *fn)
{
    struct keel__gpu_staging *st;
    keel_status_t status = staging_get(s->dev, fn, &st);
    if (status != KEEL_OK)
        return status;
    pthread_mutex_lock(&st->lock);
    const size_t chunk = st->chunk;
    size_t nchunks = (bytes + chunk - 1) / chunk;
    gpuError_t err = gpuSuccess;
    const char *what = NULL;
    size_t issued = 0;
    /* Keeps STAGING_SLOTS chunks in flight on the copy engine while the host
     * drains the oldest one. */
    for (size_t i = 0; i < nchunks && err == gpuSuccess; i++) {
        for (; issued < nchunks && issued < i + STAGING_SLOTS; issued++) {
            int slot = (int)(issued % STAGING_SLOTS);
            size_t off = issued * chunk;
            size_t n = bytes - off < chunk ? bytes - off : chunk;
            if (st->used[slot] && (err = gpuStreamWaitEvent(s->stream, st->done[slot], 0)) != gpuSuccess) {
                what = KEEL_GPU_NAME(gpuStreamWaitEvent) " on a staging buffer";
                break;
            }
            err = gpuMemcpyAsync(st->buf[slot], (const char *)src + off, n, gpuMemcpyDeviceToHost, s->stream);
            if (err != gpuSuccess) {
                what = KEEL_GPU_NAME(gpuMemcpyAsync) " into a staging buffer";
                break;
            }
            err = gpuEventRecord(st->done[slot], s->stream);
            if (err != gpuSuccess) {
                what = KEEL_GPU_NAME(gpuEventRecord);
                break;
            }
            st->used[slot] = 1;
        }
        if (err != gpuSuccess)
            break;
        int slot = (int)(i % STAGING_SLOTS);
        size_t off = i * chunk;
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        err = gpuEventSynchronize(st->done[slot]);
        if (err != gpuSuccess) {
            what = KEEL_GPU_NAME(gpuEventSynchronize) " on a staging buffer";
            break;
        }
        parallel_memcpy((char *)dst + off, st->buf[slot], n);
    }
    pthread_mutex_unlock(&st->lock);
    return err == gpuSuccess ? KEEL_OK : keel__gpu_error(err, fn, what);
}
