/* SPDX-License-Identifier: MIT */
// How the built-in kernels are launched: launch<K>(grid, block, shared,
// stream, args...) enqueues the __global__ function K and returns the
// launch's own error.
//
// CUDA: through the driver's cuLaunchKernel, with K's CUkernel handle (from
// cudaGetKernel, looked up once per kernel; the driver runs it in the
// context of the stream it is given, whatever device is current). That
// skips the runtime's own launch path and the cudaGetLastError after it, so
// a built-in operation's launch costs what an application kernel's does
// through keel_launch_kernel. Where there is no handle, the runtime
// launches it.
// HIP: the triple-chevron launch and hipGetLastError.
#ifndef KEEL_KERNELS_GPU_LAUNCH_CUH
#define KEEL_KERNELS_GPU_LAUNCH_CUH

#ifndef KEEL_GPU_HIP
#include <cuda.h>
extern "C" {
#include "backends/cuda/cuda_driver.h"
}
#endif

namespace {

template <typename F> struct KernelParams;
template <typename... P> struct KernelParams<void (*)(P...)> {
    // The arguments converted to the parameters' own types, whose
    // addresses the launch takes.
    template <auto K> static cudaError_t launch(dim3 g, dim3 b, size_t shared, cudaStream_t s, P... v)
    {
#ifdef KEEL_GPU_HIP
        K<<<g, b, shared, s>>>(v...);
        return cudaGetLastError();
#else
        void *args[sizeof...(P) + 1] = {(void *)&v...};
        static const CUkernel handle = [] {
            cudaKernel_t k = nullptr;
            if (cudaGetKernel(&k, (const void *)K) != cudaSuccess) {
                (void)cudaGetLastError();
                k = nullptr;
            }
            return (CUkernel)k;
        }();
        if (handle && keel__cu.LaunchKernel)
            return (cudaError_t)keel__cu.LaunchKernel((CUfunction)handle, g.x, g.y, g.z, b.x, b.y, b.z,
                                                      (unsigned)shared, (CUstream)s, args, nullptr);
#if CUDART_VERSION >= 12080
        // the runtime launches on the current device: the stream's, which
        // a caller through keel__gpu_launch_stream has not made current
        int want = 0, cur = 0;
        if (cudaStreamGetDevice(s, &want) == cudaSuccess && cudaGetDevice(&cur) == cudaSuccess && cur != want)
            (void)cudaSetDevice(want);
        (void)cudaGetLastError();
#endif
        return cudaLaunchKernel((const void *)K, g, b, args, shared, s);
#endif
    }
};

template <auto K, typename... A> inline cudaError_t launch(dim3 g, dim3 b, size_t shared, cudaStream_t s, A... a)
{
    return KernelParams<decltype(K)>::template launch<K>(g, b, shared, s, a...);
}

} // namespace

#endif // KEEL_KERNELS_GPU_LAUNCH_CUH
