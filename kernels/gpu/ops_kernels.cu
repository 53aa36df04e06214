// GPU kernels of the built-in operations (see ops_gpu.h).
//
// Memory-bound kernels: each thread moves 16 bytes per access where the
// pointers and shapes allow it (Pack<T>), loops grid-stride over the data,
// and reductions combine with warp shuffles, then through shared memory.
// f16 and bf16 compute in f32, f64 in f64. Row operations (softmax, layer
// norm) keep the row in shared memory when it fits, so the data is read once.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "kernels/gpu/ops_gpu.h"

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

int sm_count()
{
    static int cached[64];
    int dev = 0;
    cudaGetDevice(&dev);
    if (dev < 0 || dev >= 64)
        return 132;
    if (cached[dev] == 0) {
        int n = 0;
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
        cached[dev] = n > 0 ? n : 132;
    }
    return cached[dev];
}

unsigned grid_for(size_t items, int threads = THREADS)
{
    size_t blocks = (items + threads - 1) / threads;
    size_t cap = (size_t)sm_count() * 32;
    if (blocks > cap)
        blocks = cap;
    return blocks ? (unsigned)blocks : 1u;
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

// Maps x[i] -> y[i] with 16-byte packs when VEC, then a scalar tail.
template <typename T, bool VEC, typename F>
__global__ void map_kernel(const T *__restrict__ x, T *__restrict__ y, size_t n, F f)
{
    typedef Num<T> NT;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (VEC) {
        constexpr int N = Pack<T>::N;
        size_t np = n / N;
        const Pack<T> *xp = reinterpret_cast<const Pack<T> *>(x);
        Pack<T> *yp = reinterpret_cast<Pack<T> *>(y);
        #pragma unroll 4
        for (size_t i = tid; i < np; i += stride) {
            Pack<T> p = xp[i];
#pragma unroll
            for (int k = 0; k < N; k++)
                p.v[k] = NT::st(f(NT::ld(p.v[k])));
            yp[i] = p;
        }
        done = np * N;
    }
    for (size_t i = done + tid; i < n; i += stride)
        y[i] = NT::st(f(NT::ld(x[i])));
}

template <typename T, typename F> cudaError_t launch_map(cudaStream_t s, const T *x, T *y, size_t n, F f)
{
    if (aligned16(x) && aligned16(y)) {
        map_kernel<T, true><<<grid_for(n / Pack<T>::N + 1), THREADS, 0, s>>>(x, y, n, f);
    } else {
        map_kernel<T, false><<<grid_for(n), THREADS, 0, s>>>(x, y, n, f);
    }
    return cudaGetLastError();
}

// ---- fill ----
template <typename T> __global__ void fill_kernel(T *__restrict__ p, size_t n, T v, bool vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (vec) {
        constexpr int N = Pack<T>::N;
        Pack<T> pk;
#pragma unroll
        for (int k = 0; k < N; k++)
            pk.v[k] = v;
        Pack<T> *pp = reinterpret_cast<Pack<T> *>(p);
        size_t np = n / N;
        for (size_t i = tid; i < np; i += stride)
            pp[i] = pk;
        done = np * N;
    }
    for (size_t i = done + tid; i < n; i += stride)
        p[i] = v;
}

template <typename T> cudaError_t launch_fill(cudaStream_t s, T *p, size_t n, T v)
{
    bool vec = aligned16(p);
    fill_kernel<T><<<grid_for(vec ? n / Pack<T>::N + 1 : n), THREADS, 0, s>>>(p, n, v, vec);
    return cudaGetLastError();
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
__global__ void cast_kernel(const S *__restrict__ src, D *__restrict__ dst, size_t n)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (VEC) {
        size_t ng = n / 8;
#pragma unroll 2
        for (size_t i = tid; i < ng; i += stride) {
            Group8<S> g = reinterpret_cast<const Group8<S> *>(src)[i];
            Group8<D> o;
#pragma unroll
            for (int k = 0; k < 8; k++)
                o.v[k] = cvt<S, D>(g.v[k]);
            reinterpret_cast<Group8<D> *>(dst)[i] = o;
        }
        done = ng * 8;
    }
    for (size_t i = done + tid; i < n; i += stride)
        dst[i] = cvt<S, D>(src[i]);
}

template <typename S, typename D> void launch_cast_pair(cudaStream_t s, const S *src, D *dst, size_t n)
{
    if (aligned16(src) && aligned16(dst))
        cast_kernel<S, D, true><<<grid_for(n / 8 + 1), THREADS, 0, s>>>(src, dst, n);
    else
        cast_kernel<S, D, false><<<grid_for(n), THREADS, 0, s>>>(src, dst, n);
}

template <typename S> cudaError_t launch_cast_to(cudaStream_t s, const S *src, int ddt, void *dst, size_t n)
{
    switch (ddt) {
    case DT_F32: launch_cast_pair<S, float>(s, src, (float *)dst, n); break;
    case DT_F64: launch_cast_pair<S, double>(s, src, (double *)dst, n); break;
    case DT_F16: launch_cast_pair<S, f16>(s, src, (f16 *)dst, n); break;
    default: launch_cast_pair<S, bf16>(s, src, (bf16 *)dst, n); break;
    }
    return cudaGetLastError();
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
__global__ void binary_flat_kernel(const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ y, size_t n,
                                   size_t cols, typename Num<T>::C alpha, typename Num<T>::C beta)
{
    typedef Num<T> NT;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (VEC) {
        constexpr int N = Pack<T>::N;
        size_t np = n / N;
        #pragma unroll 4
        for (size_t i = tid; i < np; i += stride) {
            Pack<T> pa = reinterpret_cast<const Pack<T> *>(a)[i], pb;
            size_t e = i * N;
            if (MODE == 0)
                pb = reinterpret_cast<const Pack<T> *>(b)[i];
            else if (MODE == 1)
                pb = reinterpret_cast<const Pack<T> *>(b)[(e % cols) / N]; // cols % N == 0
            else {
                T bv = b[e / cols];                                           // cols % N == 0
#pragma unroll
                for (int k = 0; k < N; k++)
                    pb.v[k] = bv;
            }
#pragma unroll
            for (int k = 0; k < N; k++)
                pa.v[k] = NT::st(binop<OP>(alpha * NT::ld(pa.v[k]), beta * NT::ld(pb.v[k])));
            reinterpret_cast<Pack<T> *>(y)[i] = pa;
        }
        done = np * N;
    }
    for (size_t e = done + tid; e < n; e += stride) {
        T bv = MODE == 0 ? b[e] : MODE == 1 ? b[e % cols] : b[e / cols];
        y[e] = NT::st(binop<OP>(alpha * NT::ld(a[e]), beta * NT::ld(bv)));
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
        bool vec = aligned16(a) && aligned16(y) && (bc == 2 || aligned16(b)) && (bc == 0 || cols % N == 0);
        unsigned g = grid_for(vec ? n / N + 1 : n);
#define KEEL_BIN_LAUNCH(MODE)                                                                                  \
    (vec ? binary_flat_kernel<T, OP, MODE, true><<<g, THREADS, 0, s>>>(a, b, y, n, cols, (C)alpha, (C)beta)    \
         : binary_flat_kernel<T, OP, MODE, false><<<g, THREADS, 0, s>>>(a, b, y, n, cols, (C)alpha, (C)beta))
        if (bc == 0)
            KEEL_BIN_LAUNCH(0);
        else if (bc == 1)
            KEEL_BIN_LAUNCH(1);
        else
            KEEL_BIN_LAUNCH(2);
#undef KEEL_BIN_LAUNCH
        return cudaGetLastError();
    }
    dim3 block(64, 4);
    size_t gx = (cols + 63) / 64, gy = (rows + 3) / 4;
    dim3 grid((unsigned)(gx < 64 ? gx : 64), (unsigned)(gy < 4096 ? gy : 4096));
    binary_2d_kernel<T, OP><<<grid, block, 0, s>>>(a, lda, b, ldb, bc, y, ldy, rows, cols, (C)alpha, (C)beta);
    return cudaGetLastError();
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
        if (vec)
            reduce_all_kernel<T, OP, true><<<g, 512, 0, s>>>(x, rows, cols, ld, part);
        else
            reduce_all_kernel<T, OP, false><<<g, 512, 0, s>>>(x, rows, cols, ld, part);
        reduce_final_kernel<T, OP><<<1, 1024, 0, s>>>(part, (int)g, n, out);
    } else if (axis == AX_ROWS) {
        constexpr size_t N = Pack<T>::N;
        bool vec = aligned16(x) && cols % N == 0 && (rows == 1 || ld % N == 0);
        size_t units = vec ? cols / N : cols;
        int threads = units >= 2048 ? 512 : units >= 512 ? 256 : units >= 64 ? 64 : 32;
        size_t g = rows < 65536 * 4 ? rows : 65536 * 4;
        if (vec)
            reduce_rows_kernel<T, OP, true><<<(unsigned)g, threads, 0, s>>>(x, rows, cols, ld, out);
        else
            reduce_rows_kernel<T, OP, false><<<(unsigned)g, threads, 0, s>>>(x, rows, cols, ld, out);
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
        reduce_cols_kernel<T, OP><<<grid, dim3(32, 8), 0, s>>>(x, rows, cols, ld, slice_rows, part, out);
        if (slices > 1)
            reduce_cols_final_kernel<T, OP><<<grid_for(cols), THREADS, 0, s>>>(part, slices, rows, cols, out);
    }
    return cudaGetLastError();
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

// ---- softmax ----
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
// passes). Uncached: Welford per thread, Chan's merge across threads.
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

int row_threads(size_t cols)
{
    return cols >= 16384 ? 1024 : cols >= 4096 ? 512 : cols >= 1024 ? 256 : cols >= 128 ? 128 : 32;
}

unsigned row_grid(size_t rows)
{
    size_t cap = (size_t)sm_count() * 64;
    return (unsigned)(rows < cap ? rows : cap);
}

// Rows up to this many bytes (in the compute type) stay in shared memory:
// past the 48 KiB every device grants, the kernel opts in to more, up to
// what the device allows less room for the static shared arrays, capped so
// two blocks still fit on an SM.
size_t row_cache_limit()
{
    static size_t cached[64];
    int dev = 0;
    cudaGetDevice(&dev);
    if (dev < 0 || dev >= 64)
        return 40 * 1024;
    if (cached[dev] == 0) {
        int optin = 0;
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        size_t lim = optin > 8 * 1024 ? (size_t)optin - 8 * 1024 : 40 * 1024;
        if (lim > 100 * 1024)
            lim = 100 * 1024;
        if (lim < 40 * 1024)
            lim = 40 * 1024;
        cached[dev] = lim;
    }
    return cached[dev];
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

template <typename T> bool row_vec_ok(size_t cols, size_t ldx, size_t ldy, const void *x, const void *y)
{
    constexpr size_t N = Pack<T>::N;
    return cols % N == 0 && ldx % N == 0 && ldy % N == 0 && aligned16(x) && aligned16(y);
}

template <typename T>
cudaError_t launch_softmax(cudaStream_t s, size_t rows, size_t cols, const void *x, size_t ldx, void *y, size_t ldy,
                           int lg)
{
    typedef typename Num<T>::C C;
    const T *px = (const T *)x;
    T *py = (T *)y;
    size_t bytes = cols * sizeof(C);
    bool cache = bytes <= row_cache_limit();
    bool vec = row_vec_ok<T>(cols, ldx, ldy, x, y);
    size_t np = vec ? cols / Pack<T>::N : cols;
    if (np <= 256 && cols <= 1024) {
        /* a warp per row, 8 rows per block; at most 32 values per lane in registers */
        size_t blocks = (rows + 7) / 8, cap = (size_t)sm_count() * 16;
        unsigned gw = (unsigned)(blocks < cap ? blocks : cap);
#define KEEL_SOFTMAX_WARP(MAXP)                                                                          \
    (vec ? softmax_warp_kernel<T, MAXP, true><<<gw, 256, 0, s>>>(px, ldx, py, ldy, rows, cols, lg)          \
         : softmax_warp_kernel<T, MAXP, false><<<gw, 256, 0, s>>>(px, ldx, py, ldy, rows, cols, lg))
        if (np <= 32)
            KEEL_SOFTMAX_WARP(1);
        else if (np <= 64)
            KEEL_SOFTMAX_WARP(2);
        else if (np <= 128)
            KEEL_SOFTMAX_WARP(4);
        else
            KEEL_SOFTMAX_WARP(8);
#undef KEEL_SOFTMAX_WARP
        return cudaGetLastError();
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
            softmax_kernel<T, CACHE, VEC><<<g, threads, sh, s>>>(px, ldx, py, ldy, rows, cols, lg); \
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
    return e != cudaSuccess ? e : cudaGetLastError();
}

template <typename T>
cudaError_t launch_layernorm(cudaStream_t s, size_t rows, size_t cols, const void *x, size_t ldx, const void *gm,
                             const void *bt, double eps, void *y, size_t ldy)
{
    typedef typename Num<T>::C C;
    const T *px = (const T *)x, *pg = (const T *)gm, *pb = (const T *)bt;
    T *py = (T *)y;
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
            layernorm_kernel<T, CACHE, VEC><<<g, threads, sh, s>>>(px, ldx, pg, pb, eps, py, ldy, rows, cols); \
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
    return e != cudaSuccess ? e : cudaGetLastError();
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

dim3 lines_grid(size_t lines, size_t len)
{
    size_t gx = (len + THREADS - 1) / THREADS, gy = lines;
    return dim3((unsigned)(gx < 1024 ? gx : 1024), (unsigned)(gy < 65535 ? gy : 65535));
}

} // namespace

// ======================================================================
// launchers
// ======================================================================

#define KEEL_DT_SWITCH(dt, F, ...)                        \
    switch (dt) {                                         \
    case DT_F32: return F<float>(__VA_ARGS__);            \
    case DT_F64: return F<double>(__VA_ARGS__);           \
    case DT_F16: return F<f16>(__VA_ARGS__);              \
    default: return F<bf16>(__VA_ARGS__);                 \
    }

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
    argmax_rows_kernel<T><<<row_grid(rows), row_threads(cols), 0, s>>>((const T *)x, rows, cols, ld, out);
    return cudaGetLastError();
}

template <typename T>
cudaError_t bias_act_dispatch(cudaStream_t s, int col_major, size_t m, size_t n, void *y, size_t ldy,
                              const void *bias, int act)
{
    size_t lines = col_major ? n : m, len = col_major ? m : n;
    bias_act_kernel<T><<<lines_grid(lines, len), THREADS, 0, s>>>((T *)y, ldy, (const T *)bias, act, lines, len,
                                                                   col_major);
    return cudaGetLastError();
}

template <typename T>
cudaError_t scale_dispatch(cudaStream_t s, size_t m, size_t n, void *c, size_t ldc, size_t batch, size_t stride_c,
                           double beta)
{
    scale_kernel<T><<<lines_grid(n * batch, m), THREADS, 0, s>>>((T *)c, ldc, m, n, batch, stride_c, beta);
    return cudaGetLastError();
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
        transpose_kernel<uint16_t><<<grid, block, 0, s>>>((const uint16_t *)src, lds, (uint16_t *)dst, ldd, rows, cols);
    else if (es == 4)
        transpose_kernel<uint32_t><<<grid, block, 0, s>>>((const uint32_t *)src, lds, (uint32_t *)dst, ldd, rows, cols);
    else
        transpose_kernel<uint64_t><<<grid, block, 0, s>>>((const uint64_t *)src, lds, (uint64_t *)dst, ldd, rows, cols);
    return cudaGetLastError();
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

} // extern "C"
