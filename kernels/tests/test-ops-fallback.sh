#!/bin/sh
# SPDX-License-Identifier: MIT
# The operations suite again with KEEL_BLAS=fallback: GEMM, GEMV and the
# dense layer run on Keel's portable kernels (kernels/portable/blas.kc) on
# every usable backend, and must pass the tests the vendor libraries pass;
# and the checking-mode suite, whose GEMM hazards must be caught on them
# too. Run by `make check` from the build directory.
status=0
for t in ./kernels/tests/test-ops ./tests/test-check; do
    if [ ! -x "$t" ]; then
        echo "SKIP: $t is not built"
        exit 77
    fi
    echo "=== KEEL_BLAS=fallback $t ==="
    KEEL_BLAS=fallback "$t"
    rc=$?
    echo "=== $t: exit status $rc ==="
    [ "$rc" -eq 0 ] || status=1
done
exit $status
