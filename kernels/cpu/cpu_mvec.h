/* SPDX-License-Identifier: MIT */
/* glibc's vector math functions for the CPU backend's loops: with libmvec
 * (configure's HAVE_LIBMVEC_LOOPS) the math functions are declared with
 * GCC's simd attribute, so the vectorizer calls their SIMD forms; MATH_EXPF
 * is the f32 exp a loop calls (keel__expf without libmvec). Included by the
 * files whose loops call them (kernels/cpu/ops_cpu_math.c, which describes
 * the choice, and kernels/cpu/ops_cpu_rows.c). */
#ifndef KEEL_KERNELS_CPU_MVEC_H
#define KEEL_KERNELS_CPU_MVEC_H

#include <math.h>

#if defined(HAVE_LIBMVEC_LOOPS) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__FAST_MATH__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 35)
#define SIMD_DECL __attribute__((simd("notinbranch")))
SIMD_DECL float expf(float);
SIMD_DECL float logf(float);
SIMD_DECL float tanhf(float);
SIMD_DECL float erff(float);
SIMD_DECL double exp(double);
SIMD_DECL double log(double);
SIMD_DECL double tanh(double);
SIMD_DECL double erf(double);
#define MATH_EXPF expf
#endif
#endif
#ifndef MATH_EXPF
#define MATH_EXPF keel__expf
#endif


#endif /* KEEL_KERNELS_CPU_MVEC_H */
