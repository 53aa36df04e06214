/* SPDX-License-Identifier: MIT */
/* BLAS state for keel-hip.so: librocblas and libhipblaslt, each opened at
 * first use, and per stream the scratch of the built-in operations, a
 * rocBLAS handle and a hipBLASLt handle with its workspace (on CUDA the
 * cuBLASLt workspace doubles as that scratch).
 *
 * Debian 12 packages neither rocBLAS nor hipBLASLt, so keel-hip neither
 * links them nor needs their headers: hip_rocblas_load.c and
 * hip_hipblaslt_load.c open them once. Without rocBLAS, GEMM, GEMV and the
 * dense layer answer NOT_SUPPORTED with the reason. ROCm 5.0 to 5.6 install
 * it as librocblas.so.0 (rocBLAS 2.x and 3.0, ABI version 0), ROCm 5.7 as
 * librocblas.so.3 (rocBLAS 3.1); librocblas.so, the development link, comes
 * last. hipBLASLt serves the dense layer only (its fused epilogues,
 * hip_ops_blas.c): ROCm 6.x installs it as libhipblaslt.so.0; the release
 * is checked with the first handle (hip_hipblaslt.h says which ones fit),
 * and without a usable one the dense layer is rocBLAS plus a separate
 * bias/activation pass.
 *
 * A rocblas_handle carries its stream and is not safe to use from two
 * streams at once, so each Keel stream gets its own, made on its first BLAS
 * call on the stream's device and destroyed with the stream. A hipBLASLt
 * handle owns a device buffer its kernels synchronize through, so it too
 * belongs to one stream: made at the stream's first dense call, with a
 * workspace of HLT_WORKSPACE_BYTES. The blas entry makes the first one (to
 * check the release before the device's choice is reported); the device
 * keeps it for the first stream that asks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "hip_internal.h"
#include "backends/gpu/gpu_ops.h"


enum { SCRATCH_BYTES = 64 << 10 };   /* reduce partials: 8 KiB at least (ops_gpu.h) */
enum { HLT_WORKSPACE_BYTES = 32 << 20 };

struct keel__gpu_blas_ctx {
    void *scratch;                   /* device memory of the stream's device */
    _Atomic(keel__rocblas_handle_t) handle;
    /* hipBLASLt: 0 not set up yet, 1 lt and lt_ws are set, -1 not usable on
     * this stream (the dense layer takes the rocBLAS path) */
    atomic_int lt_state;
    keel__hipblaslt_handle_t lt;
    void *lt_ws;
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

/* ---- the libraries ---- */

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

static keel__hipblaslt_api_t hipblaslt;
static char hipblaslt_why[512];      /* why it is not usable; final once hipblaslt_release < 0 */
static int hipblaslt_loaded;
static pthread_once_t hipblaslt_once = PTHREAD_ONCE_INIT;
/* The release check, made with the first handle: 0 not yet, 1 passed
 * (hipblaslt_version set), -1 failed (hipblaslt_why says why). */
static atomic_int hipblaslt_release;
static int hipblaslt_version;
static pthread_mutex_t hipblaslt_lock = PTHREAD_MUTEX_INITIALIZER;

static void hipblaslt_open(void)
{
#ifdef __HIP_PLATFORM_NVIDIA__
    snprintf(hipblaslt_why, sizeof hipblaslt_why, "it is not looked for on HIP's NVIDIA platform");
    hipblaslt_loaded = 0;
#else
    static const char *const names[] = {"libhipblaslt.so.0", "libhipblaslt.so", NULL};
    hipblaslt_loaded = keel__hipblaslt_load(names, &hipblaslt, hipblaslt_why, sizeof hipblaslt_why) == 0;
#endif
}

/* Whether the release behind @p h fits keel-hip's declarations; checked
 * once, and logged. */
static int hipblaslt_release_ok(keel__hipblaslt_handle_t h)
{
    int r = atomic_load(&hipblaslt_release);
    if (r != 0)
        return r > 0;
    pthread_mutex_lock(&hipblaslt_lock);
    r = atomic_load(&hipblaslt_release);
    if (r == 0) {
        char why[sizeof hipblaslt_why];
        r = keel__hipblaslt_check_version(&hipblaslt, h, &hipblaslt_version, why, sizeof why) ? 1 : -1;
        if (r > 0) {
            keel__gpu_host->log(KEEL_LOG_INFO,
                                "hip: hipBLASLt %d.%d.%d (%s): keel_dense fuses bias and activation into its "
                                "epilogues",
                                hipblaslt_version / 100000, hipblaslt_version / 100 % 1000, hipblaslt_version % 100,
                                hipblaslt.lib_name);
        } else {
            snprintf(hipblaslt_why, sizeof hipblaslt_why, "%s", why);
            keel__gpu_host->log(KEEL_LOG_WARN,
                                "hip: hipBLASLt is not used: %s; keel_dense runs as GEMM plus a separate bias and "
                                "activation pass",
                                why);
        }
        atomic_store(&hipblaslt_release, r);
    }
    pthread_mutex_unlock(&hipblaslt_lock);
    return r > 0;
}

/* A hipBLASLt handle on @p dev (made current), of a release that fits;
 * NULL with the reason in @p why. */
static keel__hipblaslt_handle_t hipblaslt_handle_new(const keel__gpu_device_t *dev, char *why, size_t size)
{
    gpuError_t err = keel__gpu_use_device(dev);
    if (err != gpuSuccess) {
        snprintf(why, size, "making hip:%d current: %s", dev->ordinal, gpuGetErrorName(err));
        return NULL;
    }
    keel__hipblaslt_handle_t h = NULL;
    int st = hipblaslt.create(&h);
    if (st != KEEL_HLT_STATUS_SUCCESS) {
        (void)gpuGetLastError();
        snprintf(why, size, "hipblasLtCreate: %s (%d)", keel__hipblaslt_status_name(st), st);
        return NULL;
    }
    if (!hipblaslt_release_ok(h)) {
        (void)hipblaslt.destroy(h);
        snprintf(why, size, "%s", hipblaslt_why);
        return NULL;
    }
    return h;
}

/* Whether the dense layer can use hipBLASLt on @p dev, with the release
 * (or why not) in @p text. Makes the device's first handle, which checks
 * the release; the device keeps it for its first stream. */
static int hipblaslt_info(keel__gpu_device_t *dev, char *text, size_t size)
{
    pthread_once(&hipblaslt_once, hipblaslt_open);
    if (!hipblaslt_loaded || atomic_load(&hipblaslt_release) < 0) {
        snprintf(text, size, "%s", hipblaslt_why);
        return 0;
    }
    if (atomic_load(&hipblaslt_release) == 0) {
        keel__hipblaslt_handle_t h = hipblaslt_handle_new(dev, text, size);
        if (h == NULL)
            return 0;
        void *none = NULL;
        if (!atomic_compare_exchange_strong(&dev->blaslt, &none, h))
            (void)hipblaslt.destroy(h);
    }
    snprintf(text, size, "hipBLASLt %d.%d.%d (%s)", hipblaslt_version / 100000, hipblaslt_version / 100 % 1000,
             hipblaslt_version % 100, hipblaslt.lib_name);
    return 1;
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
                                      "here (%s). Debian 12 does not package rocBLAS; keel-hip uses hipBLASLt for "
                                      "keel_dense only",
                                      keel_fn, rocblas_why);
#endif
}

/* What runs keel_gemm, keel_gemv and keel_dense: rocBLAS for all three,
 * with hipBLASLt's epilogues first for the dense layer. With hipBLASLt
 * alone the entry is still usable: GEMM and GEMV then answer NOT_SUPPORTED
 * and the core runs its portable kernels for them (and for the dense calls
 * hipBLASLt does not take). */
int keel__gpu_blas_info(void *device_ctx, char *text, size_t size)
{
    pthread_once(&rocblas_once, rocblas_open);
    char lt[600];
    int lt_ok = hipblaslt_info(device_ctx, lt, sizeof lt);
    if (rocblas_ok && lt_ok)
        snprintf(text, size,
                 "rocBLAS (%s); keel_dense: %s with bias and activation in its epilogue, else rocBLAS and a "
                 "bias/activation pass",
                 rocblas.lib_name, lt);
    else if (rocblas_ok)
        snprintf(text, size, "rocBLAS (%s); keel_dense: rocBLAS and a bias/activation pass (hipBLASLt is not "
                             "usable here: %s)",
                 rocblas.lib_name, lt);
    else if (lt_ok)
        snprintf(text, size,
                 "keel_dense: %s with bias and activation in its epilogue; keel_gemm, keel_gemv and the dense calls "
                 "hipBLASLt does not take: Keel's portable kernels (rocBLAS is not usable here: %s)",
                 lt, rocblas_why);
    else
        snprintf(text, size, "rocBLAS is not usable here: %s; hipBLASLt neither: %s", rocblas_why, lt);
    return rocblas_ok || lt_ok;
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

/* The stream's hipBLASLt handle and workspace; 0 (logged at debug) when
 * they cannot be had: the device's first handle, or a new one, and the
 * workspace. Under the stream's lock. */
static int hipblaslt_setup(keel__gpu_stream_t *s, keel__gpu_blas_ctx_t *b)
{
    char why[600];
    keel__hipblaslt_handle_t h = atomic_exchange(&s->dev->blaslt, NULL);
    if (h != NULL)
        (void)keel__gpu_use_device(s->dev);
    else
        h = hipblaslt_handle_new(s->dev, why, sizeof why);
    if (h != NULL) {
        /* Not stream-ordered: a capture may be under way on this stream. */
        gpuError_t err = gpuMalloc(&b->lt_ws, HLT_WORKSPACE_BYTES);
        if (err == gpuSuccess) {
            b->lt = h;
            return 1;
        }
        (void)gpuGetLastError();
        b->lt_ws = NULL;
        snprintf(why, sizeof why, "no device memory for its %d MiB workspace (%s)", HLT_WORKSPACE_BYTES >> 20,
                 gpuGetErrorName(err));
        void *none = NULL; /* the device keeps the handle for another stream */
        if (!atomic_compare_exchange_strong(&s->dev->blaslt, &none, h))
            (void)hipblaslt.destroy(h);
    }
    if (keel__gpu_host->log_enabled(KEEL_LOG_DEBUG))
        keel__gpu_host->log(KEEL_LOG_DEBUG, "hip:%d: a stream's keel_dense does not use hipBLASLt: %s",
                            s->dev->ordinal, why);
    return 0;
}

keel_status_t keel__hip_hipblaslt(void *stream_ctx, const keel__hipblaslt_api_t **api,
                                  keel__hipblaslt_handle_t *handle, void **workspace, size_t *workspace_bytes)
{
    pthread_once(&hipblaslt_once, hipblaslt_open);
    if (!hipblaslt_loaded || atomic_load(&hipblaslt_release) < 0)
        return KEEL_ERROR_NOT_SUPPORTED;
    keel__gpu_stream_t *s = stream_ctx;
    keel__gpu_blas_ctx_t *b;
    keel_status_t st = blas_ctx(s, &b);
    if (st != KEEL_OK)
        return st;
    int state = atomic_load_explicit(&b->lt_state, memory_order_acquire);
    if (state == 0) {
        pthread_mutex_lock(&s->lock);
        state = atomic_load_explicit(&b->lt_state, memory_order_relaxed);
        if (state == 0) {
            state = hipblaslt_setup(s, b) ? 1 : -1;
            atomic_store_explicit(&b->lt_state, state, memory_order_release);
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (state < 0)
        return KEEL_ERROR_NOT_SUPPORTED;
    (void)keel__gpu_op_stream(s); /* the caller enqueues through the handle */
    *api = &hipblaslt;
    *handle = b->lt;
    *workspace = b->lt_ws;
    *workspace_bytes = HLT_WORKSPACE_BYTES;
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
    if (atomic_load(&b->lt_state) > 0) {
        (void)hipblaslt.destroy(b->lt);
        (void)gpuFree(b->lt_ws);
    }
    (void)gpuFree(b->scratch);
    (void)gpuGetLastError();
    free(b);
}

void keel__gpu_blas_device_release(keel__gpu_device_t *dev)
{
    void *h = atomic_exchange(&dev->blaslt, NULL);
    if (h != NULL) { /* made by the blas entry, taken by no stream */
        (void)keel__gpu_use_device(dev);
        (void)hipblaslt.destroy(h);
        (void)gpuGetLastError();
    }
}
