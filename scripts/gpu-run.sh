#!/bin/sh
# SPDX-License-Identifier: MIT
# The GPU run of Keel, done the same way every time.
#
#   scripts/gpu-run.sh prepare          on the build machine (has libtool, Check):
#                                       configure + build in build-gpu/ with CUDA,
#                                       build every test and benchmark, and copy
#                                       the shared libraries the tests need that
#                                       the GPU machine lacks into build-gpu/.gpu-lib/.
#   scripts/gpu-run.sh run [WHAT...]    on the GPU machine, from the checkout root,
#                                       with build-gpu/ carried there. WHAT is any of
#                                       info tests examples bench torch python sanitize (default: all).
#                                       No make: the real binaries are run from
#                                       .libs/ with LD_LIBRARY_PATH. Logs go to
#                                       $OUT (or ./gpu-out), at most 8 files.
#                                       Knobs (environment): TESTS_BUDGET, TEST_TIMEOUT,
#                                       SUITES, ALGO_SWEEP (" " skips it), BENCH_BUDGET, BENCHES ("runtime ops kernels"; "blas" too when named),
#                                       PAGEABLE_SWEEP, TORCH_BUDGET, TORCH_ARGS,
#                                       SANITIZE_BUDGET, SANITIZE_RUNS ("tool:suite ...").
#
# Paths: libtool and the tests bake the build machine's absolute build path
# in (rpaths, the fixture's KT_BUILDDIR). `run` links that path to this
# checkout when it does not exist there, so they hold wherever the checkout is.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu

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
    # Shared libraries of the tests that the GPU machine does not have.
    mkdir -p .gpu-lib
    for lib in libsubunit.so.0 libcheck.so.0; do
        p=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
        [ -n "$p" ] && cp -L "$p" .gpu-lib/
    done
    # The DLPack header the Python package builds with (Debian's libdlpack-dev).
    mkdir -p .gpu-include/dlpack
    [ -f /usr/include/dlpack/dlpack.h ] && cp /usr/include/dlpack/dlpack.h .gpu-include/dlpack/
    # The libtool archives and objects are not needed there; the rest is.
    echo "prepare: build-gpu is $(du -sh --exclude='*.o' --exclude='*.lo' . | cut -f1) without objects"
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
    for lib in $(ldd "$BUILD/.libs/keel-cuda.so" 2>/dev/null | awk '/not found/ {print $1}') libnvrtc.so.13; do
        ldd "$BUILD/.libs/keel-cuda.so" 2>/dev/null | grep -q "$lib => /" && continue
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
BENCH_BUDGET=${BENCH_BUDGET:-120}
SANITIZE_BUDGET=${SANITIZE_BUDGET:-180}

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

# wants_bench NAME: whether BENCHES (default "runtime ops kernels") names it;
# "blas" (Keel's portable SGEMM against cuBLAS's) runs only when named.
wants_bench() {
    case " ${BENCHES:-runtime ops kernels} " in *" $1 "*) return 0 ;; esac
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

run_bench() {
    phase=$(date +%s)
    if wants_bench runtime; then
        bench_one bench/keel-bench-cuda
        run_pageable_sweep
    fi
    wants_bench ops && bench_one kernels/bench/keel-bench-ops-cuda
    wants_bench kernels && bench_one bench/keel-bench-kernels
    wants_bench blas && bench_one kernels/bench/keel-bench-blas-portable-cuda
}

# The staging pipeline's knobs: host threads and chunk size.
run_pageable_sweep() {
    b=$BUILD/bench/keel-bench-cuda
    [ -e "$b" ] || return
    sweep=$OUTDIR/pageable-sweep.txt
    : >"$sweep"
    for cfg in ${PAGEABLE_SWEEP:-4:4096 8:4096 12:4096 8:8192}; do
        budget=$(left "$BENCH_BUDGET" "$phase")
        [ "$budget" -gt 0 ] || break
        echo "KEEL_CUDA_COPY_THREADS=${cfg%%:*} KEEL_CUDA_STAGING_CHUNK_KB=${cfg#*:}" >>"$sweep"
        KEEL_BACKEND=cuda KEEL_CUDA_COPY_THREADS=${cfg%%:*} KEEL_CUDA_STAGING_CHUNK_KB=${cfg#*:} \
            timeout "$budget" "$(real_binary "$b")" --quick --pageable 2>&1 | grep -E "^pageable|check" >>"$sweep"
    done
    cat "$sweep"
}

bench_one() {
    [ -e "$BUILD/$1" ] || { note "bench $1: not built"; return; }
    budget=$(left "$BENCH_BUDGET" "$phase")
    [ "$budget" -gt 0 ] || { note "bench $1: not run (bench budget spent)"; return; }
    out=$OUTDIR/$(basename "$1").txt
    echo "\$ KEEL_BACKEND=cuda $1" >"$out"
    KEEL_BACKEND=cuda timeout "$budget" "$(real_binary "$BUILD/$1")" >>"$out" 2>&1
    note "bench $1: rc=$?"
    cat "$out"
}

# Keel's ops against PyTorch eager in one process (torch is on the GPU machine).
run_torch() {
    out=$OUTDIR/torch-ops.txt
    py=$(command -v python3)
    "$py" -c 'import torch' 2>/dev/null || { note "torch: python3 has no torch"; return; }
    echo "\$ KEEL_BACKEND=cuda python3 kernels/bench/torch_ops.py --lib build-gpu/.libs/libkeel.so" >"$out"
    KEEL_BACKEND=cuda PYTHONUNBUFFERED=1 timeout "${TORCH_BUDGET:-120}" "$py" "$ROOT/kernels/bench/torch_ops.py" \
        --lib "$BUILD/.libs/libkeel.so" ${TORCH_ARGS:-} >>"$out" 2>&1
    note "torch: rc=$?"
    cat "$out"
}

# The Python package, built there against build-gpu (the machine's python3
# holds torch, CuPy and cuda.core), its tests on CUDA and its launch benchmark.
run_python() {
    out=$OUTDIR/python.txt
    py=$(command -v python3)
    site=/tmp/keel-python
    rm -rf "$site" "$ROOT/python/build"
    {
        echo "\$ KEEL_BUILD_DIR=build-gpu python3 -m pip install --no-build-isolation --no-deps --target $site ./python"
        CFLAGS="-I$BUILD/.gpu-include" KEEL_BUILD_DIR=$BUILD KEEL_SOURCE_DIR=$ROOT "$py" -m pip install -q --no-build-isolation --no-deps --no-index --target "$site" \
            "$ROOT/python" 2>&1 | tail -n 20
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

case ${1:-} in
prepare)
    prepare
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
        bench) run_bench ;;
        torch) run_torch ;;
        sanitize) run_sanitize ;;
        examples) run_examples ;;
        python) run_python ;;
        *) echo "unknown: $what" >&2 ;;
        esac
    done
    echo "===== summary"
    cat "$SUMMARY"
    ;;
*)
    echo "usage: $0 prepare | run [info] [tests] [examples] [bench] [torch] [python] [sanitize]" >&2
    exit 2
    ;;
esac
