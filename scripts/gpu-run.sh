#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU run of Keel, done the same way every time.
#
#   scripts/gpu-run.sh prepare          on the build machine (has libtool, Check):
#                                       configure + build in build-gpu/ with CUDA,
#                                       build every test and benchmark, and copy
#                                       the shared libraries the tests need that
#                                       the GPU machine lacks into build-gpu/.gpu-lib/.
#   scripts/gpu-run.sh prepare-hip      on the build machine: configure + build in
#                                       build-hipnv/ the HIP plugin for HIP's NVIDIA
#                                       platform (HIP_NV_INCLUDE: HIP's NVIDIA headers,
#                                       default /work/hip-nv/include; HIPNV_ARCH: the
#                                       nvcc -gencode flags, default sm_90 and its PTX),
#                                       with every test, without the CUDA plugin. The
#                                       headers are needed only there, at build time.
#   scripts/gpu-run.sh run [WHAT...]    on the GPU machine, from the checkout root,
#                                       with build-gpu/ carried there. WHAT is any of
#                                       info tests examples bench torch python sanitize (default: all),
#                                       fault (the GPU plugin's fault-injection sweep, not in the default),
#                                       or hip: the suites with KEEL_BACKEND=hip from
#                                       build-hipnv/ (carried; HIP_SUITES, default SUITES
#                                       with the HIP plugin's test for the CUDA ones),
#                                       logged to hip-info.txt and hip-tests.log.
#                                       No make: the real binaries are run from
#                                       .libs/ with LD_LIBRARY_PATH. Logs go to
#                                       $OUT (or ./gpu-out), at most 8 files.
#                                       Knobs (environment): TESTS_BUDGET, TEST_TIMEOUT,
#                                       SUITES, ALGO_SWEEP (" " skips it), BENCH_BUDGET, BENCHES
#                                       ("runtime ops kernels torch python"; "blas" too when named), BENCH_QUICK,
#                                       PAGEABLE_SWEEP, TORCH_ARGS,
#                                       SANITIZE_BUDGET, SANITIZE_RUNS ("tool:suite ..."),
#                                       FAULT_BUDGET, FAULT_STRIDE, FAULT_SITES, FAULT_BACKEND.
#
# Paths: libtool and the tests bake the build machine's absolute build path
# in (rpaths, the fixture's KT_BUILDDIR). `run` links that path to this
# checkout when it does not exist there, so they hold wherever the checkout is.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
BUILD_HIP=$ROOT/build-hipnv

prepare() {
    set -e
    cd "$ROOT"
    [ -x configure ] || autoreconf -fi
    mkdir -p "$BUILD"
    cd "$BUILD"
    if [ ! -f Makefile ]; then
        ../configure -q --with-cuda --without-hip --disable-static
    fi
    # -k: a part of the tree that does not build yet must not stop the rest.
    make -j2 -k all >build.log 2>&1 || echo "prepare: 'make all' had errors (see build-gpu/build.log)"
    make -j2 -k check TESTS= >>build.log 2>&1 || echo "prepare: building the tests had errors (see build-gpu/build.log)"
    grep -E "(error|warning):" build.log | head -20 || true
    copy_test_libs
    # The DLPack header the Python package builds with (Debian's libdlpack-dev).
    mkdir -p .gpu-include/dlpack
    [ -f /usr/include/dlpack/dlpack.h ] && cp /usr/include/dlpack/dlpack.h .gpu-include/dlpack/
    # The libtool archives and objects are not needed there; the rest is.
    echo "prepare: build-gpu is $(du -sh --exclude='*.o' --exclude='*.lo' . | cut -f1) without objects"
    ls .libs/*.so* 2>/dev/null
}

# The shared libraries of the tests that the GPU machine does not have (Check).
copy_test_libs() {
    mkdir -p .gpu-lib
    for lib in libsubunit.so.0 libcheck.so.0; do
        p=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        [ -n "$p" ] && cp -L "$p" .gpu-lib/
    done
    return 0
}

# keel-hip.so for HIP's NVIDIA platform, its tests and the suites, in
# build-hipnv/. Objects stay (a second prepare-hip rebuilds only what
# changed); carry build-hipnv on its own where build-gpu/ and it together
# exceed what a run may carry.
prepare_hip() {
    set -e
    cd "$ROOT"
    inc=${HIP_NV_INCLUDE:-/work/hip-nv/include}
    [ -f "$inc/hip/nvidia_detail/nvidia_hip_runtime_api.h" ] ||
        { echo "prepare-hip: no HIP NVIDIA headers in $inc (set HIP_NV_INCLUDE)" >&2; exit 1; }
    [ -x configure ] || autoreconf -fi
    mkdir -p "$BUILD_HIP"
    cd "$BUILD_HIP"
    if [ ! -f Makefile ]; then
        ../configure -q --without-cuda --with-hip-platform=nvidia --with-hip-include="$inc" --disable-static \
            NVCC_ARCH_FLAGS="${HIPNV_ARCH:--gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90}"
    fi
    make -j2 -k all >build.log 2>&1 || echo "prepare-hip: 'make all' had errors (see build-hipnv/build.log)"
    make -j2 -k check TESTS= >>build.log 2>&1 || echo "prepare-hip: building the tests had errors (see build-hipnv/build.log)"
    grep -E "(error|warning):" build.log | head -20 || true
    copy_test_libs
    echo "prepare-hip: build-hipnv is $(du -sh . | cut -f1), $(du -sh --exclude='*.o' --exclude='*.lo' . | cut -f1) without objects"
    ls .libs/*.so* 2>/dev/null
}

# ---- on the GPU machine ----

OUTDIR=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUTDIR" 2>/dev/null || true

real_binary() {
    # The binary libtool wrapped, or the file itself.
    d=$(dirname "$1")
    b=$(basename "$1")
    if [ -x "$d/.libs/$b" ]; then echo "$d/.libs/$b"; elif [ -x "$d/.libs/lt-$b" ]; then echo "$d/.libs/lt-$b"; else echo "$1"; fi
}

setup_env() {
    # The build machine's build path, as the binaries know it.
    built_at=$(sed -n "s/^abs_top_builddir = //p" "$BUILD/Makefile" 2>/dev/null)
    if [ -n "$built_at" ] && [ "$built_at" != "$BUILD" ] && [ ! -e "$built_at" ]; then
        mkdir -p "$(dirname "$built_at")" 2>/dev/null && ln -s "$BUILD" "$built_at" 2>/dev/null &&
            echo "linked $built_at -> $BUILD"
    fi
    LD_LIBRARY_PATH=$BUILD/.libs:$BUILD/tests/.libs:$BUILD/.gpu-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # The toolkit's libraries (cuBLAS linked, NVRTC opened at run time):
    # wherever that machine keeps them.
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
        [ -d "$d" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
    done
    export LD_LIBRARY_PATH
    plugin=$BUILD/.libs/keel-cuda.so
    [ -e "$plugin" ] || plugin=$BUILD/.libs/keel-hip.so
    for lib in $(ldd "$plugin" 2>/dev/null | awk '/not found/ {print $1}') libnvrtc.so.13; do
        ldd "$plugin" 2>/dev/null | grep -q "$lib => /" && continue
        [ "$lib" = libnvrtc.so.13 ] && ldconfig -p | grep -q libnvrtc.so.13 && continue
        f=$(find /usr /opt -name "$lib" 2>/dev/null | head -n 1)
        [ -n "$f" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$f") && echo "using $f"
    done
    KEEL_BACKEND_PATH=$BUILD/.libs:$BUILD/tests/plugins/.libs
    KEEL_CACHE_DIR=${KEEL_CACHE_DIR:-/tmp/keel-gpu-run-cache}
    export LD_LIBRARY_PATH KEEL_BACKEND_PATH KEEL_CACHE_DIR
    # Leave NVLink multicast off on shared machines (KINDS.md).
    export NCCL_NVLS_ENABLE=0
}

SUMMARY=$OUTDIR/summary.txt

# Time budgets in seconds (device time is scarce): each phase stops starting
# new runs when its budget is spent, and each run is cut at what is left.
TESTS_BUDGET=${TESTS_BUDGET:-180}
BENCH_BUDGET=${BENCH_BUDGET:-360}
SANITIZE_BUDGET=${SANITIZE_BUDGET:-180}
FAULT_BUDGET=${FAULT_BUDGET:-300}

# left BUDGET START: seconds left of a phase's budget (at least 10 while > 0).
left() {
    l=$(($1 - ($(date +%s) - $2)))
    [ "$l" -gt 0 ] && [ "$l" -lt 10 ] && l=10
    echo "$l"
}

note() {
    echo "$*" | tee -a "$SUMMARY"
}

run_info() {
    {
        date -u
        nvidia-smi -L 2>&1
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
        nproc
        "$(real_binary "$BUILD/tools/keel-info")" 2>&1
    } >"$OUTDIR/info.txt" 2>&1
    note "info: $(grep -m1 -A1 '^  cuda' "$OUTDIR/info.txt" | tr -s ' ' | tr '\n' ' ')"
}

# The suites: the conformance suites on CUDA, the CUDA-specific ones, the ops suite.
SUITES=${SUITES:-"tests/test-status tests/test-device tests/test-env tests/test-memory tests/test-copy-2d
tests/test-host-memory tests/test-dlpack tests/test-stream tests/test-kernel tests/test-module-globals
tests/test-kernel-lang tests/test-module-file tests/test-graph tests/test-loader tests/test-stress tests/test-soak tests/test-exit
backends/cuda/test-cuda backends/cuda/test-cuda-sticky kernels/tests/test-ops kernels/tests/test-blas-portable"}

run_tests() {
    log=$OUTDIR/tests.log
    : >"$log"
    phase=$(date +%s)
    for t in $SUITES; do
        [ -e "$BUILD/$t" ] || { note "test  $t: not built"; continue; }
        budget=$(left "$TESTS_BUDGET" "$phase")
        [ "$budget" -gt 0 ] || { note "test  $t: not run (tests budget spent)"; continue; }
        bin=$(real_binary "$BUILD/$t")
        echo "===== $t (KEEL_BACKEND=cuda)" >>"$log"
        start=$(date +%s)
        [ -n "${TEST_TIMEOUT:-}" ] && [ "$TEST_TIMEOUT" -lt "$budget" ] && budget=$TEST_TIMEOUT
        KEEL_BACKEND=cuda timeout "$budget" "$bin" >>"$log" 2>&1
        rc=$?
        note "test  $t: rc=$rc ($(($(date +%s) - start)) s) $(tail -n 3 "$log" | grep -m1 -E '^[0-9]+%:' || true)"
    done
    run_algo_sweep
    run_portable_ops
}

# The operations suite once more on Keel's portable BLAS kernels
# (KEEL_BLAS=fallback), which must pass what cuBLAS passes.
run_portable_ops() {
    t=kernels/tests/test-ops
    case " $(echo $SUITES) " in *" $t "*) ;; *) return ;; esac
    budget=$(left "$TESTS_BUDGET" "$phase")
    [ "$budget" -gt 0 ] || { note "test  $t KEEL_BLAS=fallback: not run (tests budget spent)"; return; }
    echo "===== $t (KEEL_BACKEND=cuda KEEL_BLAS=fallback)" >>"$log"
    KEEL_BACKEND=cuda KEEL_BLAS=fallback timeout "$budget" "$(real_binary "$BUILD/$t")" >>"$log" 2>&1
    note "test  $t KEEL_BLAS=fallback: rc=$? $(tail -n 3 "$log" | grep -m1 -E '^[0-9]+%:' || true)"
}

# The GEMM and dense tests once more with each cuBLASLt candidate a plan
# may pick (KEEL_CUDA_LT_ALGO=N), since the tuner picks by speed alone.
run_algo_sweep() {
    t=kernels/tests/test-ops
    case " $(echo $SUITES) " in *" $t "*) ;; *) return ;; esac
    for n in ${ALGO_SWEEP:-0 1 2 3 4 5 6 7}; do
        budget=$(left "$TESTS_BUDGET" "$phase")
        [ "$budget" -gt 0 ] || { note "test  $t KEEL_CUDA_LT_ALGO=$n: not run (tests budget spent)"; continue; }
        echo "===== $t blas (KEEL_BACKEND=cuda KEEL_CUDA_LT_ALGO=$n)" >>"$log"
        KEEL_BACKEND=cuda KEEL_CUDA_LT_ALGO=$n CK_RUN_CASE=blas timeout "$budget" "$(real_binary "$BUILD/$t")" >>"$log" 2>&1
        note "test  $t blas KEEL_CUDA_LT_ALGO=$n: rc=$? $(tail -n 3 "$log" | grep -m1 -E '^[0-9]+%:' || true)"
    done
}

# wants_bench NAME: whether BENCHES (default: all of them but "blas") names it;
# "blas" (Keel's portable SGEMM against cuBLAS's) runs only when named.
wants_bench() {
    case " ${BENCHES:-runtime ops kernels torch python} " in *" $1 "*) return 0 ;; esac
    return 1
}

# The examples, each with one kernel source, on the GPU.
run_examples() {
    out=$OUTDIR/examples.txt
    : >"$out"
    for ex in "examples/keel-hello" "examples/keel-demo" "examples/keel-demo --native" "examples/keel-matmul 1000 700 900" \
        "examples/aot/keel-aot $BUILD/examples/aot/scale.keelmod" "examples/keel-mlp" "examples/keel-streams" \
        "examples/keel-graph" "examples/keel-multi-device" "examples/keel-errors"; do
        bin=$(real_binary "$BUILD/${ex%% *}")
        args=$(echo "$ex" | cut -s -d' ' -f2-)
        echo "\$ KEEL_BACKEND=cuda $ex" >>"$out"
        (cd "$BUILD" && KEEL_BACKEND=cuda timeout 120 "$bin" $args) >>"$out" 2>&1
        note "example $ex: rc=$?"
    done
    cat "$out"
}

# The bench step: every GPU benchmark, each to its end (or its time cap),
# its full output in bench.log and its summary lines (bench/bench_summary.h:
# name, measured [spread], target, verdict) in bench-summary.txt. The step
# fails when any benchmark exits non-zero (1 a target missed or a result
# wrong, 2 rows skipped for the budget, 3 an error, 77 no device, 124 cut by
# its cap), after all of them ran. BENCH_BUDGET (default 360 s) bounds the
# whole step: each benchmark gets its cap or what is left, whichever is less.
# BENCH_QUICK=1 runs the C benchmarks and torch_ops.py in their quick modes.
BENCH_LOG=$OUTDIR/bench.log
BENCH_TABLE=$OUTDIR/bench-summary.txt

run_bench() {
    phase=$(date +%s)
    bench_failed=""
    : >"$BENCH_LOG"
    {
        echo "# Keel GPU benchmarks, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
        echo "# row, measured [min..max of the pairs], target, verdict; each benchmark's head says how its ratio reads"
    } >"$BENCH_TABLE"
    q=""
    [ "${BENCH_QUICK:-0}" = 1 ] && q=--quick
    wants_bench runtime && bench_one 60 bench/keel-bench-cuda $q
    wants_bench runtime && run_pageable_sweep
    wants_bench ops && bench_one 200 kernels/bench/keel-bench-ops-cuda $q
    wants_bench kernels && bench_one 90 bench/keel-bench-kernels $q
    wants_bench blas && bench_one 90 kernels/bench/keel-bench-blas-portable-cuda $q
    if wants_bench torch || wants_bench python; then
        if python_package >>"$BENCH_LOG" 2>&1; then
            wants_bench torch && bench_one 120 kernels/bench/torch_ops.py ${TORCH_ARGS:-$q}
            wants_bench python && bench_one 60 python/bench/bench_launch.py $q
        else
            bench_failed="$bench_failed python-package"
            echo "== the keel Python package did not build (bench.log): torch_ops.py and bench_launch.py not run" >>"$BENCH_TABLE"
        fi
    fi
    if [ -n "$bench_failed" ]; then
        echo "# FAIL:$bench_failed" >>"$BENCH_TABLE"
        note "bench: FAIL:$bench_failed (table: bench-summary.txt)"
    else
        echo "# PASS: every benchmark met every target" >>"$BENCH_TABLE"
        note "bench: PASS (table: bench-summary.txt)"
    fi
    cat "$BENCH_TABLE"
    [ -z "$bench_failed" ]
}

# The staging pipeline's knobs, host threads and chunk size, swept when
# PAGEABLE_SWEEP names configurations (threads:KiB, e.g. "4:4096 8:4096
# 12:4096 8:8192"); for tuning, outside the verdict.
run_pageable_sweep() {
    b=$BUILD/bench/keel-bench-cuda
    [ -e "$b" ] && [ -n "$(echo ${PAGEABLE_SWEEP:-})" ] || return 0
    for cfg in $PAGEABLE_SWEEP; do
        budget=$(left "$BENCH_BUDGET" "$phase")
        [ "$budget" -gt 0 ] || break
        echo "===== pageable sweep: KEEL_GPU_COPY_THREADS=${cfg%%:*} KEEL_GPU_STAGING_CHUNK_KB=${cfg#*:}" >>"$BENCH_LOG"
        KEEL_BACKEND=cuda KEEL_GPU_COPY_THREADS=${cfg%%:*} KEEL_GPU_STAGING_CHUNK_KB=${cfg#*:} \
            timeout "$budget" "$(real_binary "$b")" --quick --pageable 2>&1 | grep -E "^pageable|check" >>"$BENCH_LOG"
    done
}

# bench_one CAP PATH [ARGS...]: one benchmark (a binary of build-gpu, or a
# Python script of the checkout), at most CAP seconds.
bench_one() {
    cap=$1
    what=$2
    shift 2
    case $what in
    *.py) cmd="python3 $ROOT/$what" ;;
    *)
        [ -e "$BUILD/$what" ] || { bench_failed="$bench_failed $what(not-built)"; echo "== $what: not built" >>"$BENCH_TABLE"; return; }
        cmd=$(real_binary "$BUILD/$what")
        ;;
    esac
    budget=$(left "$BENCH_BUDGET" "$phase")
    if [ "$budget" -le 0 ]; then
        bench_failed="$bench_failed $what(not-run)"
        echo "== $what: not run (BENCH_BUDGET spent)" >>"$BENCH_TABLE"
        return
    fi
    [ "$cap" -lt "$budget" ] && budget=$cap
    out=$(mktemp)
    start=$(date +%s)
    echo "===== \$ KEEL_BACKEND=cuda $what $* (at most $budget s)" >>"$BENCH_LOG"
    # The C benchmarks end their own runs a little before the cap (rows
    # past it are SKIP), so that they still print their summary.
    KEEL_BACKEND=cuda KEEL_BENCH_BUDGET=$((budget > 30 ? budget - 15 : budget)) PYTHONPATH=$PYSITE${PYTHONPATH:+:$PYTHONPATH} \
        PYTHONUNBUFFERED=1 timeout "$budget" $cmd "$@" >"$out" 2>&1
    rc=$?
    cat "$out" >>"$BENCH_LOG"
    secs=$(($(date +%s) - start))
    echo "== $what $* (exit $rc, $secs s)" >>"$BENCH_TABLE"
    case $what in
    */bench_launch.py) grep -E "^target " "$out" | sed "s/^/  /" >>"$BENCH_TABLE" ;;
    *) awk '/^# summary:/ {on = 1; next} on && /^# [0-9]+ row/ {print "  " $0; on = 0; next} on && NF {print "  " $0}' "$out" >>"$BENCH_TABLE" ;;
    esac
    grep -qE "^# summary:|^target " "$out" || echo "  (no summary: $(tail -n 1 "$out"))" >>"$BENCH_TABLE"
    [ "$rc" -eq 0 ] || bench_failed="$bench_failed $(basename "$what")(exit-$rc)"
    note "bench $what: rc=$rc ($secs s)"
    rm -f "$out"
}

# Keel's ops against PyTorch alone (the bench step runs it too).
run_torch() {
    BENCHES=torch run_bench
}

# The keel Python package, built once per run against build-gpu into
# $PYSITE (the machine's python3 holds torch, CuPy and cuda.core). Prints
# the end of pip's output.
PYSITE=/tmp/keel-python
python_package() {
    [ -n "${PYSITE_BUILT:-}" ] && return 0
    py=$(command -v python3)
    rm -rf "$PYSITE" "$ROOT/python/build"
    echo "\$ KEEL_BUILD_DIR=build-gpu python3 -m pip install --no-build-isolation --no-deps --target $PYSITE ./python"
    pip_log=$(mktemp)
    CFLAGS="-I$BUILD/.gpu-include" KEEL_BUILD_DIR=$BUILD KEEL_SOURCE_DIR=$ROOT "$py" -m pip install -q --no-build-isolation \
        --no-deps --no-index --target "$PYSITE" "$ROOT/python" >"$pip_log" 2>&1
    prc=$?
    tail -n 20 "$pip_log"
    rm -f "$pip_log"
    [ "$prc" -eq 0 ] && PYSITE_BUILT=1
}

# The Python package, built there against build-gpu (the machine's python3
# holds torch, CuPy and cuda.core), its tests on CUDA and its launch benchmark.
run_python() {
    out=$OUTDIR/python.txt
    py=$(command -v python3)
    site=$PYSITE
    {
        python_package || echo "the package did not build"
        echo "\$ KEEL_BACKEND=cuda python3 -m pytest python/tests"
        KEEL_BACKEND=cuda PYTHONPATH=$site PYTHONUNBUFFERED=1 timeout "${PYTHON_BUDGET:-240}" "$py" -m pytest -q -rs \
            -p no:cacheprovider "$ROOT/python/tests" >"$OUTDIR/pytest.log" 2>&1
        echo "pytest rc=$?"
        tail -n 40 "$OUTDIR/pytest.log"
        echo "\$ KEEL_BACKEND=cuda python3 python/bench/bench_launch.py"
        KEEL_BACKEND=cuda PYTHONPATH=$site PYTHONUNBUFFERED=1 timeout 120 "$py" "$ROOT/python/bench/bench_launch.py" 2>&1
        echo "bench rc=$?"
    } >"$out" 2>&1
    note "python: $(grep -E 'passed|failed' "$out" | tail -n 1); $(grep -E '^bench rc' "$out")"
}

# The suites on the HIP plugin built for HIP's NVIDIA platform (build-hipnv,
# from prepare-hip), with KEEL_BACKEND=hip: the plugin's own code on a GPU.
# GEMM, GEMV and dense answer NOT_SUPPORTED there (no rocBLAS), and the ops
# suite skips their tests after checking that answer.
HIP_SUITES=${HIP_SUITES:-$(echo $SUITES | tr ' ' '\n' | grep -v '^backends/cuda/' | tr '\n' ' ') backends/hip/test-hip}

# enter_hip WHO: run from build-hipnv/ (BUILD and the environment set up
# for it) until leave_hip; 1, with a note, when it was not built or carried.
enter_hip() {
    if [ ! -f "$BUILD_HIP/Makefile" ] || [ ! -e "$BUILD_HIP/.libs/keel-hip.so" ]; then
        note "$1: no build-hipnv/.libs/keel-hip.so: run 'scripts/gpu-run.sh prepare-hip' on the build machine and carry build-hipnv"
        return 1
    fi
    saved_build=$BUILD saved_ld=$LD_LIBRARY_PATH saved_path=${KEEL_BACKEND_PATH:-}
    BUILD=$BUILD_HIP
    setup_env
}

leave_hip() {
    BUILD=$saved_build LD_LIBRARY_PATH=$saved_ld KEEL_BACKEND_PATH=$saved_path
    export LD_LIBRARY_PATH KEEL_BACKEND_PATH
}

run_hip() {
    enter_hip hip || return 0
    {
        date -u
        nvidia-smi -L 2>&1
        ldd "$BUILD/.libs/keel-hip.so" 2>&1
        KEEL_BACKEND=hip "$(real_binary "$BUILD/tools/keel-info")" 2>&1
    } >"$OUTDIR/hip-info.txt" 2>&1
    note "hip info: $(grep -m1 -A1 '^  hip' "$OUTDIR/hip-info.txt" | tr -s ' ' | tr '\n' ' ')"
    log=$OUTDIR/hip-tests.log
    : >"$log"
    phase=$(date +%s)
    for t in $HIP_SUITES; do
        [ -e "$BUILD/$t" ] || { note "hip   $t: not built"; continue; }
        budget=$(left "$TESTS_BUDGET" "$phase")
        [ "$budget" -gt 0 ] || { note "hip   $t: not run (tests budget spent)"; continue; }
        [ -n "${TEST_TIMEOUT:-}" ] && [ "$TEST_TIMEOUT" -lt "$budget" ] && budget=$TEST_TIMEOUT
        echo "===== $t (KEEL_BACKEND=hip)" >>"$log"
        start=$(date +%s)
        KEEL_BACKEND=hip timeout "$budget" "$(real_binary "$BUILD/$t")" >>"$log" 2>&1
        rc=$?
        note "hip   $t: rc=$rc ($(($(date +%s) - start)) s) $(tail -n 3 "$log" | grep -m1 -E '^[0-9]+%:|^SKIP' || true)"
    done
    leave_hip
}

run_sanitize() {
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
    [ -n "$cs" ] || { note "sanitize: compute-sanitizer not found"; return; }
    log=$OUTDIR/sanitizer.log
    : >"$log"
    phase=$(date +%s)
    # memcheck on the suites that move memory and launch; racecheck (shared
    # memory races) where kernels use shared memory. API errors are not
    # reported: the suites provoke them on purpose (out of memory, bad launches).
    for run in ${SANITIZE_RUNS:-memcheck:backends/cuda/test-cuda memcheck:tests/test-memory memcheck:tests/test-stream
        memcheck:tests/test-kernel memcheck:tests/test-kernel-lang memcheck:tests/test-graph memcheck:kernels/tests/test-ops
        racecheck:tests/test-kernel-lang racecheck:backends/cuda/test-cuda racecheck:kernels/tests/test-ops}; do
        tool=${run%%:*}
        t=${run#*:}
        [ -e "$BUILD/$t" ] || continue
        budget=$(left "$SANITIZE_BUDGET" "$phase")
        [ "$budget" -gt 0 ] || { note "sanitize $tool $t: not run (budget spent)"; continue; }
        start=$(date +%s)
        {
            echo "===== $tool $t"
            KEEL_BACKEND=cuda timeout "$budget" "$cs" --tool "$tool" --error-exitcode 99 --report-api-errors no \
                "$(real_binary "$BUILD/$t")"
            echo "rc=$?"
        } >>"$log" 2>&1
        note "sanitize $tool $t: $(tail -n 1 "$log") ($(($(date +%s) - start)) s) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
    done
}

# The GPU plugin under fault injection: test-fault's probe (a small
# application: init, streams, events, kernels, every kind of memory,
# copies, operations, a graph) on CUDA, with each of its vendor calls
# failed in turn (KEEL_FAULT=vendor-call:N), then every call from the Nth
# on and calls at random. Every run must end cleanly: each failed step
# reports KEEL_ERROR_BACKEND with a message, and its retry succeeds.
# FAULT_STRIDE tries every Nth point only; FAULT_SITES (default
# vendor-call; "all" for every site) sweeps other sites on the GPU too;
# FAULT_BACKEND=hip runs the probe on the HIP plugin of build-hipnv/
# (HIP's NVIDIA platform) instead.
run_fault() {
    fb=${FAULT_BACKEND:-cuda}
    if [ "$fb" = hip ]; then
        enter_hip fault || return 1
    fi
    t=tests/test-fault
    rc=1
    if [ -e "$BUILD/$t" ]; then
        log=$OUTDIR/fault-$fb.log
        start=$(date +%s)
        sites=${FAULT_SITES:-vendor-call}
        [ "$sites" = all ] && sites=
        KEEL_TEST_FAULT_BACKEND=$fb KEEL_TEST_FAULT_SITES=$sites \
            KEEL_TEST_FAULT_STRIDE=${FAULT_STRIDE:-1} timeout "$FAULT_BUDGET" "$(real_binary "$BUILD/$t")" >"$log" 2>&1
        rc=$?
        note "fault $t (KEEL_BACKEND=$fb): rc=$rc ($(($(date +%s) - start)) s) $(tail -n 3 "$log" | grep -m1 -E '^[0-9]+%:' || true)"
        grep -E '^test-fault: .*injection points' "$log" | sed "s/^test-fault: */fault   $fb: /" | tee -a "$SUMMARY"
    else
        note "fault: $t not built"
    fi
    [ "$fb" = hip ] && leave_hip
    [ "$rc" -eq 0 ]
}

case ${1:-} in
prepare)
    prepare
    ;;
prepare-hip)
    prepare_hip
    ;;
run)
    shift
    setup_env
    : >"$SUMMARY"
    [ $# -gt 0 ] || set -- info tests examples bench torch python sanitize
    for what in "$@"; do
        case $what in
        info) run_info ;;
        tests) run_tests ;;
        bench) run_bench || failed=1 ;;
        torch) run_torch || failed=1 ;;
        sanitize) run_sanitize ;;
        fault) run_fault || failed=1 ;;
        examples) run_examples ;;
        python) run_python ;;
        hip) run_hip ;;
        *) echo "unknown: $what" >&2 ;;
        esac
    done
    echo "===== summary"
    cat "$SUMMARY"
    exit "${failed:-0}"
    ;;
*)
    echo "usage: $0 prepare | prepare-hip | run [info] [tests] [examples] [bench] [torch] [python] [sanitize] [fault] [hip]" >&2
    exit 2
    ;;
esac
