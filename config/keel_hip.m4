dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_HIP: --with-hip[=DIR]. Default: guess from $ROCM_PATH,
# /opt/rocm, then hipcc on PATH (Debian's packages: /usr/bin/hipcc with the
# headers in /usr/include/hip and libamdhip64 in the multiarch directory).
# Fails only when --with-hip was given and HIP is not usable. Substitutes
# HIPCC, HIP_CPPFLAGS, HIP_LDFLAGS, HIP_LIBS, HIPCC_ARCH_FLAGS, HIPCC_WRAP,
# HIPCC_PLATFORM_FLAGS; AM_CONDITIONAL HAVE_HIP and HIP_NVIDIA.
# HIP_CPPFLAGS has -DKEEL_HAVE_HIPRTC where hiprtc links.
#
# --with-hip-platform=nvidia builds the same plugin on HIP's NVIDIA platform
# instead (KEEL_CHECK_HIP_NVIDIA): HIP's headers for NVIDIA from
# --with-hip-include=DIR, the CUDA toolkit of KEEL_CHECK_CUDA (or nvcc on
# PATH), nvcc for the kernels and the C compiler with
# -D__HIP_PLATFORM_NVIDIA__ for the rest. It must follow KEEL_CHECK_CUDA.
AC_DEFUN([KEEL_CHECK_HIP], [
  AC_ARG_WITH([hip],
    [AS_HELP_STRING([--with-hip@<:@=DIR@:>@], [build the HIP backend plugin (default: guess)])],
    [], [with_hip=guess])
  AC_ARG_WITH([hip-platform],
    [AS_HELP_STRING([--with-hip-platform=amd|nvidia],
      [the HIP platform the HIP plugin is built for (default: amd); nvidia needs --with-hip-include])],
    [], [with_hip_platform=amd])
  AC_ARG_WITH([hip-include],
    [AS_HELP_STRING([--with-hip-include=DIR],
      [HIP's headers for its NVIDIA platform (DIR/hip/hip_runtime_api.h, DIR/hip/nvidia_detail)])],
    [], [with_hip_include=])
  AC_ARG_VAR([HIP_OFFLOAD_ARCH], [AMD GPU targets of the HIP kernels (default: gfx90a gfx1030)])
  have_hip=no
  HIP_SUMMARY=
  hip_why=
  HIPCC_WRAP=
  HIPCC_PLATFORM_FLAGS=
  AS_CASE([$with_hip_platform],
    [amd|nvidia], [],
    [AC_MSG_ERROR([--with-hip-platform=$with_hip_platform: the HIP platform is amd or nvidia])])
  AS_IF([test "x$with_hip_platform" = xamd && test -n "$with_hip_include"],
    [AC_MSG_ERROR([--with-hip-include is for --with-hip-platform=nvidia (on AMD, --with-hip=DIR names ROCm)])])
  AS_IF([test "x$with_hip_platform" = xnvidia && test "x$with_hip" != xno], [KEEL_CHECK_HIP_NVIDIA],
        [test "x$with_hip" != xno], [
    AS_CASE([$with_hip],
      [yes|guess], [
        hip_dir=
        AS_IF([test -n "$ROCM_PATH" && test -x "$ROCM_PATH/bin/hipcc"], [hip_dir=$ROCM_PATH])
        AS_IF([test -z "$hip_dir" && test -x /opt/rocm/bin/hipcc], [hip_dir=/opt/rocm])
        AS_IF([test -z "$hip_dir"], [
          AC_PATH_PROG([HIPCC_ON_PATH], [hipcc])
          AS_IF([test -n "$HIPCC_ON_PATH"], [hip_dir=`dirname "$HIPCC_ON_PATH"`; hip_dir=`dirname "$hip_dir"`])])],
      [hip_dir=$with_hip])
    AS_IF([test -z "$hip_dir"], [hip_why="no hipcc"],
          [test ! -x "$hip_dir/bin/hipcc"], [hip_why="no $hip_dir/bin/hipcc"],
          [test ! -f "$hip_dir/include/hip/hip_runtime_api.h"], [hip_why="no $hip_dir/include/hip/hip_runtime_api.h"],
          [have_hip=yes])
    AS_IF([test "x$have_hip" = xyes], [
      HIPCC="$hip_dir/bin/hipcc"
      # /usr is the compiler's own search path: naming it would reorder system headers.
      HIP_CPPFLAGS="-D__HIP_PLATFORM_AMD__"
      HIP_LDFLAGS=
      AS_IF([test "$hip_dir" != /usr], [
        HIP_CPPFLAGS="-isystem $hip_dir/include $HIP_CPPFLAGS"
        HIP_LDFLAGS="-L$hip_dir/lib -Wl,-rpath,$hip_dir/lib"])
      save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
      LDFLAGS="$LDFLAGS $HIP_LDFLAGS"
      AC_CHECK_LIB([amdhip64], [hipGetDeviceCount], [HIP_LIBS="-lamdhip64"],
        [have_hip=no; hip_why="libamdhip64 does not link"])
      AS_IF([test "x$have_hip" = xyes], [
        LIBS="$HIP_LIBS $LIBS"
        # hiprtc is inside libamdhip64 up to ROCm 5.x, its own library later.
        AC_SEARCH_LIBS([hiprtcCreateProgram], [hiprtc], [
          HIP_CPPFLAGS="$HIP_CPPFLAGS -DKEEL_HAVE_HIPRTC"
          AS_IF([test "x$ac_cv_search_hiprtcCreateProgram" != "xnone required"],
            [HIP_LIBS="$ac_cv_search_hiprtcCreateProgram $HIP_LIBS"])])])
      LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
    ])
    AS_IF([test "x$have_hip" = xyes], [
      AS_IF([test -z "$HIP_OFFLOAD_ARCH"], [HIP_OFFLOAD_ARCH="gfx90a gfx1030"])
      HIPCC_ARCH_FLAGS=
      for a in $HIP_OFFLOAD_ARCH; do HIPCC_ARCH_FLAGS="$HIPCC_ARCH_FLAGS --offload-arch=$a"; done
      # hipcc must build device code for these targets (clang's AMDGPU target
      # and the device libraries are separate packages on some systems).
      AC_MSG_CHECKING([whether $HIPCC builds for $HIP_OFFLOAD_ARCH])
      printf '#include <hip/hip_runtime.h>\n__global__ void k(int *p) { p@<:@threadIdx.x@:>@ = 1; }\n' > conftest.hip
      AS_IF([$HIPCC $HIPCC_ARCH_FLAGS $HIP_CPPFLAGS -c conftest.hip -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no]); have_hip=no; hip_why="$HIPCC cannot build for $HIP_OFFLOAD_ARCH (see config.log)"])
      rm -f conftest.hip conftest.$OBJEXT
    ])
    AS_IF([test "x$have_hip" = xyes], [
      hip_version=`sed -n 's/^#define HIP_VERSION_MAJOR \(@<:@0-9@:>@*\)/\1/p;s/^#define HIP_VERSION_MINOR \(@<:@0-9@:>@*\)/.\1/p' "$hip_dir/include/hip/hip_version.h" 2>/dev/null | tr -d '\n'`
      HIP_SUMMARY="(HIP $hip_version, hipcc in $hip_dir/bin, for $HIP_OFFLOAD_ARCH)"],
      [HIP_SUMMARY="($hip_why)"])
    AS_IF([test "x$with_hip" != xguess && test "x$have_hip" = xno],
      [AC_MSG_ERROR([--with-hip given but HIP is not usable: $hip_why (looked in '${hip_dir:-ROCM_PATH, /opt/rocm, PATH}')])])
  ])
  AS_IF([test "x$have_hip" = xyes], [AC_DEFINE([HAVE_HIP], [1], [the HIP plugin is built])])
  AC_SUBST([HIPCC])
  AC_SUBST([HIP_CPPFLAGS])
  AC_SUBST([HIP_LDFLAGS])
  AC_SUBST([HIP_LIBS])
  AC_SUBST([HIPCC_ARCH_FLAGS])
  AC_SUBST([HIPCC_WRAP])
  AC_SUBST([HIPCC_PLATFORM_FLAGS])
  AM_CONDITIONAL([HAVE_HIP], [test "x$have_hip" = xyes])
  AM_CONDITIONAL([HIP_NVIDIA], [test "x$have_hip" = xyes && test "x$with_hip_platform" = xnvidia])
])

# KEEL_CHECK_HIP_NVIDIA: the HIP plugin on HIP's NVIDIA platform. The HIP
# headers there are inline wrappers of the CUDA runtime, driver API and NVRTC:
# the plugin links cudart_static and libnvrtc (the driver API is resolved
# through the runtime, backends/hip/hip_nv_driver.c), so it loads without an
# NVIDIA driver and its probe says there is none. The kernels are built by
# nvcc (-x cu) for NVCC_ARCH_FLAGS, through config/nvcc-libtool.
AC_DEFUN([KEEL_CHECK_HIP_NVIDIA], [
  hip_inc=$with_hip_include
  AS_IF([test "x$with_hip" != xyes && test "x$with_hip" != xguess],
    [AC_MSG_ERROR([--with-hip-platform=nvidia takes the headers from --with-hip-include=DIR, not --with-hip=DIR])])
  hip_cuda=
  AS_IF([test "x$have_cuda" = xyes], [hip_cuda=$CUDA_HOME_DIR], [
    AC_PATH_PROG([HIP_NVCC_ON_PATH], [nvcc])
    AS_IF([test -n "$HIP_NVCC_ON_PATH"], [hip_cuda=`dirname "$HIP_NVCC_ON_PATH"`; hip_cuda=`dirname "$hip_cuda"`])])
  AS_IF([test -z "$hip_inc"], [hip_why="--with-hip-platform=nvidia needs --with-hip-include=DIR"],
        [test ! -f "$hip_inc/hip/hip_runtime_api.h"], [hip_why="no $hip_inc/hip/hip_runtime_api.h"],
        [test ! -f "$hip_inc/hip/nvidia_detail/nvidia_hip_runtime_api.h"],
          [hip_why="no $hip_inc/hip/nvidia_detail/nvidia_hip_runtime_api.h (HIP's NVIDIA headers, ROCm's hipother)"],
        [test -z "$hip_cuda" || test ! -x "$hip_cuda/bin/nvcc" || test ! -f "$hip_cuda/include/cuda_runtime.h"],
          [hip_why="no CUDA toolkit (nvcc, cuda_runtime.h) for HIP's NVIDIA platform"],
        [test ! -f "$hip_cuda/include/nvrtc.h"], [hip_why="no $hip_cuda/include/nvrtc.h"],
        [have_hip=yes])
  AS_IF([test "x$have_hip" = xyes], [
    HIPCC="$hip_cuda/bin/nvcc"
    HIP_CPPFLAGS="-D__HIP_PLATFORM_NVIDIA__ -isystem $hip_inc -isystem $hip_cuda/include -DKEEL_HAVE_HIPRTC"
    HIP_LDFLAGS="-L$hip_cuda/lib64 -Wl,-rpath,$hip_cuda/lib64"
    HIP_LIBS="-lcudart_static -lnvrtc -lrt"
    HIPCC_ARCH_FLAGS=$NVCC_ARCH_FLAGS
    HIPCC_WRAP='$(SHELL) $(top_srcdir)/config/nvcc-libtool'
    # -diag-suppress=2810: HIP marks hipError_t nodiscard, and the kernels
    # ignore some on purpose (-Wno-unused-result on AMD).
    HIPCC_PLATFORM_FLAGS="-x cu -Wno-deprecated-gpu-targets -diag-suppress=2810"
    # The headers must compile as C and as CUDA C++, and link: HIP releases
    # older than the CUDA toolkit call what it has since removed.
    AC_MSG_CHECKING([whether HIP's NVIDIA headers in $hip_inc compile as C with $CC])
    save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $HIP_CPPFLAGS"; LDFLAGS="$LDFLAGS $HIP_LDFLAGS"; LIBS="$HIP_LIBS $PTHREAD_LIBS -ldl $LIBS"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>]], [[int n = 0, major = 0, minor = 0;
hipDeviceProp_t p;
(void)hipGetDeviceProperties(&p, 0);
(void)hiprtcVersion(&major, &minor);
return hipGetDeviceCount(&n) != hipSuccess;]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); have_hip=no; hip_why="HIP's headers in $hip_inc do not compile or link as C against CUDA in $hip_cuda (see config.log)"])
    CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
  ])
  AS_IF([test "x$have_hip" = xyes], [
    AC_MSG_CHECKING([whether $HIPCC builds HIP kernels for NVIDIA])
    printf '#include <hip/hip_runtime.h>\n__global__ void k(int *p) { p@<:@threadIdx.x@:>@ = 1; }\nvoid l(int *p) { hipLaunchKernelGGL(k, 1, 32, 0, 0, p); }\n' > conftest.hip
    AS_IF([$HIPCC $HIPCC_ARCH_FLAGS $HIPCC_PLATFORM_FLAGS $HIP_CPPFLAGS -c conftest.hip -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); have_hip=no; hip_why="$HIPCC cannot build HIP kernels with the headers in $hip_inc (see config.log)"])
    rm -f conftest.hip conftest.$OBJEXT
  ])
  AS_IF([test "x$have_hip" = xyes], [
    hip_version=`sed -n 's/^#define HIP_VERSION_MAJOR \(@<:@0-9@:>@*\)/\1/p;s/^#define HIP_VERSION_MINOR \(@<:@0-9@:>@*\)/.\1/p' "$hip_inc/hip/hip_version.h" 2>/dev/null | tr -d '\n'`
    hip_cuda_version=`"$HIPCC" --version | sed -n 's/.*release \(@<:@0-9.@:>@*\).*/\1/p'`
    HIP_SUMMARY="(HIP ${hip_version:-of unknown version} on NVIDIA, headers in $hip_inc, nvcc $hip_cuda_version in $hip_cuda)"],
    [HIP_SUMMARY="(HIP on NVIDIA: $hip_why)"])
  dnl Asking for the NVIDIA platform is asking for the plugin.
  AS_IF([test "x$have_hip" = xno],
    [AC_MSG_ERROR([--with-hip-platform=nvidia given but HIP on NVIDIA is not usable: $hip_why])])
])
