/* SPDX-License-Identifier: MIT */
/**
 * @file keel/kernel_lang.h
 * @brief The portable kernel language: one kernel source for CUDA, HIP and the CPU.
 *
 * A kernel file is C (the subset that is also C++) with this vocabulary.
 * keel_module_build() puts this header in front of the source and compiles it
 * for the device it runs on: NVRTC for CUDA, hipRTC for HIP, the system C
 * compiler for the CPU; keel-cc does the same ahead of time. A source does
 * not need to include it. docs/kernel-language.md is the guide; in short:
 *
 *   keel_kernel void saxpy(int n, float a, const float *x, float *y)
 *   {                                   // a thread kernel: the body is one thread
 *       int i = keel_global_x();
 *       if (i < n)
 *           y[i] = a * x[i] + y[i];
 *   }
 *
 *   keel_block_kernel void block_sum(int n, const float *x, float *sums)
 *   {                                   // a block kernel: the body is the block
 *       keel_shared float part[256];    // shared memory, at block level
 *       keel_threads {                  // a region: every thread of the block runs it
 *           int i = keel_global_x();
 *           part[keel_thread_x()] = i < n ? x[i] : 0.0f;
 *       }
 *       for (int s = keel_block_dim_x() / 2; s > 0; s /= 2) {
 *           keel_barrier();             // between regions, never inside one
 *           keel_threads_first(s) {     // the first s threads
 *               part[keel_thread_x()] += part[keel_thread_x() + s];
 *           }
 *       }
 *       keel_barrier();
 *       keel_threads {
 *           if (keel_thread_x() == 0)
 *               sums[keel_block_x()] = part[0];
 *       }
 *   }
 *
 * Rules the compilers enforce on every target: keel_barrier(), keel_shared
 * and keel_private() only at block level of a block kernel; thread indices
 * only in a thread kernel or inside a region. Code at block level must be the
 * same for every thread (it runs once per block on the CPU and in every
 * thread on a GPU): loops over tiles, block indices, constants.
 */
#ifndef KEEL_KERNEL_LANG_H
#define KEEL_KERNEL_LANG_H

/** @brief Version of the language; raised when the vocabulary grows. */
#define KEEL_KERNEL_LANG_VERSION 1

/* ---- which target this is compiled for ----------------------------------- */

#if defined(__HIPCC__) || defined(__HIPCC_RTC__) || defined(__HIP_DEVICE_COMPILE__)
#define KEEL_TARGET_HIP 1
#define KEEL_TARGET_CUDA 0
#define KEEL_TARGET_CPU 0
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KEEL_TARGET_CUDA 1
#define KEEL_TARGET_HIP 0
#define KEEL_TARGET_CPU 0
#else
#define KEEL_TARGET_CPU 1
#define KEEL_TARGET_CUDA 0
#define KEEL_TARGET_HIP 0
#endif
#define KEEL_TARGET_GPU (KEEL_TARGET_CUDA || KEEL_TARGET_HIP)

/* The region marker: a one-byte object at file scope, shadowed by a wider
 * one inside every region and every thread kernel, so that a static
 * assertion tells where a statement stands. */
#define KEEL__AT_BLOCK_LEVEL(what)                                                                  \
    KEEL__STATIC_ASSERT(sizeof(__keel_region_marker) == 1,                                          \
                        what " belongs at block level of a keel_block_kernel, outside keel_threads")

/* ========================================================================== */
#if KEEL_TARGET_GPU

#define KEEL__STATIC_ASSERT(c, msg) static_assert(c, msg)
#define KEEL__DEV __device__ __forceinline__
#define KEEL__UNUSED __attribute__((unused))
#if KEEL_TARGET_CUDA
/* A region's marker shadows the file-scope one on purpose. */
#pragma nv_diag_suppress 780
#endif

#if KEEL_TARGET_HIP && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif

#if defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#include <stddef.h>
#endif

/* Unused where a source has thread kernels only; NVRTC's warning would
 * name the user's file, at a line of this header. */
static const char __keel_region_marker KEEL__UNUSED = 0;
/* 1 inside a kernel declared keel_block_size(x, 1, 1) (the translator adds
 * KEEL__ONE_DIM to its body), so the linear thread index is x alone. */
static const int __keel_one_dim KEEL__UNUSED = 0;
#define KEEL__ONE_DIM const int __keel_one_dim KEEL__UNUSED = 1;

#define keel_kernel extern "C" __global__
#define keel_block_kernel extern "C" __global__
#define keel_block_size(x, y, z) __launch_bounds__((x) * (y) * (z))
#define keel_device static __device__ inline
#define keel_restrict __restrict__
/* File-scope variables: device memory that keel_module_get_global hands out
 * by the variable's name (C++ does not mangle it at namespace scope). */
#define keel_global __device__
#define keel_constant __constant__

/* Inserted at the top of a thread kernel's body by the translator. */
#define KEEL__THREAD_BODY                                                                           \
    const int __keel_region_marker KEEL__UNUSED = 0, __keel_tx KEEL__UNUSED = (int)threadIdx.x,     \
              __keel_ty KEEL__UNUSED = (int)threadIdx.y, __keel_tz KEEL__UNUSED = (int)threadIdx.z;
#define KEEL__BLOCK_BODY

/* A region is the block's threads each running its body once: on a GPU,
 * every thread already is one, so it is a loop of one trip (continue leaves
 * it, as it leaves a thread's turn on the CPU). */
#define keel_threads                                                                                \
    for (int __keel_region_marker = 1, __keel_tx KEEL__UNUSED = (int)threadIdx.x,                  \
             __keel_ty KEEL__UNUSED = (int)threadIdx.y, __keel_tz KEEL__UNUSED = (int)threadIdx.z;  \
         __keel_region_marker; __keel_region_marker = 0)

/* A region of the first @p count threads of the block (in keel_thread_linear() order). */
#define keel_threads_first(count) keel_threads if (keel_thread_linear() < (count))

#define keel_barrier()                                                                              \
    do {                                                                                            \
        KEEL__AT_BLOCK_LEVEL("keel_barrier()");                                                     \
        __syncthreads();                                                                            \
    } while (0)
#define keel_shared KEEL__AT_BLOCK_LEVEL("keel_shared"); __shared__
#define keel_private(type, name) KEEL__AT_BLOCK_LEVEL("keel_private"); type name
#define keel_private_array(type, name, n) KEEL__AT_BLOCK_LEVEL("keel_private_array"); type name[n]
#define keel_priv(name) (name)

extern __shared__ __attribute__((aligned(16))) unsigned char __keel_dynamic_shared[];
#define keel_dynamic_shared(type) ((type *)__keel_dynamic_shared)

#define keel_thread_x() (__keel_tx)
#define keel_thread_y() (__keel_ty)
#define keel_thread_z() (__keel_tz)
#define keel_global_x() ((int)(blockIdx.x * blockDim.x) + __keel_tx)
#define keel_global_y() ((int)(blockIdx.y * blockDim.y) + __keel_ty)
#define keel_global_z() ((int)(blockIdx.z * blockDim.z) + __keel_tz)
#define keel_block_x() ((int)blockIdx.x)
#define keel_block_y() ((int)blockIdx.y)
#define keel_block_z() ((int)blockIdx.z)
#define keel_block_dim_x() ((int)blockDim.x)
#define keel_block_dim_y() ((int)blockDim.y)
#define keel_block_dim_z() ((int)blockDim.z)
#define keel_grid_dim_x() ((int)gridDim.x)
#define keel_grid_dim_y() ((int)gridDim.y)
#define keel_grid_dim_z() ((int)gridDim.z)

/* ---- sub-groups (warps, wavefronts) ---- */

#if KEEL_TARGET_CUDA
#define keel_subgroup_size() 32
#define KEEL__SHFL(v, l) __shfl_sync(0xffffffffu, (v), (l))
#define KEEL__SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
#define KEEL__SHFL_DOWN(v, d) __shfl_down_sync(0xffffffffu, (v), (d))
#define KEEL__SHFL_UP(v, d) __shfl_up_sync(0xffffffffu, (v), (d))
#else
#define keel_subgroup_size() ((int)warpSize)
#define KEEL__SHFL(v, l) __shfl((v), (l))
#define KEEL__SHFL_XOR(v, m) __shfl_xor((v), (m))
#define KEEL__SHFL_DOWN(v, d) __shfl_down((v), (d))
#define KEEL__SHFL_UP(v, d) __shfl_up((v), (d))
#endif
#define keel_subgroup_lane() (keel_thread_linear() % keel_subgroup_size())

template <typename T> KEEL__DEV T keel_shfl(T v, int lane) { return KEEL__SHFL(v, lane); }
template <typename T> KEEL__DEV T keel_shfl_xor(T v, int mask) { return KEEL__SHFL_XOR(v, mask); }
template <typename T> KEEL__DEV T keel_shfl_down(T v, int delta) { return KEEL__SHFL_DOWN(v, delta); }
template <typename T> KEEL__DEV T keel_shfl_up(T v, int delta) { return KEEL__SHFL_UP(v, delta); }
template <typename T> KEEL__DEV T keel_subgroup_add(T v)
{
    for (int m = keel_subgroup_size() / 2; m > 0; m /= 2)
        v += KEEL__SHFL_XOR(v, m);
    return v;
}
template <typename T> KEEL__DEV T keel_subgroup_max(T v)
{
    for (int m = keel_subgroup_size() / 2; m > 0; m /= 2) {
        T o = KEEL__SHFL_XOR(v, m);
        v = o > v ? o : v;
    }
    return v;
}
template <typename T> KEEL__DEV T keel_subgroup_min(T v)
{
    for (int m = keel_subgroup_size() / 2; m > 0; m /= 2) {
        T o = KEEL__SHFL_XOR(v, m);
        v = o < v ? o : v;
    }
    return v;
}

/* ---- atomics: relaxed, return the old value ---- */

#define KEEL__GPU_ATOMIC_INT(sfx, T, U)                                                             \
    KEEL__DEV T keel_atomic_add_##sfx(T *p, T v) { return (T)atomicAdd((U *)p, (U)v); }             \
    KEEL__DEV T keel_atomic_xchg_##sfx(T *p, T v) { return (T)atomicExch((U *)p, (U)v); }           \
    KEEL__DEV T keel_atomic_cas_##sfx(T *p, T cmp, T v) { return (T)atomicCAS((U *)p, (U)cmp, (U)v); }
/* min and max where the vendor has them, else a compare-and-swap loop. */
#define KEEL__GPU_ATOMIC_MINMAX(sfx, T)                                                             \
    KEEL__DEV T keel_atomic_min_##sfx(T *p, T v) { return atomicMin(p, v); }                        \
    KEEL__DEV T keel_atomic_max_##sfx(T *p, T v) { return atomicMax(p, v); }
#define KEEL__GPU_ATOMIC_MINMAX_CAS(sfx, T, U)                                                      \
    KEEL__DEV T keel_atomic_min_##sfx(T *p, T v)                                                    \
    {                                                                                               \
        U old = *(volatile U *)p;                                                                   \
        while (v < (T)old) {                                                                        \
            U seen = atomicCAS((U *)p, old, (U)v);                                                  \
            if (seen == old)                                                                        \
                break;                                                                              \
            old = seen;                                                                             \
        }                                                                                           \
        return (T)old;                                                                              \
    }                                                                                               \
    KEEL__DEV T keel_atomic_max_##sfx(T *p, T v)                                                    \
    {                                                                                               \
        U old = *(volatile U *)p;                                                                   \
        while (v > (T)old) {                                                                        \
            U seen = atomicCAS((U *)p, old, (U)v);                                                  \
            if (seen == old)                                                                        \
                break;                                                                              \
            old = seen;                                                                             \
        }                                                                                           \
        return (T)old;                                                                              \
    }
KEEL__GPU_ATOMIC_INT(i32, int, int)
KEEL__GPU_ATOMIC_INT(u32, unsigned, unsigned)
KEEL__GPU_ATOMIC_INT(i64, long long, unsigned long long)
KEEL__GPU_ATOMIC_INT(u64, unsigned long long, unsigned long long)
KEEL__GPU_ATOMIC_MINMAX(i32, int)
KEEL__GPU_ATOMIC_MINMAX(u32, unsigned)
KEEL__GPU_ATOMIC_MINMAX(u64, unsigned long long)
#if KEEL_TARGET_CUDA
KEEL__GPU_ATOMIC_MINMAX(i64, long long)
#else
KEEL__GPU_ATOMIC_MINMAX_CAS(i64, long long, unsigned long long)
#endif

#define KEEL__GPU_ATOMIC_FP(sfx, T, U, to_bits, from_bits)                                          \
    KEEL__DEV T keel_atomic_add_##sfx(T *p, T v) { return atomicAdd(p, v); }                        \
    KEEL__DEV T keel_atomic_xchg_##sfx(T *p, T v) { return from_bits(atomicExch((U *)p, to_bits(v))); } \
    KEEL__DEV T keel_atomic_cas_##sfx(T *p, T cmp, T v)                                             \
    {                                                                                               \
        return from_bits(atomicCAS((U *)p, to_bits(cmp), to_bits(v)));                              \
    }                                                                                               \
    KEEL__DEV T keel_atomic_min_##sfx(T *p, T v)                                                    \
    {                                                                                               \
        U old = *(volatile U *)p;                                                                   \
        while (v < from_bits(old)) {                                                                \
            U seen = atomicCAS((U *)p, old, to_bits(v));                                            \
            if (seen == old)                                                                        \
                break;                                                                              \
            old = seen;                                                                             \
        }                                                                                           \
        return from_bits(old);                                                                      \
    }                                                                                               \
    KEEL__DEV T keel_atomic_max_##sfx(T *p, T v)                                                    \
    {                                                                                               \
        U old = *(volatile U *)p;                                                                   \
        while (v > from_bits(old)) {                                                                \
            U seen = atomicCAS((U *)p, old, to_bits(v));                                            \
            if (seen == old)                                                                        \
                break;                                                                              \
            old = seen;                                                                             \
        }                                                                                           \
        return from_bits(old);                                                                      \
    }
#define KEEL__D2U(x) ((unsigned long long)__double_as_longlong(x))
#define KEEL__U2D(x) __longlong_as_double((long long)(x))
KEEL__GPU_ATOMIC_FP(f32, float, unsigned, __float_as_uint, __uint_as_float)
KEEL__GPU_ATOMIC_FP(f64, double, unsigned long long, KEEL__D2U, KEEL__U2D)

/* The generic names pick the typed function by the pointer's type. */
#define KEEL__GPU_ATOMIC_GENERIC(T, sfx)                                                            \
    KEEL__DEV T keel_atomic_add(T *p, T v) { return keel_atomic_add_##sfx(p, v); }                  \
    KEEL__DEV T keel_atomic_min(T *p, T v) { return keel_atomic_min_##sfx(p, v); }                  \
    KEEL__DEV T keel_atomic_max(T *p, T v) { return keel_atomic_max_##sfx(p, v); }                  \
    KEEL__DEV T keel_atomic_xchg(T *p, T v) { return keel_atomic_xchg_##sfx(p, v); }                \
    KEEL__DEV T keel_atomic_cas(T *p, T c, T v) { return keel_atomic_cas_##sfx(p, c, v); }
KEEL__GPU_ATOMIC_GENERIC(int, i32)
KEEL__GPU_ATOMIC_GENERIC(unsigned, u32)
KEEL__GPU_ATOMIC_GENERIC(long long, i64)
KEEL__GPU_ATOMIC_GENERIC(unsigned long long, u64)
KEEL__GPU_ATOMIC_GENERIC(float, f32)
KEEL__GPU_ATOMIC_GENERIC(double, f64)

/* ---- fast math ---- */

#if KEEL_TARGET_CUDA
KEEL__DEV float keel__tanh_approx(float x)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return tanhf(x);
#endif
}
#define keel_fast_expf(x) __expf(x)
#define keel_fast_exp2f(x) exp2f(x)
#define keel_fast_logf(x) __logf(x)
#define keel_fast_log2f(x) __log2f(x)
#define keel_fast_sinf(x) __sinf(x)
#define keel_fast_cosf(x) __cosf(x)
#define keel_fast_powf(x, y) __powf((x), (y))
#define keel_fast_tanhf(x) keel__tanh_approx(x)
#define keel_fast_divf(x, y) __fdividef((x), (y))
#define keel_fast_rsqrtf(x) rsqrtf(x)
#else
#define keel_fast_expf(x) __expf(x)
#define keel_fast_exp2f(x) exp2f(x)
#define keel_fast_logf(x) __logf(x)
#define keel_fast_log2f(x) __log2f(x)
#define keel_fast_sinf(x) __sinf(x)
#define keel_fast_cosf(x) __cosf(x)
#define keel_fast_powf(x, y) __powf((x), (y))
#define keel_fast_tanhf(x) tanhf(x)
#define keel_fast_divf(x, y) __fdividef((x), (y))
#define keel_fast_rsqrtf(x) rsqrtf(x)
#endif

/* ---- 16-bit floats: stored as 16-bit integers, computed in float ---- */

typedef unsigned short keel_half;
typedef unsigned short keel_bf16;

#if KEEL_TARGET_CUDA
KEEL__DEV float keel_half_to_float(keel_half h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
KEEL__DEV keel_half keel_float_to_half(float f)
{
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#else
KEEL__DEV float keel_half_to_float(keel_half h) { return (float)__builtin_bit_cast(_Float16, h); }
KEEL__DEV keel_half keel_float_to_half(float f) { return __builtin_bit_cast(keel_half, (_Float16)f); }
#endif
KEEL__DEV float keel_bf16_to_float(keel_bf16 b) { return __uint_as_float((unsigned)b << 16); }
KEEL__DEV keel_bf16 keel_float_to_bf16(float f)
{
#if KEEL_TARGET_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return b;
#else
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (keel_bf16)((u >> 16) | 0x40u);   /* a quiet NaN */
    return (keel_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

/* ========================================================================== */
#else /* the CPU: C, compiled by the system C compiler */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* glibc's vector math library (libmvec) has SIMD forms of the float math
 * functions, but <math.h> tells GCC about them only under -ffast-math, so a
 * kernel calling tanhf() or expf() stayed a scalar loop. The CPU backend
 * defines KEEL_CPU_LIBMVEC when it links the kernel with libmvec; these
 * declarations then let GCC call the vector forms (within a few ulp of
 * libm's). Only what the running glibc exports: the first five since 2.22,
 * the rest since 2.35. Clang has no simd attribute and keeps libm's calls. */
#if defined(KEEL_CPU_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__FAST_MATH__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 22)
#define KEEL__SIMD_DECL __attribute__((simd("notinbranch")))
KEEL__SIMD_DECL float expf(float);
KEEL__SIMD_DECL float logf(float);
KEEL__SIMD_DECL float sinf(float);
KEEL__SIMD_DECL float cosf(float);
KEEL__SIMD_DECL float powf(float, float);
#endif
#if __GLIBC_PREREQ(2, 35)
KEEL__SIMD_DECL float tanhf(float);
KEEL__SIMD_DECL float sinhf(float);
KEEL__SIMD_DECL float coshf(float);
KEEL__SIMD_DECL float tanf(float);
KEEL__SIMD_DECL float asinf(float);
KEEL__SIMD_DECL float acosf(float);
KEEL__SIMD_DECL float atanf(float);
KEEL__SIMD_DECL float atan2f(float, float);
KEEL__SIMD_DECL float asinhf(float);
KEEL__SIMD_DECL float acoshf(float);
KEEL__SIMD_DECL float atanhf(float);
KEEL__SIMD_DECL float exp2f(float);
KEEL__SIMD_DECL float expm1f(float);
KEEL__SIMD_DECL float log2f(float);
KEEL__SIMD_DECL float log10f(float);
KEEL__SIMD_DECL float log1pf(float);
KEEL__SIMD_DECL float cbrtf(float);
KEEL__SIMD_DECL float erff(float);
KEEL__SIMD_DECL float erfcf(float);
KEEL__SIMD_DECL float hypotf(float, float);
#endif
#endif

#define KEEL__STATIC_ASSERT(c, msg) _Static_assert(c, msg)

/* What a CPU block sees of its launch: the layout of keel_cpu_kernel_ctx_t
 * (keel/kernel.h), which libkeel checks against this copy. */
typedef struct keel__dim3 {
    unsigned x, y, z;
} keel__dim3_t;
typedef struct keel__block {
    keel__dim3_t grid_dim, block_dim, block_idx;
    void *shared_mem;
    size_t shared_bytes;
} keel__block_t;
typedef void (*keel__block_fn_t)(const keel__block_t *block, void **args);
/* The layout of keel_cpu_kernel_desc_t for KEEL_CPU_KERNEL_ABI 1. */
typedef struct keel__kernel_desc {
    uint32_t abi_version;
    const char *name;
    keel__block_fn_t fn;
    unsigned num_args;
    size_t arg_sizes[64];
} keel__kernel_desc_t;

static const char __keel_region_marker __attribute__((unused)) = 0;
static const int __keel_one_dim __attribute__((unused)) = 0;
#define KEEL__ONE_DIM                                                                               \
    const int __keel_one_dim = 1;                                                                   \
    (void)__keel_one_dim;

#define keel_kernel static inline __attribute__((always_inline))
#define keel_block_kernel static inline __attribute__((always_inline))
/* The translator reads the shape and gives the block's wrapper constants. */
#define keel_block_size(x, y, z)
#define keel_device static inline
#define keel_restrict restrict
/* File-scope variables: plain globals, visible to dlsym whatever
 * -fvisibility KEEL_CPU_CFLAGS gives (keel_module_get_global). A constant
 * is written by the host like any global. */
#define keel_global __attribute__((visibility("default")))
#define keel_constant __attribute__((visibility("default")))

/* The translator gives a thread kernel these leading parameters (the block,
 * the thread's x index and global x index, its y and z, the block's x, which
 * a one-dimensional launch runs as one loop over global x) and a block
 * kernel the first one. */
#define KEEL__THREAD_PARAMS                                                                         \
    const keel__block_t *__keel_b, int __keel_tx, int __keel_gx, int __keel_ty, int __keel_tz, int __keel_bx
#define KEEL__BLOCK_PARAMS const keel__block_t *__keel_b
#define KEEL__THREAD_BODY                                                                           \
    const unsigned __keel_region_marker = 0;                                                        \
    (void)__keel_region_marker; (void)__keel_b; (void)__keel_tx; (void)__keel_gx; (void)__keel_ty; (void)__keel_tz; \
    (void)__keel_bx;
#define KEEL__BLOCK_BODY                                                                            \
    const int __keel_bx = (int)__keel_b->block_idx.x;                                               \
    (void)__keel_bx;

/* A region is a loop over the block's threads, x fastest: the compiler
 * vectorizes it like any loop. The thread's x index and its global x index
 * are both signed induction variables of that loop, which is what lets GCC
 * vectorize a body guarded by either ("if (i < n)", "if (t < s)": it splits
 * the loop at the bound; with an unsigned or derived index it gives up).
 * Leaving a thread's turn is continue. */
#define keel_threads                                                                                \
    for (int __keel_tz = 0; __keel_tz < (int)__keel_b->block_dim.z; __keel_tz++)                    \
        for (int __keel_ty = 0; __keel_ty < (int)__keel_b->block_dim.y; __keel_ty++)                \
            for (int __keel_tx = 0, __keel_gx = (int)(__keel_b->block_idx.x * __keel_b->block_dim.x), \
                     __keel_region_marker = 0;                                                      \
                 __keel_tx < (int)__keel_b->block_dim.x; __keel_tx++, __keel_gx++, (void)__keel_region_marker)

/* The first @p count threads: the same loops with the x loop's bound cut
 * where the count ends, so the compiler sees a shorter loop, not a test. */
#define keel_threads_first(count)                                                                   \
    for (int __keel_tz = 0, __keel_first = (count); __keel_tz < (int)__keel_b->block_dim.z; __keel_tz++) \
        for (int __keel_ty = 0; __keel_ty < (int)__keel_b->block_dim.y; __keel_ty++)                \
            for (int __keel_tx = 0, __keel_gx = (int)(__keel_b->block_idx.x * __keel_b->block_dim.x), \
                     __keel_region_marker = 0,                                                      \
                     __keel_end = KEEL__MIN((int)__keel_b->block_dim.x,                             \
                                            __keel_first - (__keel_tz * (int)__keel_b->block_dim.y + __keel_ty) * \
                                                               (int)__keel_b->block_dim.x);         \
                 __keel_tx < __keel_end; __keel_tx++, __keel_gx++, (void)__keel_region_marker)
#define KEEL__MIN(a, b) ((a) < (b) ? (a) : (b))

/* The end of every region is a barrier already. */
#define keel_barrier()                                                                              \
    do {                                                                                            \
        KEEL__AT_BLOCK_LEVEL("keel_barrier()");                                                     \
    } while (0)
#define keel_shared KEEL__AT_BLOCK_LEVEL("keel_shared"); __attribute__((aligned(64)))
#define keel_private(type, name)                                                                    \
    KEEL__AT_BLOCK_LEVEL("keel_private");                                                           \
    type name[__keel_b->block_dim.x * __keel_b->block_dim.y * __keel_b->block_dim.z]
#define keel_private_array(type, name, n)                                                           \
    KEEL__AT_BLOCK_LEVEL("keel_private_array");                                                     \
    type name[__keel_b->block_dim.x * __keel_b->block_dim.y * __keel_b->block_dim.z][n]
#define keel_priv(name) ((name)[keel_thread_linear()])

#define keel_dynamic_shared(type) ((type *)__keel_b->shared_mem)

#define keel_thread_x() (__keel_tx)
#define keel_thread_y() (__keel_ty)
#define keel_thread_z() (__keel_tz)
#define keel_global_x() (__keel_gx)
#define keel_global_y() (keel_block_y() * keel_block_dim_y() + __keel_ty)
#define keel_global_z() (keel_block_z() * keel_block_dim_z() + __keel_tz)
#define keel_block_x() (__keel_bx)
#define keel_block_y() ((int)__keel_b->block_idx.y)
#define keel_block_z() ((int)__keel_b->block_idx.z)
#define keel_block_dim_x() ((int)__keel_b->block_dim.x)
#define keel_block_dim_y() ((int)__keel_b->block_dim.y)
#define keel_block_dim_z() ((int)__keel_b->block_dim.z)
#define keel_grid_dim_x() ((int)__keel_b->grid_dim.x)
#define keel_grid_dim_y() ((int)__keel_b->grid_dim.y)
#define keel_grid_dim_z() ((int)__keel_b->grid_dim.z)

/* ---- sub-groups: a region runs its threads one after another, so a
 * sub-group is one thread and every sub-group operation is its identity. ---- */

#define keel_subgroup_size() 1
#define keel_subgroup_lane() ((void)keel_thread_x(), 0)
#define keel_shfl(v, lane) ((void)(lane), (v))
#define keel_shfl_xor(v, mask) ((void)(mask), (v))
#define keel_shfl_down(v, delta) ((void)(delta), (v))
#define keel_shfl_up(v, delta) ((void)(delta), (v))
#define keel_subgroup_add(v) (v)
#define keel_subgroup_max(v) (v)
#define keel_subgroup_min(v) (v)

/* ---- atomics: relaxed, return the old value (blocks run on several cores) ---- */

#define KEEL__CPU_ATOMIC_INT(sfx, T)                                                                \
    static inline T keel__atomic_add_##sfx(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
    static inline T keel__atomic_xchg_##sfx(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
    static inline T keel__atomic_cas_##sfx(T *p, T cmp, T v)                                        \
    {                                                                                               \
        __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);             \
        return cmp;                                                                                 \
    }                                                                                               \
    static inline T keel__atomic_min_##sfx(T *p, T v)                                               \
    {                                                                                               \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                               \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
            ;                                                                                       \
        return old;                                                                                 \
    }                                                                                               \
    static inline T keel__atomic_max_##sfx(T *p, T v)                                               \
    {                                                                                               \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                               \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
            ;                                                                                       \
        return old;                                                                                 \
    }
KEEL__CPU_ATOMIC_INT(i, int)
KEEL__CPU_ATOMIC_INT(u, unsigned)
KEEL__CPU_ATOMIC_INT(l, long)
KEEL__CPU_ATOMIC_INT(ul, unsigned long)
KEEL__CPU_ATOMIC_INT(ll, long long)
KEEL__CPU_ATOMIC_INT(ull, unsigned long long)

/* Floating point: a compare-and-swap on the bits; cas compares bits too, as on a GPU. */
#define KEEL__CPU_ATOMIC_FP(sfx, T, U)                                                              \
    static inline T keel__bits_to_##sfx(U u)                                                        \
    {                                                                                               \
        T v;                                                                                        \
        memcpy(&v, &u, sizeof v);                                                                   \
        return v;                                                                                   \
    }                                                                                               \
    static inline U keel__##sfx##_to_bits(T v)                                                      \
    {                                                                                               \
        U u;                                                                                        \
        memcpy(&u, &v, sizeof u);                                                                   \
        return u;                                                                                   \
    }                                                                                               \
    static inline T keel__atomic_add_##sfx(T *p, T v)                                               \
    {                                                                                               \
        U old = __atomic_load_n((U *)p, __ATOMIC_RELAXED);                                          \
        while (!__atomic_compare_exchange_n((U *)p, &old, keel__##sfx##_to_bits(keel__bits_to_##sfx(old) + v), 1, \
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))                    \
            ;                                                                                       \
        return keel__bits_to_##sfx(old);                                                            \
    }                                                                                               \
    static inline T keel__atomic_xchg_##sfx(T *p, T v)                                              \
    {                                                                                               \
        return keel__bits_to_##sfx(__atomic_exchange_n((U *)p, keel__##sfx##_to_bits(v), __ATOMIC_RELAXED)); \
    }                                                                                               \
    static inline T keel__atomic_cas_##sfx(T *p, T cmp, T v)                                        \
    {                                                                                               \
        U old = keel__##sfx##_to_bits(cmp);                                                         \
        __atomic_compare_exchange_n((U *)p, &old, keel__##sfx##_to_bits(v), 0, __ATOMIC_RELAXED,     \
                                    __ATOMIC_RELAXED);                                              \
        return keel__bits_to_##sfx(old);                                                            \
    }                                                                                               \
    static inline T keel__atomic_min_##sfx(T *p, T v)                                               \
    {                                                                                               \
        U old = __atomic_load_n((U *)p, __ATOMIC_RELAXED);                                          \
        while (v < keel__bits_to_##sfx(old) &&                                                      \
               !__atomic_compare_exchange_n((U *)p, &old, keel__##sfx##_to_bits(v), 1, __ATOMIC_RELAXED, \
                                            __ATOMIC_RELAXED))                                      \
            ;                                                                                       \
        return keel__bits_to_##sfx(old);                                                            \
    }                                                                                               \
    static inline T keel__atomic_max_##sfx(T *p, T v)                                               \
    {                                                                                               \
        U old = __atomic_load_n((U *)p, __ATOMIC_RELAXED);                                          \
        while (v > keel__bits_to_##sfx(old) &&                                                      \
               !__atomic_compare_exchange_n((U *)p, &old, keel__##sfx##_to_bits(v), 1, __ATOMIC_RELAXED, \
                                            __ATOMIC_RELAXED))                                      \
            ;                                                                                       \
        return keel__bits_to_##sfx(old);                                                            \
    }
KEEL__CPU_ATOMIC_FP(f, float, uint32_t)
KEEL__CPU_ATOMIC_FP(d, double, uint64_t)

#define KEEL__CPU_ATOMIC_PICK(op, p)                                                                \
    _Generic((p), int *: keel__atomic_##op##_i, unsigned *: keel__atomic_##op##_u,                  \
             long *: keel__atomic_##op##_l, unsigned long *: keel__atomic_##op##_ul,                \
             long long *: keel__atomic_##op##_ll, unsigned long long *: keel__atomic_##op##_ull,    \
             float *: keel__atomic_##op##_f, double *: keel__atomic_##op##_d)
#define keel_atomic_add(p, v) KEEL__CPU_ATOMIC_PICK(add, p)((p), (v))
#define keel_atomic_min(p, v) KEEL__CPU_ATOMIC_PICK(min, p)((p), (v))
#define keel_atomic_max(p, v) KEEL__CPU_ATOMIC_PICK(max, p)((p), (v))
#define keel_atomic_xchg(p, v) KEEL__CPU_ATOMIC_PICK(xchg, p)((p), (v))
#define keel_atomic_cas(p, c, v) KEEL__CPU_ATOMIC_PICK(cas, p)((p), (c), (v))

#define KEEL__CPU_ATOMIC_TYPED(sfx, T)                                                              \
    static inline T keel_atomic_add_##sfx(T *p, T v) { return keel_atomic_add(p, v); }              \
    static inline T keel_atomic_min_##sfx(T *p, T v) { return keel_atomic_min(p, v); }              \
    static inline T keel_atomic_max_##sfx(T *p, T v) { return keel_atomic_max(p, v); }              \
    static inline T keel_atomic_xchg_##sfx(T *p, T v) { return keel_atomic_xchg(p, v); }            \
    static inline T keel_atomic_cas_##sfx(T *p, T c, T v) { return keel_atomic_cas(p, c, v); }
KEEL__CPU_ATOMIC_TYPED(i32, int32_t)
KEEL__CPU_ATOMIC_TYPED(u32, uint32_t)
KEEL__CPU_ATOMIC_TYPED(i64, int64_t)
KEEL__CPU_ATOMIC_TYPED(u64, uint64_t)
KEEL__CPU_ATOMIC_TYPED(f32, float)
KEEL__CPU_ATOMIC_TYPED(f64, double)

/* ---- fast math: the C library's functions, which the compiler vectorizes
 * (glibc's libmvec) when the kernel is built without errno. ---- */

#define keel_fast_expf(x) expf(x)
#define keel_fast_exp2f(x) exp2f(x)
#define keel_fast_logf(x) logf(x)
#define keel_fast_log2f(x) log2f(x)
#define keel_fast_sinf(x) sinf(x)
#define keel_fast_cosf(x) cosf(x)
#define keel_fast_powf(x, y) powf((x), (y))
#define keel_fast_tanhf(x) tanhf(x)
#define keel_fast_divf(x, y) ((x) / (y))
#define keel_fast_rsqrtf(x) (1.0f / sqrtf(x))

/* ---- 16-bit floats ---- */

typedef uint16_t keel_half;
typedef uint16_t keel_bf16;

static inline float keel_bf16_to_float(keel_bf16 b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline keel_bf16 keel_float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (keel_bf16)((u >> 16) | 0x40u);   /* a quiet NaN */
    return (keel_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#if defined(__FLT16_MANT_DIG__)
static inline float keel_half_to_float(keel_half h)
{
    _Float16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}
static inline keel_half keel_float_to_half(float f)
{
    _Float16 v = (_Float16)f;
    keel_half h;
    memcpy(&h, &v, sizeof h);
    return h;
}
#else
/* IEEE binary16 by hand, round to nearest even, for compilers without _Float16. */
static inline float keel_half_to_float(keel_half h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f)
        u = s | 0x7f800000u | (m << 13);
    else if (e != 0)
        u = s | ((e + 112u) << 23) | (m << 13);
    else if (m == 0)
        u = s;
    else {
        e = 113;
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        u = s | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline keel_half keel_float_to_half(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (keel_half)(s | 0x7e00u);
    if (a >= 0x477ff000u)   /* rounds to infinity */
        return (keel_half)(s | 0x7c00u);
    if (a < 0x38800000u) {  /* a subnormal half, or zero */
        if (a <= 0x33000000u)
            return (keel_half)s;
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (keel_half)(s | h);
    }
    uint32_t h = ((a >> 13) - (112u << 10));
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (keel_half)(s | h);
}
#endif

#endif /* KEEL_TARGET_GPU */
/* ========================================================================== */

/* ---- the same on every target ---- */

#define keel_thread_linear()                                                                        \
    (__keel_one_dim ? keel_thread_x()                                                               \
                    : (keel_thread_z() * keel_block_dim_y() + keel_thread_y()) * keel_block_dim_x() + keel_thread_x())
#define keel_global_size_x() (keel_grid_dim_x() * keel_block_dim_x())
#define keel_global_size_y() (keel_grid_dim_y() * keel_block_dim_y())
#define keel_global_size_z() (keel_grid_dim_z() * keel_block_dim_z())

#define keel_load_half(p) keel_half_to_float(*(p))
#define keel_store_half(p, v) (*(p) = keel_float_to_half(v))
#define keel_load_bf16(p) keel_bf16_to_float(*(p))
#define keel_store_bf16(p, v) (*(p) = keel_float_to_bf16(v))

#endif /* KEEL_KERNEL_LANG_H */
