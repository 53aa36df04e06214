dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_OPENBLAS: --with-openblas[=yes|no|guess]. Finds cblas.h and
# libopenblas through pkg-config (Debian: libopenblas-dev). Defines
# HAVE_OPENBLAS, substitutes OPENBLAS_CFLAGS / OPENBLAS_LIBS.
AC_DEFUN([KEEL_CHECK_OPENBLAS], [
  AC_ARG_WITH([openblas],
    [AS_HELP_STRING([--with-openblas], [use OpenBLAS for the CPU backend's BLAS (default: guess)])],
    [], [with_openblas=guess])
  have_openblas=no
  AS_IF([test "x$with_openblas" != xno], [
    PKG_CHECK_MODULES([OPENBLAS], [openblas], [have_openblas=yes], [have_openblas=no])
    AS_IF([test "x$have_openblas" = xyes], [
      save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $OPENBLAS_CFLAGS"
      AC_CHECK_HEADER([cblas.h], [], [have_openblas=no])
      CPPFLAGS=$save_CPPFLAGS])
    AS_IF([test "x$with_openblas" = xyes && test "x$have_openblas" = xno],
      [AC_MSG_ERROR([--with-openblas given but OpenBLAS (cblas.h, openblas.pc) was not found: install libopenblas-dev])])
  ])
  AS_IF([test "x$have_openblas" = xyes], [AC_DEFINE([HAVE_OPENBLAS], [1], [OpenBLAS is available])])
  AM_CONDITIONAL([HAVE_OPENBLAS], [test "x$have_openblas" = xyes])
])
