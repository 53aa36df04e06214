dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_LIBMVEC: glibc's vector math library (libmvec), for the CPU
# backend's transcendental loops (kernels/cpu/ops_cpu_math.c) and the
# hand-written loops of the benchmarks.
#
#   --with-libmvec=yes|no|check (default check)
#
# HAVE_LIBMVEC and MVEC_LIBS (-lmvec): the library, with the float
# functions of glibc 2.35. HAVE_LIBMVEC_LOOPS: besides, $CC vectorizes a
# loop through the simd declarations ops_cpu_math.c makes and the program
# links: every vector form the SSE2, AVX2 and AVX-512F builds of such a loop
# call is there. Without it the CPU backend's loops call libm per element.
AC_DEFUN([KEEL_CHECK_LIBMVEC], [
  AC_ARG_WITH([libmvec],
    [AS_HELP_STRING([--with-libmvec], [vectorize the CPU backend's exp, log, tanh, erf loops with glibc's libmvec (default: where it works)])],
    [], [with_libmvec=check])
  MVEC_LIBS=
  have_libmvec_loops=no
  AS_IF([test "x$with_libmvec" != xno], [
    AC_CHECK_LIB([mvec], [_ZGVbN4v_tanhf],
      [MVEC_LIBS=-lmvec; AC_DEFINE([HAVE_LIBMVEC], [1], [glibc's libmvec, with the float functions of glibc 2.35])])
    AS_IF([test -n "$MVEC_LIBS"], [
      AC_CACHE_CHECK([whether $CC vectorizes math loops with libmvec], [keel_cv_libmvec_loops], [
        keel_save_CFLAGS=$CFLAGS
        keel_save_LIBS=$LIBS
        CFLAGS="$CFLAGS -O2 -ftree-vectorize -fno-math-errno -fno-trapping-math -Werror"
        LIBS="$MVEC_LIBS -lm $LIBS"
        AC_LINK_IFELSE([AC_LANG_SOURCE([[
#include <math.h>
#if !defined(__x86_64__) || !defined(__GNUC__) || defined(__clang__) || !defined(__GLIBC_PREREQ)
#error "GCC on x86-64 glibc only"
#elif !__GLIBC_PREREQ(2, 35)
#error "glibc 2.35 or later"
#endif
__attribute__((simd("notinbranch"))) float tanhf(float);
__attribute__((simd("notinbranch"))) float erff(float);
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float logf(float);
__attribute__((simd("notinbranch"))) double tanh(double);
__attribute__((simd("notinbranch"))) double erf(double);
__attribute__((simd("notinbranch"))) double exp(double);
__attribute__((simd("notinbranch"))) double log(double);
float xf[64], yf[64];
double xd[64], yd[64];
__attribute__((target_clones("avx512f", "avx2", "default"))) void f(int n)
{
    for (int i = 0; i < n; i++)
        yf[i] = tanhf(xf[i]) + erff(xf[i]) + expf(xf[i]) + logf(xf[i]);
    for (int i = 0; i < n; i++)
        yd[i] = tanh(xd[i]) + erf(xd[i]) + exp(xd[i]) + log(xd[i]);
}
int main(void) { f(64); return yf[0] > 1e30f; }
]])], [keel_cv_libmvec_loops=yes], [keel_cv_libmvec_loops=no])
        CFLAGS=$keel_save_CFLAGS
        LIBS=$keel_save_LIBS])
      have_libmvec_loops=$keel_cv_libmvec_loops
    ])
    AS_IF([test "x$with_libmvec" = xyes && test "x$have_libmvec_loops" != xyes],
      [AC_MSG_ERROR([--with-libmvec: the CPU loops cannot use libmvec here (it needs glibc 2.35 or later and GCC on x86-64; see config.log)])])
  ])
  AS_IF([test "x$have_libmvec_loops" = xyes],
    [AC_DEFINE([HAVE_LIBMVEC_LOOPS], [1], [the CPU backend's transcendental loops call libmvec])])
  AC_SUBST([MVEC_LIBS])
  AM_CONDITIONAL([HAVE_LIBMVEC_LOOPS], [test "x$have_libmvec_loops" = xyes])
])
