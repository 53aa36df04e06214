/* SPDX-License-Identifier: MIT */
// GPU kernels of the built-in operations (see ops_gpu.h).
//
// Memory-bound kernels: each thread moves 16 bytes per access where the
// pointers and shapes allow it (Pack<T>). The elementwise kernels take one
// pack per thread over a full grid (flat_vec_items below); reductions loop
// grid-stride and combine with warp shuffles, then through shared memory.
// f16 and bf16 compute in f32, f64 in f64. Softmax and layer norm are in
// row_kernels.cu.
#include "kernels/gpu/gpu_common.cuh"

namespace {

template <int OP> struct Unary {
    template <typename C> __device__ C operator()(C v) const
    {
        switch (OP) {
        case U_NEG: return -v;
        case U_ABS: return c_abs(v);
        case U_EXP: return c_exp(v);
        case U_LOG: return c_log(v);
        case U_SQRT: return c_sqrt(v);
        case U_RELU: return v < (C)0 ? (C)0 : v;
        case U_GELU: return gelu_erf(v);
        case U_GELU_TANH: return gelu_tanh(v);
        case U_SILU: return v / ((C)1 + c_exp(-v));
        case U_SIGMOID: return (C)1 / ((C)1 + c_exp(-v));
        default: return c_tanh(v);
        }
    }
};

// The flat elementwise kernels come in two builds. VEC: one 16-byte pack
// per thread over a grid of one thread per pack, no loop (on the H200 a
// scalar tail loop in the same kernel cost 2 % of bandwidth for gelu, a
// grid-stride loop 1 %); the last n % N elements go to as many threads past
// the packs, one element each, in the same launch. Scalar: every element,
// with a grid-stride loop, for unaligned pointers.
//
// The VEC build's threads for n elements in packs of per_pack: one per pack
// and one per element of the tail; 0 where the scalar build takes them
// (unaligned pointers, no whole pack, or more threads than a grid has).
inline size_t flat_vec_items(size_t n, int per_pack, bool aligned)
{
    size_t items = n / per_pack + n % per_pack;
    return aligned && n >= (size_t)per_pack && items <= (size_t)0x7fffffff * THREADS ? items : 0;
}

// The tail element that thread tid of a VEC launch takes, for a thread
// past the n / per_pack pack threads: n when it has none.
__device__ inline size_t flat_tail(size_t tid, size_t n, int per_pack)
{
    size_t t = tid - n / per_pack;
    return t < n % per_pack ? n - n % per_pack + t : n;
}

// Maps x[i] -> y[i].
template <typename T, bool VEC, typename F>
__global__ void __launch_bounds__(THREADS) map_kernel(const T *__restrict__ x, T *__restrict__ y, size_t n, F f)
{
    typedef Num<T> NT;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if constexpr (VEC) {
        constexpr int N = Pack<T>::N;
        if (tid < n / N) {
            Pack<T> p = reinterpret_cast<const Pack<T> *>(x)[tid];
#pragma unroll
            for (int k = 0; k < N; k++)
                p.v[k] = NT::st(f(NT::ld(p.v[k])));
            reinterpret_cast<Pack<T> *>(y)[tid] = p;
        } else if (size_t i = flat_tail(tid, n, N); i < n) {
            y[i] = NT::st(f(NT::ld(x[i])));
        }
    } else {
        for (size_t i = tid; i < n; i += (size_t)gridDim.x * blockDim.x)
            y[i] = NT::st(f(NT::ld(x[i])));
    }
}

template <typename T, typename F> cudaError_t launch_map(cudaStream_t s, const T *x, T *y, size_t n, F f)
{
    size_t v = flat_vec_items(n, Pack<T>::N, aligned16(x) && aligned16(y));
    if (v)
        return launch<map_kernel<T, true, F>>(grid_flat(v), THREADS, 0, s, x, y, n, f);
    return launch<map_kernel<T, false, F>>(grid_flat(n), THREADS, 0, s, x, y, n, f);
}

// ---- fill ----
template <typename T, bool VEC>
__global__ void __launch_bounds__(THREADS) fill_kernel(T *__restrict__ p, size_t n, T v)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if constexpr (VEC) {
        constexpr int N = Pack<T>::N;
        if (tid < n / N) {
            Pack<T> pk;
#pragma unroll
            for (int k = 0; k < N; k++)
                pk.v[k] = v;
            reinterpret_cast<Pack<T> *>(p)[tid] = pk;
        } else if (size_t i = flat_tail(tid, n, N); i < n) {
            p[i] = v;
        }
    } else {
        for (size_t i = tid; i < n; i += (size_t)gridDim.x * blockDim.x)
            p[i] = v;
    }
}

template <typename T> cudaError_t launch_fill(cudaStream_t s, T *p, size_t n, T v)
{
    size_t vi = flat_vec_items(n, Pack<T>::N, aligned16(p));
    if (vi)
        return launch<fill_kernel<T, true>>(grid_flat(vi), THREADS, 0, s, p, n, v);
    return launch<fill_kernel<T, false>>(grid_flat(n), THREADS, 0, s, p, n, v);
}

// ---- cast ----
template <typename D> __device__ inline D cvt_from_double(double v);
template <> __device__ inline float cvt_from_double<float>(double v) { return (float)v; }
template <> __device__ inline double cvt_from_double<double>(double v) { return v; }
template <> __device__ inline f16 cvt_from_double<f16>(double v) { return __double2half(v); }
template <> __device__ inline bf16 cvt_from_double<bf16>(double v) { return __double2bfloat16(v); }

template <typename S> __device__ inline double to_double(S v) { return (double)Num<S>::ld(v); }

template <typename S, typename D> __device__ inline D cvt(S v)
{
    // Through double when either side is f64 (one rounding); through float
    // otherwise (f16/bf16/f32 widen to f32 exactly).
    if (sizeof(S) == 8 || sizeof(D) == 8)
        return cvt_from_double<D>(to_double(v));
    return Num<D>::st(Num<S>::ld(v));
}

// Groups of 8 elements: 16-byte accesses on the narrow side, two or four on
// the wide side.
template <typename T> struct alignas(16) Group8 {
    T v[8];
};

template <typename S, typename D, bool VEC>
__global__ void __launch_bounds__(THREADS) cast_kernel(const S *__restrict__ src, D *__restrict__ dst, size_t n)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if constexpr (VEC) {
        if (tid < n / 8) {
            Group8<S> g = reinterpret_cast<const Group8<S> *>(src)[tid];
            Group8<D> o;
#pragma unroll
            for (int k = 0; k < 8; k++)
                o.v[k] = cvt<S, D>(g.v[k]);
            reinterpret_cast<Group8<D> *>(dst)[tid] = o;
        } else if (size_t i = flat_tail(tid, n, 8); i < n) {
            dst[i] = cvt<S, D>(src[i]);
        }
    } else {
        for (size_t i = tid; i < n; i += (size_t)gridDim.x * blockDim.x)
            dst[i] = cvt<S, D>(src[i]);
    }
}

template <typename S, typename D> cudaError_t launch_cast_pair(cudaStream_t s, const S *src, D *dst, size_t n)
{
    size_t v = flat_vec_items(n, 8, aligned16(src) && aligned16(dst));
    if (v)
        return launch<cast_kernel<S, D, true>>(grid_flat(v), THREADS, 0, s, src, dst, n);
    return launch<cast_kernel<S, D, false>>(grid_flat(n), THREADS, 0, s, src, dst, n);
}

template <typename S> cudaError_t launch_cast_to(cudaStream_t s, const S *src, int ddt, void *dst, size_t n)
{
    switch (ddt) {
    case DT_F32: return launch_cast_pair<S, float>(s, src, (float *)dst, n);
    case DT_F64: return launch_cast_pair<S, double>(s, src, (double *)dst, n);
    case DT_F16: return launch_cast_pair<S, f16>(s, src, (f16 *)dst, n);
    default: return launch_cast_pair<S, bf16>(s, src, (bf16 *)dst, n);
    }
}

// ---- transpose: 32 x 32 tiles through shared memory ----
template <typename T>
__global__ void transpose_kernel(const T *__restrict__ src, size_t lds, T *__restrict__ dst, size_t ldd, size_t rows,
                                 size_t cols)
{
    __shared__ T tile[32][33];
    for (size_t by = blockIdx.y; by * 32 < rows; by += gridDim.y)
        for (size_t bx = blockIdx.x; bx * 32 < cols; bx += gridDim.x) {
            size_t c = bx * 32 + threadIdx.x;
            for (int k = threadIdx.y; k < 32; k += 8) {
                size_t r = by * 32 + k;
                if (r < rows && c < cols)
                    tile[k][threadIdx.x] = src[r * lds + c];
            }
            __syncthreads();
            size_t r2 = by * 32 + threadIdx.x; // a column of dst is a row of src
            for (int k = threadIdx.y; k < 32; k += 8) {
                size_t c2 = bx * 32 + k;
                if (r2 < rows && c2 < cols)
                    dst[c2 * ldd + r2] = tile[threadIdx.x][k];
            }
            __syncthreads();
        }
}

// ---- binary ----
template <int OP, typename C> __device__ inline C binop(C u, C v)
{
    switch (OP) {
    case B_ADD: return u + v;
    case B_SUB: return u - v;
    case B_MUL: return u * v;
    case B_DIV: return u / v;
    case B_MAX: return u != u ? u : v != v ? v : u > v ? u : v;
    default: return u != u ? u : v != v ? v : u < v ? u : v;
    }
}

// Flat contiguous y = op(alpha a, beta b) (MODE 0), or b a row vector of
// `cols` repeated (MODE 1, flat index modulo cols), or a column vector
// (MODE 2, flat index / cols).
template <typename T, int OP, int MODE, bool VEC>
__global__ void __launch_bounds__(THREADS) binary_flat_kernel(const T *__restrict__ a, const T *__restrict__ b,
                                                              T *__restrict__ y, size_t n, size_t cols,
                                                              typename Num<T>::C alpha, typename Num<T>::C beta)
{
    typedef Num<T> NT;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    bool narrow = n <= 0xffffffffu;
    if constexpr (VEC) {
        constexpr int N = Pack<T>::N;
        size_t cp = cols / N; // cols % N == 0 when b is broadcast
        if (tid < n / N) {
            Pack<T> pa = reinterpret_cast<const Pack<T> *>(a)[tid], pb;
            if (MODE == 0)
                pb = reinterpret_cast<const Pack<T> *>(b)[tid];
            else if (MODE == 1)
                pb = reinterpret_cast<const Pack<T> *>(b)[idx_mod(tid, cp, narrow)];
            else {
                T bv = b[idx_div(tid, cp, narrow)];
#pragma unroll
                for (int k = 0; k < N; k++)
                    pb.v[k] = bv;
            }
#pragma unroll
            for (int k = 0; k < N; k++)
                pa.v[k] = NT::st(binop<OP>(alpha * NT::ld(pa.v[k]), beta * NT::ld(pb.v[k])));
            reinterpret_cast<Pack<T> *>(y)[tid] = pa;
        } else if (size_t e = flat_tail(tid, n, N); e < n) { // MODE 1 has none: cols, and so n, is a multiple of N
            T bv = MODE == 0 ? b[e] : b[idx_div(e, cols, narrow)];
            y[e] = NT::st(binop<OP>(alpha * NT::ld(a[e]), beta * NT::ld(bv)));
        }
    } else {
        for (size_t e = tid; e < n; e += (size_t)gridDim.x * blockDim.x) {
            T bv = MODE == 0 ? b[e] : MODE == 1 ? b[idx_mod(e, cols, narrow)] : b[idx_div(e, cols, narrow)];
            y[e] = NT::st(binop<OP>(alpha * NT::ld(a[e]), beta * NT::ld(bv)));
        }
    }
}

// Strided 2-D: one block row of threads per matrix row, grid-stride over rows.
template <typename T, int OP>
__global__ void binary_2d_kernel(const T *__restrict__ a, size_t lda, const T *__restrict__ b, size_t ldb, int bc,
                                 T *__restrict__ y, size_t ldy, size_t rows, size_t cols,
                                 typename Num<T>::C alpha, typename Num<T>::C beta)
{
    typedef Num<T> NT;
    for (size_t i = blockIdx.y * (size_t)blockDim.y + threadIdx.y; i < rows; i += (size_t)gridDim.y * blockDim.y)
        for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < cols; j += (size_t)gridDim.x * blockDim.x) {
            T bv = bc == 0 ? b[i * ldb + j] : bc == 1 ? b[j] : b[i];
            y[i * ldy + j] = NT::st(binop<OP>(alpha * NT::ld(a[i * lda + j]), beta * NT::ld(bv)));
        }
}

template <typename T, int OP>
cudaError_t launch_binary_op(cudaStream_t s, int bc, size_t rows, size_t cols, double alpha, const T *a, size_t lda,
                             double beta, const T *b, size_t ldb, T *y, size_t ldy)
{
    typedef typename Num<T>::C C;
    constexpr int N = Pack<T>::N;
    bool contiguous = rows == 1 || (lda == cols && ldy == cols && (bc != 0 || ldb == cols));
    if (contiguous) {
        size_t n = rows * cols;
        size_t v = flat_vec_items(n, N, aligned16(a) && aligned16(y) && (bc == 2 || aligned16(b)) &&
                                               (bc == 0 || cols % N == 0));
        unsigned grid = grid_flat(v ? v : n);
        cudaError_t e = cudaSuccess;
#define KEEL_BIN_LAUNCH(MODE)                                                                                     \
    do {                                                                                                          \
        if (v)                                                                                                    \
            e = launch<binary_flat_kernel<T, OP, MODE, true>>(grid, THREADS, 0, s, a, b, y, n, cols, (C)alpha,    \
                                                              (C)beta);                                           \
        else                                                                                                      \
            e = launch<binary_flat_kernel<T, OP, MODE, false>>(grid, THREADS, 0, s, a, b, y, n, cols, (C)alpha,   \
                                                               (C)beta);                                          \
    } while (0)
        if (bc == 0)
            KEEL_BIN_LAUNCH(0);
        else if (bc == 1)
            KEEL_BIN_LAUNCH(1);
        else
            KEEL_BIN_LAUNCH(2);
#undef KEEL_BIN_LAUNCH
        return e;
    }
    dim3 block(64, 4);
    size_t gx = (cols + 63) / 64, gy = (rows + 3) / 4;
    dim3 grid((unsigned)(gx < 64 ? gx : 64), (unsigned)(gy < 4096 ? gy : 4096));
    return launch<binary_2d_kernel<T, OP>>(grid, block, 0, s, a, lda, b, ldb, bc, y, ldy, rows, cols, (C)alpha,
                                           (C)beta);
}

template <typename T>
cudaError_t launch_binary(cudaStream_t s, int op, int bc, size_t rows, size_t cols, double alpha, const void *a,
                          size_t lda, double beta, const void *b, size_t ldb, void *y, size_t ldy)
{
    const T *pa = (const T *)a, *pb = (const T *)b;
    T *py = (T *)y;
    switch (op) {
    case B_ADD: return launch_binary_op<T, B_ADD>(s, bc, rows, cols, alpha, pa, lda, beta, pb, ldb, py, ldy);
    case B_SUB: return launch_binary_op<T, B_SUB>(s, bc, rows, cols, alpha, pa, lda, beta, pb, ldb, py, ldy);
    case B_MUL: return launch_binary_op<T, B_MUL>(s, bc, rows, cols, alpha, pa, lda, beta, pb, ldb, py, ldy);
    case B_DIV: return launch_binary_op<T, B_DIV>(s, bc, rows, cols, alpha, pa, lda, beta, pb, ldb, py, ldy);
    case B_MAX: return launch_binary_op<T, B_MAX>(s, bc, rows, cols, alpha, pa, lda, beta, pb, ldb, py, ldy);
    default: return launch_binary_op<T, B_MIN>(s, bc, rows, cols, alpha, pa, lda, beta, pb, ldb, py, ldy);
    }
}

// ---- reductions ----
// The accumulator is the compute type for the per-thread part; partial
// results across blocks go through double.
template <int OP> __device__ inline double rfinal(double acc, size_t count)
{
    return OP == R_MEAN ? acc / (double)count : OP == R_NORM2 ? sqrt(acc) : acc;
}

template <typename T> __device__ inline void store_double(T *out, size_t i, double v)
{
    out[i] = cvt_from_double<T>(v);
}

// Whole array, pass 1: each block reduces a grid-stride share into part[block].
template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(512) reduce_all_kernel(const T *__restrict__ x, size_t rows, size_t cols, size_t ld, double *part)
{
    typedef typename Num<T>::C C;
    C acc = rinit<OP, C>();
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n = rows * cols, done = 0;
    if (VEC) { // contiguous and aligned
        constexpr int N = Pack<T>::N;
        size_t np = n / N;
        #pragma unroll 4
        for (size_t i = tid; i < np; i += stride) {
            Pack<T> p = reinterpret_cast<const Pack<T> *>(x)[i];
#pragma unroll
            for (int k = 0; k < N; k++)
                acc = rcombine<OP>(acc, rmap<OP>(Num<T>::ld(p.v[k])));
        }
        done = np * N;
    }
    for (size_t e = done + tid; e < n; e += stride) {
        size_t i = e / cols, j = e - i * cols;
        acc = rcombine<OP>(acc, rmap<OP>(Num<T>::ld(x[i * ld + j])));
    }
    double r = block_reduce<OP, double>((double)acc);
    if (threadIdx.x == 0)
        part[blockIdx.x] = r;
}

// Pass 2: one block combines the partial results and writes the value.
template <typename T, int OP> __global__ void __launch_bounds__(1024) reduce_final_kernel(const double *part, int nparts, size_t count, T *out)
{
    double acc = rinit<OP, double>();
    for (int i = threadIdx.x; i < nparts; i += blockDim.x)
        acc = rcombine<OP>(acc, part[i]);
    acc = block_reduce<OP, double>(acc);
    if (threadIdx.x == 0)
        store_double(out, 0, rfinal<OP>(acc, count));
}

// Each row: one block per row (grid-stride over rows), 16-byte packs when
// VEC (x aligned, cols and ld multiples of the pack).
template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(512) reduce_rows_kernel(const T *__restrict__ x, size_t rows, size_t cols, size_t ld, T *out)
{
    typedef typename Num<T>::C C;
    for (size_t i = blockIdx.x; i < rows; i += gridDim.x) {
        const T *row = x + i * ld;
        C acc = rinit<OP, C>();
        if (VEC) {
            constexpr int N = Pack<T>::N;
            const Pack<T> *rp = reinterpret_cast<const Pack<T> *>(row);
            for (size_t p = threadIdx.x; p < cols / N; p += blockDim.x) {
                Pack<T> pk = rp[p];
#pragma unroll
                for (int k = 0; k < N; k++)
                    acc = rcombine<OP>(acc, rmap<OP>(Num<T>::ld(pk.v[k])));
            }
        } else {
            for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
                acc = rcombine<OP>(acc, rmap<OP>(Num<T>::ld(row[j])));
        }
        double r = block_reduce<OP, double>((double)acc);
        if (threadIdx.x == 0)
            store_double(out, i, rfinal<OP>(r, cols));
    }
}

// Each column: blocks of 32 columns x 8 row lanes; blockIdx.y takes a
// slice of the rows. With one slice the result is written, otherwise the
// slice's partial goes to part[slice * cols + j] for reduce_cols_final.
template <typename T, int OP>
__global__ void reduce_cols_kernel(const T *__restrict__ x, size_t rows, size_t cols, size_t ld, size_t slice_rows,
                                   double *part, T *out)
{
    typedef typename Num<T>::C C;
    __shared__ double sh[8][33];
    size_t j = blockIdx.x * 32 + threadIdx.x;
    size_t r0 = blockIdx.y * slice_rows, r1 = r0 + slice_rows < rows ? r0 + slice_rows : rows;
    C acc = rinit<OP, C>();
    if (j < cols)
        for (size_t i = r0 + threadIdx.y; i < r1; i += 8)
            acc = rcombine<OP>(acc, rmap<OP>(Num<T>::ld(x[i * ld + j])));
    sh[threadIdx.y][threadIdx.x] = (double)acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        double r = sh[0][threadIdx.x];
        for (int k = 1; k < 8; k++)
            r = rcombine<OP>(r, sh[k][threadIdx.x]);
        if (gridDim.y == 1)
            store_double(out, j, rfinal<OP>(r, rows));
        else
            part[blockIdx.y * cols + j] = r;
    }
}

template <typename T, int OP>
__global__ void reduce_cols_final_kernel(const double *part, size_t slices, size_t rows, size_t cols, T *out)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < cols; j += (size_t)gridDim.x * blockDim.x) {
        double r = part[j];
        for (size_t k = 1; k < slices; k++)
            r = rcombine<OP>(r, part[k * cols + j]);
        store_double(out, j, rfinal<OP>(r, rows));
    }
}

template <typename T, int OP>
cudaError_t launch_reduce_op(cudaStream_t s, int axis, size_t rows, size_t cols, const T *x, size_t ld, T *out,
                             void *work, size_t work_bytes)
{
    double *part = (double *)work;
    size_t max_parts = work_bytes / sizeof(double);
    if (axis == AX_ALL) {
        bool contiguous = rows == 1 || ld == cols;
        if (contiguous) {
            cols = rows * cols;
            rows = 1;
            ld = cols;
        }
        size_t n = rows * cols;
        bool vec = contiguous && aligned16(x);
        unsigned g = grid_for(vec ? n / Pack<T>::N + 1 : n, 512);
        if (g > 1024)
            g = 1024;
        if (g > max_parts)
            g = (unsigned)max_parts;
        cudaError_t e = vec ? launch<reduce_all_kernel<T, OP, true>>(g, 512, 0, s, x, rows, cols, ld, part)
                            : launch<reduce_all_kernel<T, OP, false>>(g, 512, 0, s, x, rows, cols, ld, part);
        return e != cudaSuccess ? e : launch<reduce_final_kernel<T, OP>>(1, 1024, 0, s, part, (int)g, n, out);
    } else if (axis == AX_ROWS) {
        constexpr size_t N = Pack<T>::N;
        bool vec = aligned16(x) && cols % N == 0 && (rows == 1 || ld % N == 0);
        size_t units = vec ? cols / N : cols;
        int threads = units >= 2048 ? 512 : units >= 512 ? 256 : units >= 64 ? 64 : 32;
        size_t g = rows < 65536 * 4 ? rows : 65536 * 4;
        if (vec)
            return launch<reduce_rows_kernel<T, OP, true>>((unsigned)g, threads, 0, s, x, rows, cols, ld, out);
        return launch<reduce_rows_kernel<T, OP, false>>((unsigned)g, threads, 0, s, x, rows, cols, ld, out);
    } else {
        size_t gx = (cols + 31) / 32;
        // Enough blocks to fill the device: slice the rows when the columns alone are too few.
        size_t want = (size_t)sm_count() * 8, slices = 1;
        if (gx < want && rows >= 256) {
            slices = (want + gx - 1) / gx;
            size_t max_slices = rows / 64;
            if (slices > max_slices)
                slices = max_slices;
            if (slices * cols > max_parts)
                slices = max_parts / cols;
            if (slices > 65535)
                slices = 65535;
            if (slices < 1)
                slices = 1;
        }
        size_t slice_rows = (rows + slices - 1) / slices;
        slices = (rows + slice_rows - 1) / slice_rows;
        dim3 grid((unsigned)gx, (unsigned)slices);
        cudaError_t e = launch<reduce_cols_kernel<T, OP>>(grid, dim3(32, 8), 0, s, x, rows, cols, ld, slice_rows,
                                                         part, out);
        if (e == cudaSuccess && slices > 1)
            e = launch<reduce_cols_final_kernel<T, OP>>(grid_for(cols), THREADS, 0, s, part, slices, rows, cols, out);
        return e;
    }
}

template <typename T>
cudaError_t launch_reduce(cudaStream_t s, int op, int axis, size_t rows, size_t cols, const void *x, size_t ld,
                          void *out, void *work, size_t wb)
{
    const T *px = (const T *)x;
    T *po = (T *)out;
    switch (op) {
    case R_SUM: return launch_reduce_op<T, R_SUM>(s, axis, rows, cols, px, ld, po, work, wb);
    case R_MAX: return launch_reduce_op<T, R_MAX>(s, axis, rows, cols, px, ld, po, work, wb);
    case R_MIN: return launch_reduce_op<T, R_MIN>(s, axis, rows, cols, px, ld, po, work, wb);
    case R_MEAN: return launch_reduce_op<T, R_MEAN>(s, axis, rows, cols, px, ld, po, work, wb);
    default: return launch_reduce_op<T, R_NORM2>(s, axis, rows, cols, px, ld, po, work, wb);
    }
}

// ---- argmax ----
// (value, index) pairs: NaN beats everything, then larger, then lower index.
template <typename C> __device__ inline void amax_merge(C &v, long long &i, C v2, long long i2)
{
    bool n1 = v != v, n2 = v2 != v2;
    bool take;
    if (n1 || n2)
        take = n2 && (!n1 || i2 < i);
    else
        take = v2 > v || (v2 == v && i2 < i);
    if (take) {
        v = v2;
        i = i2;
    }
}

template <typename T>
__global__ void __launch_bounds__(1024) argmax_rows_kernel(const T *__restrict__ x, size_t rows, size_t cols, size_t ld, int64_t *out)
{
    typedef typename Num<T>::C C;
    __shared__ C sv[32];
    __shared__ long long si[32];
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *row = x + r * ld;
        C v = (C)-INFINITY;
        long long idx = (long long)cols; // "none yet": loses every tie
        for (size_t j = threadIdx.x; j < cols; j += blockDim.x)
            amax_merge(v, idx, Num<T>::ld(row[j]), (long long)j);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            C v2 = __shfl_xor_sync(0xffffffffu, v, o);
            long long i2 = __shfl_xor_sync(0xffffffffu, idx, o);
            amax_merge(v, idx, v2, i2);
        }
        int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
        __syncthreads();
        if (lane == 0) {
            sv[w] = v;
            si[w] = idx;
        }
        __syncthreads();
        if (w == 0) {
            v = lane < nw ? sv[lane] : (C)-INFINITY;
            idx = lane < nw ? si[lane] : (long long)cols;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                C v2 = __shfl_xor_sync(0xffffffffu, v, o);
                long long i2 = __shfl_xor_sync(0xffffffffu, idx, o);
                amax_merge(v, idx, v2, i2);
            }
            if (lane == 0)
                out[r] = idx < (long long)cols ? idx : 0; // a row of -inf only: index 0
        }
    }
}

// ---- dense epilogue and scaling ----
template <typename C> __device__ inline C activate(int act, C v)
{
    switch (act) {
    case ACT_RELU: return v < (C)0 ? (C)0 : v;
    case ACT_GELU: return gelu_tanh(v);
    case ACT_GELU_ERF: return gelu_erf(v);
    default: return v;
    }
}

template <typename T>
__global__ void bias_act_kernel(T *y, size_t ldy, const T *__restrict__ bias, int act, size_t lines, size_t len,
                                int col_major)
{
    // A line is a column of a column-major Y (bias varies along it) or a row
    // of a row-major Y (one bias value).
    for (size_t l = blockIdx.y; l < lines; l += gridDim.y) {
        T *yl = y + l * ldy;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len; i += (size_t)gridDim.x * blockDim.x) {
            typename Num<T>::C v = Num<T>::ld(yl[i]);
            if (bias)
                v += Num<T>::ld(bias[col_major ? i : l]);
            yl[i] = Num<T>::st(activate(act, v));
        }
    }
}

template <typename T>
__global__ void scale_kernel(T *c, size_t ldc, size_t m, size_t n, size_t batch, size_t stride_c, double beta)
{
    typedef typename Num<T>::C C;
    for (size_t col = blockIdx.y; col < n * batch; col += gridDim.y) {
        T *p = c + (col / n) * stride_c + (col % n) * ldc;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < m; i += (size_t)gridDim.x * blockDim.x)
            p[i] = beta == 0 ? Num<T>::st((C)0) : Num<T>::st((C)beta * Num<T>::ld(p[i]));
    }
}

#ifndef KEEL_GPU_HIP // PTX: the GEMM tuner that uses it is CUDA's
__global__ void hold_kernel(unsigned ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
#endif

dim3 lines_grid(size_t lines, size_t len)
{
    size_t gx = (len + THREADS - 1) / THREADS, gy = lines;
    return dim3((unsigned)(gx < 1024 ? gx : 1024), (unsigned)(gy < 65535 ? gy : 65535));
}

} // namespace

// ======================================================================
// launchers
// ======================================================================


namespace {
template <typename T> cudaError_t fill_dispatch(cudaStream_t s, void *p, size_t n, double v);
template <> cudaError_t fill_dispatch<float>(cudaStream_t s, void *p, size_t n, double v)
{
    return launch_fill<float>(s, (float *)p, n, (float)v);
}
template <> cudaError_t fill_dispatch<double>(cudaStream_t s, void *p, size_t n, double v)
{
    return launch_fill<double>(s, (double *)p, n, v);
}
template <> cudaError_t fill_dispatch<f16>(cudaStream_t s, void *p, size_t n, double v)
{
    return launch_fill<f16>(s, (f16 *)p, n, __double2half(v));
}
template <> cudaError_t fill_dispatch<bf16>(cudaStream_t s, void *p, size_t n, double v)
{
    return launch_fill<bf16>(s, (bf16 *)p, n, __double2bfloat16(v));
}

template <typename T> cudaError_t cast_dispatch(cudaStream_t s, const void *src, int ddt, void *dst, size_t n)
{
    return launch_cast_to<T>(s, (const T *)src, ddt, dst, n);
}

template <typename T> cudaError_t unary_dispatch(cudaStream_t s, int op, size_t n, const void *x, void *y)
{
    const T *px = (const T *)x;
    T *py = (T *)y;
    switch (op) {
    case U_NEG: return launch_map(s, px, py, n, Unary<U_NEG>());
    case U_ABS: return launch_map(s, px, py, n, Unary<U_ABS>());
    case U_EXP: return launch_map(s, px, py, n, Unary<U_EXP>());
    case U_LOG: return launch_map(s, px, py, n, Unary<U_LOG>());
    case U_SQRT: return launch_map(s, px, py, n, Unary<U_SQRT>());
    case U_RELU: return launch_map(s, px, py, n, Unary<U_RELU>());
    case U_GELU: return launch_map(s, px, py, n, Unary<U_GELU>());
    case U_GELU_TANH: return launch_map(s, px, py, n, Unary<U_GELU_TANH>());
    case U_SILU: return launch_map(s, px, py, n, Unary<U_SILU>());
    case U_SIGMOID: return launch_map(s, px, py, n, Unary<U_SIGMOID>());
    default: return launch_map(s, px, py, n, Unary<U_TANH>());
    }
}

template <typename T>
cudaError_t argmax_dispatch(cudaStream_t s, size_t rows, size_t cols, const void *x, size_t ld, int64_t *out)
{
    return launch<argmax_rows_kernel<T>>(row_grid(rows), row_threads(cols), 0, s, (const T *)x, rows, cols, ld, out);
}

template <typename T>
cudaError_t bias_act_dispatch(cudaStream_t s, int col_major, size_t m, size_t n, void *y, size_t ldy,
                              const void *bias, int act)
{
    size_t lines = col_major ? n : m, len = col_major ? m : n;
    return launch<bias_act_kernel<T>>(lines_grid(lines, len), THREADS, 0, s, (T *)y, ldy, (const T *)bias, act, lines,
                                      len, col_major);
}

template <typename T>
cudaError_t scale_dispatch(cudaStream_t s, size_t m, size_t n, void *c, size_t ldc, size_t batch, size_t stride_c,
                           double beta)
{
    return launch<scale_kernel<T>>(lines_grid(n * batch, m), THREADS, 0, s, (T *)c, ldc, m, n, batch, stride_c, beta);
}
} // namespace

extern "C" {

cudaError_t keel__gpu_fill(cudaStream_t s, int dtype, void *p, size_t n, double value)
{
    KEEL_DT_SWITCH(dtype, fill_dispatch, s, p, n, value)
}

cudaError_t keel__gpu_cast(cudaStream_t s, int sdt, const void *src, int ddt, void *dst, size_t n)
{
    KEEL_DT_SWITCH(sdt, cast_dispatch, s, src, ddt, dst, n)
}

cudaError_t keel__gpu_transpose(cudaStream_t s, size_t es, size_t rows, size_t cols, const void *src, size_t lds,
                                void *dst, size_t ldd)
{
    size_t gx = (cols + 31) / 32, gy = (rows + 31) / 32;
    dim3 grid((unsigned)(gx < 65535 ? gx : 65535), (unsigned)(gy < 65535 ? gy : 65535)), block(32, 8);
    if (es == 2)
        return launch<transpose_kernel<uint16_t>>(grid, block, 0, s, (const uint16_t *)src, lds, (uint16_t *)dst, ldd,
                                                  rows, cols);
    if (es == 4)
        return launch<transpose_kernel<uint32_t>>(grid, block, 0, s, (const uint32_t *)src, lds, (uint32_t *)dst, ldd,
                                                  rows, cols);
    return launch<transpose_kernel<uint64_t>>(grid, block, 0, s, (const uint64_t *)src, lds, (uint64_t *)dst, ldd, rows,
                                              cols);
}

cudaError_t keel__gpu_unary(cudaStream_t s, int op, int dtype, size_t n, const void *x, void *y)
{
    KEEL_DT_SWITCH(dtype, unary_dispatch, s, op, n, x, y)
}

cudaError_t keel__gpu_binary(cudaStream_t s, int op, int dtype, int bc, size_t rows, size_t cols, double alpha,
                             const void *a, size_t lda, double beta, const void *b, size_t ldb, void *y, size_t ldy)
{
    KEEL_DT_SWITCH(dtype, launch_binary, s, op, bc, rows, cols, alpha, a, lda, beta, b, ldb, y, ldy)
}

cudaError_t keel__gpu_reduce(cudaStream_t s, int op, int dtype, int axis, size_t rows, size_t cols, const void *x,
                             size_t ld, void *out, void *work, size_t work_bytes)
{
    KEEL_DT_SWITCH(dtype, launch_reduce, s, op, axis, rows, cols, x, ld, out, work, work_bytes)
}

cudaError_t keel__gpu_argmax_rows(cudaStream_t s, int dtype, size_t rows, size_t cols, const void *x, size_t ld,
                                  int64_t *out)
{
    KEEL_DT_SWITCH(dtype, argmax_dispatch, s, rows, cols, x, ld, out)
}

cudaError_t keel__gpu_bias_act(cudaStream_t s, int dtype, int col_major, size_t m, size_t n, void *y, size_t ldy,
                               const void *bias, int act)
{
    KEEL_DT_SWITCH(dtype, bias_act_dispatch, s, col_major, m, n, y, ldy, bias, act)
}

cudaError_t keel__gpu_scale(cudaStream_t s, int dtype, size_t m, size_t n, void *c, size_t ldc, size_t batch,
                            size_t stride_c, double beta)
{
    KEEL_DT_SWITCH(dtype, scale_dispatch, s, m, n, c, ldc, batch, stride_c, beta)
}

#ifndef KEEL_GPU_HIP
cudaError_t keel__gpu_hold(cudaStream_t s, unsigned ns)
{
    return launch<hold_kernel>(1, 1, 0, s, ns);
}
#endif

} // extern "C"
