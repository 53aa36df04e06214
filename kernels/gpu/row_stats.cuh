/* SPDX-License-Identifier: MIT */
// Row statistics shared by the row kernels (row_kernels.cu, the general
// kernels; row_resident.cuh, the register-resident ones): softmax's online
// (max, sum of exponentials) pairs and layer norm's Welford triples with
// their merges, the softmax exponential by storage type, and whether a
// row array can be walked in 16-byte packs.
#ifndef KEEL_KERNELS_GPU_ROW_STATS_CUH
#define KEEL_KERNELS_GPU_ROW_STATS_CUH

#include "kernels/gpu/gpu_common.cuh"

namespace {

// Online (max, sum of exp(x - max)) pairs, merged by rescaling.
template <typename C> struct MS {
    C m, s;
};

template <typename C> __device__ inline MS<C> ms_merge(MS<C> a, MS<C> b)
{
    if (a.m != a.m || b.m != b.m)
        return MS<C>{(C)NAN, (C)NAN};
    C m = a.m > b.m ? a.m : b.m;
    if (m == (C)-INFINITY)
        return MS<C>{m, (C)0};
    return MS<C>{m, a.s * c_exp(a.m - m) + b.s * c_exp(b.m - m)};
}

// exp(v) for a softmax of storage type T. Half-precision results keep 8
// (bf16) or 11 (f16) bits, so their exponentials take the hardware's fast
// exponential (a few float ulps); f32 and f64 keep the accurate one.
// Measured on bf16 rows of 128 columns, where the exponential dominates.
template <typename T> __device__ inline typename Num<T>::C row_exp(typename Num<T>::C v)
{
    if (sizeof(T) < sizeof(float))
        return __expf(v);
    return c_exp(v);
}

// Welford triples (count, mean, sum of squared deviations), merged by
// Chan's formula.
template <typename C> struct WF {
    C n, mean, m2;
};

template <typename C> __device__ inline WF<C> wf_merge(WF<C> a, WF<C> b)
{
    C n = a.n + b.n;
    if (n == (C)0)
        return a;
    C d = b.mean - a.mean, f = b.n / n;
    return WF<C>{n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

template <typename T> bool row_vec_ok(size_t cols, size_t ldx, size_t ldy, const void *x, const void *y)
{
    constexpr size_t N = Pack<T>::N;
    return cols % N == 0 && ldx % N == 0 && ldy % N == 0 && aligned16(x) && aligned16(y);
}

} // namespace

#endif // KEEL_KERNELS_GPU_ROW_STATS_CUH
