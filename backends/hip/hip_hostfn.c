/* SPDX-License-Identifier: MIT */
/* hipLaunchHostFunc, where the installed libamdhip64 has it. ROCm 5.2
 * declares it in hip_runtime_api.h without exporting it, so a direct call
 * would keep keel-hip.so from loading at all. Host functions normally run on
 * the stream's own thread (cuda_hostfn.c, through hipStreamWaitValue32); this
 * is only the path for graph capture and KEEL_GPU_HOST_FUNCS=hip. On
 * HIP's NVIDIA platform it is cudaLaunchHostFunc, always there. */
#include "hip_internal.h"

#ifdef __HIP_PLATFORM_NVIDIA__
hipError_t keel__hip_launch_host_func(hipStream_t stream, hipHostFn_t fn, void *user_data)
{
    return hipLaunchHostFunc(stream, fn, user_data);
}

const char *keel__hip_launch_host_func_name(void)
{
    return "hipLaunchHostFunc";
}
#else
#include <dlfcn.h>
#include <stdatomic.h>

typedef hipError_t (*launch_host_func_t)(hipStream_t, hipHostFn_t, void *);

static _Atomic(launch_host_func_t) resolved;
static atomic_int looked;

static launch_host_func_t launch_host_func(void)
{
    if (!atomic_load_explicit(&looked, memory_order_acquire)) {
        /* The library is loaded already: keel-hip.so links it. */
        void *lib = dlopen(KEEL_GPU_DRIVER_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
        launch_host_func_t f = NULL;
        if (lib != NULL) {
            *(void **)&f = dlsym(lib, "hipLaunchHostFunc");
            dlclose(lib);
        }
        atomic_store_explicit(&resolved, f, memory_order_relaxed);
        atomic_store_explicit(&looked, 1, memory_order_release);
    }
    return atomic_load_explicit(&resolved, memory_order_relaxed);
}

hipError_t keel__hip_launch_host_func(hipStream_t stream, hipHostFn_t fn, void *user_data)
{
    launch_host_func_t f = launch_host_func();
    return f != NULL ? f(stream, fn, user_data) : hipErrorNotSupported;
}

const char *keel__hip_launch_host_func_name(void)
{
    return launch_host_func() != NULL ? "hipLaunchHostFunc"
                                      : "hipLaunchHostFunc: not in this " KEEL_GPU_DRIVER_LIBRARY
                                        " (ROCm 5.2 declares it without exporting it)";
}
#endif /* __HIP_PLATFORM_NVIDIA__ */
