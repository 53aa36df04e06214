#!/bin/sh
# SPDX-License-Identifier: MIT
# Smoke test of what a new user runs first: keel-info (output, exit codes,
# JSON), keel-demo on the default device and on an emulated second CPU device,
# the kernel-module path of the demo, the examples of common tasks (each
# checks its own result), and the README's example program, whose text must
# be the one printed in README.md. Run by make check from the top
# build directory.
set -u

: "${srcdir:=.}"
info=./tools/keel-info
demo=./examples/keel-demo
hello=./examples/keel-hello
module=./examples/.libs/demo-kernels.so

# The user's selection must not change what this test expects.
unset KEEL_BACKEND KEEL_DEVICE KEEL_CPU_DEVICES KEEL_CPU_MEMORY_LIMIT KEEL_CPU_THREADS KEEL_LOG

# Keep the plugin directories the harness gave us that exist in this build
# (a GPU plugin's directory exists only where it was built): a directory that
# does not exist is an environment error, which is not what this test is about.
if [ -n "${KEEL_BACKEND_PATH:-}" ]; then
    kept=
    old_ifs=$IFS
    IFS=:
    for d in $KEEL_BACKEND_PATH; do
        [ -d "$d" ] && kept=${kept:+$kept:}$d
    done
    IFS=$old_ifs
    if [ -n "$kept" ]; then export KEEL_BACKEND_PATH="$kept"; else unset KEEL_BACKEND_PATH; fi
fi

fails=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/keel-tools.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
pass() {
    echo "ok: $*"
}

# run NAME EXPECTED_RC CMD...: runs CMD, keeps its stdout/stderr in $tmp/NAME.{out,err}.
run() {
    name=$1 want=$2
    shift 2
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$name: '$*' exited $got, expected $want"
        cat "$tmp/$name.out" "$tmp/$name.err" | head -n 60 | sed 's/^/    | /'
        return 1
    fi
    pass "$name (exit $got)"
    return 0
}

# expect NAME FILE PATTERN: FILE ($tmp/NAME.FILE) contains the extended regex PATTERN.
expect() {
    if grep -Eq -- "$3" "$tmp/$1.$2"; then
        pass "$1: $2 matches /$3/"
    else
        fail "$1: $2 does not match /$3/"
        sed 's/^/    | /' "$tmp/$1.$2"
    fi
}

# --- keel-info ------------------------------------------------------------
run info 0 "$info" && {
    expect info out '^Keel [0-9]+\.[0-9]+\.[0-9]+'
    expect info out '^  cpu +usable'
    expect info out '^  cpu:0$'
    expect info out 'selected +: cpu:0|selected +: (cuda|hip):0'
    for var in KEEL_BACKEND KEEL_DEVICE KEEL_BACKEND_PATH KEEL_LOG; do
        expect info out "^  $var "
    done
    # Every backend that is not usable says why.
    if grep -q 'NOT USABLE' "$tmp/info.out"; then
        n_bad=$(grep -c 'NOT USABLE' "$tmp/info.out")
        n_why=$(grep -Ec '^    why not +: .+\((KEEL_ERROR_[A-Z_]+)\)$' "$tmp/info.out")
        if [ "$n_bad" -eq "$n_why" ]; then pass "every unusable backend has a reason"; else
            fail "$n_bad unusable backends but $n_why 'why not' lines"; fi
    fi
}
# At debug every error detail is logged as it is set: keel-info must make
# no errors of its own (such as running past the end of a table).
run debug 0 env KEEL_LOG=debug "$info" && {
    expect debug err 'keel\[info\]: backend cpu: usable'
    if grep -E 'KEEL_ERROR_OUT_OF_RANGE|keel_env_var_get' "$tmp/debug.err"; then
        fail "KEEL_LOG=debug keel-info logs an error of keel-info's own making"
    else
        pass "KEEL_LOG=debug keel-info logs no error of its own"
    fi
}
run help 0 "$info" --help && expect help out '^Usage: keel-info'
run version 0 "$info" --version && expect version out '^keel-info \(Keel\) [0-9]'
run badopt 1 "$info" --frobnicate && expect badopt err 'unknown option'
run only-cpu 0 "$info" --backend cpu && {
    expect only-cpu out '^  cpu +usable'
    if grep -Eq '^  (cuda|hip) ' "$tmp/only-cpu.out"; then fail "--backend cpu lists other backends"; fi
}
run only-none 1 "$info" --backend nosuch && expect only-none err 'nosuch'
run list 0 "$info" -l && {
    expect list out '^cpu: [0-9]+ devices?$'
    expect list out '^  cpu:0  [^ ]'
    n_other=$(grep -Evc '^[a-z0-9_-]+: ([0-9]+ devices?|not usable: .+)$|^  [a-z0-9_-]+:[0-9]+  .+$' "$tmp/list.out")
    if [ "$n_other" -eq 0 ]; then pass "keel-info -l prints only backend and device lines"; else
        fail "keel-info -l prints $n_other other lines"; fi
}
run list-two 0 env KEEL_CPU_DEVICES=2 "$info" --list --backend cpu && {
    expect list-two out '^cpu: 2 devices$'
    expect list-two out '^  cpu:1  '
}
run list-json 1 "$info" --list --json && expect list-json err 'cannot be combined'

run json 0 "$info" --json && {
    expect json out '"name": "cpu"'
    if command -v python3 >/dev/null 2>&1; then
        if python3 -m json.tool "$tmp/json.out" >/dev/null 2>"$tmp/json.py"; then pass "json parses"; else
            fail "keel-info --json is not valid JSON: $(cat "$tmp/json.py")"; fi
    fi
}

# Selection errors: exit 2, still a full report, and a reason on stderr.
run bogus 2 env KEEL_BACKEND=bogus "$info" && {
    expect bogus err 'bogus'
    expect bogus err 'cpu'
    expect bogus out '^  cpu +usable'
}
run baddev 2 env KEEL_DEVICE=banana "$info" && expect baddev err 'KEEL_DEVICE'

# A plugin cut short (here: the first page of libkeel.so under a plugin's
# name): dlopen would map its segments past the end of the file and die of
# SIGBUS. keel-info lists it as not usable and says why.
mkdir "$tmp/plugins" && head -c 4096 ./.libs/libkeel.so >"$tmp/plugins/keel-trunc.so"
run trunc 0 env KEEL_BACKEND=cpu KEEL_BACKEND_PATH="$tmp/plugins" "$info" && {
    expect trunc out '^  trunc +NOT USABLE'
    expect trunc out '^    why not +: cannot load .*/keel-trunc\.so: the file is truncated: 4096 bytes'
    expect trunc out 'selected +: cpu:0'
}
run sel-cpu 0 env KEEL_BACKEND=cpu "$info" && expect sel-cpu out 'selected +: cpu:0'
for gpu in cuda hip; do
    # Where the GPU backend is not usable, selecting it alone must fail and say why.
    if "$info" --backend $gpu >/dev/null 2>&1; then
        run sel-$gpu 0 env KEEL_BACKEND=$gpu "$info"
    else
        run sel-$gpu 2 env KEEL_BACKEND=$gpu "$info" && expect sel-$gpu err "$gpu"
    fi
done

# A moved install: libkeel in some lib/ and a plugin in lib/keel/, with no
# KEEL_BACKEND_PATH and nothing at the configured prefix. Keel finds the
# plugin next to itself (the real keel-info, not libtool's wrapper).
if [ -x ./tools/.libs/keel-info ] && [ -f ./tests/plugins/.libs/keel-fakeok.so ]; then
    mkdir -p "$tmp/moved/lib/keel"
    cp -P ./.libs/libkeel.so* "$tmp/moved/lib/"
    cp ./tests/plugins/.libs/keel-fakeok.so "$tmp/moved/lib/keel/"
    run moved 0 env -u KEEL_BACKEND_PATH LD_LIBRARY_PATH="$tmp/moved/lib" ./tools/.libs/keel-info -l && {
        expect moved out '^fakeok: '
    }
    run moved-info 0 env -u KEEL_BACKEND_PATH LD_LIBRARY_PATH="$tmp/moved/lib" ./tools/.libs/keel-info && {
        expect moved-info out "^  plugin search path +: $tmp/moved/lib/keel:"
    }
    # From the build tree, without KEEL_BACKEND_PATH: the plugins built here.
    run buildtree 0 env -u KEEL_BACKEND_PATH "$info" &&
        expect buildtree out "^  plugin search path +: $PWD/\.libs:"
else
    echo "skip: moved install (no libtool .libs binaries in this build)"
fi

# A plugin variable set only through its older name: keel-info shows the
# value in force and the name that set it (the fakeok2 test plugin's
# KEEL_FAKE_MODE, also read as KEEL_FAKE_OLD_MODE); the name wins over it.
fake2=./tests/plugins/.libs/keel-fakeok2.so
if [ -f "$fake2" ]; then
    mkdir -p "$tmp/fake2"
    cp "$fake2" "$tmp/fake2/"
    run alias 0 env -u KEEL_FAKE_MODE KEEL_FAKE_OLD_MODE=b KEEL_BACKEND_PATH="$tmp/fake2" "$info" && {
        expect alias out '^  KEEL_FAKE_MODE +"b" +.*\[set by KEEL_FAKE_OLD_MODE\]$'
        expect alias out '^  KEEL_FAKE_COUNT +\(unset\) '
    }
    run alias-json 0 env -u KEEL_FAKE_MODE KEEL_FAKE_OLD_MODE=b KEEL_BACKEND_PATH="$tmp/fake2" "$info" --json && {
        expect alias-json out '"name": "KEEL_FAKE_MODE", "value": "b", "set_by": "KEEL_FAKE_OLD_MODE"'
    }
    run alias-both 0 env KEEL_FAKE_MODE=a KEEL_FAKE_OLD_MODE=b KEEL_BACKEND_PATH="$tmp/fake2" "$info" && {
        expect alias-both out '^  KEEL_FAKE_MODE +"a" +fakeok2 plugin: [^[]*$'
    }
else
    echo "skip: keel-info and an aliased plugin variable (no fakeok2 test plugin in this build)"
fi

# --- keel-demo ------------------------------------------------------------
run demo 0 "$demo" -n 100003 && expect demo out 'verified' && expect demo out 'portable kernel'
run demo-native 0 "$demo" -n 4099 --native && expect demo-native out 'verified'
run demo-cpu1 0 env KEEL_BACKEND=cpu KEEL_CPU_DEVICES=2 KEEL_DEVICE=1 "$demo" -n 5000 &&
    expect demo-cpu1 out 'device cpu:1'
if [ -f "$module" ]; then
    run demo-module 0 env KEEL_BACKEND=cpu "$demo" -n 777 --module "$module" &&
        expect demo-module out 'loaded from a module file'
else
    fail "$module was not built"
fi
run demo-bogus 1 env KEEL_BACKEND=bogus "$demo" && expect demo-bogus err 'KEEL_ERROR_'

# --- the tiled matmul example --------------------------------------------
run matmul 0 ./examples/keel-matmul && expect matmul out 'verified'
run matmul-odd 0 ./examples/keel-matmul 33 17 45 && expect matmul-odd out 'verified'

# --- the examples of common tasks ----------------------------------------
# Each checks its own result against the host and prints 'verified'.
run mlp 0 ./examples/keel-mlp && expect mlp out 'gemm .* verified' && expect mlp out 'mlp .* verified'
run streams 0 ./examples/keel-streams && expect streams out 'in 4 streams .* verified'
run streams-odd 0 ./examples/keel-streams 1001 && expect streams-odd out '^keel-streams: 1001 elements .* verified'
run graph 0 ./examples/keel-graph && expect graph out '5 replays .* verified'
run multi 0 ./examples/keel-multi-device && expect multi out 'verified'
run multi-cpu3 0 env KEEL_BACKEND=cpu KEEL_CPU_DEVICES=3 ./examples/keel-multi-device &&
    expect multi-cpu3 out 'over 3 devices of cpu: cpu:0 .*, cpu:1 .*, cpu:2 .* verified'
run errors 0 ./examples/keel-errors && {
    for code in INVALID_POINTER OUT_OF_RANGE COMPILE_FAILED INVALID_ARGUMENT; do
        expect errors out "-> KEEL_ERROR_$code "
    done
    expect errors out 'square\.kc(:5:|\(5\))' # the C compiler's and clang's form, or NVRTC's
    expect errors out 'verified'
}

# --- the README example ---------------------------------------------------
run hello 0 "$hello" && expect hello out 'expected 1998'
# README.md shows examples/hello.c between a marker line and the closing fence.
readme="$srcdir/README.md"
if [ -f "$readme" ]; then
    sed -n '/<!-- begin: examples\/hello.c -->/,/<!-- end: examples\/hello.c -->/p' "$readme" |
        sed '1,2d;$d' | sed '$d' >"$tmp/readme-hello.c"
    if cmp -s "$tmp/readme-hello.c" "$srcdir/examples/hello.c"; then
        pass "README.md shows examples/hello.c as it is"
    else
        fail "README.md's example differs from examples/hello.c:"
        diff -u "$srcdir/examples/hello.c" "$tmp/readme-hello.c" | sed 's/^/    | /'
    fi
else
    fail "$readme not found"
fi

# --- the public headers ----------------------------------------------------
# keel.h is C99 and C++ as it is: no repeated typedef, no extension that
# -pedantic-errors refuses. KEEL_TEST_CC/KEEL_TEST_CXX name the compilers.
printf '#include <keel.h>\n#include <keel/backend.h>\nint main(void) { return keel_init() == KEEL_OK ? 0 : 1; }\n' >"$tmp/hdr.c"
incs="-I$srcdir/include -I./include"
if ${KEEL_TEST_CC:-cc} -std=c99 -pedantic-errors -Wall -Wextra -Werror $incs -c "$tmp/hdr.c" -o "$tmp/hdr.o" 2>"$tmp/hdr.err"; then
    pass "keel.h compiles as C99 with -pedantic-errors -Wall -Wextra -Werror"
else
    fail "keel.h under -std=c99 -pedantic-errors:"; sed 's/^/    | /' "$tmp/hdr.err"
fi
cxx=${KEEL_TEST_CXX:-c++}
if command -v "$cxx" >/dev/null 2>&1; then
    if "$cxx" -std=c++11 -pedantic-errors -Wall -Wextra -Werror -x c++ $incs -c "$tmp/hdr.c" -o "$tmp/hdr.o" 2>"$tmp/hdr.err"; then
        pass "keel.h compiles as C++11 with -pedantic-errors"
    else
        fail "keel.h as C++11:"; sed 's/^/    | /' "$tmp/hdr.err"
    fi
fi

# --- licence ------------------------------------------------------------------
# Every C source and header of the tree names its licence in its first lines.
missing=$(find "$srcdir" \( -name 'build*' -o -name '_build' -o -name '.git' -o -name 'autom4te.cache' \) -prune -o \
    -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.hip' -o -name '*.kc' \) -print |
    while read -r f; do head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' || echo "$f"; done)
if [ -z "$missing" ]; then pass "every C source names its licence (SPDX)"; else
    fail "sources without an SPDX-License-Identifier line:"; echo "$missing" | sed 's/^/    | /'; fi

# --- loadable late -------------------------------------------------------
# Python tools open libkeel with dlopen after other libraries (torch) took
# the static TLS that glibc keeps for that; a library built with
# initial-exec TLS then fails to load ("cannot allocate memory in static TLS
# block"). The linker marks such a library STATIC_TLS.
for lib in ./.libs/libkeel.so ./.libs/keel-cuda.so; do
    [ -f "$lib" ] && command -v readelf >/dev/null 2>&1 || continue
    if readelf -d "$lib" | grep -q 'STATIC_TLS'; then
        fail "$lib needs static TLS: it cannot be opened with dlopen once that is used up"
    else
        pass "$lib needs no static TLS"
    fi
done

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
