/* BLAS for keel-hip.so, and the per-stream scratch the built-in operations
 * use (on CUDA the cuBLASLt workspace doubles as that scratch).
 *
 * rocBLAS and hipBLASLt are not packaged in Debian 12, and keel-hip does not
 * call them yet: GEMM, GEMV and the dense layer answer NOT_SUPPORTED, naming
 * the library that is missing, or, where librocblas is installed, saying that
 * this build does not use it. The library is looked for once, at first use. */
#include <dlfcn.h>
#include <stdlib.h>
#include "hip_internal.h"
#include "cuda_shared.h"

enum { SCRATCH_BYTES = 64 << 10 };   /* reduce partials: 8 KiB at least (ops_gpu.h) */

struct keel__cuda_blas_ctx {
    void *scratch;                   /* device memory of the stream's device */
};

keel_status_t keel__hip_scratch(void *stream_ctx, void **work, size_t *work_bytes)
{
    keel__cuda_stream_t *s = stream_ctx;
    keel__cuda_blas_ctx_t *b = atomic_load_explicit(&s->blas, memory_order_acquire);
    if (b == NULL) {
        pthread_mutex_lock(&s->lock);
        b = atomic_load_explicit(&s->blas, memory_order_relaxed);
        if (b == NULL) {
            b = calloc(1, sizeof *b);
            gpuError_t err = b != NULL ? keel__cuda_use_device(s->dev) : gpuErrorMemoryAllocation;
            /* Not stream-ordered: a capture may be under way on this stream. */
            if (err == gpuSuccess)
                err = gpuMalloc(&b->scratch, SCRATCH_BYTES);
            if (err != gpuSuccess) {
                free(b);
                pthread_mutex_unlock(&s->lock);
                return keel__cuda_error(err, NULL, "allocating the operations' scratch");
            }
            atomic_store_explicit(&s->blas, b, memory_order_release);
        }
        pthread_mutex_unlock(&s->lock);
    }
    *work = b->scratch;
    *work_bytes = SCRATCH_BYTES;
    return KEEL_OK;
}

void keel__cuda_blas_stream_release(keel__cuda_stream_t *s)
{
    keel__cuda_blas_ctx_t *b = atomic_exchange(&s->blas, NULL);
    if (b == NULL)
        return;
    (void)gpuFree(b->scratch);
    free(b);
}

void keel__cuda_blas_device_release(keel__cuda_device_t *dev)
{
    (void)dev;
}

/* Which BLAS library is there: 0 none, 1 rocBLAS. Looked up once; the
 * handle is closed again, since nothing here calls into it. */
static int blas_found(void)
{
    static atomic_int found = -1;
    int f = atomic_load_explicit(&found, memory_order_relaxed);
    if (f < 0) {
        void *h = dlopen("librocblas.so.0", RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            h = dlopen("librocblas.so", RTLD_NOW | RTLD_LOCAL);
        f = h != NULL;
        if (h != NULL)
            dlclose(h);
        atomic_store_explicit(&found, f, memory_order_relaxed);
    }
    return f;
}

keel_status_t keel__hip_blas_unavailable(const char *keel_fn)
{
    if (blas_found())
        return keel__cuda_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                          "%s: not supported by the hip backend: librocblas is installed, but this "
                                          "keel-hip build does not call rocBLAS or hipBLASLt yet",
                                          keel_fn);
    return keel__cuda_host->set_error(KEEL_ERROR_NOT_SUPPORTED,
                                      "%s: not supported by the hip backend: it needs rocBLAS (librocblas.so.0) or "
                                      "hipBLASLt, and neither is installed (Debian 12 packages neither)",
                                      keel_fn);
}
