/* SPDX-License-Identifier: MIT */
// Softmax of long half-type rows, each row read twice within a thread block
// cluster (CUDA, sm_90), included by row_kernels.cu after row_resident.cuh.
//
// A cluster of cl blocks owns a row at a time, one slice of it per block.
// Each thread walks its packs of the slice in chunks of REREAD_CHUNK packs:
// the first pass folds each chunk into the thread's running (max, sum of
// exponentials), the cluster merges them through distributed shared memory,
// and the second pass reads the same packs again and writes the output.
// Nothing of the row stays in registers between the passes, so a block
// needs few registers and several blocks share an SM: while one waits for
// its cluster, the others' loads keep memory busy. The second read finds
// the slice in the SM's L1 cache (the first read asks L1 to keep its lines,
// the second to drop them) or in L2.
#ifndef KEEL_KERNELS_GPU_ROW_REREAD_CUH
#define KEEL_KERNELS_GPU_ROW_REREAD_CUH

#if !defined(KEEL_GPU_HIP)
#include "kernels/gpu/row_resident.cuh"

namespace {

constexpr int REREAD_THREADS = 256, REREAD_CHUNK = 4, REREAD_MIN_BLOCKS = 4;
constexpr size_t REREAD_SLICE = 32 * 1024; // bytes of a row per block, up to a cluster of 8

// 16 bytes through L1: KEEP for the first read, whose lines the second
// pass reads again (evict last), else evict first.
template <bool KEEP> __device__ inline uint4 reread_load(const uint4 *p)
{
    uint4 r;
#if KEEL_GPU_CLUSTER_CODE
    if (KEEP)
        asm volatile("ld.global.L1::evict_last.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                     : "l"(p));
    else
        asm volatile("ld.global.L1::evict_first.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                     : "l"(p));
#else
    r = *p;
#endif
    return r;
}

// The chunk of P packs that starts at pack c0 (the thread's first at c0 +
// its index, then every blockDim.x), into v as compute values; packs at
// or past end are pads of -inf, which raise no max and add exp(-inf) = 0.
template <typename T, int P, bool KEEP>
__device__ inline void reread_chunk(const uint4 *xr, size_t c0, size_t end, typename Num<T>::C (&v)[P][Pack<T>::N],
                                    bool (&has)[P])
{
#pragma unroll
    for (int i = 0; i < P; i++) {
        size_t p = c0 + threadIdx.x + (size_t)i * blockDim.x;
        has[i] = p < end;
        if (has[i]) {
            uint4 u = reread_load<KEEP>(xr + p);
            Pack<T> pk;
            memcpy(&pk, &u, sizeof pk);
#pragma unroll
            for (int k = 0; k < Pack<T>::N; k++)
                v[i][k] = Num<T>::ld(pk.v[k]);
        } else {
#pragma unroll
            for (int k = 0; k < Pack<T>::N; k++)
                v[i][k] = (typename Num<T>::C) - INFINITY;
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(REREAD_THREADS, REREAD_MIN_BLOCKS)
    softmax_reread_kernel(const T *__restrict__ x, size_t ldx, int lg, T *__restrict__ y, size_t ldy, size_t rows,
                          size_t cols, int cl)
{
#if KEEL_GPU_CLUSTER_CODE
    typedef typename Num<T>::C C;
    constexpr int N = Pack<T>::N, P = REREAD_CHUNK;
    constexpr size_t CH = (size_t)REREAD_THREADS * P; // packs per chunk
    __shared__ RowStat<C> warp_stat[REREAD_THREADS / 32];
    __shared__ RowStat<C> block_stat[2];
    namespace cg = cooperative_groups;
    int rank = (int)cg::this_cluster().block_rank(), par = 0;
    size_t np = cols / N, per = (np + (size_t)cl * CH - 1) / ((size_t)cl * CH) * CH;
    size_t lo = (size_t)rank * per, hi = lo + per < np ? lo + per : np;
    for (size_t r = blockIdx.x / cl; r < rows; r += gridDim.x / cl) {
        const uint4 *xr = reinterpret_cast<const uint4 *>(x + r * ldx);
        RowStat<C> acc = stat_identity<C, false>();
        for (size_t c0 = lo; c0 < hi; c0 += CH) {
            C v[P][N];
            bool has[P];
            reread_chunk<T, P, true>(xr, c0, hi, v, has);
            // the chunk's (max, sum of exponentials); its pads are -inf
            acc = stat_merge<C, false>(acc, vals_stat<T, false, P, N>(v, P, false));
        }
        RowStat<C> t = row_stat_merge<C, false>(acc, warp_stat, block_stat, par, cl);
        RowNorm<C> q = row_norm<C, false>(t, cols, 0.0, lg);
        T *yr = y + r * ldy;
        for (size_t c0 = lo; c0 < hi; c0 += CH) {
            C v[P][N];
            bool has[P];
            reread_chunk<T, P, false>(xr, c0, hi, v, has);
#pragma unroll
            for (int i = 0; i < P; i++)
                if (has[i])
                    row_out<T, false>(yr, c0 + threadIdx.x + (size_t)i * REREAD_THREADS, v[i], q, lg, NULL, NULL,
                                      false, (C)0);
        }
    }
    cg::this_cluster().sync(); // no block exits while another may still read its slots
#else
    (void)x, (void)ldx, (void)lg, (void)y, (void)ldy, (void)rows, (void)cols, (void)cl;
#endif
}

// Softmax of f16 and bf16 rows of 65536 columns and more, when the device
// launches clusters: *done says whether the kernel was launched (the error
// is the launch's). There it measured faster than the streamed kernel
// (docs/performance.md); f32 rows and layer norm measured slower this way.
template <typename T>
cudaError_t launch_softmax_reread(cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx, int lg, T *y,
                                  size_t ldy, bool *done)
{
    *done = false;
    if constexpr (sizeof(T) == 2) {
        if (rows == 0 || cols < 65536 || !row_vec_ok<T>(cols, ldx, ldy, x, y) || !cluster_launch_ok())
            return cudaSuccess;
        size_t want = (cols * sizeof(T) + REREAD_SLICE - 1) / REREAD_SLICE;
        int cl = want > 8 ? 8 : (int)want;
        // As much of each SM's memory for L1 as the kernel's few shared
        // bytes leave: a preference, set once per device.
        static bool carved[64];
        int dev = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < 64 && !carved[dev]) {
            (void)cudaFuncSetAttribute(softmax_reread_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout, 0);
            carved[dev] = true;
        }
        (void)cudaGetLastError();
        size_t groups = rows < 0x7fffffffu / 8 ? rows : 0x7fffffffu / 8;
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute attr[1];
        cluster_config(&cfg, attr, (unsigned)(groups * cl), REREAD_THREADS, 0, s, cl);
        cudaError_t e = cudaLaunchKernelEx(&cfg, softmax_reread_kernel<T>, x, ldx, lg, y, ldy, rows, cols, cl);
        if (e == cudaSuccess) {
            *done = true;
            return e;
        }
        cudaGetLastError(); // a cluster this size cannot be placed: the other kernels instead
        return cudaSuccess;
    } else {
        (void)s, (void)rows, (void)cols, (void)x, (void)ldx, (void)lg, (void)y, (void)ldy;
        return cudaSuccess; // f32 and f64 rows take the other kernels
    }
}

} // namespace

#endif // !KEEL_GPU_HIP
#endif // KEEL_KERNELS_GPU_ROW_REREAD_CUH
