# KEEL_CHECK_HIP: --with-hip[=DIR]. Default: guess from hipcc on PATH,
# $ROCM_PATH, then /opt/rocm. Fails only when --with-hip was given and ROCm
# is not usable. Substitutes HIPCC, HIP_CPPFLAGS, HIP_LDFLAGS; AM_CONDITIONAL HAVE_HIP.
AC_DEFUN([KEEL_CHECK_HIP], [
  AC_ARG_WITH([hip],
    [AS_HELP_STRING([--with-hip@<:@=DIR@:>@], [build the HIP backend plugin (default: guess)])],
    [], [with_hip=guess])
  have_hip=no
  HIP_SUMMARY=
  AS_IF([test "x$with_hip" != xno], [
    AS_CASE([$with_hip],
      [yes|guess], [
        hip_dir=
        AS_IF([test -n "$ROCM_PATH" && test -x "$ROCM_PATH/bin/hipcc"], [hip_dir=$ROCM_PATH])
        AS_IF([test -z "$hip_dir" && test -x /opt/rocm/bin/hipcc], [hip_dir=/opt/rocm])],
      [hip_dir=$with_hip])
    AS_IF([test -n "$hip_dir" && test -x "$hip_dir/bin/hipcc" && test -f "$hip_dir/include/hip/hip_runtime_api.h"], [
      HIPCC="$hip_dir/bin/hipcc"
      HIP_CPPFLAGS="-I$hip_dir/include -D__HIP_PLATFORM_AMD__"
      HIP_LDFLAGS="-L$hip_dir/lib -Wl,-rpath,$hip_dir/lib"
      have_hip=yes
      HIP_SUMMARY="(hipcc in $hip_dir)"])
    AS_IF([test "x$with_hip" != xguess && test "x$have_hip" = xno],
      [AC_MSG_ERROR([--with-hip given but no usable ROCm/HIP (hipcc, hip/hip_runtime_api.h) found in '${hip_dir:-ROCM_PATH, /opt/rocm}'])])
  ])
  AS_IF([test "x$have_hip" = xyes], [AC_DEFINE([HAVE_HIP], [1], [the HIP plugin is built])])
  AC_SUBST([HIPCC])
  AC_SUBST([HIP_CPPFLAGS])
  AC_SUBST([HIP_LDFLAGS])
  AM_CONDITIONAL([HAVE_HIP], [test "x$have_hip" = xyes])
])
