dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_CFLAG(FLAG, [ACTION-IF-ACCEPTED], [ACTION-IF-NOT-ACCEPTED])
# Whether $CC compiles a C program with FLAG. Warnings count as a refusal
# (-Werror), so a compiler that accepts a flag only to ignore it with a
# warning is not taken to support it. FLAG may be a shell variable.
AC_DEFUN([KEEL_CHECK_CFLAG], [
  AS_VAR_PUSHDEF([keel_cv_flag], [keel_cv_cflag_$1])dnl
  AC_CACHE_CHECK([whether $CC accepts $1], [keel_cv_flag], [
    keel_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS $1 -Werror"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
      [AS_VAR_SET([keel_cv_flag], [yes])], [AS_VAR_SET([keel_cv_flag], [no])])
    CFLAGS=$keel_save_CFLAGS])
  AS_VAR_IF([keel_cv_flag], [yes], [$2], [$3])
  AS_VAR_POPDEF([keel_cv_flag])dnl
])

# KEEL_CHECK_OPS_CFLAGS: KEEL_OPS_CFLAGS, the flags of the CPU kernels
# (kernels/Makefile.include says why each matters), those of them the
# compiler knows. -fvect-cost-model is GCC's alone: clang vectorizes loops
# with a remainder without being told.
AC_DEFUN([KEEL_CHECK_OPS_CFLAGS], [
  KEEL_OPS_CFLAGS=
  for keel_flag in -fvect-cost-model=dynamic -fno-math-errno -fno-trapping-math; do
    KEEL_CHECK_CFLAG([$keel_flag], [KEEL_OPS_CFLAGS="$KEEL_OPS_CFLAGS $keel_flag"])
  done
  AC_SUBST([KEEL_OPS_CFLAGS])
])
