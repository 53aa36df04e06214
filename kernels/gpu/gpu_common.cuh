/* SPDX-License-Identifier: MIT */
// Shared by the GPU kernel files of the built-in operations: number
// traits (storage type T, compute type C), 16-byte packs, launch geometry,
// math on the compute type, warp and block reductions. Header-only, in an
// anonymous namespace: each .cu file gets its own copy.
#ifndef KEEL_KERNELS_GPU_COMMON_CUH
#define KEEL_KERNELS_GPU_COMMON_CUH

#ifdef KEEL_GPU_HIP
#include "kernels/gpu/gpu_hip.h"
#else
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include "kernels/gpu/ops_gpu.h"
#include "kernels/gpu/gpu_launch.cuh"

namespace {

enum { DT_F32 = 1, DT_F64 = 2, DT_F16 = 3, DT_BF16 = 4 };
enum { U_NEG = 1, U_ABS, U_EXP, U_LOG, U_SQRT, U_RELU, U_GELU, U_GELU_TANH, U_SILU, U_SIGMOID, U_TANH };
enum { B_ADD = 1, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN };
enum { R_SUM = 1, R_MAX, R_MIN, R_MEAN, R_NORM2 };
enum { AX_ALL = 0, AX_ROWS = 1, AX_COLS = 2 };
enum { ACT_NONE = 0, ACT_RELU = 1, ACT_GELU = 2, ACT_GELU_ERF = 3 };

typedef __half f16;
typedef __nv_bfloat16 bf16;

// ---- number traits: storage type T, compute type C ----
template <typename T> struct Num;
template <> struct Num<float> {
    typedef float C;
    __device__ static float ld(float v) { return v; }
    __device__ static float st(float v) { return v; }
};
template <> struct Num<double> {
    typedef double C;
    __device__ static double ld(double v) { return v; }
    __device__ static double st(double v) { return v; }
};
template <> struct Num<f16> {
    typedef float C;
    __device__ static float ld(f16 v) { return __half2float(v); }
    __device__ static f16 st(float v) { return __float2half_rn(v); }
};
template <> struct Num<bf16> {
    typedef float C;
    __device__ static float ld(bf16 v) { return __bfloat162float(v); }
    __device__ static bf16 st(float v) { return __float2bfloat16_rn(v); }
};

template <typename T> struct alignas(16) Pack {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};

__host__ __device__ inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// Threads per block of the elementwise kernels, and a grid that fills the
// device a few times over without a block per element for huge arrays.
constexpr int THREADS = 256;

// An attribute of the current device, asked of the runtime once per device
// (devices past the 64th every time); fallback where the query fails. The
// attributes asked are never negative: each is kept as value + 1 in one
// word (0: not asked yet), so no thread reads a value half written.
typedef decltype(cudaDevAttrMultiProcessorCount) DeviceAttr;
template <DeviceAttr A> int device_attr(int fallback)
{
    static int kept[64];
    int dev = 0;
    cudaGetDevice(&dev);
    bool cache = dev >= 0 && dev < 64;
    if (cache && kept[dev] > 0)
        return kept[dev] - 1;
    int v = 0;
    if (cudaDeviceGetAttribute(&v, A, dev) != cudaSuccess || v < 0)
        v = fallback;
    if (cache && v >= 0 && v < INT_MAX)
        kept[dev] = v + 1;
    return v;
}

inline int sm_count()
{
    int n = device_attr<cudaDevAttrMultiProcessorCount>(132);
    return n > 0 ? n : 132;
}

inline unsigned grid_for(size_t items, int threads = THREADS)
{
    size_t blocks = (items + threads - 1) / threads;
    size_t cap = (size_t)sm_count() * 32;
    if (blocks > cap)
        blocks = cap;
    return blocks ? (unsigned)blocks : 1u;
}

// One thread per item, as many blocks as that takes: the elementwise
// kernels run their loop body once per thread. On the H200 this measured
// 0.997 of a device-to-device copy for gelu against 0.93 with grid_for's
// capped grid and a grid-stride loop (each thread's next pack waits for the
// previous store). The kernels keep the loop for grids past the limit.
inline unsigned grid_flat(size_t items, int threads = THREADS)
{
    size_t blocks = (items + threads - 1) / threads;
    if (blocks > 0x7fffffffu)
        blocks = 0x7fffffffu;
    return blocks ? (unsigned)blocks : 1u;
}

// i % m and i / m, in 32 bits when both fit (a 64-bit division is a
// long instruction sequence on the GPU; `narrow` is uniform per launch).
__device__ inline size_t idx_mod(size_t i, size_t m, bool narrow)
{
    return narrow ? (size_t)((uint32_t)i % (uint32_t)m) : i % m;
}
__device__ inline size_t idx_div(size_t i, size_t m, bool narrow)
{
    return narrow ? (size_t)((uint32_t)i / (uint32_t)m) : i / m;
}

// Threads for one block per row of `cols` elements, and the grid of such blocks.
inline int row_threads(size_t cols)
{
    return cols >= 16384 ? 1024 : cols >= 4096 ? 512 : cols >= 1024 ? 256 : cols >= 128 ? 128 : 32;
}

inline unsigned row_grid(size_t rows)
{
    size_t cap = (size_t)sm_count() * 64;
    return (unsigned)(rows < cap ? rows : cap);
}

// ---- math on the compute type ----
__device__ inline float c_exp(float v) { return expf(v); }
__device__ inline double c_exp(double v) { return exp(v); }
__device__ inline float c_log(float v) { return logf(v); }
__device__ inline double c_log(double v) { return log(v); }
__device__ inline float c_sqrt(float v) { return sqrtf(v); }
__device__ inline double c_sqrt(double v) { return sqrt(v); }
__device__ inline float c_erf(float v) { return erff(v); }
__device__ inline double c_erf(double v) { return erf(v); }
__device__ inline float c_tanh(float v) { return tanhf(v); }
__device__ inline double c_tanh(double v) { return tanh(v); }
__device__ inline float c_abs(float v) { return fabsf(v); }
__device__ inline double c_abs(double v) { return fabs(v); }

template <typename C> __device__ inline C gelu_erf(C v) { return (C)0.5 * v * ((C)1 + c_erf(v * (C)0.70710678118654752440)); }
template <typename C> __device__ inline C gelu_tanh(C v)
{
    return (C)0.5 * v * ((C)1 + c_tanh((C)0.79788456080286535588 * (v + (C)0.044715 * v * v * v)));
}


// ---- reductions: combine, identity, warp and block ----

template <int OP, typename A> __device__ inline A rcombine(A a, A b)
{
    switch (OP) {
    case R_MAX: return a != a ? a : b != b ? b : a > b ? a : b;
    case R_MIN: return a != a ? a : b != b ? b : a < b ? a : b;
    default: return a + b;
    }
}

template <int OP, typename A> __device__ inline A rinit()
{
    return OP == R_MAX ? (A)-INFINITY : OP == R_MIN ? (A)INFINITY : (A)0;
}

template <int OP, typename A> __device__ inline A rmap(A v) { return OP == R_NORM2 ? v * v : v; }

template <int OP, typename A> __device__ inline A warp_reduce(A v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = rcombine<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide reduce; the result is valid in every thread.
template <int OP, typename A> __device__ A block_reduce(A v)
{
    __shared__ A sh[32];
    v = warp_reduce<OP>(v);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads(); // sh may still be read by a previous call
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : rinit<OP, A>();
    return warp_reduce<OP>(v);
}

} // namespace

#define KEEL_DT_SWITCH(dt, F, ...)                        \
    switch (dt) {                                         \
    case DT_F32: return F<float>(__VA_ARGS__);            \
    case DT_F64: return F<double>(__VA_ARGS__);           \
    case DT_F16: return F<f16>(__VA_ARGS__);              \
    default: return F<bf16>(__VA_ARGS__);                 \
    }

#endif /* KEEL_KERNELS_GPU_COMMON_CUH */
