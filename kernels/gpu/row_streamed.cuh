/* SPDX-License-Identifier: MIT */
// Long rows streamed through shared memory (CUDA, sm_80 and up; clusters
// from sm_90), included by row_kernels.cu after row_resident.cuh.
//
// A block (or a thread block cluster, one slice of the row per block) owns
// a row at a time. Each thread copies its packs of the row into its own
// slots of shared memory with asynchronous copies, moves them into
// registers, and at once starts the copies of its packs of the block's next
// row into the same slots: while the block reduces the row, waits for its
// cluster and writes the output, the next row is already on its way. The
// register-resident block kernel instead issues a row's loads only after
// the previous row is written, and with a cluster every block waits for the
// slowest one with nothing in flight. Each thread reads only the slots it
// copied itself, so the copies need no block barrier.
#ifndef KEEL_KERNELS_GPU_ROW_STREAMED_CUH
#define KEEL_KERNELS_GPU_ROW_STREAMED_CUH

#if !defined(KEEL_GPU_HIP)
#include <cuda_pipeline_primitives.h>
#include "kernels/gpu/row_resident.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KEEL_GPU_STREAM_CODE 1
#else
#define KEEL_GPU_STREAM_CODE 0
#endif

namespace {

// AFF (layer norm with gamma or beta): the block's packs of gamma and beta
// follow the slots in shared memory, copied once with the first row's, in
// the same order, and every row's output reads them there instead of
// reading the block's slice of both again from global memory.
template <typename T, bool LN, int PPT, int MINB, bool AFF>
__global__ void __launch_bounds__(ROW_BLOCK_MAX, MINB)
    rows_stream_kernel(const T *__restrict__ x, size_t ldx, const T *__restrict__ gamma, const T *__restrict__ beta,
                       double eps, int lg, T *__restrict__ y, size_t ldy, size_t rows, size_t cols, int cl)
{
#if KEEL_GPU_STREAM_CODE
    typedef typename Num<T>::C C;
    constexpr int N = Pack<T>::N;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Pack<T> *slots = reinterpret_cast<Pack<T> *>(smem_raw); // thread t owns t + i * blockDim.x
    __shared__ RowStat<C> warp_stat[ROW_BLOCK_MAX / 32];
    __shared__ ClusterStats<C> cstats;
    size_t np = cols / N;
    int rank = 0;
#if KEEL_GPU_CLUSTER_CODE
    namespace cg = cooperative_groups;
    if (cl > 1)
        rank = (int)cg::this_cluster().block_rank();
#else
    if (cl > 1)
        return; // the launcher asks for clusters only where the device has them
#endif
    size_t first = (size_t)rank * blockDim.x * PPT + threadIdx.x, step = gridDim.x / cl;
    size_t r = blockIdx.x / cl;
    auto fetch = [&](size_t row) {
        const Pack<T> *xr = reinterpret_cast<const Pack<T> *>(x + row * ldx);
#pragma unroll
        for (int i = 0; i < PPT; i++) {
            size_t p = first + (size_t)i * blockDim.x;
            if (p < np)
                __pipeline_memcpy_async(&slots[threadIdx.x + i * blockDim.x], &xr[p], sizeof(Pack<T>));
        }
        __pipeline_commit();
    };
    if (AFF && r < rows) {
        size_t ns = (size_t)blockDim.x * PPT; // gamma's slots follow x's, then beta's
#pragma unroll
        for (int i = 0; i < PPT; i++) {
            size_t p = first + (size_t)i * blockDim.x, at = threadIdx.x + (size_t)i * blockDim.x;
            if (p < np && gamma)
                __pipeline_memcpy_async(&slots[ns + at], reinterpret_cast<const Pack<T> *>(gamma) + p,
                                        sizeof(Pack<T>));
            if (p < np && beta)
                __pipeline_memcpy_async(&slots[2 * ns + at], reinterpret_cast<const Pack<T> *>(beta) + p,
                                        sizeof(Pack<T>));
        }
    }
    if (r < rows)
        fetch(r); // with AFF, its commit takes gamma's and beta's copies too
    cluster_stats_init(&cstats, cl);
    bool keep = !LN && !lg;
    for (; r < rows; r += step) {
        __pipeline_wait_prior(0);
        C v[PPT][N];
        int cnt = 0;
#pragma unroll
        for (int i = 0; i < PPT; i++) {
            size_t p = first + (size_t)i * blockDim.x;
            pack_in<T, LN>(v[i], slots, threadIdx.x + (size_t)i * blockDim.x, p < np, i, &cnt); // slot i: pack p
        }
        if (r + step < rows)
            fetch(r + step);
        RowStat<C> own = vals_stat<T, LN, PPT, N>(v, cnt, keep);
        RowStat<C> t = row_stat_merge<C, LN>(own, warp_stat, &cstats, cl);
        RowNorm<C> q = row_norm<C, LN>(t, cols, eps, lg);
        C kf = keep && !q.bad ? c_exp(own.a - t.a) * q.scale : (C)0;
        T *yr = y + r * ldy;
        // with AFF, gamma's and beta's packs where the block staged them;
        // derived each row: held across the loop, the two pointers made
        // ptxas spill more in bf16 at four packs a thread (64 registers)
        unsigned ns = blockDim.x * PPT * Pack<T>::N;
        const T *gs = AFF && gamma ? reinterpret_cast<const T *>(smem_raw) + ns : gamma;
        const T *bs = AFF && beta ? reinterpret_cast<const T *>(smem_raw) + 2 * ns : beta;
#pragma unroll
        for (int i = 0; i < PPT; i++)
            if (i < cnt)
                row_out<T, LN>(yr, first + (size_t)i * blockDim.x, v[i], q, lg, gs, bs, keep, kf,
                               (AFF ? threadIdx.x : first) + (size_t)i * blockDim.x);
    }
#if KEEL_GPU_CLUSTER_CODE
    if (cl > 1)
        cg::this_cluster().sync(); // no block exits while another may still read its slots
#endif
#endif
}

// Dynamic shared memory of a streamed block of `threads`: its slots of x,
// and with AFF gamma's and beta's after them.
template <typename T, int PPT, bool AFF> constexpr size_t stream_smem(size_t threads)
{
    return threads * PPT * sizeof(Pack<T>) * (AFF ? 3 : 1);
}

// The streamed kernel for a row of np packs over cl blocks (cluster when cl
// > 1, up to 16: past 8 the device must allow a non-portable size), PPT
// packs a thread, compiled for at least MINB blocks of ROW_BLOCK_MAX threads
// an SM (2: 64 registers a thread; 1: 128); AFF stages gamma and beta
// (three times the shared memory).
template <typename T, bool LN, int PPT, int MINB, bool AFF>
cudaError_t launch_stream(cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx, const T *gm, const T *bt,
                          double eps, int lg, T *y, size_t ldy, int cl)
{
    if (!cluster_size_ok(cl))
        return cudaErrorInvalidValue;
    size_t np = cols / Pack<T>::N;
    size_t per_block = (np + cl - 1) / cl;
    unsigned threads = (unsigned)(((per_block + PPT - 1) / PPT + 31) / 32 * 32);
    if (threads > ROW_BLOCK_MAX)
        return cudaErrorInvalidValue;
    size_t smem = stream_smem<T, PPT, AFF>(threads);
    auto kernel = rows_stream_kernel<T, LN, PPT, MINB, AFF>;
    static bool attr_set[8];
    int dev = 0;
    cudaGetDevice(&dev);
    if (dev < 0 || dev >= 8 || !attr_set[dev]) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)stream_smem<T, PPT, AFF>(ROW_BLOCK_MAX));
        if (e != cudaSuccess)
            return e;
        // clusters past 8 blocks, where the device has them (else refused at launch)
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
            cudaGetLastError();
        if (dev >= 0 && dev < 8)
            attr_set[dev] = true;
    }
    static OccupancyCache occ;
    size_t groups = (size_t)occupancy_groups(kernel, threads, smem, cl, occ);
    if (groups == 0)
        return cudaErrorInvalidConfiguration;
    if (groups > rows)
        groups = rows;
    if (cl == 1)
        return launch<rows_stream_kernel<T, LN, PPT, MINB, AFF>>((unsigned)groups, threads, smem, s, x, ldx, gm, bt,
                                                                 eps, lg, y, ldy, rows, cols, 1);
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    cluster_config(&cfg, attr, (unsigned)(groups * cl), threads, smem, s, cl);
    return cudaLaunchKernelEx(&cfg, kernel, x, ldx, gm, bt, eps, lg, y, ldy, rows, cols, cl);
}

// Whether the device runs asynchronous copies (compute capability 8.0 and
// up).
inline bool async_copy_ok()
{
    return device_attr<cudaDevAttrComputeCapabilityMajor>(0) >= 8;
}

// Whether minb blocks of `bytes` of dynamic shared memory (and the kernel's
// few static bytes) fit an SM of the current device.
inline bool smem_fits(size_t bytes, int minb)
{
    size_t block = (size_t)device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>(0);
    size_t sm = (size_t)device_attr<cudaDevAttrMaxSharedMemoryPerMultiprocessor>(0);
    return bytes <= block && (size_t)minb * (bytes + 2048) <= sm;
}

// launch_stream, staging gamma and beta where aff and MINB blocks of the
// staged slots fit an SM (half-type layer norm only: an f32 row's eight
// packs a thread would lose their second block an SM to the staged copies).
template <typename T, bool LN, int PPT, int MINB>
cudaError_t launch_stream_aff(bool aff, cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx,
                              const T *gm, const T *bt, double eps, int lg, T *y, size_t ldy, int cl)
{
    if constexpr (LN && sizeof(T) < sizeof(float)) {
        if (aff && smem_fits(stream_smem<T, PPT, true>(ROW_BLOCK_MAX), MINB))
            return launch_stream<T, LN, PPT, MINB, true>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, cl);
    }
    return launch_stream<T, LN, PPT, MINB, false>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, cl);
}

// Half types: rows past one block's 2048 packs (16k values) up to a
// cluster of 16 take the streamed kernel, which also keeps each value (or
// exponential) in float so the output pass converts and exponentiates
// nothing again. Up to 4096 packs (32k values) that is one block of eight
// packs a thread at one block an SM instead of a cluster of two at four
// packs and two blocks an SM: the same bytes in flight an SM without a
// cluster's exchange per row (H100, 4096x32768 bf16 layer norm 0.89 ->
// 0.92 of copy, softmax 0.87 -> 0.90). Up to one block's packs the
// register-resident block kernel is the faster one (H100, bf16 softmax at
// 4096 and 16384 columns: 0.98 of copy against 0.85-0.86 streamed). f32 rows past what a cluster
// of 8 holds in registers (131072 values) up to 262144 values take it on a
// cluster of 16, eight packs a thread, instead of the general kernel that
// reads each row twice. Clusters of 16 are a non-portable size: where the
// device refuses one, the other kernels take the row. Measured on an H100
// against the kernels these rows took before, fraction of copy bandwidth
// (docs/performance.md): bf16 softmax 1024x65536 0.83 -> 0.85 and 256 x
// 262144 0.75 -> 0.91 (against reading each row twice in a cluster of 8);
// bf16 layer norm 256x262144 0.56 -> 0.75 and f32 layer norm 0.64 -> 0.87
// (against the general kernel). *done says whether it was launched.
template <typename T, bool LN>
cudaError_t launch_rows_streamed(cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx, const T *gm,
                                 const T *bt, double eps, int lg, T *y, size_t ldy, bool *done)
{
    constexpr bool f32 = sizeof(T) == sizeof(float);
    constexpr int P = f32 ? 8 : 4;
    constexpr size_t per_block = (size_t)ROW_BLOCK_MAX * P;
    *done = false;
    if constexpr (sizeof(T) > sizeof(float)) {
        return cudaSuccess;
    } else {
        size_t np = cols / Pack<T>::N;
        size_t least = f32 ? 8 * per_block : per_block, most = 16 * per_block;
        if (rows == 0 || !row_vec_ok<T>(cols, ldx, ldy, x, y) || (gm && !aligned16(gm)) || (bt && !aligned16(bt)) ||
            np <= least || np > most || !async_copy_ok())
            return cudaSuccess;
        int cl = 1;
        while ((size_t)cl * per_block < np)
            cl *= 2;
        cudaError_t e = cudaSuccess;
        bool wide = false; // one block of twice the packs a thread
        // gamma and beta staged where they fit beside the blocks an SM
        // (H100, bf16 with both: 0.85 of copy at 1024x65536 and at
        // 2048x32768, against 0.79 and 0.82 without the staging)
        bool aff = LN && (gm || bt);
        if constexpr (!f32) {
            wide = cl == 2;
            if (wide)
                e = launch_stream_aff<T, LN, 2 * P, 1>(aff, s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, 1);
        }
        if (!wide) {
            if (cl > 1 && !cluster_launch_ok())
                return cudaSuccess;
            e = launch_stream_aff<T, LN, P, 2>(aff, s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, cl);
        }
        if (e != cudaSuccess) {
            cudaGetLastError(); // cannot be placed: the other kernels instead
            return cudaSuccess;
        }
        *done = true;
        return e;
    }
}

} // namespace

#endif // !KEEL_GPU_HIP
#endif // KEEL_KERNELS_GPU_ROW_STREAMED_CUH
