#!/bin/sh
# SPDX-License-Identifier: MIT
# Clean exit: runs tests/keel-exit-probe in each of its ways to end (return
# after keel_finalize, return without it, exit from a second thread while
# every stream is busy, exit from a host function, exit after keel_finalize,
# exit handlers before and after Keel's, children of fork that exit or
# finalize and start again), first as it is, then under
# valgrind's memcheck, and fails on any error or leak record valgrind prints,
# "still reachable" and "possibly lost" included. In a sanitizer build the
# first runs are under the sanitizer (LeakSanitizer at exit in an ASan build)
# and valgrind, which cannot run such a program, is not used. Run by make
# check from the top build directory; skips (77) when valgrind is missing.
set -u

probe=./tests/keel-exit-probe
[ -x "$probe" ] || { echo "test-exit: $probe is not built"; exit 1; }

# Two emulated CPU devices, whatever the user's selection; a cache of its own
# for the probe's portable kernel, compiled for the architecture's baseline:
# valgrind does not know every vector instruction (AVX-512) that the default
# -march=native may use.
unset KEEL_DEVICE KEEL_CPU_MEMORY_LIMIT KEEL_LOG KEEL_FAULT
export KEEL_BACKEND=cpu KEEL_CPU_DEVICES=2 KEEL_CPU_THREADS=2 KEEL_CPU_CFLAGS=-O2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/keel-test-exit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export KEEL_CACHE_DIR="$tmp/cache"

modes="finalize no-finalize busy-thread host-fn after-finalize handlers fork"
fail=0

# What each mode must print besides "ok <mode>".
expect_line() {
    case $1 in
    handlers) echo "late handler: KEEL_OK
early handler: KEEL_ERROR_INVALID_HANDLE KEEL_ERROR_BACKEND_UNAVAILABLE KEEL_ERROR_INVALID_HANDLE" ;;
    *) echo "" ;;
    esac
}

# run <log> <command...>: status 124 when it ran past 120 s (a hang).
run() {
    log=$1
    shift
    timeout -k 5 120 "$@" >"$log" 2>&1
}

check_output() {
    mode=$1 log=$2 rc=$3 how=$4
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $how $mode: exit status $rc"
        sed 's/^/  | /' "$log" | tail -40
        return 1
    fi
    grep -qx "ok $mode" "$log" || { echo "FAIL: $how $mode: no \"ok $mode\""; sed 's/^/  | /' "$log" | tail -40; return 1; }
    want=$(expect_line "$mode")
    if [ -n "$want" ]; then
        echo "$want" | while IFS= read -r line; do
            grep -qxF "$line" "$log" || { echo "FAIL: $how $mode: no line \"$line\""; exit 1; }
        done || { sed 's/^/  | /' "$log" | tail -40; return 1; }
    fi
    return 0
}

# ThreadSanitizer does not support threads started in a child of a
# multi-threaded fork (it refuses them, or loses track of thread ids).
# AddressSanitizer's allocator in GCC's runtime takes no lock around fork:
# a child of a multi-threaded fork can block for ever on an allocator lock
# that one of the parent's threads held at that moment (a few runs in a
# hundred hang there; built without the sanitizer, none in
# hundreds). Neither runs the fork mode.
tsan=0 asan=0
ldd "$probe" 2>/dev/null | grep -q libtsan && tsan=1
ldd "$probe" 2>/dev/null | grep -q libasan && asan=1

for mode in $modes; do
    if [ "$mode" = fork ] && [ $tsan -eq 1 ]; then
        echo "SKIP: fork (ThreadSanitizer does not support threads in a child of a multi-threaded fork)"
        continue
    fi
    if [ "$mode" = fork ] && [ $asan -eq 1 ]; then
        echo "SKIP: fork (AddressSanitizer's allocator is not fork-safe in a multi-threaded process)"
        continue
    fi
    run "$tmp/plain-$mode.log" "$probe" "$mode"
    rc=$?
    if check_output "$mode" "$tmp/plain-$mode.log" "$rc" "plain"; then
        echo "PASS: $mode (plain run)"
    else
        fail=1
    fi
done

if ldd "$probe" 2>/dev/null | grep -Eq 'lib(a|t|ub|l)san'; then
    echo "test-exit: a sanitizer build: valgrind is not used (the runs above were under the sanitizer)"
    exit $fail
fi
if ! command -v valgrind >/dev/null 2>&1; then
    [ $fail -ne 0 ] && exit 1
    echo "SKIP: valgrind is not installed (Debian package valgrind); the exit paths ran without it"
    exit 77
fi

# valgrind 3.19 (Debian 12) cannot read the DWARF 5 debug information
# clang 14 writes by default, and gives up on the program: say so and skip
# rather than report its reader's failure (configure with CFLAGS=-gdwarf-4).
valgrind --quiet --error-exitcode=99 "$probe" --help >"$tmp/vg-probe.log" 2>&1
if grep -Eq "Possibly corrupted debuginfo|can't recover|unhandled dwarf2" "$tmp/vg-probe.log"; then
    [ $fail -ne 0 ] && exit 1
    echo "SKIP: this valgrind cannot read the build's debug information (DWARF 5?): configure with CFLAGS='-g -gdwarf-4 -O2' to run the exit paths under it"
    exit 77
fi

# Not fork: a child of fork holds copies of the parent's objects, which
# Keel leaves to the system there (its threads are the parent's), and
# valgrind runs the children too.
for mode in $modes; do
    [ "$mode" = fork ] && continue
    vlog="$tmp/valgrind-$mode.txt"
    run "$tmp/vg-$mode.log" valgrind --quiet --log-file="$vlog" --error-exitcode=99 --leak-check=full \
        --show-leak-kinds=all --errors-for-leak-kinds=all --track-fds=no --num-callers=30 "$probe" "$mode"
    rc=$?
    # 99: memcheck found something; what it found is judged below.
    [ $rc -eq 99 ] && [ -s "$vlog" ] && rc=0
    ok=1
    check_output "$mode" "$tmp/vg-$mode.log" "$rc" "valgrind" || ok=0
    # --quiet: valgrind writes nothing but errors and leak records, each a
    # block of lines ended by an empty "==pid== " line. Every error counts; a
    # leak record counts when a frame is Keel's (a keel_ function, libkeel).
    # A thread alive at exit leaves its thread descriptor "possibly lost"
    # (glibc's allocate_dtv under pthread_create): the probe's own exit
    # thread in busy-thread is not Keel's, and in host-fn the stream worker
    # that runs exit cannot end while exit runs on it: that one record, and
    # only it, is expected there.
    awk -v mode="$mode" '
        /^==[0-9]+== *$/ { flush(); next }
        { rec = rec $0 "\n" }
        END { flush() }
        function flush() {
            if (rec == "") return
            leak = rec ~ /are (definitely|indirectly|possibly) lost|are still reachable/
            keel = rec ~ /: keel_|libkeel/
            dtv = rec ~ /possibly lost/ && rec ~ /allocate_dtv/ && rec ~ /cpu_stream_create/
            if (!leak || (keel && !(mode == "host-fn" && dtv && ++seen == 1)))
                printf "%s", rec > "/dev/stderr"
            else
                printf "%s", rec
            rec = ""
        }' "$vlog" >"$vlog.other" 2>"$vlog.bad"
    if [ -s "$vlog.bad" ]; then
        echo "FAIL: valgrind $mode: memcheck reports, in Keel:"
        sed 's/^/  | /' "$vlog.bad" | head -120
        ok=0
    fi
    if [ -s "$vlog.other" ]; then
        echo "note: valgrind $mode: records not of Keel's (expected: a thread of the program alive at exit):"
        sed 's/^/  | /' "$vlog.other" | head -40
    fi
    if [ $ok -eq 1 ]; then echo "PASS: $mode (valgrind: no error, no leak record of Keel's)"; else fail=1; fi
done
exit $fail
