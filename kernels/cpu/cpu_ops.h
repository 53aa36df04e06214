/* SPDX-License-Identifier: MIT */
/* Shared pieces of the CPU built-in operations: 16-bit float conversions
 * and the dtype-dispatching tile loaders. Internal to libkeel. */
#ifndef KEEL_KERNELS_CPU_OPS_H
#define KEEL_KERNELS_CPU_OPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "keel/backend_ops.h"
#include "kernels/dtype_size.h"

#define KEEL_CPU_HIDDEN __attribute__((visibility("hidden")))

/* The hot functions start on a cache line and their loops on a 32-byte
 * boundary: their speed on small sizes otherwise moves by a third or more
 * with where unrelated code changes happen to place them (measured on the
 * 1024-element add: an inner loop that straddles a 32-byte boundary ran at
 * half speed). */
#ifdef __clang__
/* clang has no optimize attribute, and refuses aligned on a function that
 * target_clones makes several of: the clones (KEEL_CPU_VEC) go without. */
#define KEEL_CPU_HOT __attribute__((aligned(64)))
#define KEEL__CPU_HOT_CLONES
#else
#define KEEL_CPU_HOT __attribute__((aligned(64), optimize("align-loops=32")))
#define KEEL__CPU_HOT_CLONES KEEL_CPU_HOT
#endif

/* The elementwise loops also come in an AVX2 build, picked once at load
 * time by the CPU (an ifunc) where the compiler and the C library support
 * it: twice the width of the SSE2 baseline the library is compiled for.
 * avx2 only, not fma: no multiply-add is contracted, so both builds give
 * the same bits. Reductions keep one build (a wider vector would change the
 * order of their sums between machines). Not under ThreadSanitizer: the
 * ifunc resolvers run before its runtime is set up, and every program
 * crashed at load.
 *
 * The transcendental loops (kernels/cpu/ops_cpu_math.c, KEEL_CPU_VEC_MATH)
 * add an AVX-512F build: they are bound by the vector math functions they
 * call, and libmvec's 16-lane forms are up to twice as fast as its 8-lane
 * ones. Their builds do not give the same bits (libmvec's forms for each
 * width are different code, and AVX-512F contracts multiply-adds), only
 * results within the same error bound. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute) && !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define KEEL_CPU_VEC KEEL__CPU_HOT_CLONES __attribute__((target_clones("avx2", "default")))
#define KEEL_CPU_VEC_MATH KEEL__CPU_HOT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef KEEL_CPU_VEC
#define KEEL_CPU_VEC KEEL_CPU_HOT
#define KEEL_CPU_VEC_MATH KEEL_CPU_HOT
#endif

/* Elements a half-precision loop converts to f32 at a time: small enough for
 * the stack and L1, large enough to amortize the loop around it. */
#define KEEL_CPU_TILE 512

/* Items below which a loop stays on the calling worker thread. */
#define KEEL_CPU_GRAIN ((size_t)1 << 15)

static inline uint32_t keel__f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float keel__u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* binary32 -> binary16, round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t keel__f32_to_f16(float f)
{
    uint32_t x = keel__f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* Inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) /* rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        /* Below the smallest normal: adding 0.5 makes the FPU round the
         * value to a multiple of 2^-24, the subnormal step, to nearest even. */
        float a = keel__u2f(ax) + 0.5f;
        return (uint16_t)(sign | (keel__f2u(a) - 0x3f000000u));
    }
    uint32_t odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + odd; /* rebias the exponent by -112 and round */
    return (uint16_t)(sign | (ax >> 13));
}

static inline float keel__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return keel__u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return keel__u2f(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t keel__f32_to_bf16(float f)
{
    uint32_t x = keel__f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float keel__bf16_to_f32(uint16_t h)
{
    return keel__u2f((uint32_t)h << 16);
}

/* double -> float rounded to odd: converting that float to a format of at
 * most 22 significand bits then rounds once, correctly, from the double. */
static inline float keel__f64_to_f32_odd(double d)
{
    float f = (float)d;
    if (isnan(d) || (double)f == d)
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    return keel__u2f(keel__f2u(f) | 1u);
}

static inline uint16_t keel__f64_to_f16(double d)
{
    return keel__f32_to_f16(keel__f64_to_f32_odd(d));
}

static inline uint16_t keel__f64_to_bf16(double d)
{
    return keel__f32_to_bf16(keel__f64_to_f32_odd(d));
}

/* exp for f32 without branches or calls, so loops that use it vectorize:
 * e^x = 2^n e^r with n = round(x / ln 2), |r| <= ln 2 / 2, e^r by its Taylor
 * polynomial to degree 7 (truncation below 2^-27), 2^n built in two halves so
 * that subnormal results come out right. Within 2 ulp of expf; exact
 * overflow to Inf, underflow to 0, NaN passed through. */
static inline float keel__expf(float x)
{
    /* NaN takes the lower clamp (its result is x itself, below), so that
     * converting nf to int is defined for every input. */
    float xc = x > 88.8f ? 88.8f : x >= -104.0f ? x : -104.0f;
    float nf = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - nf * 0.693359375f;  /* ln 2 split: the high part has 9 bits, so nf * hi is exact */
    r = r - nf * -2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int n = (int)nf, n1 = n >> 1, n2 = n - n1;
    float s1 = keel__u2f((uint32_t)(n1 + 127) << 23), s2 = keel__u2f((uint32_t)(n2 + 127) << 23);
    float v = p * s1 * s2;
    v = x > 88.72283935546875f ? INFINITY : v;
    v = x < -103.972084045410f ? 0.0f : v;
    return x != x ? x : v;
}

/* The same conversions without branches: every case is computed and the
 * right one selected, so the array loops below vectorize. The branchy forms
 * above stay as the readable reference (the tests compare against them). */
static inline float keel__f16_to_f32_v(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t normal = sign | ((e + 112u) << 23) | (m << 13);
    uint32_t special = sign | 0x7f800000u | (m << 13);
    uint32_t sub = sign | keel__f2u((float)(int32_t)m * 0x1p-24f);
    return keel__u2f(e == 0x1f ? special : e == 0 ? sub : normal);
}

static inline uint16_t keel__f32_to_f16_v(float f)
{
    uint32_t x = keel__f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    uint32_t special = 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u);
    uint32_t sub = keel__f2u(keel__u2f(ax) + 0.5f) - 0x3f000000u;
    uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
    uint32_t r = ax >= 0x7f800000u ? special : ax >= 0x477ff000u ? 0x7c00u : ax < 0x38800000u ? sub : normal;
    return (uint16_t)(sign | r);
}

static inline uint16_t keel__f32_to_bf16_v(float f)
{
    uint32_t x = keel__f2u(f);
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t quiet = (x >> 16) | 0x40u;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

/* n elements of a 16/32-bit dtype at src (element offset applied by the
 * caller) to f32, and back. */
static inline void keel__load_f32(keel_dtype_t dt, const void *src, size_t n, float *dst)
{
    if (dt == KEEL_F32) {
        memcpy(dst, src, n * 4);
    } else if (dt == KEEL_F16) {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] = keel__f16_to_f32_v(s[i]);
    } else {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++)
            dst[i] = keel__bf16_to_f32(s[i]);
    }
}

static inline void keel__store_f32(keel_dtype_t dt, void *dst, size_t n, const float *src)
{
    if (dt == KEEL_F32) {
        memcpy(dst, src, n * 4);
    } else if (dt == KEEL_F16) {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = keel__f32_to_f16_v(src[i]);
    } else {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++)
            d[i] = keel__f32_to_bf16_v(src[i]);
    }
}

/* The transcendental elementwise loops (kernels/cpu/ops_cpu_math.c): y[i] =
 * op(x[i]) for op exp, log, tanh, sigmoid, SiLU or either GELU (any other op
 * writes nothing); y may be x. The unary operation and the dense layer's
 * epilogue share them. */
KEEL_CPU_HIDDEN void keel__cpu_math_f32(keel_unary_op_t op, const float *x, float *y, size_t n);
KEEL_CPU_HIDDEN void keel__cpu_math_f64(keel_unary_op_t op, const double *x, double *y, size_t n);

/* Softmax (lg: log-softmax) or layer norm (g, b: NULL or the affine terms)
 * of rows [0, rows) of n elements, row i at x + i * ldx and y + i * ldy, in
 * f32 or f64 (kernels/cpu/ops_cpu_rows.c); y may be x. */
KEEL_CPU_HIDDEN void keel__cpu_softmax_rows_f32(const float *x, size_t ldx, float *y, size_t ldy, size_t rows,
                                                size_t n, int lg);
KEEL_CPU_HIDDEN void keel__cpu_softmax_rows_f64(const double *x, size_t ldx, double *y, size_t ldy, size_t rows,
                                                size_t n, int lg);
KEEL_CPU_HIDDEN void keel__cpu_layernorm_rows_f32(const float *x, size_t ldx, float *y, size_t ldy, size_t rows,
                                                  size_t n, const float *g, const float *b, double eps);
KEEL_CPU_HIDDEN void keel__cpu_layernorm_rows_f64(const double *x, size_t ldx, double *y, size_t ldy, size_t rows,
                                                  size_t n, const double *g, const double *b, double eps);

/* The BLAS half (kernels/cpu/ops_cpu_blas.c), on OpenBLAS: built only with
 * it (HAVE_OPENBLAS). keel__cpu_blas_name writes "OpenBLAS 0.3.21". */
KEEL_CPU_HIDDEN keel_status_t keel__cpu_gemm(void *stream_ctx, const keel_gemm_params_t *p);
KEEL_CPU_HIDDEN keel_status_t keel__cpu_gemv(void *stream_ctx, const keel_gemv_args_t *g);
KEEL_CPU_HIDDEN keel_status_t keel__cpu_dense(void *stream_ctx, const keel_dense_params_t *p);
KEEL_CPU_HIDDEN void keel__cpu_blas_name(char *text, size_t size);

#endif /* KEEL_KERNELS_CPU_OPS_H */
