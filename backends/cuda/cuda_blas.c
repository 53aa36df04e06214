/* SPDX-License-Identifier: MIT */
/* cuBLAS and cuBLASLt state for the built-in operations (cuda_internal.h).
 *
 * A cublasHandle_t carries its stream and workspace and is not safe to use
 * from two streams at once, so each Keel stream gets its own, made on first
 * use. A cuBLASLt handle carries neither, so one per device serves every
 * stream; the workspace it is given must still not be shared by streams
 * running at the same time, so the workspace belongs to the stream too (and
 * serves its cuBLAS handle as well: work on one stream runs in order). */
#include <stdlib.h>
#include "cuda_internal.h"

enum { BLAS_WORKSPACE_BYTES = 32 << 20 };

struct keel__gpu_blas_ctx {
    void *workspace;
    size_t workspace_bytes;
    _Atomic(cublasHandle_t) handle;
};

static keel_status_t blas_error(cublasStatus_t st, const char *what)
{
    keel_status_t ks = st == CUBLAS_STATUS_ALLOC_FAILED ? KEEL_ERROR_OUT_OF_MEMORY
                       : st == CUBLAS_STATUS_NOT_INITIALIZED ? KEEL_ERROR_BACKEND_UNAVAILABLE
                       : st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH
                           ? KEEL_ERROR_NOT_SUPPORTED
                           : KEEL_ERROR_BACKEND;
    return keel__gpu_host->set_error(ks, "%s: %s: %s", what, cublasGetStatusName(st), cublasGetStatusString(st));
}

/* The stream's BLAS context with its workspace; made once, under the stream's lock. */
static keel_status_t blas_ctx(keel__gpu_stream_t *s, keel__gpu_blas_ctx_t **out)
{
    keel__gpu_blas_ctx_t *b = atomic_load_explicit(&s->blas, memory_order_acquire);
    if (b != NULL) {
        *out = b;
        return KEEL_OK;
    }
    keel_status_t st = KEEL_OK;
    pthread_mutex_lock(&s->lock);
    b = atomic_load_explicit(&s->blas, memory_order_relaxed);
    if (b == NULL) {
        b = calloc(1, sizeof *b);
        if (b == NULL) {
            st = keel__gpu_host->set_error(KEEL_ERROR_OUT_OF_MEMORY, "cuBLAS setup: no host memory");
        } else {
            gpuError_t err = keel__gpu_use_device(s->dev);
            if (err == gpuSuccess)
                err = gpuMalloc(&b->workspace, BLAS_WORKSPACE_BYTES);
            if (err != gpuSuccess) {
                free(b);
                b = NULL;
                st = keel__gpu_error(err, "cuBLAS setup", "allocating the BLAS workspace");
            } else {
                b->workspace_bytes = BLAS_WORKSPACE_BYTES;
                atomic_store_explicit(&s->blas, b, memory_order_release);
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (b != NULL)
        *out = b;
    return st;
}

keel_status_t keel__cuda_cublas(void *stream_ctx, cublasHandle_t *handle)
{
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_stream_touch(s); /* the caller enqueues through the handle */
    keel__gpu_blas_ctx_t *b;
    keel_status_t st = blas_ctx(s, &b);
    if (st != KEEL_OK)
        return st;
    cublasHandle_t h = atomic_load_explicit(&b->handle, memory_order_acquire);
    if (h != NULL) {
        *handle = h;
        return KEEL_OK;
    }
    pthread_mutex_lock(&s->lock);
    h = atomic_load_explicit(&b->handle, memory_order_relaxed);
    if (h == NULL) {
        cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
        gpuError_t err = keel__gpu_use_device(s->dev);
        if (err != gpuSuccess) {
            st = keel__gpu_error(err, "cublasCreate", NULL);
        } else if ((cs = cublasCreate(&h)) != CUBLAS_STATUS_SUCCESS ||
                   (cs = cublasSetStream(h, s->stream)) != CUBLAS_STATUS_SUCCESS ||
                   /* f16 and bf16 results accumulate in f32, split-K partial sums too */
                   (cs = cublasSetMathMode(h, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
                       CUBLAS_STATUS_SUCCESS ||
                   (cs = cublasSetWorkspace(h, b->workspace, b->workspace_bytes)) != CUBLAS_STATUS_SUCCESS) {
            if (h != NULL)
                (void)cublasDestroy(h);
            h = NULL;
            st = blas_error(cs, "cuBLAS setup");
        } else {
            atomic_store_explicit(&b->handle, h, memory_order_release);
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (h != NULL)
        *handle = h;
    return st;
}

keel_status_t keel__cuda_cublaslt(void *stream_ctx, cublasLtHandle_t *handle, void **workspace,
                                  size_t *workspace_bytes)
{
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_device_t *dev = s->dev;
    keel__gpu_stream_touch(s); /* the caller enqueues with the handle */
    keel__gpu_blas_ctx_t *b;
    keel_status_t st = blas_ctx(s, &b);
    if (st != KEEL_OK)
        return st;
    void *lt = atomic_load_explicit(&dev->blaslt, memory_order_acquire);
    if (lt == NULL) {
        pthread_mutex_lock(&dev->lock);
        lt = atomic_load_explicit(&dev->blaslt, memory_order_relaxed);
        if (lt == NULL) {
            cublasLtHandle_t h = NULL;
            gpuError_t err = keel__gpu_use_device(dev);
            cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
            if (err != gpuSuccess)
                st = keel__gpu_error(err, "cublasLtCreate", NULL);
            else if ((cs = cublasLtCreate(&h)) != CUBLAS_STATUS_SUCCESS)
                st = blas_error(cs, "cuBLASLt setup");
            else
                atomic_store_explicit(&dev->blaslt, (void *)h, memory_order_release);
            lt = h;
        }
        pthread_mutex_unlock(&dev->lock);
        if (st != KEEL_OK)
            return st;
    }
    *handle = (cublasLtHandle_t)lt;
    if (workspace != NULL)
        *workspace = b->workspace;
    if (workspace_bytes != NULL)
        *workspace_bytes = b->workspace_bytes;
    return KEEL_OK;
}

void keel__gpu_blas_stream_release(keel__gpu_stream_t *s)
{
    keel__gpu_blas_ctx_t *b = atomic_exchange(&s->blas, NULL);
    if (b == NULL)
        return;
    cublasHandle_t h = atomic_load(&b->handle);
    if (h != NULL)
        (void)cublasDestroy(h);
    (void)keel__gpu_use_device(s->dev);
    (void)gpuFree(b->workspace);
    (void)gpuGetLastError();
    free(b);
}

void keel__gpu_blas_device_release(keel__gpu_device_t *dev)
{
    void *lt = atomic_exchange(&dev->blaslt, NULL);
    if (lt != NULL)
        (void)cublasLtDestroy((cublasLtHandle_t)lt);
}
