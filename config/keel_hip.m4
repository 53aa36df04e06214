dnl SPDX-License-Identifier: MIT
# KEEL_CHECK_HIP: --with-hip[=DIR]. Default: guess from $ROCM_PATH,
# /opt/rocm, then hipcc on PATH (Debian's packages: /usr/bin/hipcc with the
# headers in /usr/include/hip and libamdhip64 in the multiarch directory).
# Fails only when --with-hip was given and HIP is not usable. Substitutes
# HIPCC, HIP_CPPFLAGS, HIP_LDFLAGS, HIP_LIBS, HIPCC_ARCH_FLAGS;
# AM_CONDITIONAL HAVE_HIP. HIP_CPPFLAGS has -DKEEL_HAVE_HIPRTC where hiprtc links.
AC_DEFUN([KEEL_CHECK_HIP], [
  AC_ARG_WITH([hip],
    [AS_HELP_STRING([--with-hip@<:@=DIR@:>@], [build the HIP backend plugin (default: guess)])],
    [], [with_hip=guess])
  AC_ARG_VAR([HIP_OFFLOAD_ARCH], [AMD GPU targets of the HIP kernels (default: gfx90a gfx1030)])
  have_hip=no
  HIP_SUMMARY=
  hip_why=
  AS_IF([test "x$with_hip" != xno], [
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
  AM_CONDITIONAL([HAVE_HIP], [test "x$have_hip" = xyes])
])
