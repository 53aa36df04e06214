/* SPDX-License-Identifier: MIT */
/* The per-device thread pool and keel__cpu_parallel_for.
 *
 * The thread that submits a loop (a stream worker) takes chunks itself along
 * with the helpers, so a pool of N threads has N-1 helpers, and a loop never
 * waits on a helper that has not started on it. Helpers start on the first
 * loop that needs them, so a device that only copies never starts any. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_enqueue.h"
#include "backends/cpu/cpu_internal.h"

_Thread_local cpu_device_t *keel__cpu_tls_device;
_Thread_local int keel__cpu_tls_pool_worker;

/* Per-thread dynamic shared memory of kernels; freed by the thread at exit
 * (the key's destructor) so joined workers leave nothing behind. */
typedef struct cpu_scratch {
    void *buf;
    size_t cap;
} cpu_scratch_t;

static pthread_key_t cpu_scratch_key;
static pthread_once_t cpu_scratch_once = PTHREAD_ONCE_INIT;

static void cpu_scratch_destroy(void *p)
{
    cpu_scratch_t *sc = p;
    free(sc->buf);
    free(sc);
}

static void cpu_scratch_key_init(void)
{
    pthread_key_create(&cpu_scratch_key, cpu_scratch_destroy);
}

void *keel__cpu_thread_scratch(size_t bytes)
{
    pthread_once(&cpu_scratch_once, cpu_scratch_key_init);
    cpu_scratch_t *sc = pthread_getspecific(cpu_scratch_key);
    if (!sc) {
        sc = keel__calloc(1, sizeof *sc);
        if (!sc || pthread_setspecific(cpu_scratch_key, sc) != 0) {
            free(sc);
            return NULL;
        }
    }
    if (sc->cap < bytes) {
        size_t cap = sc->cap ? sc->cap : 4096;
        while (cap < bytes)
            cap = cap > SIZE_MAX / 2 ? bytes : cap * 2;
        void *nb = keel__aligned_alloc(64, (cap + 63) & ~(size_t)63);
        if (!nb)
            return NULL;
        free(sc->buf);
        sc->buf = nb;
        sc->cap = cap;
    }
    return sc->buf;
}

void keel__cpu_thread_scratch_free(void)
{
    pthread_once(&cpu_scratch_once, cpu_scratch_key_init);
    cpu_scratch_t *sc = pthread_getspecific(cpu_scratch_key);
    if (sc) {
        pthread_setspecific(cpu_scratch_key, NULL);
        cpu_scratch_destroy(sc);
    }
}

/* ---- spinning before sleeping ---- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t cpu_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Spins (bounded by KEEL_CPU_SPIN_NS) until *v differs from x, or, with
 * reached set, until *v >= x. 1 when it happened, 0 when the time ran out. */
static int spin_until(_Atomic uint64_t *v, uint64_t x, int reached)
{
    uint64_t deadline = 0;
    for (unsigned i = 1;; i++) {
        uint64_t cur = atomic_load_explicit(v, memory_order_acquire);
        if (reached ? cur >= x : cur != x)
            return 1;
        cpu_relax();
        if ((i & 63) == 0) {
            uint64_t t = cpu_now_ns();
            if (!deadline)
                deadline = t + KEEL_CPU_SPIN_NS;
            else if (t > deadline)
                return 0;
        }
    }
}

int keel__cpu_spin_changed(_Atomic uint64_t *v, uint64_t old)
{
    return spin_until(v, old, 0);
}

int keel__cpu_spin_reached(_Atomic uint64_t *v, uint64_t at_least)
{
    return spin_until(v, at_least, 1);
}

/* ---- the pool ---- */

void keel__cpu_pool_init(cpu_pool_t *pool, int threads, int cores)
{
    memset(pool, 0, sizeof *pool);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work_cv, NULL);
    pthread_cond_init(&pool->done_cv, NULL);
    pool->wanted = threads > 1 ? threads - 1 : 0;
    pool->spin = threads <= cores;
}

static void cpu_job_unlink_locked(cpu_pool_t *pool, cpu_job_t *job)
{
    if (!job->linked)
        return;
    cpu_job_t **pp = &pool->head, *prev = NULL;
    while (*pp && *pp != job) {
        prev = *pp;
        pp = &(*pp)->next_job;
    }
    if (*pp) {
        *pp = job->next_job;
        if (pool->tail == job)
            pool->tail = prev;
    }
    job->linked = 0;
}

static void cpu_job_work(cpu_job_t *job)
{
    for (;;) {
        size_t begin = atomic_fetch_add_explicit(&job->next, job->grain, memory_order_relaxed);
        if (begin >= job->n)
            break;
        size_t end = job->n - begin < job->grain ? job->n : begin + job->grain;
        job->body(job->arg, begin, end);
    }
}

static void *cpu_helper_main(void *p)
{
    cpu_device_t *dev = p;
    cpu_pool_t *pool = &dev->pool;
    keel__cpu_tls_device = dev;
    keel__cpu_tls_pool_worker = 1;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        if (!pool->head && !pool->stop && pool->spin) {
            /* Kernels tend to come in runs: wait a moment for the next one awake. */
            uint64_t seen = atomic_load_explicit(&pool->posted, memory_order_relaxed);
            pthread_mutex_unlock(&pool->lock);
            keel__cpu_spin_changed(&pool->posted, seen);
            pthread_mutex_lock(&pool->lock);
        }
        while (!pool->head && !pool->stop)
            pthread_cond_wait(&pool->work_cv, &pool->lock);
        if (pool->stop && !pool->head)
            break;
        cpu_job_t *job = pool->head;
        job->joined++;
        pthread_mutex_unlock(&pool->lock);
        cpu_job_work(job);
        pthread_mutex_lock(&pool->lock);
        /* Every chunk is claimed: no later helper should pick the job up. */
        cpu_job_unlink_locked(pool, job);
        /* The submitting thread may return as soon as left reaches joined,
         * so the job is read before and not touched after; the release
         * hands it this thread's results. */
        uint64_t joined = (uint64_t)job->joined;
        if (atomic_fetch_add_explicit(&job->left, 1, memory_order_release) + 1 == joined)
            pthread_cond_broadcast(&pool->done_cv);
    }
    pthread_mutex_unlock(&pool->lock);
    keel__cpu_thread_scratch_free();
    return NULL;
}

/* Pool lock held. A helper that fails to start just leaves fewer helpers. */
static void cpu_pool_start_locked(cpu_device_t *dev)
{
    cpu_pool_t *pool = &dev->pool;
    pool->started = 1;
    if (pool->wanted == 0)
        return;
    pool->threads = keel__calloc((size_t)pool->wanted, sizeof *pool->threads);
    if (!pool->threads)
        return;
    for (int i = 0; i < pool->wanted; i++) {
        if (keel__pthread_create(&pool->threads[pool->nthreads], NULL, cpu_helper_main, dev) != 0)
            break;
#ifdef __GLIBC__
        char name[32];
        snprintf(name, sizeof name, "keel-cpu%d-p%d", dev->index, i);
        name[15] = '\0';   /* the kernel keeps 15 characters */
        pthread_setname_np(pool->threads[pool->nthreads], name);
#endif
        pool->nthreads++;
    }
    if (pool->nthreads == 0 && keel__cpu_host && keel__cpu_host->log)
        keel__cpu_host->log(KEEL_LOG_WARN, "cpu:%d: could not start pool threads; running kernels on one thread",
                            dev->index);
}

void keel__cpu_pool_fini(cpu_pool_t *pool)
{
    pthread_mutex_lock(&pool->lock);
    pool->stop = 1;
    pthread_cond_broadcast(&pool->work_cv);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i], NULL);
    free(pool->threads);
    pool->threads = NULL;
    pool->nthreads = 0;
    pthread_cond_destroy(&pool->work_cv);
    pthread_cond_destroy(&pool->done_cv);
    pthread_mutex_destroy(&pool->lock);
}

void keel__cpu_pool_run(cpu_device_t *dev, size_t n, size_t grain,
                        void (*body)(void *arg, size_t begin, size_t end), void *arg)
{
    cpu_pool_t *pool = &dev->pool;
    if (grain == 0)
        grain = 1;
    if (n <= grain || pool->wanted == 0 || keel__cpu_tls_pool_worker) {
        body(arg, 0, n);
        return;
    }
    pthread_mutex_lock(&pool->lock);
    if (!pool->started)
        cpu_pool_start_locked(dev);
    int helpers = pool->nthreads;
    if (helpers == 0) {
        pthread_mutex_unlock(&pool->lock);
        body(arg, 0, n);
        return;
    }
    /* A few chunks per thread even out blocks of unequal cost and a helper
     * that starts late; more of them only add claims and split the data
     * further between the threads' caches. */
    size_t parts = (size_t)(helpers + 1) * 4;
    size_t even = n / parts + (n % parts != 0);
    cpu_job_t job = {.body = body, .arg = arg, .n = n, .grain = even > grain ? even : grain, .linked = 1};
    atomic_init(&job.next, 0);
    atomic_init(&job.left, 0);
    if (pool->tail)
        pool->tail->next_job = &job;
    else
        pool->head = &job;
    pool->tail = &job;
    atomic_store_explicit(&pool->posted, atomic_load_explicit(&pool->posted, memory_order_relaxed) + 1,
                          memory_order_release);
    pthread_cond_broadcast(&pool->work_cv);
    pthread_mutex_unlock(&pool->lock);

    cpu_job_work(&job);

    /* Every chunk is claimed; once the job is unlinked no helper takes it
     * up, and those on it are finishing their last chunks. */
    pthread_mutex_lock(&pool->lock);
    cpu_job_unlink_locked(pool, &job);
    uint64_t joined = (uint64_t)job.joined;
    pthread_mutex_unlock(&pool->lock);
    /* Sleeping on the condition variable costs a futex wake, tens of
     * microseconds on a virtual machine, a large part of a loop over a
     * million elements: spin for the helpers first, briefly. */
    if (atomic_load_explicit(&job.left, memory_order_acquire) < joined &&
        !(pool->spin && keel__cpu_spin_reached(&job.left, joined))) {
        pthread_mutex_lock(&pool->lock);
        while (atomic_load_explicit(&job.left, memory_order_acquire) < joined)
            pthread_cond_wait(&pool->done_cv, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
}

void keel__cpu_parallel_for(size_t n, size_t grain, void (*body)(void *arg, size_t begin, size_t end), void *arg)
{
    if (n == 0)
        return;
    /* Most small operations end here, before the thread-local lookup. */
    cpu_device_t *dev = n <= grain ? NULL : keel__cpu_tls_device;
    if (!dev) {
        body(arg, 0, n);
        return;
    }
    keel__cpu_pool_run(dev, n, grain, body, arg);
}
