/* SPDX-License-Identifier: MIT */
/* The transcendental elementwise loops of the CPU backend: exp, log, tanh,
 * sigmoid, SiLU and the two GELUs, in f32 and f64, for the unary operation
 * and the dense layer's epilogue.
 *
 * With glibc's vector math library (libmvec; configure's HAVE_LIBMVEC_LOOPS)
 * the math functions are declared here with GCC's simd attribute, which
 * tells the vectorizer that the C library has SIMD forms of them
 * (_ZGVdN8v_tanhf and so on, glibc 2.35 and later): each loop then calls one
 * vector function per 4, 8 or 16 elements. <math.h> declares the same only
 * under -ffast-math, which would also let the compiler assume away NaN and
 * infinity in the code around the calls; declared here, the loops keep IEEE
 * semantics and the functions keep their own handling of special values
 * (NaN in, NaN out; exp overflows to Inf and underflows through the
 * subnormals to 0; log of a negative is NaN, of 0 is -Inf). Each loop comes
 * in an SSE2, an AVX2 and an AVX-512F build picked at load time
 * (KEEL_CPU_VEC_MATH), which call libmvec's 4-, 8- and 16-lane forms.
 *
 * Without libmvec (another C library, clang, or configure --without-libmvec)
 * the f32 exp-based operations use keel__expf, which vectorizes, and the
 * rest call libm once per element.
 *
 * Sigmoid, SiLU and the tanh GELU are a / (1 + exp(-t)), one exponential
 * and one division: no 1 - tanh cancellation, and 1 + exp(-t) adds two
 * positive numbers, so both tails keep exp's relative accuracy. Once
 * exp(-t) overflows (t below about -88.7 in f32, -709.8 in f64) the
 * division gives 0 where the exact result is below |a| times the smallest
 * normal number. Written with exp(-|t|) and a select between the two
 * tails instead, the loops ran 2-20 % slower (AVX-512 and AVX2, 2^19
 * floats in cache) for the same error bound. The erf GELU is
 * x/2 (1 + erf(x / sqrt 2)) as PyTorch computes it: below x = -3 its
 * absolute error stays within |x| 2^-24, while its relative error grows as
 * the result falls toward 0. */
#include "config.h"
#include <math.h>
#include "kernels/cpu/cpu_ops.h"

#include "kernels/cpu/cpu_mvec.h"

/* a sigmoid(t) */
#define SIG_MUL(T, EXP, a, t) ((a) / ((T)1 + EXP(-(t))))

/* One function per operation, each a plain loop the compiler vectorizes,
 * with its own builds (KEEL_CPU_VEC_MATH). Written as one function with the
 * switch outside the loops, GCC kept the loops' constants in stack slots
 * around each vector call, and SiLU over 2^24 floats on two threads ran at
 * 25 GB/s against 29 for the same loop on its own (AMD EPYC, AVX-512). */
#define DEFINE_LOOP(T, NAME, ...)                                                                \
    static KEEL_CPU_VEC_MATH void NAME##_##T(const T *x, T *y, size_t n)                       \
    {                                                                                            \
        for (size_t i = 0; i < n; i++) {                                                         \
            T v = x[i];                                                                          \
            __VA_ARGS__                                                                          \
        }                                                                                        \
    }

#define DEFINE_MATH(T, EXP, LOG, TANH, ERF)                                                      \
    DEFINE_LOOP(T, exp, y[i] = EXP(v);)                                                          \
    DEFINE_LOOP(T, log, y[i] = LOG(v);)                                                          \
    DEFINE_LOOP(T, tanh, y[i] = TANH(v);)                                                        \
    DEFINE_LOOP(T, sigmoid, y[i] = SIG_MUL(T, EXP, (T)1, v);)                                    \
    DEFINE_LOOP(T, silu, y[i] = SIG_MUL(T, EXP, v, v);)                                          \
    /* x/2 (1 + tanh z) = x sigmoid(2z) */                                                       \
    DEFINE_LOOP(T, gelu_tanh, T z2 = (T)1.59576912160573071176 * (v + (T)0.044715 * v * v * v); \
                y[i] = SIG_MUL(T, EXP, v, z2);)                                                  \
    DEFINE_LOOP(T, gelu_erf, y[i] = (T)0.5 * v * ((T)1 + ERF(v * (T)0.70710678118654752440));)  \
    static void math_##T(keel_unary_op_t op, const T *x, T *y, size_t n)                        \
    {                                                                                            \
        switch (op) {                                                                            \
        case KEEL_UNARY_EXP: exp_##T(x, y, n); break;                                            \
        case KEEL_UNARY_LOG: log_##T(x, y, n); break;                                            \
        case KEEL_UNARY_TANH: tanh_##T(x, y, n); break;                                          \
        case KEEL_UNARY_SIGMOID: sigmoid_##T(x, y, n); break;                                    \
        case KEEL_UNARY_SILU: silu_##T(x, y, n); break;                                          \
        case KEEL_UNARY_GELU_TANH: gelu_tanh_##T(x, y, n); break;                                \
        case KEEL_UNARY_GELU_ERF: gelu_erf_##T(x, y, n); break;                                  \
        default: break;                                                                          \
        }                                                                                        \
    }
DEFINE_MATH(float, MATH_EXPF, logf, tanhf, erff)
DEFINE_MATH(double, exp, log, tanh, erf)

void keel__cpu_math_f32(keel_unary_op_t op, const float *x, float *y, size_t n)
{
    math_float(op, x, y, n);
}

void keel__cpu_math_f64(keel_unary_op_t op, const double *x, double *y, size_t n)
{
    math_double(op, x, y, n);
}
