#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keel's built-in operations against PyTorch eager, in one process.

Keel is called through ctypes on buffers it allocated (Keel validates every
pointer against its own allocations, so torch tensors cannot be passed in);
torch runs the same shapes on its own tensors. Both are timed the same way:
batches of calls of about 10 ms, one synchronization each, Keel's and torch's
batches alternating for 15 pairs. Prints median times and the median of the
pairs' ratios torch time / keel time (> 1: Keel is faster).

Usage (from the build tree):
  KEEL_BACKEND_PATH=$PWD/.libs python3 ../kernels/bench/torch_ops.py \
      [--lib .libs/libkeel.so] [--quick]
"""
import argparse
import ctypes as C
import math
import os
import sys
import statistics
import time

import torch
import torch.nn.functional as F

KEEL_F32, KEEL_F64, KEEL_F16, KEEL_BF16 = 1, 2, 3, 4
DT = {torch.float32: KEEL_F32, torch.float16: KEEL_F16, torch.bfloat16: KEEL_BF16}
KEEL_BINARY_ADD, KEEL_BROADCAST_NONE, KEEL_BROADCAST_ROW = 1, 0, 1
KEEL_UNARY_RELU, KEEL_UNARY_GELU = 6, 7
KEEL_REDUCE_SUM, KEEL_AXIS_ALL, KEEL_AXIS_ROWS = 1, 0, 1
KEEL_COL_MAJOR, KEEL_TRANS = 1, 1
KEEL_ACT_RELU = 1


class DenseParams(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("layout", C.c_int), ("transw", C.c_int),
                ("m", C.c_size_t), ("n", C.c_size_t), ("k", C.c_size_t),
                ("dtype", C.c_int), ("compute", C.c_int), ("act", C.c_int),
                ("w", C.c_void_p), ("ldw", C.c_size_t), ("x", C.c_void_p), ("ldx", C.c_size_t),
                ("bias", C.c_void_p), ("y", C.c_void_p), ("ldy", C.c_size_t)]


class Keel:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        L = self.lib
        L.keel_last_error.restype = C.c_char_p
        L.keel_status_name.restype = C.c_char_p
        self.dev = C.c_void_p()
        self.check(L.keel_device_get(b"cuda", 0, C.byref(self.dev)), "keel_device_get")
        self.stream = C.c_void_p()
        self.check(L.keel_device_default_stream(self.dev, C.byref(self.stream)), "keel_device_default_stream")
        L.keel_binary.argtypes = [C.c_void_p, C.c_int, C.c_int, C.c_size_t, C.c_size_t, C.c_double, C.c_void_p,
                                  C.c_size_t, C.c_double, C.c_void_p, C.c_size_t, C.c_int, C.c_void_p, C.c_size_t]
        L.keel_unary.argtypes = [C.c_void_p, C.c_int, C.c_int, C.c_size_t, C.c_void_p, C.c_void_p]
        L.keel_reduce.argtypes = [C.c_void_p, C.c_int, C.c_int, C.c_size_t, C.c_size_t, C.c_void_p, C.c_size_t,
                                  C.c_int, C.c_void_p]
        L.keel_softmax_rows.argtypes = [C.c_void_p, C.c_int, C.c_size_t, C.c_size_t, C.c_void_p, C.c_size_t,
                                        C.c_void_p, C.c_size_t, C.c_int]
        L.keel_layernorm_rows.argtypes = [C.c_void_p, C.c_int, C.c_size_t, C.c_size_t, C.c_void_p, C.c_size_t,
                                          C.c_void_p, C.c_void_p, C.c_double, C.c_void_p, C.c_size_t]
        L.keel_dense.argtypes = [C.c_void_p, C.POINTER(DenseParams)]
        L.keel_malloc.argtypes = [C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p)]
        L.keel_memset.argtypes = [C.c_void_p, C.c_int, C.c_size_t]
        L.keel_free.argtypes = [C.c_void_p]
        L.keel_stream_synchronize.argtypes = [C.c_void_p]

    def check(self, st, what):
        if st != 0:
            raise RuntimeError("%s: %s (%s)" % (what, self.lib.keel_status_name(st).decode(),
                                                 self.lib.keel_last_error().decode()))

    def alloc(self, nbytes):
        p = C.c_void_p()
        self.check(self.lib.keel_malloc(self.dev, nbytes, C.byref(p)), "keel_malloc")
        self.check(self.lib.keel_memset(p, 0x3c, nbytes), "keel_memset")  # small finite values
        return p

    def sync(self):
        self.check(self.lib.keel_stream_synchronize(self.stream), "keel_stream_synchronize")


def batch_reps(fn, sync):
    """Calls per batch so that a batch takes about 10 ms (after a warm-up)."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    one = time.perf_counter() - t0
    return max(1, min(2000, int(0.01 / max(one, 1e-7))))


def batch_time(fn, sync, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def compare(name, work, unit, keel_fn, keel, torch_fn, quick):
    """Keel and torch in alternating batches (Keel first in every other
    pair); the ratio is the median of the pairs' ratios, the times medians."""
    rk = batch_reps(keel_fn, keel.sync)
    rt = batch_reps(torch_fn, torch.cuda.synchronize)
    tks, tts, ratios = [], [], []
    for r in range(5 if quick else 15):
        if r % 2:
            tk = batch_time(keel_fn, keel.sync, rk)
            tt = batch_time(torch_fn, torch.cuda.synchronize, rt)
        else:
            tt = batch_time(torch_fn, torch.cuda.synchronize, rt)
            tk = batch_time(keel_fn, keel.sync, rk)
        tks.append(tk)
        tts.append(tt)
        ratios.append(tt / tk)
    tk, tt, ratio = statistics.median(tks), statistics.median(tts), statistics.median(ratios)
    print("%-38s keel %10.2f us %9.1f %-7s torch %10.2f us %9.1f %-7s ratio %.3f" %
          (name, tk * 1e6, work / tk * 1e-9, unit, tt * 1e6, work / tt * 1e-9, unit, ratio), flush=True)
    return ratio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(".libs", "libkeel.so"))
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    k = Keel(a.lib)
    L = k.lib
    dev = torch.device("cuda")
    print("# Keel vs PyTorch %s on %s; ratio = torch / keel" % (torch.__version__, torch.cuda.get_device_name()))

    n = 1 << (26 if a.quick else 28)
    xa, xb, xy = k.alloc(n * 4), k.alloc(n * 4), k.alloc(n * 4)
    out = k.alloc(4096 * 4 * 64)
    ta = torch.randn(n, device=dev)
    tb = torch.randn(n, device=dev)
    ty = torch.empty(n, device=dev)

    compare("add f32 n=%d" % n, 12.0 * n, "GB/s",
            lambda: k.check(L.keel_binary(k.stream, KEEL_BINARY_ADD, KEEL_F32, 1, n, 1.0, xa, n, 1.0, xb, n,
                                          KEEL_BROADCAST_NONE, xy, n), "keel_binary"),
            k, lambda: torch.add(ta, tb, out=ty), a.quick)
    compare("gelu f32 n=%d" % n, 8.0 * n, "GB/s",
            lambda: k.check(L.keel_unary(k.stream, KEEL_UNARY_GELU, KEEL_F32, n, xa, xy), "keel_unary"),
            k, lambda: F.gelu(ta), a.quick)
    compare("sum f32 n=%d" % n, 4.0 * n, "GB/s",
            lambda: k.check(L.keel_reduce(k.stream, KEEL_REDUCE_SUM, KEEL_F32, 1, n, xa, n, KEEL_AXIS_ALL, out),
                            "keel_reduce"),
            k, lambda: torch.sum(ta), a.quick)
    rows = n // 4096
    t2 = ta.view(rows, 4096)
    compare("sum rows f32 %dx4096" % rows, 4.0 * n, "GB/s",
            lambda: k.check(L.keel_reduce(k.stream, KEEL_REDUCE_SUM, KEEL_F32, rows, 4096, xa, 4096,
                                          KEEL_AXIS_ROWS, xy), "keel_reduce"),
            k, lambda: torch.sum(t2, dim=1), a.quick)
    for cols in (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144):
        r = (n // 4) // cols
        tx = ta[: r * cols].view(r, cols)
        compare("softmax f32 %dx%d" % (r, cols), 8.0 * r * cols, "GB/s",
                lambda: k.check(L.keel_softmax_rows(k.stream, KEEL_F32, r, cols, xa, cols, xy, cols, 0),
                                "keel_softmax_rows"),
                k, lambda: torch.softmax(tx, dim=1), a.quick)
        compare("layernorm f32 %dx%d" % (r, cols), 8.0 * r * cols, "GB/s",
                lambda: k.check(L.keel_layernorm_rows(k.stream, KEEL_F32, r, cols, xa, cols, None, None, 1e-5,
                                                      xy, cols), "keel_layernorm_rows"),
                k, lambda: F.layer_norm(tx, (cols,)), a.quick)
    for cols in (128, 4096):
        r = (n // 4) // cols
        tx16 = ta[: r * cols].view(r, cols).to(torch.bfloat16)
        compare("softmax bf16 %dx%d" % (r, cols), 4.0 * r * cols, "GB/s",
                lambda: k.check(L.keel_softmax_rows(k.stream, KEEL_BF16, r, cols, xa, cols, xy, cols, 0),
                                "keel_softmax_rows"),
                k, lambda: torch.softmax(tx16, dim=1), a.quick)
        del tx16
    for p in (xa, xb, xy, out):
        L.keel_free(p)
    del ta, tb, ty

    # dense: y[batch, out] = relu(x[batch, in] @ w[out, in]^T + b), bf16
    for (outf, batch, inf) in ((4096, 4096, 4096), (4096, 64, 4096)):
        w, x, b, y = k.alloc(outf * inf * 2), k.alloc(batch * inf * 2), k.alloc(outf * 2), k.alloc(batch * outf * 2)
        prm = DenseParams(C.sizeof(DenseParams), KEEL_COL_MAJOR, KEEL_TRANS, outf, batch, inf, KEEL_BF16, 0,
                          KEEL_ACT_RELU, w, inf, x, inf, b, y, outf)
        tw = torch.randn(outf, inf, device=dev, dtype=torch.bfloat16)
        tx = torch.randn(batch, inf, device=dev, dtype=torch.bfloat16)
        tbias = torch.randn(outf, device=dev, dtype=torch.bfloat16)
        compare("dense bf16 relu %dx%dx%d" % (outf, batch, inf), 2.0 * outf * batch * inf, "GFLOP/s",
                lambda: k.check(L.keel_dense(k.stream, C.byref(prm)), "keel_dense"),
                k, lambda: F.relu(F.linear(tx, tw, tbias)), a.quick)
        for p in (w, x, b, y):
            L.keel_free(p)


if __name__ == "__main__":
    sys.exit(main())
