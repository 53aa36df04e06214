/* SPDX-License-Identifier: MIT */
/* Memory of an emulated device: host memory, 256-byte aligned, counted
 * against the device's cap. A small header in front of each block remembers
 * its device and size, so a free (which names only the pointer) gives the
 * bytes back to the right device. One spare byte behind each block keeps
 * its end pointer inside the block's own chunk: the core refuses a copy at
 * the end of an allocation, which must never be where the system allocator
 * put someone's host buffer (allocators without chunk headers pack blocks
 * back to back). Copies and memsets run on the stream's
 * worker; big ones are spread over the device's pool. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_enqueue.h"

#define CPU_ALLOC_MAGIC 0x6b63706du

typedef struct cpu_alloc_hdr {
    cpu_device_t *dev;
    size_t bytes;
    uint32_t magic;
    keel_memory_kind_t kind;
} cpu_alloc_hdr_t;

_Static_assert(sizeof(cpu_alloc_hdr_t) <= KEEL_CPU_ALIGN, "the header fits in the alignment padding");

/* Big enough that waking the pool pays off. */
#define CPU_PARALLEL_BYTES (8u << 20)
#define CPU_CHUNK_BYTES (1u << 20)
/* Up to this size an asynchronous copy or set on an idle stream is done on
 * the calling thread: cheaper than handing it to the stream's worker. */
#define CPU_INLINE_BYTES (64u << 10)

/* Messages leave out the function and device: the core puts them in front. */
static keel_status_t cpu_alloc_kind(cpu_device_t *d, keel_memory_kind_t kind, size_t bytes, void **ptr)
{
    size_t cap = d->backend->mem_cap;
    if (bytes > SIZE_MAX - KEEL_CPU_ALIGN - 1)
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "%zu bytes cannot be allocated", bytes);
    if (cap) {
        /* Reserve first, so concurrent allocations cannot pass the cap together. */
        size_t used = atomic_load_explicit(&d->used, memory_order_relaxed);
        do {
            if (bytes > cap || used > cap - bytes)
                return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY,
                               "memory cap of %zu bytes reached (%zu in use, %zu asked; KEEL_CPU_MEMORY_LIMIT)", cap,
                               used, bytes);
        } while (!atomic_compare_exchange_weak_explicit(&d->used, &used, used + bytes, memory_order_relaxed,
                                                        memory_order_relaxed));
    } else {
        /* More than the machine has can only fail later (or abort under a
         * sanitizer's allocator), so refuse it as a GPU would. */
        if (d->backend->ram && bytes > d->backend->ram)
            return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "%zu bytes exceed the device's memory (%zu bytes, the machine's RAM)",
                           bytes, d->backend->ram);
        atomic_fetch_add_explicit(&d->used, bytes, memory_order_relaxed);
    }
    void *raw = NULL;
    if (keel__posix_memalign(&raw, KEEL_CPU_ALIGN, KEEL_CPU_ALIGN + bytes + 1) != 0) {
        atomic_fetch_sub_explicit(&d->used, bytes, memory_order_relaxed);
        return CPU_ERR(KEEL_ERROR_OUT_OF_MEMORY, "the system could not allocate %zu bytes", bytes);
    }
    cpu_alloc_hdr_t *h = raw;
    h->dev = d;
    h->bytes = bytes;
    h->magic = CPU_ALLOC_MAGIC;
    h->kind = kind;
    *ptr = (unsigned char *)raw + KEEL_CPU_ALIGN;
    if (KEEL__UNLIKELY(keel__cpu_check))   /* fresh memory is not zero on a GPU either */
        memset(*ptr, KEEL_CPU_CHECK_POISON, bytes);
    return KEEL_OK;
}

void keel__cpu_mem_release(void *ptr)
{
    cpu_alloc_hdr_t *h = (cpu_alloc_hdr_t *)((unsigned char *)ptr - KEEL_CPU_ALIGN);
    atomic_fetch_sub_explicit(&h->dev->used, h->bytes, memory_order_relaxed);
    if (KEEL__UNLIKELY(keel__cpu_check))
        memset(ptr, KEEL_CPU_CHECK_POISON, h->bytes);
    h->magic = 0;
    free(h);
}

static keel_status_t cpu_mem_alloc(void *device_ctx, keel_memory_kind_t kind, size_t bytes, void **ptr)
{
    return cpu_alloc_kind(device_ctx, kind, bytes, ptr);
}

static keel_status_t cpu_mem_free(void *device_ctx, keel_memory_kind_t kind, void *ptr)
{
    cpu_alloc_hdr_t *h = (cpu_alloc_hdr_t *)((unsigned char *)ptr - KEEL_CPU_ALIGN);
    if (h->magic != CPU_ALLOC_MAGIC)
        return CPU_ERR(KEEL_ERROR_INVALID_POINTER, "keel_free: %p was not allocated by the cpu backend", ptr);
    keel__cpu_mem_release(ptr);
    return KEEL_OK;
}

static keel_status_t cpu_mem_alloc_async(void *stream_ctx, size_t bytes, void **ptr)
{
    cpu_stream_t *s = stream_ctx;
    return cpu_alloc_kind(s->dev, KEEL_MEMORY_DEVICE, bytes, ptr);
}

static keel_status_t cpu_mem_free_async(void *stream_ctx, void *ptr)
{
    cpu_stream_t *s = stream_ctx;
    cpu_cmd_t *c = keel__cpu_cmd_begin(s, CPU_CMD_FREE, 0, "keel_free_async");
    if (!c)
        return KEEL_ERROR_OUT_OF_MEMORY;
    if (s->capture) {
        /* Each replay would free the same block again. */
        keel__cpu_cmd_cancel(s, c);
        return CPU_ERR(KEEL_ERROR_NOT_SUPPORTED,
                       "keel_free_async: cpu:%d: a stream-ordered free cannot be captured into a graph", s->dev->index);
    }
    c->u.free.ptr = ptr;
    keel__cpu_cmd_commit(s, c);
    return KEEL_OK;
}

typedef struct cpu_copy_job {
    unsigned char *dst;
    const unsigned char *src;
    int value;
} cpu_copy_job_t;

static void cpu_copy_body(void *arg, size_t begin, size_t end)
{
    cpu_copy_job_t *j = arg;
    memcpy(j->dst + begin * CPU_CHUNK_BYTES, j->src + begin * CPU_CHUNK_BYTES, (end - begin) * CPU_CHUNK_BYTES);
}

static void cpu_set_body(void *arg, size_t begin, size_t end)
{
    cpu_copy_job_t *j = arg;
    memset(j->dst + begin * CPU_CHUNK_BYTES, j->value, (end - begin) * CPU_CHUNK_BYTES);
}

void keel__cpu_copy(void *dst, const void *src, size_t bytes)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d == s || bytes == 0)
        return;
    int overlap = d < s + bytes && s < d + bytes;
    cpu_device_t *dev = keel__cpu_tls_device;
    if (overlap || bytes < CPU_PARALLEL_BYTES || !dev || dev->pool.wanted == 0) {
        memmove(d, s, bytes);
        return;
    }
    cpu_copy_job_t j = {d, s, 0};
    size_t chunks = bytes / CPU_CHUNK_BYTES;
    keel__cpu_pool_run(dev, chunks, 1, cpu_copy_body, &j);
    memcpy(d + chunks * CPU_CHUNK_BYTES, s + chunks * CPU_CHUNK_BYTES, bytes - chunks * CPU_CHUNK_BYTES);
}

void keel__cpu_set(void *dst, int value, size_t bytes)
{
    cpu_device_t *dev = keel__cpu_tls_device;
    if (bytes < CPU_PARALLEL_BYTES || !dev || dev->pool.wanted == 0) {
        memset(dst, value, bytes);
        return;
    }
    cpu_copy_job_t j = {dst, NULL, value};
    size_t chunks = bytes / CPU_CHUNK_BYTES;
    keel__cpu_pool_run(dev, chunks, 1, cpu_set_body, &j);
    memset((unsigned char *)dst + chunks * CPU_CHUNK_BYTES, value, bytes - chunks * CPU_CHUNK_BYTES);
}

/* Queues a copy (CPU_CMD_COPY) or a memset (CPU_CMD_SET, of value). In the
 * checking mode the caller has checked the ranges, which go to the command
 * (keel__cpu_check_copy, _set); they are disarmed here. */
static keel_status_t cpu_enqueue_mem(cpu_stream_t *s, int type, void *dst, const void *src, int value, size_t bytes,
                                     const char *fn)
{
    cpu_cmd_t *c = keel__cpu_cmd_begin(s, type, 0, fn);
    if (c) {
        if (type == CPU_CMD_COPY) {
            c->u.copy.dst = dst;
            c->u.copy.src = src;
            c->u.copy.bytes = bytes;
        } else {
            c->u.set.dst = dst;
            c->u.set.value = value;
            c->u.set.bytes = bytes;
        }
        keel__cpu_cmd_commit(s, c);
    }
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_disarm();
    return c ? KEEL_OK : KEEL_ERROR_OUT_OF_MEMORY;
}

static keel_status_t cpu_enqueue_copy(cpu_stream_t *s, void *dst, const void *src, size_t bytes, const char *fn)
{
    return cpu_enqueue_mem(s, CPU_CMD_COPY, dst, src, 0, bytes, fn);
}

static keel_status_t cpu_mem_memcpy_async(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, const void *src,
                                          keel_memory_kind_t src_kind, size_t bytes)
{
    cpu_stream_t *s = stream_ctx;
    keel_status_t st;
    if (KEEL__UNLIKELY(keel__cpu_check) &&
        (st = keel__cpu_check_copy(s, "keel_memcpy_async", dst, src, bytes)) != KEEL_OK)
        return st;
    if (bytes <= CPU_INLINE_BYTES && keel__cpu_inline_begin(s)) {
        if (dst != src)
            memmove(dst, src, bytes);
        keel__cpu_inline_end(s);
        return KEEL_OK;
    }
    return cpu_enqueue_copy(s, dst, src, bytes, "keel_memcpy_async");
}

/* A small synchronous copy runs on the caller once the stream is idle, which
 * saves two thread hand-offs; a big one goes through the stream so that the
 * pool shares it. */
static keel_status_t cpu_mem_memcpy_sync(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind, const void *src,
                                         keel_memory_kind_t src_kind, size_t bytes)
{
    cpu_stream_t *s = stream_ctx;
    keel_status_t st;
    if (KEEL__UNLIKELY(keel__cpu_check) && (st = keel__cpu_check_copy(s, "keel_memcpy", dst, src, bytes)) != KEEL_OK)
        return st;
    if (bytes >= CPU_PARALLEL_BYTES) {
        if ((st = cpu_enqueue_copy(s, dst, src, bytes, "keel_memcpy")) != KEEL_OK)
            return st;
        return keel__cpu_stream_sync(s);
    }
    if (KEEL__UNLIKELY(keel__cpu_check))
        keel__cpu_check_disarm();   /* runs here, queues nothing */
    if ((st = keel__cpu_stream_sync(s)) != KEEL_OK)
        return st;
    keel__cpu_copy(dst, src, bytes);
    return KEEL_OK;
}

static keel_status_t cpu_mem_memset_async(void *stream_ctx, void *dst, int value, size_t bytes)
{
    cpu_stream_t *s = stream_ctx;
    keel_status_t st;
    if (KEEL__UNLIKELY(keel__cpu_check) &&
        (st = keel__cpu_check_set(s, "keel_memset(_async)", dst, bytes)) != KEEL_OK)
        return st;
    if (bytes <= CPU_INLINE_BYTES && keel__cpu_inline_begin(s)) {
        memset(dst, value, bytes);
        keel__cpu_inline_end(s);
        return KEEL_OK;
    }
    return cpu_enqueue_mem(s, CPU_CMD_SET, dst, NULL, value, bytes, "keel_memset_async");
}

static keel_status_t cpu_mem_memcpy_peer_async(void *stream_ctx, void *dst, void *dst_device_ctx, const void *src,
                                               void *src_device_ctx, size_t bytes)
{
    keel_status_t st;
    if (KEEL__UNLIKELY(keel__cpu_check) &&
        (st = keel__cpu_check_copy(stream_ctx, "keel_memcpy_async (a peer copy)", dst, src, bytes)) != KEEL_OK)
        return st;
    return cpu_enqueue_copy(stream_ctx, dst, src, bytes, "keel_memcpy_peer_async");
}

/* Rows of a 2D copy or memset, spread over the pool by whole rows when
 * there are enough bytes to share. */
typedef struct cpu_rows {
    unsigned char *dst;
    const unsigned char *src; /* NULL: a memset of value */
    size_t dpitch, spitch, width, height;
    int value;
} cpu_rows_t;

static void cpu_rows_body(void *arg, size_t begin, size_t end)
{
    const cpu_rows_t *r = arg;
    for (size_t i = begin; i < end; i++) {
        if (r->src)
            memmove(r->dst + i * r->dpitch, r->src + i * r->spitch, r->width);
        else
            memset(r->dst + i * r->dpitch, r->value, r->width);
    }
}

static void cpu_rows_run(void *payload)
{
    cpu_rows_t *r = payload;
    /* Rows may overlap when a copy moves data within one allocation: then in order, on one thread. */
    int overlap = r->src && r->dst < r->src + r->spitch * (r->height - 1) + r->width &&
                  r->src < r->dst + r->dpitch * (r->height - 1) + r->width;
    size_t grain = r->width >= CPU_PARALLEL_BYTES ? 1 : CPU_PARALLEL_BYTES / r->width;
    if (overlap)
        cpu_rows_body(r, 0, r->height);
    else
        keel__cpu_parallel_for(r->height, grain, cpu_rows_body, r);
}

static keel_status_t cpu_mem_memcpy_2d_async(void *stream_ctx, void *dst, keel_memory_kind_t dst_kind,
                                             size_t dst_pitch, const void *src, keel_memory_kind_t src_kind,
                                             size_t src_pitch, size_t width, size_t height)
{
    (void)dst_kind;
    (void)src_kind;
    cpu_rows_t r = {dst, src, dst_pitch, src_pitch, width, height, 0};
    return keel__cpu_enqueue(stream_ctx, cpu_rows_run, &r, sizeof r);
}

static keel_status_t cpu_mem_memset_2d_async(void *stream_ctx, void *dst, size_t pitch, int value, size_t width,
                                             size_t height)
{
    cpu_rows_t r = {dst, NULL, pitch, 0, width, height, value};
    return keel__cpu_enqueue(stream_ctx, cpu_rows_run, &r, sizeof r);
}

/* The CPU's device memory is host memory: registering the application's
 * memory only makes Keel know it (runtime/host_register.c), nothing to lock. */
static keel_status_t cpu_mem_host_register(void *device_ctx, void *ptr, size_t bytes)
{
    (void)device_ctx;
    (void)ptr;
    (void)bytes;
    return KEEL_OK;
}

static keel_status_t cpu_mem_host_unregister(void *device_ctx, void *ptr)
{
    (void)device_ctx;
    (void)ptr;
    return KEEL_OK;
}

const keel_memory_vtable_t keel__cpu_memory_vtable = {
    .struct_size = sizeof(keel_memory_vtable_t),
    .alloc = cpu_mem_alloc,
    .free = cpu_mem_free,
    .alloc_async = cpu_mem_alloc_async,
    .free_async = cpu_mem_free_async,
    .memcpy_async = cpu_mem_memcpy_async,
    .memcpy_sync = cpu_mem_memcpy_sync,
    .memset_async = cpu_mem_memset_async,
    .memcpy_peer_async = cpu_mem_memcpy_peer_async,
    .memcpy_2d_async = cpu_mem_memcpy_2d_async,
    .memset_2d_async = cpu_mem_memset_2d_async,
    .host_register = cpu_mem_host_register,
    .host_unregister = cpu_mem_host_unregister,
};
