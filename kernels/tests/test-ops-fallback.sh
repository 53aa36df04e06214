#!/bin/sh
# SPDX-License-Identifier: MIT
# The operations suite again with KEEL_BLAS=fallback: GEMM, GEMV and the
# dense layer run on Keel's portable kernels (kernels/portable/blas.kc) on
# every usable backend, and must pass the tests the vendor libraries pass.
# Run by `make check` from the build directory.
t=./kernels/tests/test-ops
if [ ! -x "$t" ]; then
    echo "SKIP: $t is not built"
    exit 77
fi
echo "=== KEEL_BLAS=fallback $t ==="
KEEL_BLAS=fallback "$t"
