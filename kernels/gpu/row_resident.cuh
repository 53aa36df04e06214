/* SPDX-License-Identifier: MIT */
// The register-resident row kernels of softmax, log-softmax and layer
// norm, and their launcher (launch_rows_fast), included by row_kernels.cu.
#ifndef KEEL_KERNELS_GPU_ROW_RESIDENT_CUH
#define KEEL_KERNELS_GPU_ROW_RESIDENT_CUH

#include "kernels/gpu/row_merge.cuh"

namespace {

// ======================================================================
// Register-resident rows (16-byte packs only). Each thread loads all of
// its packs of a row before any arithmetic, so a row's bytes are in flight
// at once; the row is then reduced in registers and written once. Three
// shapes, by the row's length in packs (np):
//   np <= 256        a group of G lanes per row (G = 4..32, two packs per
//                    lane up to 64 packs), several rows per warp, no shared
//                    memory or barriers;
//   np <= 512 PPT    one block per row (PPT packs per thread: 32 values of
//                    4- and 2-byte types, 8 of f64, so nothing spills);
//   np <= 4096 PPT   a thread block cluster of up to 8 blocks per row
//                    (sm_90): each block holds a slice, and the blocks merge
//                    their statistics through distributed shared memory.
// Longer rows, unaligned data and devices without clusters take the
// general kernels of row_kernels.cu.
// ======================================================================

// What the output pass needs, from a row's merged statistics.
template <typename C> struct RowNorm {
    C shift, scale, lse;
    bool bad;
};

// Softmax computes only what its output needs (the scale, or for
// log-softmax the log-sum-exp): with few packs per lane, a row's cost is
// shared by few elements.
template <typename C, bool LN> __device__ inline RowNorm<C> row_norm(RowStat<C> t, size_t cols, double eps, int lg)
{
    if (LN) {
        C var = t.c / (C)cols;
        return RowNorm<C>{t.b, (C)1 / c_sqrt(var + (C)eps), (C)0, false};
    }
    bool bad = t.a != t.a || t.a == (C)-INFINITY;
    return lg ? RowNorm<C>{t.a, (C)0, t.a + c_log(t.b), bad} : RowNorm<C>{t.a, (C)1 / t.b, (C)0, bad};
}

template <typename T> __device__ inline Pack<T> load_pack(const T *row, size_t p)
{
    return reinterpret_cast<const Pack<T> *>(row)[p];
}

template <typename T> __device__ inline void store_pack(T *row, size_t p, const Pack<T> &pk)
{
    reinterpret_cast<Pack<T> *>(row)[p] = pk;
}

// y's pack p from the pack's values v (compute type).
// kept: v holds exp(x - m) rather than x, scaled by kf = exp(m - max) / sum.
// Layer norm scales by gamma's pack gp and adds beta's: gp is p, or the
// thread's slot where a kernel staged its packs of gamma and beta.
template <typename T, bool LN>
__device__ inline void row_out(T *yr, size_t p, const typename Num<T>::C (&v)[Pack<T>::N],
                               const RowNorm<typename Num<T>::C> &q, int lg, const T *gamma, const T *beta, bool kept,
                               typename Num<T>::C kf, size_t gp)
{
    typedef typename Num<T>::C C;
    constexpr int N = Pack<T>::N;
    Pack<T> o;
    if (LN) {
        Pack<T> g, b;
        if (gamma)
            g = load_pack(gamma, gp);
        if (beta)
            b = load_pack(beta, gp);
#pragma unroll
        for (int k = 0; k < N; k++) {
            C r = (v[k] - q.shift) * q.scale;
            if (gamma)
                r *= Num<T>::ld(g.v[k]);
            if (beta)
                r += Num<T>::ld(b.v[k]);
            o.v[k] = Num<T>::st(r);
        }
    } else {
#pragma unroll
        for (int k = 0; k < N; k++)
            o.v[k] = Num<T>::st(q.bad ? (C)NAN : lg ? v[k] - q.lse : kept ? v[k] * kf : row_exp_shift<T>(v[k], q.shift) * q.scale);
    }
    store_pack(yr, p, o);
}

// Rows of at most G * PPT packs: G lanes per row, GROUP_THREADS per block.
// A row's statistics take two exact passes over its registers, each ended
// by one butterfly over the group: max, then the sum of exponentials
// (softmax); the sum, then squared deviations from the mean (layer norm).
// A butterfly step combines the same two numbers in both lanes, so every
// lane of the group ends with the same result, bit for bit. This costs one
// shuffle per step, where merging (max, sum) or Welford triples costs three
// and an exponential or a division: with one pack per lane, the merges made
// softmax over 128 f32 columns compute-bound (0.56x torch).
constexpr int GROUP_THREADS = 128;

// The largest of a thread's values v[i][*] for the packs i where has(i):
// by the fast maximum, then NaN where that leaves -inf but a NaN was there
// (all -inf, NaN or none).
template <typename C, int PPT, int N, typename Has>
__device__ inline C values_max(const C (&v)[PPT][N], Has has)
{
    C m = (C)-INFINITY;
#pragma unroll
    for (int i = 0; i < PPT; i++)
        if (has(i))
#pragma unroll
            for (int k = 0; k < N; k++)
                m = c_fmax(m, v[i][k]);
    if (m == (C)-INFINITY)
#pragma unroll
        for (int i = 0; i < PPT; i++)
            if (has(i))
#pragma unroll
                for (int k = 0; k < N; k++)
                    if (v[i][k] != v[i][k])
                        m = (C)NAN;
    return m;
}

template <typename T, bool LN, int G, int PPT>
__global__ void __launch_bounds__(GROUP_THREADS)
    rows_group_kernel(const T *__restrict__ x, size_t ldx, const T *__restrict__ gamma, const T *__restrict__ beta,
                      double eps, int lg, T *__restrict__ y, size_t ldy, size_t rows, size_t cols)
{
    typedef typename Num<T>::C C;
    constexpr int N = Pack<T>::N;
    constexpr int RW = 32 / G; // rows per warp
    size_t np = cols / N;
    int lane = threadIdx.x & 31, li = lane % G;
    size_t warp = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    // The trip count is the same for the whole warp, so every lane takes
    // part in every shuffle; lanes past the last row load nothing.
    for (size_t base = warp * RW; base < rows; base += warps * RW) {
        size_t r = base + lane / G;
        bool live = r < rows;
        const T *xr = x + (live ? r : 0) * ldx;
        C v[PPT][N];
        bool has[PPT];
#pragma unroll
        for (int i = 0; i < PPT; i++) {
            size_t p = li + (size_t)i * G;
            has[i] = live && p < np;
            if (has[i]) {
                Pack<T> pk = load_pack(xr, p);
#pragma unroll
                for (int k = 0; k < N; k++)
                    v[i][k] = Num<T>::ld(pk.v[k]);
            }
        }
        C a = 0, b = 0; // softmax: max and sum of exponentials; layer norm: mean and sum of squared deviations
        if (LN) {
            C s = 0;
#pragma unroll
            for (int i = 0; i < PPT; i++)
                if (has[i])
#pragma unroll
                    for (int k = 0; k < N; k++)
                        s += v[i][k];
            a = group_sum<C, G>(s) / (C)cols;
            C q = 0;
#pragma unroll
            for (int i = 0; i < PPT; i++)
                if (has[i])
#pragma unroll
                    for (int k = 0; k < N; k++) {
                        C d = v[i][k] - a;
                        q += d * d;
                    }
            b = group_sum<C, G>(q);
        } else {
            a = group_max<C, G>(values_max<C, PPT, N>(v, [&](int i) { return has[i]; }));
            bool none = a == (C)-INFINITY; // every value -inf: no exponential to take
            C s = 0;
#pragma unroll
            for (int i = 0; i < PPT; i++)
                if (has[i])
#pragma unroll
                    for (int k = 0; k < N; k++) {
                        C e = none ? (C)0 : row_exp_shift<T>(v[i][k], a);
                        s += e;
                        if (!lg)
                            v[i][k] = e;
                    }
            b = group_sum<C, G>(s);
        }
        if (!live)
            continue;
        // layer norm's statistics as row_norm takes them: (count, mean, sum of squared deviations)
        RowNorm<C> q = row_norm<C, LN>(LN ? RowStat<C>{(C)cols, a, b} : RowStat<C>{a, b, (C)0}, cols, eps, lg);
        T *yr = y + r * ldy;
#pragma unroll
        for (int i = 0; i < PPT; i++)
            if (has[i])
                row_out<T, LN>(yr, li + (size_t)i * G, v[i], q, lg, gamma, beta, !LN && !lg, q.scale,
                               li + (size_t)i * G);
    }
}

// Pack src[i], the thread's pack number at, into its values v (compute
// type) where h, and *cnt becomes at + 1; else (softmax) -inf, the pad of a
// pack past the row's end: it raises no max, and its exponential is 0.
// Softmax then needs no branch per pack: with a branch around each pack's
// exponential, softmax over 65536 f32 columns ran at 0.75 of copy
// bandwidth, 0.80 without. Layer norm keeps them (vals_stat).
template <typename T, bool LN>
__device__ inline void pack_in(typename Num<T>::C (&v)[Pack<T>::N], const Pack<T> *src, size_t i, bool h, int at,
                               int *cnt)
{
    typedef typename Num<T>::C C;
    // For softmax both branches set every value: a pack left undefined
    // where !h let the compiler give every load the same registers, which
    // serialized them.
    if (h) {
        Pack<T> pk = src[i];
#pragma unroll
        for (int k = 0; k < Pack<T>::N; k++)
            v[k] = Num<T>::ld(pk.v[k]);
        *cnt = at + 1;
    } else if (!LN) {
#pragma unroll
        for (int k = 0; k < Pack<T>::N; k++)
            v[k] = (C)-INFINITY;
    }
}

// The statistics of a thread's values v (compute type; packs cnt and up
// are pads), exactly: two passes (max then sum of exponentials; mean then
// squared deviations). keep: v becomes exp(x - m) of the thread's own max
// m, for the output pass.
template <typename T, bool LN, int PPT, int N>
__device__ inline RowStat<typename Num<T>::C> vals_stat(typename Num<T>::C (&v)[PPT][N], int cnt, bool keep)
{
    typedef typename Num<T>::C C;
    if (LN) {
        // A branch per pack (pack_in): without them layer norm ran slower
        // (f32 4096 x 16384: 0.96 -> 0.91 of copy bandwidth).
        if (cnt == 0)
            return stat_identity<C, LN>();
        // Four partial sums each: four chains of dependent additions
        // instead of one as long as the thread's values.
        C s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
#pragma unroll
        for (int i = 0; i < PPT; i++)
            if (i < cnt)
#pragma unroll
                for (int k = 0; k < N; k++)
                    s[k & 3] += v[i][k];
        C n = (C)(cnt * N), mean = ((s[0] + s[1]) + (s[2] + s[3])) / n;
#pragma unroll
        for (int i = 0; i < PPT; i++)
            if (i < cnt)
#pragma unroll
                for (int k = 0; k < N; k++) {
                    C d = v[i][k] - mean;
                    q[k & 3] += d * d;
                }
        return RowStat<C>{n, mean, (q[0] + q[1]) + (q[2] + q[3])};
    }
    // Pads are -inf: they raise no max, and exp(-inf - m) is 0.
    C m = values_max<C, PPT, N>(v, [](int) { return true; });
    C sh = m == (C)-INFINITY ? (C)0 : m; // every value -inf (or none): exponentials of 0
    C s = 0;
#pragma unroll
    for (int i = 0; i < PPT; i++)
#pragma unroll
        for (int k = 0; k < N; k++) {
            C e = row_exp_shift<T>(v[i][k], sh);
            s += e;
            if (keep)
                v[i][k] = e;
        }
    return RowStat<C>{m, s, (C)0};
}

// One block per row, or with a cluster launch of CL blocks, one cluster per
// row (block rank b holds packs [b * blockDim.x * PPT, (b + 1) * ...)).
constexpr int ROW_BLOCK_MAX = 512;

template <typename T> struct BigPPT {
    static constexpr int value = sizeof(T) == 4 ? 8 : 4;
};

template <typename T, bool LN, int PPT>
__global__ void __launch_bounds__(ROW_BLOCK_MAX, 2)
    rows_block_kernel(const T *__restrict__ x, size_t ldx, const T *__restrict__ gamma, const T *__restrict__ beta,
                      double eps, int lg, T *__restrict__ y, size_t ldy, size_t rows, size_t cols, int cl)
{
    typedef typename Num<T>::C C;
    __shared__ RowStat<C> warp_stat[ROW_BLOCK_MAX / 32];
    constexpr bool BAR = LN && PPT == 8; // f32 layer norm: row_stat_merge_bar
    __shared__ ClusterStats<C> cstats;
    __shared__ RowStat<C> block_stat[2];
    size_t np = cols / Pack<T>::N;
    int rank = 0, par = 0;
#if KEEL_GPU_CLUSTER_CODE
    namespace cg = cooperative_groups;
    if (cl > 1)
        rank = (int)cg::this_cluster().block_rank();
#else
    if (cl > 1)
        return; // the launcher only asks for clusters where the device has them
#endif
    size_t first = (size_t)rank * blockDim.x * PPT + threadIdx.x;
    if (!BAR)
        cluster_stats_init(&cstats, cl);
    for (size_t r = blockIdx.x / cl; r < rows; r += gridDim.x / cl) {
        const T *xr = x + r * ldx;
        // Each value converted once (half types), exponentials kept in the
        // compute type: the output pass converts and exponentiates nothing
        // again (bf16 layer norm was bound by the integer pipe's
        // conversions, three per value).
        constexpr int N = Pack<T>::N;
        C v[PPT][N];
        int cnt = 0;
#pragma unroll
        for (int i = 0; i < PPT; i++) {
            size_t p = first + (size_t)i * blockDim.x;
            pack_in<T, LN>(v[i], reinterpret_cast<const Pack<T> *>(xr), p, p < np, i, &cnt);
        }
        bool keep = !LN && !lg;
        RowStat<C> own = vals_stat<T, LN, PPT, N>(v, cnt, keep);
        RowStat<C> t = BAR ? row_stat_merge_bar<C>(own, warp_stat, block_stat, par, cl)
                           : row_stat_merge<C, LN>(own, warp_stat, &cstats, cl);
        RowNorm<C> q = row_norm<C, LN>(t, cols, eps, lg);
        C kf = keep && !q.bad ? c_exp(own.a - t.a) * q.scale : (C)0;
        T *yr = y + r * ldy;
#pragma unroll
        for (int i = 0; i < PPT; i++)
            if (i < cnt)
                row_out<T, LN>(yr, first + (size_t)i * blockDim.x, v[i], q, lg, gamma, beta, keep, kf,
                               first + (size_t)i * blockDim.x);
    }
#if KEEL_GPU_CLUSTER_CODE
    if (cl > 1)
        cg::this_cluster().sync(); // no block exits while another may still read its slots
#endif
}

// Whether the device launches thread block clusters (cached per device).
bool cluster_launch_ok()
{
#ifdef KEEL_GPU_HIP
    return false; // no thread block clusters in HIP
#else
    return device_attr<cudaDevAttrClusterLaunch>(0) != 0;
#endif
}

#ifndef KEEL_GPU_HIP
// A launch of grid blocks in clusters of cl (attr: its one attribute).
inline void cluster_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, unsigned grid, unsigned threads,
                           size_t smem, cudaStream_t s, int cl)
{
    *cfg = cudaLaunchConfig_t{};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg->gridDim = dim3(grid);
    cfg->blockDim = dim3(threads);
    cfg->dynamicSmemBytes = smem;
    cfg->stream = s;
    cfg->attrs = attr;
    cfg->numAttrs = 1;
}
#endif

// Blocks (or clusters) of this kernel, block size, shared memory and
// cluster size that fit on the device at once: the grid is one wave, each
// block looping over rows. cache: the caller's, one per kernel.
typedef int OccupancyCache[8][17][17];

template <typename K> int occupancy_groups(K kernel, unsigned threads, size_t smem, int cl, OccupancyCache &cached)
{
#ifdef KEEL_GPU_HIP
    (void)kernel, (void)threads, (void)smem, (void)cl, (void)cached;
    return 0; // asked only for clusters, which HIP has not
#else
    int dev = 0;
    cudaGetDevice(&dev);
    int ti = (int)(threads / 32);
    bool cache = dev >= 0 && dev < 8 && ti <= 16 && cl <= 16;
    if (cache && cached[dev][ti][cl] != 0)
        return cached[dev][ti][cl];
    int n = 0;
    if (cl == 1) {
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, (int)threads, smem) == cudaSuccess)
            n = per_sm * sm_count();
    } else {
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute attr[1];
        cluster_config(&cfg, attr, (unsigned)cl * 64, threads, smem, 0, cl);
        if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess)
            n = 0;
    }
    cudaGetLastError();
    if (n <= 0)
        return 0;
    if (cache)
        cached[dev][ti][cl] = n;
    return n;
#endif
}

template <typename T, bool LN, int G, int PPT>
cudaError_t launch_group(cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx, const T *gm,
                         const T *bt, double eps, int lg, T *y, size_t ldy)
{
    // A block per 4 warps of rows, however many that is: a capped grid
    // looping over rows measured 2.5 % slower (softmax 524288 x 128 f32),
    // and 256-thread blocks 0.5 to 1 % slower than 128 (128 to 512 columns).
    constexpr int wpb = GROUP_THREADS / 32;
    size_t warps = (rows + (32 / G) - 1) / (32 / G), blocks = (warps + wpb - 1) / wpb;
    unsigned g = (unsigned)(blocks < 0x7fffffffu ? blocks : 0x7fffffffu);
    return launch<rows_group_kernel<T, LN, G, PPT>>(g, GROUP_THREADS, 0, s, x, ldx, gm, bt, eps, lg, y, ldy, rows,
                                                    cols);
}

template <typename T, bool LN, int PPT>
cudaError_t launch_block(cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx, const T *gm,
                         const T *bt, double eps, int lg, T *y, size_t ldy, int cl)
{
    if (!cluster_size_ok(cl))
        return cudaErrorInvalidValue;
    size_t np = cols / Pack<T>::N;
    size_t per_block = (np + cl - 1) / cl;
    unsigned threads = (unsigned)(((per_block + PPT - 1) / PPT + 31) / 32 * 32);
    if (threads > ROW_BLOCK_MAX)
        threads = ROW_BLOCK_MAX;
    // Clusters: exactly the ones that fit at once (a second wave of
    // clusters measured 2-4 % slower at 64k and 128k f32 columns).
    static OccupancyCache occ;
    size_t cap = cl > 1 ? (size_t)occupancy_groups(rows_block_kernel<T, LN, PPT>, threads, 0, cl, occ)
                        : (size_t)sm_count() * 64;
    if (cap == 0)
        cap = (size_t)sm_count() * 8 / cl + 1;
    size_t groups = rows < cap ? rows : cap;
    if (cl == 1)
        return launch<rows_block_kernel<T, LN, PPT>>((unsigned)groups, threads, 0, s, x, ldx, gm, bt, eps, lg, y, ldy,
                                                     rows, cols, 1);
#ifdef KEEL_GPU_HIP
    return hipErrorNotSupported; // never asked: cluster_launch_ok() is false on HIP
#else
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    cluster_config(&cfg, attr, (unsigned)(groups * cl), threads, 0, s, cl);
    return cudaLaunchKernelEx(&cfg, rows_block_kernel<T, LN, PPT>, x, ldx, gm, bt, eps, lg, y, ldy, rows, cols, cl);
#endif
}

// The register-resident kernels, when they take this row: *done says
// whether one was launched (the error is the launch's).
template <typename T, bool LN>
cudaError_t launch_rows_fast(cudaStream_t s, size_t rows, size_t cols, const T *x, size_t ldx, const T *gm,
                             const T *bt, double eps, int lg, T *y, size_t ldy, bool *done)
{
    constexpr size_t N = Pack<T>::N;
    *done = false;
    if (rows == 0 || cols == 0 || !row_vec_ok<T>(cols, ldx, ldy, x, y) || (gm && !aligned16(gm)) ||
        (bt && !aligned16(bt)))
        return cudaSuccess;
    size_t np = cols / N;
    cudaError_t e;
    if (np <= 256) {
        // Two packs per lane, with as many lanes per row as that takes (up
        // to a warp), then more packs per lane. Measured on softmax and
        // layer norm over 128 to 1024 columns, f32 and bf16: two packs per
        // lane beat one (the row's reductions then cost too much per
        // element: 0.90x torch at 128 f32 columns) and four (0.98x).
        *done = true;
        if (np <= 8)
            return launch_group<T, LN, 4, 2>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy);
        if (np <= 16)
            return launch_group<T, LN, 8, 2>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy);
        if (np <= 32)
            return launch_group<T, LN, 16, 2>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy);
        if (np <= 64)
            return launch_group<T, LN, 32, 2>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy);
        if (np <= 128)
            return launch_group<T, LN, 32, 4>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy);
        return launch_group<T, LN, 32, 8>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy);
    }
    constexpr int P = BigPPT<T>::value;
    constexpr size_t per_block = (size_t)ROW_BLOCK_MAX * P;
    if (np <= per_block) {
        *done = true;
        if (np >= 2048)
            return launch_block<T, LN, P>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, 1);
        return launch_block<T, LN, 4>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, 1);
    }
    if (np <= 8 * per_block && cluster_launch_ok()) {
        int cl = np <= 2 * per_block ? 2 : np <= 4 * per_block ? 4 : 8;
        e = launch_block<T, LN, P>(s, rows, cols, x, ldx, gm, bt, eps, lg, y, ldy, cl);
        if (e == cudaSuccess) {
            *done = true;
            return e;
        }
        cudaGetLastError(); // a cluster this size cannot be placed: the general kernels instead
    }
    return cudaSuccess;
}

} // namespace

#endif // KEEL_KERNELS_GPU_ROW_RESIDENT_CUH
