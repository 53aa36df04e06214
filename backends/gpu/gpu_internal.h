/* SPDX-License-Identifier: MIT */
/* Internal declarations of keel-cuda.so: the contexts behind Keel's handles,
 * the driver entry points, error mapping and helpers shared by the plugin's
 * files. Nothing here leaves the plugin (hidden visibility throughout). */
#ifndef KEEL_CUDA_INTERNAL_H
#define KEEL_CUDA_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "keel/backend.h"
#ifdef KEEL_GPU_HIP
#include "vendor_hip.h"   /* backends/hip: the HIP plugin compiles these sources too */
#else
#include "vendor_cuda.h"
#endif

#define KEEL_CUDA_HIDDEN __attribute__((visibility("hidden")))
#define KEEL_CUDA_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* KEEL_CUDA_LT_ALGO: "tune" (the default: cuBLASLt plans time the
 * heuristic's candidates, cuda_lt_plan.c), or N: every plan runs candidate
 * N (the last when there are fewer), untimed, for runs that must pick the
 * same algorithm every time and for tests of each candidate a plan may
 * pick. Checked at probe (cuda_env.c). */
#define KEEL_CUDA_LT_ALGO_MAX 7

/* The vendor's own name of a gpu* call, as a string for error messages:
 * KEEL_GPU_CALL(gpuMalloc) is "cudaMalloc" here and "hipMalloc" in the HIP
 * plugin (the argument is macro-expanded before it is quoted). */
#define KEEL_GPU_QUOTE_(x) #x
#define KEEL_GPU_CALL(gpu_name) KEEL_GPU_QUOTE_(gpu_name)

/* ---- the core's services (set once by keel_backend_init) ---- */
KEEL_CUDA_HIDDEN extern const keel_host_api_t *keel__cuda_host;

/* ---- fault injection (KEEL_FAULT, docs/reliability.md) ----
 * The core's mask of armed sites, copied at keel_backend_init (0 when the
 * core offers none): unset, a check costs one load and a branch. */
KEEL_CUDA_HIDDEN extern unsigned keel__gpu_fault_armed;
/* The core counts a call of site (keel_fault_site_t); 1 when it is to fail. */
KEEL_CUDA_HIDDEN int keel__gpu_fault(int site);
#define KEEL_GPU_FAULT(site) \
    (KEEL_CUDA_UNLIKELY((keel__gpu_fault_armed & (1u << (site))) != 0) && keel__gpu_fault(site))
/* A vendor call that KEEL_FAULT vendor-call can fail: it then returns
 * KEEL_GPU_FAULT_ERROR (an invalid-value error of the vendor's, which takes
 * every call site's general error path) without calling the vendor, and
 * the error functions (keel__cuda_error, keel__cu_error_as) report it as
 * KEEL_ERROR_BACKEND "<call>: injected failure (KEEL_FAULT vendor-call)". */
#define KEEL_GPU_FAULT_ERROR gpuErrorInvalidValue
#define KEEL_GPU_TRY(call) (KEEL_GPU_FAULT(KEEL_FAULT_VENDOR_CALL) ? (gpuError_t)KEEL_GPU_FAULT_ERROR : (call))
#define KEEL_GPU_DRV_TRY(call) \
    (KEEL_GPU_FAULT(KEEL_FAULT_VENDOR_CALL) ? (gpuDrvError_t)gpuDrvErrorInvalidValue : (call))
/* Set on the thread whose vendor call KEEL_FAULT failed, until its error is reported. */
KEEL_CUDA_HIDDEN extern _Thread_local int keel__gpu_fault_pending;
/* The report of an injected vendor failure (keel_fn may be NULL). */
KEEL_CUDA_HIDDEN keel_status_t keel__gpu_fault_report(const char *keel_fn, const char *what);
/* pthread_create, failed with EAGAIN by KEEL_FAULT thread-create. */
#define KEEL_GPU_PTHREAD_CREATE(t, attr, fn, arg) \
    (KEEL_GPU_FAULT(KEEL_FAULT_THREAD_CREATE) ? EAGAIN : pthread_create((t), (attr), (fn), (arg)))

#ifndef KEEL_GPU_HIP
/* ---- driver API, resolved through the runtime at probe time so that the
 * plugin never links libcuda and loads on machines without a driver ---- */
struct keel__cuda_driver {
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxPushCurrent)(CUcontext);
    CUresult (*CtxPopCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*KernelGetFunction)(CUfunction *, CUkernel);
    CUresult (*LibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned int,
                                CUlibraryOption *, void **, unsigned int);
    CUresult (*LibraryLoadFromFile)(CUlibrary *, const char *, CUjit_option *, void **, unsigned int,
                                    CUlibraryOption *, void **, unsigned int);
    CUresult (*LibraryUnload)(CUlibrary);
    CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
    CUresult (*LibraryGetModule)(CUmodule *, CUlibrary);
    CUresult (*LibraryGetGlobal)(CUdeviceptr *, size_t *, CUlibrary, const char *);
    CUresult (*KernelGetAttribute)(int *, CUfunction_attribute, CUkernel, CUdevice);
    CUresult (*KernelSetAttribute)(CUfunction_attribute, int, CUkernel, CUdevice);
    CUresult (*KernelGetParamInfo)(CUkernel, size_t, size_t *, size_t *);   /* may be NULL (driver < 12.4) */
    CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
    CUresult (*StreamWaitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
};
KEEL_CUDA_HIDDEN extern struct keel__cuda_driver keel__cu;
/* Fills keel__cu; on failure sets the error (naming the missing entry point). */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_driver_load(void);
#endif

/* ---- contexts ---- */
struct keel__cuda_staging;

typedef struct keel__cuda_device {
    int ordinal;
    gpuDevice_t cudev;
    gpuContext_t primary;            /* retained for the device's lifetime */
    int cc_major, cc_minor;
    char arch[16];                 /* "sm_90" */
    int managed_memory;
    int pools_supported;
    atomic_int stream_wait_value;  /* cuStreamWaitValue32 works: host functions run on the stream's thread */
    gpuMemPool_t pool;             /* default pool, release threshold raised */
    pthread_mutex_t lock;          /* guards the lazily made members below */
    _Atomic(struct keel__cuda_staging *) staging;
    _Atomic(void *) blaslt;        /* cublasLtHandle_t */
} keel__cuda_device_t;

typedef struct keel__cuda_blas_ctx keel__cuda_blas_ctx_t;
struct keel__cuda_hostq;

typedef struct keel__cuda_stream {
    gpuStream_t stream;            /* first: the launch path reads it */
    keel__cuda_device_t *dev;
    /* Changes after every enqueue that is not a host function (see
     * keel__cuda_stream_touch): host functions with nothing in between share
     * one wait in the stream. */
    atomic_uint epoch;
    pthread_mutex_t lock;          /* guards the lazy BLAS and host-function state */
    _Atomic(keel__cuda_blas_ctx_t *) blas;
    _Atomic(struct keel__cuda_hostq *) hostq;
} keel__cuda_stream_t;

typedef struct keel__cuda_event {
    gpuEvent_t event;
    keel__cuda_device_t *dev;
    unsigned flags;                /* KEEL_EVENT_* */
    atomic_int recorded;
} keel__cuda_event_t;

typedef struct keel__cuda_module {
    gpuLibrary_t library;
    keel__cuda_device_t *dev;
} keel__cuda_module_t;

typedef struct keel__cuda_kernel {
    /* What cuLaunchKernel gets. By default the CUkernel cast to CUfunction:
     * the launch then takes the stream's context and needs no current one.
     * With KEEL_CUDA_LAUNCH=function (read at lookup), the CUfunction of the
     * device's primary context, launched with that context made current. */
    gpuFunction_t fn;
    int needs_context;
    gpuKernel_t kernel;
    keel__cuda_device_t *dev;
} keel__cuda_kernel_t;

typedef struct keel__cuda_graph {
    gpuGraph_t graph;
    keel__cuda_device_t *dev;
} keel__cuda_graph_t;

typedef struct keel__cuda_graph_exec {
    gpuGraphExec_t exec;
    keel__cuda_device_t *dev;
} keel__cuda_graph_exec_t;

/* ---- probe and shutdown: the vendor's plugin file; cuda_entry.c's table uses them ---- */
KEEL_CUDA_HIDDEN keel_status_t keel__gpu_probe(const keel_host_api_t *host, void **backend_ctx, int *device_count,
                                               const char **desc);
KEEL_CUDA_HIDDEN void keel__gpu_shutdown(void *backend_ctx);

/* ---- vtables (one file each) ---- */
KEEL_CUDA_HIDDEN extern const keel_device_vtable_t keel__cuda_device_vtable;
KEEL_CUDA_HIDDEN extern const keel_memory_vtable_t keel__cuda_memory_vtable;
KEEL_CUDA_HIDDEN extern const keel_stream_vtable_t keel__cuda_stream_vtable;
KEEL_CUDA_HIDDEN extern const keel_event_vtable_t keel__cuda_event_vtable;
KEEL_CUDA_HIDDEN extern const keel_kernel_vtable_t keel__cuda_kernel_vtable;
KEEL_CUDA_HIDDEN extern const keel_graph_vtable_t keel__cuda_graph_vtable;

/* ---- errors (cuda_error.c) ---- */
/* Map a runtime error to a Keel status, without side effects. */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_status_of(int err);
/* Driver-API twin of keel__cuda_error (cuda_shared.h). */
KEEL_CUDA_HIDDEN keel_status_t keel__cu_error(gpuDrvError_t res, const char *keel_fn, const char *what);
/* The same, reported as @p status. */
KEEL_CUDA_HIDDEN keel_status_t keel__cu_error_as(gpuDrvError_t res, keel_status_t status, const char *keel_fn,
                                                 const char *what);

/* ---- helpers ---- */
/* Make @p dev the calling thread's current device, unless it already is: a
 * cheap check, since cudaGetDevice reads thread-local state. The runtime
 * calls that take no stream (allocation, creation of streams and events) act
 * on the current device; stream-ordered calls take the stream's device. */
static inline gpuError_t keel__cuda_use_device(const keel__cuda_device_t *dev)
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
static inline void keel__cuda_stream_touch(keel__cuda_stream_t *s)
{
    atomic_store_explicit(&s->epoch, atomic_load_explicit(&s->epoch, memory_order_relaxed) + 1u,
                          memory_order_relaxed);
}

/* Make the device's primary context current for a driver call that needs
 * one (occupancy). Returns 1 when it pushed, so the caller pops. */
KEEL_CUDA_HIDDEN int keel__cuda_push_primary(const keel__cuda_device_t *dev);
KEEL_CUDA_HIDDEN void keel__cuda_pop_primary(int pushed);

/* ---- pageable copies through pinned staging (cuda_staging.c) ---- */
/* Whether a copy between pageable host memory and the device of @p bytes
 * goes through staging (large enough, and the stream is not capturing). */
KEEL_CUDA_HIDDEN int keel__cuda_staging_wanted(keel__cuda_stream_t *s, size_t bytes);
/* Copy pageable @p src to device @p dst on @p s; returns once @p src may be reused. */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_staged_h2d(keel__cuda_stream_t *s, void *dst, const void *src,
                                                     size_t bytes, const char *keel_fn);
/* Copy device @p src to pageable @p dst after the work on @p s; returns when done. */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_staged_d2h(keel__cuda_stream_t *s, void *dst, const void *src,
                                                     size_t bytes, const char *keel_fn);
KEEL_CUDA_HIDDEN void keel__cuda_staging_destroy(keel__cuda_device_t *dev);

/* ---- host functions (cuda_hostfn.c) ---- */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_launch_host_func(keel__cuda_stream_t *s, keel_host_fn_t fn,
                                                           void *user_data);
/* Stops the stream's host thread; the stream must be idle. */
KEEL_CUDA_HIDDEN void keel__cuda_hostq_release(keel__cuda_stream_t *s);

/* ---- BLAS state (cuda_blas.c) ---- */
KEEL_CUDA_HIDDEN void keel__cuda_blas_stream_release(keel__cuda_stream_t *s);
KEEL_CUDA_HIDDEN void keel__cuda_blas_device_release(keel__cuda_device_t *dev);

/* ---- run-time compilation (cuda_nvrtc.c) ---- */
/* Compile @p source for @p dev to a cubin (or PTX when the options ask for a
 * virtual architecture), through the on-disk cache. *image is malloc'd. */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_nvrtc_compile(const keel__cuda_device_t *dev, const char *source,
                                                        const char *name, const char *const *options,
                                                        int num_options, void **image, size_t *size);
/* Load a cubin/fatbin/PTX image as a module (cuda_module.c). */
KEEL_CUDA_HIDDEN keel_status_t keel__cuda_module_from_image(keel__cuda_device_t *dev, const void *image,
                                                            const char *keel_fn, void **module_ctx);

/* cuda_env.c: KEEL_CUDA_* checked at probe; INVALID_ENVIRONMENT (error set) on garbage. */
__attribute__((visibility("hidden"))) keel_status_t keel__cuda_check_env(void);

#endif /* KEEL_CUDA_INTERNAL_H */
