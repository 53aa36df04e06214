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

// exp(x - m) for a softmax of storage type T. Half types: 2^(x log2 e -
// m log2 e), one fused multiply-add and the hardware's base-2 exponential
// (m log2 e is the same for a whole row); the others exp of the difference.
// x = -inf gives 0 for any m below +inf; m = -inf is left to the callers.
template <typename T> __device__ inline typename Num<T>::C row_exp_shift(typename Num<T>::C x, typename Num<T>::C m)
{
#if !defined(KEEL_GPU_HIP)
    if (sizeof(T) < sizeof(float)) {
        const float l2e = 1.4426950408889634f;
        float t = fmaf((float)x, l2e, -(float)m * l2e), r;
        asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
        return r;
    }
#endif
    return row_exp<T>(x - m);
}

// The larger of a and b by the fast maximum, which passes NaN over. The
// softmax kernels take a thread's max with it and look for NaN only where
// that max is -inf: any other NaN reaches the row's sum through its
// exponential.
template <typename C> __device__ inline C c_fmax(C a, C b) { return fmax(a, b); }
template <> __device__ inline float c_fmax<float>(float a, float b) { return fmaxf(a, b); }

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
