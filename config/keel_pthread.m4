dnl SPDX-License-Identifier: MIT
# AX_PTHREAD_SIMPLE: add -pthread to CFLAGS/LIBS (gcc and clang on Linux).
AC_DEFUN([AX_PTHREAD_SIMPLE], [
  PTHREAD_CFLAGS=-pthread
  PTHREAD_LIBS=-pthread
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
