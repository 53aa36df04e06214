dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_CUDA: --with-cuda[=DIR]. Default: guess from nvcc on PATH,
# $CUDA_HOME, then /usr/local/cuda. Fails only when --with-cuda was given
# and the toolkit is not usable. Substitutes NVCC, CUDA_CPPFLAGS, CUDA_LDFLAGS,
# CUDA_LIBS, NVCC_ARCH_FLAGS; AM_CONDITIONAL HAVE_CUDA.
AC_DEFUN([KEEL_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend plugin (default: guess)])],
    [], [with_cuda=guess])
  AC_ARG_VAR([NVCC_ARCH_FLAGS], [nvcc -gencode flags (default: sm_80, sm_90 and compute_90 PTX)])
  have_cuda=no
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
      AC_CHECK_HEADERS([cuda.h cuda_runtime.h cublas_v2.h cublasLt.h nvrtc.h], [have_cuda=yes], [have_cuda=no; break])
      CPPFLAGS=$save_CPPFLAGS
      cuda_version=`"$NVCC" --version | sed -n 's/.*release \(@<:@0-9.@:>@*\).*/\1/p'`
      CUDA_SUMMARY="(nvcc $cuda_version in $cuda_dir)"
    ])
    AS_IF([test "x$with_cuda" != xguess && test "x$have_cuda" = xno],
      [AC_MSG_ERROR([--with-cuda given but no usable CUDA toolkit (nvcc, cuda.h, cublas_v2.h, nvrtc.h) found in '${cuda_dir:-PATH, CUDA_HOME, /usr/local/cuda}'])])
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
