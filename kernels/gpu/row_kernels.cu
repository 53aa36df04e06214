/* SPDX-License-Identifier: MIT */
// Row operations of the built-in operations: softmax, log-softmax and
// layer norm along the rows of a 2-D array. Aligned long rows of half
// types, and f32 rows past what a cluster of 8 holds in registers, take the
// streamed kernels (row_streamed.cuh, CUDA), other aligned rows of up to
// 32768 packs the register-resident kernels (launch_rows_fast); the rest
// the general kernels, which keep a row in shared memory when it fits.
#include "kernels/gpu/gpu_common.cuh"
#include "kernels/gpu/row_stats.cuh"
#include "kernels/gpu/row_resident.cuh"
#include "kernels/gpu/row_streamed.cuh"

namespace {

// ---- softmax ----
// Uncached rows: online (max, sum) pairs per thread (row_stats.cuh), merged
// across the block.
template <typename C> __device__ MS<C> block_ms(MS<C> v)
{
    __shared__ C shm[32], shs[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MS<C> w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
        v = ms_merge(v, w);
    }
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) {
        shm[wi] = v.m;
        shs[wi] = v.s;
    }
    __syncthreads();
    v = lane < nw ? MS<C>{shm[lane], shs[lane]} : MS<C>{(C)-INFINITY, (C)0};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MS<C> w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
        v = ms_merge(v, w);
    }
    return v;
}

// Rows are walked in packs: N elements of T per access (16 bytes) when VEC
// (pointers aligned, cols and leading dimensions multiples of N), else one.
// CP is the matching pack of compute values, the unit of the shared cache.
template <typename T, bool VEC> struct RowPack {
    typedef typename Num<T>::C C;
    static constexpr int N = VEC ? Pack<T>::N : 1;
    struct alignas(sizeof(C) * N >= 16 ? 16 : sizeof(C) * N) CP {
        C v[N];
    };
    __device__ static CP load(const T *row, size_t p)
    {
        CP c;
        if (VEC) {
            Pack<T> pk = reinterpret_cast<const Pack<T> *>(row)[p];
#pragma unroll
            for (int k = 0; k < N; k++)
                c.v[k] = Num<T>::ld(pk.v[k]);
        } else {
            c.v[0] = Num<T>::ld(row[p]);
        }
        return c;
    }
    __device__ static void store(T *row, size_t p, const CP &c)
    {
        if (VEC) {
            Pack<T> pk;
#pragma unroll
            for (int k = 0; k < N; k++)
                pk.v[k] = Num<T>::st(c.v[k]);
            reinterpret_cast<Pack<T> *>(row)[p] = pk;
        } else {
            row[p] = Num<T>::st(c.v[0]);
        }
    }
};

// One block per row (grid-stride over rows). CACHE: the row, in the compute
// type, stays in dynamic shared memory, so global memory is read once and
// written once: max pass, exp pass (in the cache), scale pass. Without the
// cache, one online (max, sum) pass and one write pass.
template <typename T, bool CACHE, bool VEC>
__global__ void __launch_bounds__(1024) softmax_kernel(const T *__restrict__ x, size_t ldx, T *__restrict__ y, size_t ldy, size_t rows,
                               size_t cols, int lg)
{
    typedef RowPack<T, VEC> RP;
    typedef typename Num<T>::C C;
    typedef typename RP::CP CP;
    constexpr int N = RP::N;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    CP *cache = reinterpret_cast<CP *>(smem_raw);
    size_t np = cols / N;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * ldx;
        T *yr = y + r * ldy;
        C m, sum;
        if (CACHE) {
            C mx = (C)-INFINITY;
            bool nan = false;
            for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
                CP c = RP::load(xr, p);
                cache[p] = c;
#pragma unroll
                for (int k = 0; k < N; k++) {
                    mx = c.v[k] > mx ? c.v[k] : mx;
                    nan |= c.v[k] != c.v[k];
                }
            }
            m = block_reduce<R_MAX, C>(nan ? (C)NAN : mx);
            C s = 0;
            for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
                CP c = cache[p];
#pragma unroll
                for (int k = 0; k < N; k++) {
                    C e = c_exp(c.v[k] - m);
                    s += e;
                    c.v[k] = e;
                }
                if (!lg)
                    cache[p] = c;
            }
            sum = block_reduce<R_SUM, C>(s);
        } else {
            MS<C> t{(C)-INFINITY, (C)0};
            for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
                CP c = RP::load(xr, p);
#pragma unroll
                for (int k = 0; k < N; k++) {
                    C v = c.v[k];
                    if (v != v) {
                        t = MS<C>{v, v};
                    } else if (t.m == t.m && v != (C)-INFINITY) {
                        if (v > t.m) {
                            t.s = t.s * c_exp(t.m - v) + (C)1;
                            t.m = v;
                        } else {
                            t.s += c_exp(v - t.m);
                        }
                    }
                }
            }
            t = block_ms(t);
            m = t.m;
            sum = t.s;
        }
        C inv = (C)1 / sum, lse = m + c_log(sum);
        bool bad = m != m || m == (C)-INFINITY;
        for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
            CP c = CACHE ? cache[p] : RP::load(xr, p);
#pragma unroll
            for (int k = 0; k < N; k++) {
                C v = c.v[k];
                c.v[k] = bad ? (C)NAN : lg ? v - lse : CACHE ? v * inv : c_exp(v - m) * inv;
            }
            RP::store(yr, p, c);
        }
        __syncthreads(); // the cache is reused by the next row
    }
}

// Short rows (up to 256 packs): one warp per row, the row in registers, no
// shared memory or block barriers; MAXP packs per lane at most.
template <typename T, int MAXP, bool VEC>
__global__ void __launch_bounds__(256) softmax_warp_kernel(const T *__restrict__ x, size_t ldx, T *__restrict__ y,
                                                           size_t ldy, size_t rows, size_t cols, int lg)
{
    typedef RowPack<T, VEC> RP;
    typedef typename Num<T>::C C;
    typedef typename RP::CP CP;
    constexpr int N = RP::N;
    int lane = threadIdx.x & 31, wpb = blockDim.x >> 5;
    size_t np = cols / N;
    for (size_t r = blockIdx.x * (size_t)wpb + (threadIdx.x >> 5); r < rows; r += (size_t)gridDim.x * wpb) {
        const T *xr = x + r * ldx;
        T *yr = y + r * ldy;
        CP v[MAXP];
        C mx = (C)-INFINITY;
        bool nan = false;
#pragma unroll
        for (int i = 0; i < MAXP; i++) {
            size_t p = lane + (size_t)i * 32;
            if (p < np) {
                v[i] = RP::load(xr, p);
#pragma unroll
                for (int k = 0; k < N; k++) {
                    mx = v[i].v[k] > mx ? v[i].v[k] : mx;
                    nan |= v[i].v[k] != v[i].v[k];
                }
            }
        }
        C m = warp_reduce<R_MAX, C>(nan ? (C)NAN : mx);
        C s = 0;
#pragma unroll
        for (int i = 0; i < MAXP; i++) {
            size_t p = lane + (size_t)i * 32;
            if (p < np) {
#pragma unroll
                for (int k = 0; k < N; k++) {
                    C e = c_exp(v[i].v[k] - m);
                    s += e;
                    if (!lg)
                        v[i].v[k] = e;
                }
            }
        }
        s = warp_reduce<R_SUM, C>(s);
        C inv = (C)1 / s, lse = m + c_log(s);
        bool bad = m != m || m == (C)-INFINITY;
#pragma unroll
        for (int i = 0; i < MAXP; i++) {
            size_t p = lane + (size_t)i * 32;
            if (p < np) {
                CP o;
#pragma unroll
                for (int k = 0; k < N; k++)
                    o.v[k] = bad ? (C)NAN : lg ? v[i].v[k] - lse : v[i].v[k] * inv;
                RP::store(yr, p, o);
            }
        }
    }
}

// ---- layer norm ----
// Cached: mean, then the variance around it from shared memory (two exact
// passes). Uncached: Welford per thread, Chan's merge across threads
// (row_stats.cuh).
template <typename C> __device__ WF<C> block_wf(WF<C> v)
{
    __shared__ C sn[32], sm[32], s2[32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        WF<C> w{__shfl_xor_sync(0xffffffffu, v.n, o), __shfl_xor_sync(0xffffffffu, v.mean, o),
                __shfl_xor_sync(0xffffffffu, v.m2, o)};
        v = wf_merge(v, w);
    }
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) {
        sn[wi] = v.n;
        sm[wi] = v.mean;
        s2[wi] = v.m2;
    }
    __syncthreads();
    v = lane < nw ? WF<C>{sn[lane], sm[lane], s2[lane]} : WF<C>{(C)0, (C)0, (C)0};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        WF<C> w{__shfl_xor_sync(0xffffffffu, v.n, o), __shfl_xor_sync(0xffffffffu, v.mean, o),
                __shfl_xor_sync(0xffffffffu, v.m2, o)};
        v = wf_merge(v, w);
    }
    return v;
}

template <typename T, bool CACHE, bool VEC>
__global__ void __launch_bounds__(1024) layernorm_kernel(const T *__restrict__ x, size_t ldx, const T *__restrict__ gamma,
                                 const T *__restrict__ beta, double eps, T *__restrict__ y, size_t ldy, size_t rows,
                                 size_t cols)
{
    typedef RowPack<T, VEC> RP;
    typedef typename Num<T>::C C;
    typedef typename RP::CP CP;
    constexpr int N = RP::N;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    CP *cache = reinterpret_cast<CP *>(smem_raw);
    size_t np = cols / N;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * ldx;
        T *yr = y + r * ldy;
        C mean, var;
        if (CACHE) {
            C s = 0;
            for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
                CP c = RP::load(xr, p);
                cache[p] = c;
#pragma unroll
                for (int k = 0; k < N; k++)
                    s += c.v[k];
            }
            mean = block_reduce<R_SUM, C>(s) / (C)cols;
            C q = 0;
            for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
                CP c = cache[p];
#pragma unroll
                for (int k = 0; k < N; k++) {
                    C d = c.v[k] - mean;
                    q += d * d;
                }
            }
            var = block_reduce<R_SUM, C>(q) / (C)cols;
        } else {
            WF<C> w{(C)0, (C)0, (C)0};
            for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
                CP c = RP::load(xr, p);
#pragma unroll
                for (int k = 0; k < N; k++) {
                    w.n += (C)1;
                    C d = c.v[k] - w.mean;
                    w.mean += d / w.n;
                    w.m2 += d * (c.v[k] - w.mean);
                }
            }
            w = block_wf(w);
            mean = w.mean;
            var = w.m2 / (C)cols;
        }
        C rstd = (C)1 / c_sqrt(var + (C)eps);
        for (size_t p = threadIdx.x; p < np; p += blockDim.x) {
            CP c = CACHE ? cache[p] : RP::load(xr, p);
            CP g, b;
            if (gamma)
                g = RP::load(gamma, p);
            if (beta)
                b = RP::load(beta, p);
#pragma unroll
            for (int k = 0; k < N; k++) {
                C o = (c.v[k] - mean) * rstd;
                if (gamma)
                    o *= g.v[k];
                if (beta)
                    o += b.v[k];
                c.v[k] = o;
            }
            RP::store(yr, p, c);
        }
        __syncthreads();
    }
}


// Rows up to this many bytes (in the compute type) stay in shared memory:
// past the 48 KiB every device grants, the kernel opts in to more, up to
// what the device allows less room for the static shared arrays, capped so
// two blocks still fit on an SM.
size_t row_cache_limit()
{
    int optin = device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>(0);
    size_t lim = optin > 8 * 1024 ? (size_t)optin - 8 * 1024 : 40 * 1024;
    if (lim > 100 * 1024)
        lim = 100 * 1024;
    if (lim < 40 * 1024)
        lim = 40 * 1024;
    return lim;
}

template <typename K> cudaError_t allow_smem(K kernel, size_t bytes)
{
    if (bytes <= 40 * 1024)
        return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

// Threads for a row of np packs: a few packs per thread in flight.
int row_threads_packs(size_t np)
{
    return np >= 4096 ? 1024 : np >= 1024 ? 512 : np >= 256 ? 256 : np >= 64 ? 128 : 32;
}

template <typename T>
cudaError_t launch_softmax(cudaStream_t s, size_t rows, size_t cols, const void *x, size_t ldx, void *y, size_t ldy,
                           int lg)
{
    typedef typename Num<T>::C C;
    const T *px = (const T *)x;
    T *py = (T *)y;
    bool done;
#ifndef KEEL_GPU_HIP
    cudaError_t streamed =
        launch_rows_streamed<T, false>(s, rows, cols, px, ldx, NULL, NULL, 0.0, lg, py, ldy, &done);
    if (done)
        return streamed;
#endif
    cudaError_t fast = launch_rows_fast<T, false>(s, rows, cols, px, ldx, NULL, NULL, 0.0, lg, py, ldy, &done);
    if (done)
        return fast;
    size_t bytes = cols * sizeof(C);
    bool cache = bytes <= row_cache_limit();
    bool vec = row_vec_ok<T>(cols, ldx, ldy, x, y);
    size_t np = vec ? cols / Pack<T>::N : cols;
    if (!vec && np <= 256) {
        /* a warp per row, 8 rows per block; at most 8 values per lane in
         * registers. Aligned short rows never get here: launch_rows_fast
         * takes every one of them. */
        size_t blocks = (rows + 7) / 8, cap = (size_t)sm_count() * 16;
        unsigned gw = (unsigned)(blocks < cap ? blocks : cap);
#define KEEL_SOFTMAX_WARP(MAXP) launch<softmax_warp_kernel<T, MAXP, false>>(gw, 256, 0, s, px, ldx, py, ldy, rows, cols, lg)
        if (np <= 32)
            return KEEL_SOFTMAX_WARP(1);
        if (np <= 64)
            return KEEL_SOFTMAX_WARP(2);
        if (np <= 128)
            return KEEL_SOFTMAX_WARP(4);
        return KEEL_SOFTMAX_WARP(8);
#undef KEEL_SOFTMAX_WARP
    }
    int threads = row_threads_packs(np);
    unsigned g = row_grid(rows);
    size_t sh = cache ? bytes : 0;
    cudaError_t e = cudaSuccess;
#define KEEL_SOFTMAX(CACHE, VEC)                                                                   \
    do {                                                                                           \
        if (CACHE)                                                                                 \
            e = allow_smem(softmax_kernel<T, CACHE, VEC>, sh);                                     \
        if (e == cudaSuccess)                                                                      \
            e = launch<softmax_kernel<T, CACHE, VEC>>(g, threads, sh, s, px, ldx, py, ldy, rows, cols, lg); \
    } while (0)
    if (cache && vec)
        KEEL_SOFTMAX(true, true);
    else if (cache)
        KEEL_SOFTMAX(true, false);
    else if (vec)
        KEEL_SOFTMAX(false, true);
    else
        KEEL_SOFTMAX(false, false);
#undef KEEL_SOFTMAX
    return e;
}

template <typename T>
cudaError_t launch_layernorm(cudaStream_t s, size_t rows, size_t cols, const void *x, size_t ldx, const void *gm,
                             const void *bt, double eps, void *y, size_t ldy)
{
    typedef typename Num<T>::C C;
    const T *px = (const T *)x, *pg = (const T *)gm, *pb = (const T *)bt;
    T *py = (T *)y;
    bool done;
#ifndef KEEL_GPU_HIP
    cudaError_t streamed = launch_rows_streamed<T, true>(s, rows, cols, px, ldx, pg, pb, eps, 0, py, ldy, &done);
    if (done)
        return streamed;
#endif
    cudaError_t fast = launch_rows_fast<T, true>(s, rows, cols, px, ldx, pg, pb, eps, 0, py, ldy, &done);
    if (done)
        return fast;
    size_t bytes = cols * sizeof(C);
    bool cache = bytes <= row_cache_limit();
    bool vec = row_vec_ok<T>(cols, ldx, ldy, x, y) && (!gm || aligned16(gm)) && (!bt || aligned16(bt));
    size_t np = vec ? cols / Pack<T>::N : cols;
    int threads = row_threads_packs(np);
    unsigned g = row_grid(rows);
    size_t sh = cache ? bytes : 0;
    cudaError_t e = cudaSuccess;
#define KEEL_LAYERNORM(CACHE, VEC)                                                                       \
    do {                                                                                                 \
        if (CACHE)                                                                                       \
            e = allow_smem(layernorm_kernel<T, CACHE, VEC>, sh);                                         \
        if (e == cudaSuccess)                                                                            \
            e = launch<layernorm_kernel<T, CACHE, VEC>>(g, threads, sh, s, px, ldx, pg, pb, eps, py, ldy, rows, cols); \
    } while (0)
    if (cache && vec)
        KEEL_LAYERNORM(true, true);
    else if (cache)
        KEEL_LAYERNORM(true, false);
    else if (vec)
        KEEL_LAYERNORM(false, true);
    else
        KEEL_LAYERNORM(false, false);
#undef KEEL_LAYERNORM
    return e;
}

} // namespace

extern "C" {

cudaError_t keel__gpu_softmax_rows(cudaStream_t s, int dtype, size_t rows, size_t cols, const void *x, size_t ldx,
                                   void *y, size_t ldy, int lg)
{
    KEEL_DT_SWITCH(dtype, launch_softmax, s, rows, cols, x, ldx, y, ldy, lg)
}

cudaError_t keel__gpu_layernorm_rows(cudaStream_t s, int dtype, size_t rows, size_t cols, const void *x, size_t ldx,
                                     const void *gamma, const void *beta, double eps, void *y, size_t ldy)
{
    KEEL_DT_SWITCH(dtype, launch_layernorm, s, rows, cols, x, ldx, gamma, beta, eps, y, ldy)
}

} // extern "C"
