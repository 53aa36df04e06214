#!/bin/sh
# SPDX-License-Identifier: MIT
# The conformance suites that drive streams, run again in the CPU backend's
# checking mode (KEEL_CPU_CHECK=1, docs/reliability.md): correct programs
# must pass in it unchanged. Run by `make check` from the build directory.
status=0
# test-soak for a shorter time than its own run: the mode's bookkeeping
# under threads is what it is here for.
for t in test-memory test-stream test-kernel test-graph test-stress test-soak test-exit; do
    echo "=== KEEL_BACKEND=cpu KEEL_CPU_CHECK=1 tests/$t ==="
    KEEL_BACKEND=cpu KEEL_CPU_CHECK=1 KEEL_SOAK_SECONDS=4 "./tests/$t"
    rc=$?
    echo "=== tests/$t: exit status $rc ==="
    if [ "$rc" -ne 0 ]; then
        status=1
    fi
done
exit $status
