/* SPDX-License-Identifier: MIT */
/* Internal declarations of the GPU plugins, keel-cuda.so and keel-hip.so:
 * the contexts behind Keel's handles, error mapping and helpers shared by the
 * sources of backends/gpu, which call only gpu* names. Each plugin compiles
 * them with its vendor's mapping header: vendor_cuda.h, or vendor_hip.h when
 * KEEL_GPU_HIP is defined. What one vendor's files add is declared in
 * backends/cuda/cuda_internal.h and backends/hip/hip_internal.h. Nothing here
 * leaves the plugin (hidden visibility throughout). */
#ifndef KEEL_GPU_INTERNAL_H
#define KEEL_GPU_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "keel/backend.h"

/* The same definition as kernels/gpu/ops_gpu.h's. */
#ifndef KEEL_GPU_HIDDEN
#define KEEL_GPU_HIDDEN __attribute__((visibility("hidden")))
#endif
#define KEEL_GPU_UNLIKELY(x) __builtin_expect(!!(x), 0)

#ifdef KEEL_GPU_HIP
#include "vendor_hip.h"
#else
#include "vendor_cuda.h"
#endif

/* The vendor's own name of a gpu* call or constant, as a string for
 * messages: KEEL_GPU_NAME(gpuMalloc) is "cudaMalloc" in the CUDA plugin and
 * "hipMalloc" in the HIP plugin (the argument is macro-expanded before it is
 * quoted). Names that map to more than a name have a gpu*Name string in the
 * vendor headers instead (gpuLaunchHostFuncName, gpuStreamWaitValueName). */
#define KEEL_GPU_QUOTE_(x) #x
#define KEEL_GPU_NAME(gpu_name) KEEL_GPU_QUOTE_(gpu_name)
/* The format of a device in messages, with its ordinal: "cuda:0", "hip:0". */
#define KEEL_GPU_DEVICE_FMT KEEL_GPU_BACKEND_NAME ":%d"

/* ---- the core's services (set once by keel_backend_init) ---- */
KEEL_GPU_HIDDEN extern const keel_host_api_t *keel__gpu_host;

/* ---- fault injection (KEEL_FAULT, docs/reliability.md) ----
 * The core's mask of armed sites, copied at keel_backend_init (0 when the
 * core offers none): unset, a check costs one load and a branch. */
KEEL_GPU_HIDDEN extern unsigned keel__gpu_fault_armed;
/* The core counts a call of site (keel_fault_site_t); 1 when it is to fail. */
KEEL_GPU_HIDDEN int keel__gpu_fault(int site);
#define KEEL_GPU_FAULT(site) \
    (KEEL_GPU_UNLIKELY((keel__gpu_fault_armed & (1u << (site))) != 0) && keel__gpu_fault(site))
/* A vendor call that KEEL_FAULT vendor-call can fail: it then returns
 * KEEL_GPU_FAULT_ERROR (an invalid-value error of the vendor's, which takes
 * every call site's general error path) without calling the vendor, and
 * the error functions (keel__gpu_error, keel__gpu_drv_error_as) report it as
 * KEEL_ERROR_BACKEND "<call>: injected failure (KEEL_FAULT vendor-call)". */
#define KEEL_GPU_FAULT_ERROR gpuErrorInvalidValue
#define KEEL_GPU_TRY(call) (KEEL_GPU_FAULT(KEEL_FAULT_VENDOR_CALL) ? (gpuError_t)KEEL_GPU_FAULT_ERROR : (call))
#define KEEL_GPU_DRV_TRY(call) \
    (KEEL_GPU_FAULT(KEEL_FAULT_VENDOR_CALL) ? (gpuDrvError_t)gpuDrvErrorInvalidValue : (call))
/* Set on the thread whose vendor call KEEL_FAULT failed, until its error is reported. */
KEEL_GPU_HIDDEN extern _Thread_local int keel__gpu_fault_pending;
/* The report of an injected vendor failure (keel_fn may be NULL). */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_fault_report(const char *keel_fn, const char *what);
/* pthread_create, failed with EAGAIN by KEEL_FAULT thread-create. */
#define KEEL_GPU_PTHREAD_CREATE(t, attr, fn, arg) \
    (KEEL_GPU_FAULT(KEEL_FAULT_THREAD_CREATE) ? EAGAIN : pthread_create((t), (attr), (fn), (arg)))

/* ---- contexts ---- */
struct keel__gpu_staging;

typedef struct keel__gpu_device {
    int ordinal;
    gpuDevice_t gpudev;
    gpuContext_t primary;          /* CUDA: retained for the device's lifetime; HIP: none */
    int cc_major, cc_minor;
    char arch[16];                 /* "sm_90", "gfx90a" */
    int managed_memory;
    int pools_supported;
    atomic_int stream_wait_value;  /* gpuStreamWaitValueGeq works: host functions run on the stream's thread */
    gpuMemPool_t pool;             /* default pool, release threshold raised */
    pthread_mutex_t lock;          /* guards the lazily made members below */
    _Atomic(struct keel__gpu_staging *) staging;
    _Atomic(void *) blaslt;        /* CUDA: the device's cublasLtHandle_t; HIP: a hipBLASLt handle
                                      made by the blas entry, kept for the device's first stream */
} keel__gpu_device_t;

typedef struct keel__gpu_blas_ctx keel__gpu_blas_ctx_t;
struct keel__gpu_hostq;

typedef struct keel__gpu_stream {
    gpuStream_t stream;            /* first: the launch path reads it */
    keel__gpu_device_t *dev;
    /* Changes after every enqueue that is not a host function (see
     * keel__gpu_stream_touch): host functions with nothing in between share
     * one wait in the stream. */
    atomic_uint epoch;
    pthread_mutex_t lock;          /* guards the lazy BLAS and host-function state */
    _Atomic(keel__gpu_blas_ctx_t *) blas;
    _Atomic(struct keel__gpu_hostq *) hostq;
    pthread_mutex_t bounce_lock;   /* guards bounce: small device-to-host copies (gpu_staging.c) */
    void *bounce;                  /* pinned, bounce_size bytes, or NULL */
    size_t bounce_size;
} keel__gpu_stream_t;

typedef struct keel__gpu_event {
    gpuEvent_t event;
    keel__gpu_device_t *dev;
    unsigned flags;                /* KEEL_EVENT_* */
    atomic_int recorded;
} keel__gpu_event_t;

typedef struct keel__gpu_module {
    gpuLibrary_t library;
    keel__gpu_device_t *dev;
} keel__gpu_module_t;

typedef struct keel__gpu_kernel {
    /* What the launch gets. HIP: the module's hipFunction_t (kernel too).
     * CUDA: by default the CUkernel cast to CUfunction: the launch then
     * takes the stream's context and needs no current one. With
     * KEEL_CUDA_LAUNCH=function (read at lookup), the CUfunction of the
     * device's primary context, launched with that context made current. */
    gpuFunction_t fn;
    int needs_context;
    gpuKernel_t kernel;
    keel__gpu_device_t *dev;
} keel__gpu_kernel_t;

typedef struct keel__gpu_graph {
    gpuGraph_t graph;
    keel__gpu_device_t *dev;
} keel__gpu_graph_t;

typedef struct keel__gpu_graph_exec {
    gpuGraphExec_t exec;
    keel__gpu_device_t *dev;
} keel__gpu_graph_exec_t;

/* ---- probe and shutdown: the vendor's plugin file; gpu_entry.c's table uses them ---- */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                                              const char **desc);
KEEL_GPU_HIDDEN void keel__gpu_shutdown(void *backend_ctx);

/* ---- vtables (one file each; devices and kernels are the vendor's) ---- */
KEEL_GPU_HIDDEN extern const keel_device_vtable_t keel__gpu_device_vtable;
KEEL_GPU_HIDDEN extern const keel_memory_vtable_t keel__gpu_memory_vtable;
KEEL_GPU_HIDDEN extern const keel_stream_vtable_t keel__gpu_stream_vtable;
KEEL_GPU_HIDDEN extern const keel_event_vtable_t keel__gpu_event_vtable;
KEEL_GPU_HIDDEN extern const keel_kernel_vtable_t keel__gpu_kernel_vtable;
KEEL_GPU_HIDDEN extern const keel_graph_vtable_t keel__gpu_graph_vtable;

/* ---- errors (the vendor's: backends/cuda/cuda_error.c, backends/hip/hip_error.c) ---- */
/* Map a runtime error to a Keel status, without side effects. */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_status_of(int err);
/* Turn a runtime error into a Keel status with the vendor's error name and
 * message and the calling Keel function ("keel_gemm: cudaErrorInvalidValue: ..."). */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_error(gpuError_t err, const char *keel_fn, const char *what);
/* Driver-API twin of keel__gpu_error (on HIP, module calls: the same error type). */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_drv_error(gpuDrvError_t res, const char *keel_fn, const char *what);
/* The same, reported as @p status. */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_drv_error_as(gpuDrvError_t res, keel_status_t status, const char *keel_fn,
                                                     const char *what);

/* ---- helpers ---- */
/* Make @p dev the calling thread's current device, unless it already is: a
 * cheap check, since gpuGetDevice reads thread-local state. The runtime
 * calls that take no stream (allocation, creation of streams and events) act
 * on the current device; stream-ordered calls take the stream's device. */
static inline gpuError_t keel__gpu_use_device(const keel__gpu_device_t *dev)
{
    int cur;
    gpuError_t err = gpuGetDevice(&cur);
    if (err != gpuSuccess || cur != dev->ordinal)
        err = gpuSetDevice(dev->ordinal);
    return err;
}

/* Marks that work other than a host function was enqueued on @p s. Called
 * after the enqueue. Not a read-modify-write on purpose: a lost increment
 * under concurrent enqueues still changes the value, which is all that is
 * read (it costs a load and a store on the launch path). */
static inline void keel__gpu_stream_touch(keel__gpu_stream_t *s)
{
    atomic_store_explicit(&s->epoch, atomic_load_explicit(&s->epoch, memory_order_relaxed) + 1u,
                          memory_order_relaxed);
}

/* ---- pageable copies through pinned staging (gpu_staging.c) ---- */
/* How a copy between host memory Keel does not know (@p host) and the
 * device goes: the driver's path (small host-to-device copies, a capturing
 * stream, host memory that is not pageable), the device's staging buffers
 * (2 MiB and more), or the stream's bounce buffer (smaller device-to-host
 * copies, CUDA). */
enum { KEEL__GPU_COPY_DRIVER, KEEL__GPU_COPY_STAGED, KEEL__GPU_COPY_BOUNCE };
KEEL_GPU_HIDDEN int keel__gpu_pageable_route(keel__gpu_stream_t *s, const void *host, size_t bytes, int d2h);
/* Copies @p bytes of device @p src to pageable @p dst through the stream's
 * pinned buffer, in stream order, and returns 1 once done (the status in
 * @p status); 0 when the buffer could not be made (nothing was done). */
KEEL_GPU_HIDDEN int keel__gpu_bounce_d2h(keel__gpu_stream_t *s, void *dst, const void *src, size_t bytes,
                                         const char *keel_fn, keel_status_t *status);
/* Frees the stream's pinned buffer (the stream is idle). */
KEEL_GPU_HIDDEN void keel__gpu_bounce_release(keel__gpu_stream_t *s);
/* Copy pageable @p src to device @p dst on @p s; returns once @p src may be reused. */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_staged_h2d(keel__gpu_stream_t *s, void *dst, const void *src, size_t bytes,
                                                   const char *keel_fn);
/* Copy device @p src to pageable @p dst after the work on @p s; returns when done. */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_staged_d2h(keel__gpu_stream_t *s, void *dst, const void *src, size_t bytes,
                                                   const char *keel_fn);
KEEL_GPU_HIDDEN void keel__gpu_staging_destroy(keel__gpu_device_t *dev);

/* ---- host functions (gpu_hostfn.c) ---- */
KEEL_GPU_HIDDEN keel_status_t keel__gpu_launch_host_func(keel__gpu_stream_t *s, keel_host_fn_t fn, void *user_data);
/* Stops the stream's host thread; the stream must be idle. */
KEEL_GPU_HIDDEN void keel__gpu_hostq_release(keel__gpu_stream_t *s);

/* ---- BLAS state (the vendor's: backends/cuda/cuda_blas.c, backends/hip/hip_blas.c) ---- */
KEEL_GPU_HIDDEN void keel__gpu_blas_stream_release(keel__gpu_stream_t *s);
KEEL_GPU_HIDDEN void keel__gpu_blas_device_release(keel__gpu_device_t *dev);

/* gpu_env.c: KEEL_CUDA_* checked at probe; INVALID_ENVIRONMENT (error set) on garbage. */
/* gpu_env.c: the plugins' environment table, and a variable of it as the
 * core checked it (NULL when unset). */
KEEL_GPU_HIDDEN extern const keel_env_decl_t keel__gpu_env_table[];
KEEL_GPU_HIDDEN const char *keel__gpu_env(const char *name);

#endif /* KEEL_GPU_INTERNAL_H */
