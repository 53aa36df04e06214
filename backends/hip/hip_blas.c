/* SPDX-License-Identifier: MIT */
/* BLAS state for keel-hip.so: librocblas, opened at first use, and per
 * stream the scratch of the built-in operations and a rocBLAS handle (on
 * CUDA the cuBLASLt workspace doubles as that scratch).
 *
 * rocBLAS is not packaged in Debian 12, so keel-hip neither links it nor
 * needs its headers: hip_rocblas_load.c opens librocblas once, and without
 * it GEMM, GEMV and the dense layer answer NOT_SUPPORTED with the reason.
 * ROCm 5.0 to 5.6 install it as librocblas.so.0 (rocBLAS 2.x and 3.0, ABI
 * version 0), ROCm 5.7 as librocblas.so.3 (rocBLAS 3.1); librocblas.so, the
 * development link, comes last. hipBLASLt is not used.
 *
 * A rocblas_handle carries its stream and is not safe to use from two
 * streams at once, so each Keel stream gets its own, made on its first BLAS
 * call on the stream's device and destroyed with the stream. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "hip_internal.h"
#include "backends/gpu/gpu_ops.h"


enum { SCRATCH_BYTES = 64 << 10 };   /* reduce partials: 8 KiB at least (ops_gpu.h) */

struct keel__gpu_blas_ctx {
    void *scratch;                   /* device memory of the stream's device */
    _Atomic(keel__rocblas_handle_t) handle;
};

/* The stream's BLAS context with its scratch; made once, under the stream's lock. */
static keel_status_t blas_ctx(keel__gpu_stream_t *s, keel__gpu_blas_ctx_t **out)
{
    keel__gpu_blas_ctx_t *b = atomic_load_explicit(&s->blas, memory_order_acquire);
    if (b == NULL) {
        pthread_mutex_lock(&s->lock);
        b = atomic_load_explicit(&s->blas, memory_order_relaxed);
        if (b == NULL) {
            b = calloc(1, sizeof *b);
            gpuError_t err = b != NULL ? keel__gpu_use_device(s->dev) : gpuErrorMemoryAllocation;
            /* Not stream-ordered: a capture may be under way on this stream. */
            if (err == gpuSuccess)
                err = gpuMalloc(&b->scratch, SCRATCH_BYTES);
            if (err != gpuSuccess) {
                free(b);
                pthread_mutex_unlock(&s->lock);
                return keel__gpu_error(err, NULL, "allocating the operations' scratch");
            }
            atomic_store_explicit(&s->blas, b, memory_order_release);
        }
        pthread_mutex_unlock(&s->lock);
    }
    *out = b;
    return KEEL_OK;
}

keel_status_t keel__gpu_ops_scratch(void *stream_ctx, void **work, size_t *work_bytes)
{
    keel__gpu_blas_ctx_t *b;
    keel_status_t st = blas_ctx(stream_ctx, &b);
    if (st != KEEL_OK)
        return st;
    *work = b->scratch;
    *work_bytes = SCRATCH_BYTES;
    return KEEL_OK;
}

/* ---- the library ---- */

static keel__rocblas_api_t rocblas;
static char rocblas_why[512];
static int rocblas_ok;
static pthread_once_t rocblas_once = PTHREAD_ONCE_INIT;

static void rocblas_open(void)
{
#ifdef __HIP_PLATFORM_NVIDIA__
    /* rocBLAS is AMD's: its kernels are AMD code objects, so on HIP's NVIDIA
     * platform it is not even looked for. */
    snprintf(rocblas_why, sizeof rocblas_why, "rocBLAS runs on AMD GPUs only, and this keel-hip is built for HIP's "
                                              "NVIDIA platform; the cuda backend has cuBLAS");
    rocblas_ok = 0;
#else
    static const char *const names[] = {"librocblas.so.0", "librocblas.so.3", "librocblas.so", NULL};
    rocblas_ok = keel__rocblas_load(names, &rocblas, rocblas_why, sizeof rocblas_why) == 0;
#endif
}

keel_status_t keel__hip_blas_unavailable(const char *keel_fn)
{
#ifdef __HIP_PLATFORM_NVIDIA__
    return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                      "%s: not supported by the hip backend: it needs rocBLAS, which is not usable "
                                      "here (%s)",
                                      keel_fn, rocblas_why);
#else
    return keel__gpu_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                      "%s: not supported by the hip backend: it needs rocBLAS, which is not usable "
                                      "here (%s). Debian 12 does not package rocBLAS; keel-hip does not use "
                                      "hipBLASLt",
                                      keel_fn, rocblas_why);
#endif
}

int keel__gpu_blas_info(void *device_ctx, char *text, size_t size)
{
    (void)device_ctx;
    pthread_once(&rocblas_once, rocblas_open);
    if (rocblas_ok)
        snprintf(text, size, "rocBLAS (%s)", rocblas.lib_name);
    else
        snprintf(text, size, "rocBLAS is not usable here: %s", rocblas_why);
    return rocblas_ok;
}

keel_status_t keel__hip_rocblas_error(int status, const char *keel_fn, const char *call)
{
    keel_status_t ks = status == KEEL_RB_STATUS_MEMORY_ERROR     ? KEEL_ERROR_OUT_OF_MEMORY
                       : status == KEEL_RB_STATUS_NOT_IMPLEMENTED ? KEEL_ERROR_NOT_SUPPORTED
                                                                  : KEEL_ERROR_BACKEND;
    return keel__gpu_host->set_error(ks, "%s: %s: %s (%d)", keel_fn, call, keel__rocblas_status_name(status),
                                      status);
}

/* A rocBLAS handle on @p s's device, bound to its stream, with host scalars. */
static keel_status_t handle_create(keel__gpu_stream_t *s, const char *keel_fn, keel__rocblas_handle_t *out)
{
    keel__rocblas_handle_t h = NULL;
    gpuError_t err = keel__gpu_use_device(s->dev);
    if (err != gpuSuccess)
        return keel__gpu_error(err, keel_fn, "rocblas_create_handle");
    int rs = rocblas.create_handle(&h);
    const char *call = "rocblas_create_handle";
    if (rs == KEEL_RB_STATUS_SUCCESS) {
        call = "rocblas_set_stream";
        rs = rocblas.set_stream(h, s->stream);
    }
    if (rs == KEEL_RB_STATUS_SUCCESS) {
        call = "rocblas_set_pointer_mode";
        rs = rocblas.set_pointer_mode(h, KEEL_RB_POINTER_HOST);
    }
    if (rs != KEEL_RB_STATUS_SUCCESS) {
        if (h != NULL)
            (void)rocblas.destroy_handle(h);
        return keel__hip_rocblas_error(rs, keel_fn, call);
    }
    *out = h;
    return KEEL_OK;
}

keel_status_t keel__hip_rocblas(void *stream_ctx, const char *keel_fn, const keel__rocblas_api_t **api,
                                keel__rocblas_handle_t *handle)
{
    pthread_once(&rocblas_once, rocblas_open);
    if (!rocblas_ok)
        return keel__hip_blas_unavailable(keel_fn);
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_blas_ctx_t *b;
    keel_status_t st = blas_ctx(s, &b);
    if (st != KEEL_OK)
        return st;
    keel__rocblas_handle_t h = atomic_load_explicit(&b->handle, memory_order_acquire);
    if (h == NULL) {
        pthread_mutex_lock(&s->lock);
        h = atomic_load_explicit(&b->handle, memory_order_relaxed);
        if (h == NULL && (st = handle_create(s, keel_fn, &h)) == KEEL_OK)
            atomic_store_explicit(&b->handle, h, memory_order_release);
        pthread_mutex_unlock(&s->lock);
        if (st != KEEL_OK)
            return st;
    }
    (void)keel__gpu_op_stream(s); /* the caller enqueues through the handle */
    *api = &rocblas;
    *handle = h;
    return KEEL_OK;
}

void keel__gpu_blas_stream_release(keel__gpu_stream_t *s)
{
    keel__gpu_blas_ctx_t *b = atomic_exchange(&s->blas, NULL);
    if (b == NULL)
        return;
    (void)keel__gpu_use_device(s->dev);
    keel__rocblas_handle_t h = atomic_load(&b->handle);
    if (h != NULL) /* only made once the library loaded */
        (void)rocblas.destroy_handle(h);
    (void)gpuFree(b->scratch);
    (void)gpuGetLastError();
    free(b);
}

void keel__gpu_blas_device_release(keel__gpu_device_t *dev)
{
    (void)dev;
}
