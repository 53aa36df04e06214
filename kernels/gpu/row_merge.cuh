/* SPDX-License-Identifier: MIT */
// A row's statistics merged across the threads that hold it: a group of
// lanes, a block, and a thread block cluster (its blocks exchange them
// through distributed shared memory). Included by row_resident.cuh.
#ifndef KEEL_KERNELS_GPU_ROW_MERGE_CUH
#define KEEL_KERNELS_GPU_ROW_MERGE_CUH

#ifndef KEEL_GPU_HIP
#include <cooperative_groups.h> // clusters (sm_90); HIP has none and compiles them out
#endif
// Device code for thread block clusters: CUDA's, from sm_90. Not in the HIP
// build, AMD or NVIDIA platform alike: nvcc defines __CUDA_ARCH__ on HIP's
// NVIDIA platform too, but HIP has no cluster launch (cluster_launch_ok).
#if !defined(KEEL_GPU_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KEEL_GPU_CLUSTER_CODE 1
#else
#define KEEL_GPU_CLUSTER_CODE 0
#endif
#include "kernels/gpu/row_stats.cuh"

namespace {

// Statistics of a slice of a row: softmax (m = max, s = sum of exp(x - m))
// or layer norm (n values, their mean, sum of squared deviations m2).
template <typename C> struct RowStat {
    C a, b, c;
};

template <typename C, bool LN> __device__ inline RowStat<C> stat_identity()
{
    return LN ? RowStat<C>{(C)0, (C)0, (C)0} : RowStat<C>{(C)-INFINITY, (C)0, (C)0};
}

template <typename C> __device__ inline C max_nan(C a, C b)
{
    return (b > a || b != b) ? b : a; // NaN sticks
}

template <typename C, int G> __device__ inline C group_sum(C v)
{
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename C, int G> __device__ inline C group_max(C v)
{
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1)
        v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// A group's row statistics from its lanes' (every lane gets them, bit for
// bit: a butterfly step adds the same two numbers in both lanes). Softmax
// takes the group's max first and rescales each lane's sum to it once: one
// exponential per lane, where merging (max, sum) pairs along the butterfly
// costs two per step. Layer norm merges the lanes' (n, mean, m2) at once:
// the group's mean from their sums, then the sum of each lane's m2 and
// n (mean - group mean)^2, which is what merging them in pairs (Chan's
// formula) adds up, without a division at every step. Pairwise merges
// along the butterfly, and the blocks of a cluster merged in turn, cost a
// division each and made layer norm bound by its instructions (H100: bf16
// 256 x 262144 at 0.75 of copy bandwidth, 0.92 merged at once).
template <typename C, bool LN, int G> __device__ inline RowStat<C> group_stat(RowStat<C> v)
{
    if (LN) {
        // group_sum of both, in one butterfly: each step's two shuffles
        // issued together rather than one sum's five after the other's
        C s = v.a * v.b, n = v.a;
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) {
            s += __shfl_xor_sync(0xffffffffu, s, o);
            n += __shfl_xor_sync(0xffffffffu, n, o);
        }
        C mean = n > (C)0 ? s / n : (C)0, d = v.b - mean;
        return RowStat<C>{n, mean, group_sum<C, G>(v.c + v.a * d * d)};
    }
    C m = group_max<C, G>(v.a);
    C s = m != m ? m : m == (C)-INFINITY ? (C)0 : v.b * c_exp(v.a - m);
    return RowStat<C>{m, group_sum<C, G>(s), (C)0};
}

// The blocks of a cluster exchange each row's statistics through these
// slots: block b pushes its pair or triple into slot [parity][b] of every
// block by st.async, which counts its bytes on that block's mbarrier
// full[parity], and each block waits on its own mbarrier. A cluster barrier
// in its place (cluster.sync) made every thread wait for its global stores
// of the previous row first (its release fence), once per row.
constexpr int CLUSTER_MAX = 16;

// Whether a launch over clusters of cl blocks fits the slots (host side).
inline bool cluster_size_ok(int cl)
{
    return cl >= 1 && cl <= CLUSTER_MAX;
}

template <typename C> struct alignas(16) StatSlot {
    C a, b, c, pad;
};

template <typename C> struct ClusterStats {
    StatSlot<C> slot[2][CLUSTER_MAX];
    uint64_t full[2];
    uint32_t rows; // rows merged, this one included
};

#if KEEL_GPU_CLUSTER_CODE
// PTX of the exchange (ISA 8.1, sm_90): shared addresses are 32-bit.
__device__ inline uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

// The address in block `to` of the shared variable at local address a.
__device__ inline uint32_t cluster_addr(uint32_t a, int to)
{
    uint32_t r;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(to));
    return r;
}

// Words into another block's shared memory at dst, counted on its mbarrier
// bar (both cluster addresses).
__device__ inline void push(uint32_t dst, uint32_t bar, uint32_t w0, uint32_t w1)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];"
                 :
                 : "r"(dst), "r"(w0), "r"(w1), "r"(bar)
                 : "memory");
}

__device__ inline void push(uint32_t dst, uint32_t bar, uint32_t w0)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
                 :
                 : "r"(dst), "r"(w0), "r"(bar)
                 : "memory");
}

// This thread's arrival on the mbarrier at bar, which is to receive bytes.
__device__ inline void arrive_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" : : "r"(bar), "r"(bytes) : "memory");
}

// Until the mbarrier at bar has completed the phase of this parity.
__device__ inline void wait_phase(uint32_t bar, uint32_t parity)
{
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

// The bytes a block pushes to each block of its cluster a row: softmax's
// pair or layer norm's triple.
template <typename C, bool LN> __device__ constexpr uint32_t stat_bytes()
{
    return (LN ? 3 : 2) * sizeof(C);
}

// This block's statistics t into slot [k][rank] of block `to`, counted on
// that block's full[k].
template <typename C, bool LN>
__device__ inline void stat_push(ClusterStats<C> *cs, uint32_t k, int rank, int to, RowStat<C> t)
{
    uint32_t base = cluster_addr(smem_addr(cs), to);
    uint32_t dst = base + (uint32_t)((k * CLUSTER_MAX + rank) * sizeof(StatSlot<C>));
    uint32_t bar = base + (uint32_t)(offsetof(ClusterStats<C>, full) + k * sizeof(uint64_t));
    if constexpr (sizeof(C) == 4) {
        push(dst, bar, __float_as_uint(t.a), __float_as_uint(t.b));
        if (LN)
            push(dst + 8, bar, __float_as_uint(t.c));
    } else {
        uint64_t a = (uint64_t)__double_as_longlong(t.a), b = (uint64_t)__double_as_longlong(t.b);
        push(dst, bar, (uint32_t)a, (uint32_t)(a >> 32));
        push(dst + 8, bar, (uint32_t)b, (uint32_t)(b >> 32));
        if (LN) {
            uint64_t c = (uint64_t)__double_as_longlong(t.c);
            push(dst + 16, bar, (uint32_t)c, (uint32_t)(c >> 32));
        }
    }
}
#endif

// Before a kernel's first row: the mbarriers, one arrival a phase, visible
// to the whole cluster.
template <typename C> __device__ inline void cluster_stats_init(ClusterStats<C> *cs, int cl)
{
#if KEEL_GPU_CLUSTER_CODE
    if (cl > 1) {
        if (threadIdx.x == 0) {
            cs->rows = 0;
            for (int k = 0; k < 2; k++)
                asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" : : "r"(smem_addr(&cs->full[k])) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" : : : "memory");
        }
        cooperative_groups::this_cluster().sync();
    }
#else
    (void)cs, (void)cl;
#endif
}

// A row's statistics from the block's threads' (own), merged through
// warp_stat; every thread gets them. Thread 0 counts the row in *rows
// (unless NULL), which the others read only after this merge.
template <typename C, bool LN>
__device__ inline RowStat<C> block_stat_merge(RowStat<C> own, RowStat<C> *warp_stat, uint32_t *rows)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    RowStat<C> t = group_stat<C, LN, 32>(own);
    __syncthreads(); // warp_stat may still be read for the previous row
    if (lane == 0)
        warp_stat[w] = t;
    if (threadIdx.x == 0 && rows)
        (*rows)++;
    __syncthreads();
    return group_stat<C, LN, 32>(lane < nw ? warp_stat[lane] : stat_identity<C, LN>());
}

// A row's statistics from its threads' (own), merged across the block and,
// for a cluster of cl blocks, across the cluster through cs. cs->rows, the
// rows this block has merged, picks the slots' parity and the mbarrier's
// phase. A block pushes into a slot of parity k again two rows later,
// after it has every block's statistics of the row between, which each
// block pushed only after it had read this row's slots. The cl slots are
// merged by group_stat, lane b holding block b's.
template <typename C, bool LN>
__device__ inline RowStat<C> row_stat_merge(RowStat<C> own, RowStat<C> *warp_stat, ClusterStats<C> *cs, int cl)
{
    RowStat<C> t = block_stat_merge<C, LN>(own, warp_stat, cl > 1 ? &cs->rows : NULL); // counted for clusters only
#if KEEL_GPU_CLUSTER_CODE
    if (cl > 1) {
        int lane = threadIdx.x & 31;
        uint32_t row = cs->rows - 1, k = row & 1, phase = (row >> 1) & 1;
        if ((int)threadIdx.x < cl)
            stat_push<C, LN>(cs, k, (int)cooperative_groups::this_cluster().block_rank(), (int)threadIdx.x, t);
        if (threadIdx.x == 0)
            arrive_expect(smem_addr(&cs->full[k]), (uint32_t)cl * stat_bytes<C, LN>());
        wait_phase(smem_addr(&cs->full[k]), phase);
        const StatSlot<C> *sl = cs->slot[k];
        t = lane < cl ? RowStat<C>{sl[lane].a, sl[lane].b, sl[lane].c} : stat_identity<C, LN>();
        t = group_stat<C, LN, 32>(t);
    }
#else
    (void)cl;
#endif
    return t;
}

// Layer norm's merge across a cluster by a cluster barrier instead: each
// block writes its triple into its own block_stat slot (by row parity,
// par), waits for the cluster, and merges all of them (lane b reads block
// b's) as row_stat_merge does. The f32
// register-resident kernel keeps it: it holds 32 values a thread with no
// register to spare, and the exchange above cost it a spill and 1 to 4 %
// (H100, 16384 to 65536 columns).
template <typename C>
__device__ inline RowStat<C> row_stat_merge_bar(RowStat<C> own, RowStat<C> *warp_stat, RowStat<C> *block_stat, int &par,
                                                int cl)
{
    RowStat<C> t = block_stat_merge<C, true>(own, warp_stat, NULL);
#if KEEL_GPU_CLUSTER_CODE
    if (cl > 1) {
        namespace cg = cooperative_groups;
        cg::cluster_group cluster = cg::this_cluster();
        if (threadIdx.x == 0)
            block_stat[par] = t;
        cluster.sync();
        int lane = threadIdx.x & 31;
        t = lane < cl ? *cluster.map_shared_rank(&block_stat[par], lane) : stat_identity<C, true>();
        t = group_stat<C, true, 32>(t);
        par ^= 1;
    }
#else
    (void)block_stat, (void)par, (void)cl;
#endif
    return t;
}

} // namespace

#endif // KEEL_KERNELS_GPU_ROW_MERGE_CUH
