dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_CUDA: --with-cuda[=DIR]. Default: guess from nvcc on PATH,
# $CUDA_HOME, then /usr/local/cuda. Fails only when --with-cuda was given
# and the toolkit is not usable: its headers, the libraries the plugin
# links, and nvcc building for NVCC_ARCH_FLAGS are checked. Substitutes NVCC, CUDA_CPPFLAGS, CUDA_LDFLAGS,
# CUDA_LIBS, NVCC_ARCH_FLAGS; AM_CONDITIONAL HAVE_CUDA.
AC_DEFUN([KEEL_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend plugin (default: guess)])],
    [], [with_cuda=guess])
  AC_ARG_VAR([NVCC_ARCH_FLAGS], [nvcc -gencode flags (default: sm_80, sm_90 and compute_90 PTX)])
  have_cuda=no
  cuda_why=
  CUDA_SUMMARY=
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda],
      [yes|guess], [
        cuda_dir=
        AS_IF([test -n "$CUDA_HOME" && test -x "$CUDA_HOME/bin/nvcc"], [cuda_dir=$CUDA_HOME])
        AS_IF([test -z "$cuda_dir"], [
          AC_PATH_PROG([NVCC_ON_PATH], [nvcc])
          AS_IF([test -n "$NVCC_ON_PATH"], [cuda_dir=`dirname "$NVCC_ON_PATH"`; cuda_dir=`dirname "$cuda_dir"`])])
        AS_IF([test -z "$cuda_dir" && test -x /usr/local/cuda/bin/nvcc], [cuda_dir=/usr/local/cuda])],
      [cuda_dir=$with_cuda])
    AS_IF([test -n "$cuda_dir" && test -x "$cuda_dir/bin/nvcc" && test -f "$cuda_dir/include/cuda.h"], [
      NVCC="$cuda_dir/bin/nvcc"
      CUDA_HOME_DIR=$cuda_dir
      CUDA_CPPFLAGS="-I$cuda_dir/include"
      CUDA_LDFLAGS="-L$cuda_dir/lib64 -L$cuda_dir/lib64/stubs -Wl,-rpath,$cuda_dir/lib64"
      save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
      AC_CHECK_HEADERS([cuda.h cuda_runtime.h cublas_v2.h cublasLt.h nvrtc.h], [have_cuda=yes],
        [have_cuda=no; cuda_why="a CUDA header is missing (see config.log)"; break])
      CPPFLAGS=$save_CPPFLAGS
    ])
    dnl The libraries the plugin links (backends/cuda/Makefile.include) must
    dnl link: the static runtime, cuBLAS and cuBLASLt.
    AS_IF([test "x$have_cuda" = xyes], [
      AC_MSG_CHECKING([whether the CUDA runtime, cuBLAS and cuBLASLt link])
      save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
      LIBS="-lcudart_static -lcublasLt -lcublas -lstdc++ -lrt $PTHREAD_LIBS -ldl -lm $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>]], [[int n = 0; cublasHandle_t h; cublasLtHandle_t lt;
(void)cudaGetDeviceCount(&n); (void)cublasCreate(&h); (void)cublasLtCreate(&lt);]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no]); have_cuda=no; cuda_why="cudart_static, cublas or cublasLt does not link (see config.log)"])
      CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
    ])
    AS_IF([test -z "$NVCC_ARCH_FLAGS"],
      [NVCC_ARCH_FLAGS="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"])
    dnl nvcc must build device code for the chosen architectures (an old
    dnl toolkit lacks new targets; a new one drops old ones).
    AS_IF([test "x$have_cuda" = xyes], [
      AC_MSG_CHECKING([whether nvcc builds for $NVCC_ARCH_FLAGS])
      printf '__global__ void k(int *p) { p@<:@threadIdx.x@:>@ = 1; }\n' > conftest.cu
      AS_IF([$NVCC $NVCC_ARCH_FLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no]); have_cuda=no; cuda_why="$NVCC cannot build for $NVCC_ARCH_FLAGS (see config.log)"])
      rm -f conftest.cu conftest.$OBJEXT
    ])
    AS_IF([test "x$have_cuda" = xyes], [
      cuda_version=`"$NVCC" --version | sed -n 's/.*release \(@<:@0-9.@:>@*\).*/\1/p'`
      CUDA_SUMMARY="(nvcc $cuda_version in $cuda_dir)"],
      [AS_IF([test -n "$cuda_why"], [CUDA_SUMMARY="($cuda_why)"])])
    AS_IF([test "x$with_cuda" != xguess && test "x$have_cuda" = xno],
      [AC_MSG_ERROR([--with-cuda given but CUDA is not usable: ${cuda_why:-no toolkit (nvcc, cuda.h) found} (looked in '${cuda_dir:-PATH, CUDA_HOME, /usr/local/cuda}')])])
  ])
  AS_IF([test -z "$NVCC_ARCH_FLAGS"],
    [NVCC_ARCH_FLAGS="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"])
  AS_IF([test "x$have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [the CUDA plugin is built])])
  AC_SUBST([NVCC])
  AC_SUBST([CUDA_HOME_DIR])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
])
