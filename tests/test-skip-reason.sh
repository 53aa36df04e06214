#!/bin/sh
# SPDX-License-Identifier: MIT
# config/test-skip-reason, the driver make check runs every test under: a
# skipped test's reason is printed under its SKIP line (from the test's
# "SKIP:" line, else its last line), a passing or failing test prints no
# reason, and the result files are Automake's own.
set -u
top=${srcdir:-.}
wrapper=$top/config/test-skip-reason
driver=$top/config/aux/test-driver
[ -f "$wrapper" ] && [ -f "$driver" ] || { echo "test-skip-reason: $wrapper or $driver missing"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/keel-test-skip.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# run NAME SCRIPT-BODY: a test that runs SCRIPT-BODY, under the wrapper.
run() {
    printf '#!/bin/sh\n%s\n' "$2" > "$tmp/$1"
    chmod +x "$tmp/$1"
    sh "$wrapper" sh "$driver" --test-name "$1" --log-file "$tmp/$1.log" --trs-file "$tmp/$1.trs" \
        --color-tests no --enable-hard-errors yes --expect-failure no -- "$tmp/$1" > "$tmp/$1.out" 2>&1
}

# expect NAME WHAT GREP-PATTERN: fails unless the output of NAME matches.
expect() {
    if ! grep -q -e "$3" "$tmp/$1.out"; then
        echo "FAIL: $2; the driver printed:"
        cat "$tmp/$1.out"
        fail=1
    fi
}

token=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
run tagged "echo working; echo 'SKIP: no device $token' >&2; echo more; exit 77"
expect tagged "a SKIP: line gives the reason" "^      why: no device $token\$"
expect tagged "the result line is Automake's" "^SKIP: tagged"
grep -q '^:test-result: SKIP' "$tmp/tagged.trs" || { echo "FAIL: the .trs file does not say SKIP"; fail=1; }

run untagged "echo first; echo 'nothing to run on $token'; exit 77"
expect untagged "the last line is the reason when no SKIP: line is printed" "^      why: nothing to run on $token\$"

run silent "exit 77"
expect silent "a silent skip says so" "^      why: (the test printed no reason)"

run passing "echo 'SKIP: not a skip $token'; exit 0"
expect passing "a pass is reported" "^PASS: passing"
if grep -q "why:" "$tmp/passing.out"; then echo "FAIL: a passing test got a reason"; fail=1; fi

run failing "echo 'SKIP: not a skip $token'; exit 3"
grep -q '^:test-result: FAIL' "$tmp/failing.trs" || { echo "FAIL: the .trs file of a failing test does not say FAIL"; fail=1; }
expect failing "a failure is reported" "^FAIL: failing"
if grep -q "why:" "$tmp/failing.out"; then echo "FAIL: a failing test got a reason"; fail=1; fi

exit $fail
