#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpora of fuzz/corpus/: for fuzz-api, a few call
sequences in the byte code fuzz-api.c decodes (one op byte, then its
operands); for fuzz-env, one value of each variable, valid and not.

    python3 fuzz/make-seeds.py fuzz/corpus
"""
import os
import sys

def u16(v):
    return [v & 0xff, v >> 8]

# pick_ptr operands: buffer slot s from offset 0, its end, host memory, a freed block
def buf(s): return [0x40 | s] + u16(0)
def end(): return [236] + u16(0)
def host(): return [176] + u16(0)
def dangling(): return [224] + u16(0)
def nbytes(n): return u16(0x4000 | n)          # 0..16383 bytes
DEV, PINNED, MANAGED, ASYNC = range(4)
def alloc(slot, kind, dev, n, sid=None): return [0, slot, kind, dev] + nbytes(n) + ([sid] if kind == ASYNC else [])
def free(slot, sid=None): return [2, slot, 1 if sid is not None else 0] + ([sid] if sid is not None else [])
def copy(d, s, n): return [3] + d + s + nbytes(n)
def copy_async(d, s, n, sid): return [4] + d + s + nbytes(n) + [sid]
def memset_async(p, v, n, sid): return [7] + p + [v] + nbytes(n) + [sid]
def stream(slot, dev): return [8, slot, dev, 0x10, 0]
def event_create(slot, dev): return [11, 0, slot, dev, 0]
def event_record(slot, sid): return [11, 2, slot, sid]
def elapsed(a, b): return [11, 6, a, b]
def wait(slot, sid): return [11, 7, slot, sid]
def host_fn(sid): return [13, sid, 0]
def begin(sid): return [14, sid]
def end_capture(sid, g): return [15, sid, g]
def instantiate(g, x): return [16, 0, g, x]
def launch(g, x, sid): return [16, 1, g, x, sid]
def kernel(k, dev, sid, grid, block, n, extra=()):
    return [19, k, dev, sid, grid, 0, block, 3, 1, 0, 0, 1] + u16(n) + [0, 0] + list(extra)
F32, F64, F16, BF16 = range(4)
def builtin(op, sid, dt, rows, cols, k, a, b, c, sub, extra=()):
    return [17, op, sid, dt, dt, rows, cols, k] + a + b + c + [0, 1, 0, 0, 0, sub] + list(extra)
def cpu_kernel(dev, what, *rest): return [21, dev, what] + list(rest)
def verify(slot, v): return [22, slot, v]

api = {
    # a copy queued on another device's busy stream, then keel_free of its source
    "free-while-peer-copy": alloc(0, DEV, 0, 4096) + alloc(1, DEV, 1, 4096) + stream(0, 1) + host_fn(0)
        + copy_async(buf(1), buf(0), 4096, 0) + free(0) + verify(1, 7),
    # copies through a freed pointer and the end of a live block are refused
    "dangling-and-end": alloc(0, PINNED, 0, 256) + alloc(1, DEV, 0, 256) + free(0)
        + copy(dangling(), host(), 16) + copy(host(), end(), 16) + copy(end(), buf(1), 1),
    "graph-replay": alloc(0, DEV, 0, 1024) + stream(1, 0) + begin(1) + memset_async(buf(0), 3, 1024, 1)
        + host_fn(1) + end_capture(1, 0) + instantiate(0, 0) + launch(0, 0, 1) + launch(0, 0, 4) + verify(0, 9),
    "events": stream(0, 0) + stream(2, 2) + event_create(0, 0) + event_create(1, 0) + event_record(0, 0)
        + host_fn(0) + event_record(1, 0) + elapsed(0, 1) + wait(1, 2) + event_record(0, 2),
    "kernels": alloc(0, DEV, 0, 4096) + alloc(1, MANAGED, 0, 4096) + stream(0, 0)
        + kernel(0, 0, 0, 4, 16, 1000) + kernel(1, 0, 0, 2, 8, 64, [15, 3, 1]) + kernel(2, 0, 0, 2, 8, 64)
        + kernel(3, 0, 4, 1, 1, 64) + verify(1, 1),
    "builtin-ops": alloc(0, DEV, 1, 8192) + alloc(1, DEV, 1, 8192) + alloc(2, DEV, 1, 8192)
        + builtin(10, 5, F32, 8, 8, 8, buf(0), buf(1), buf(2), 0, [0, 0, 0])
        + builtin(8, 5, F64, 4, 16, 0, buf(0), buf(1), buf(2), 0)
        + builtin(6, 5, F32, 4, 4, 0, buf(0), buf(1), buf(2), 8),
    "stream-ordered": stream(0, 2) + alloc(3, ASYNC, 2, 2048, 0) + memset_async(buf(3), 1, 2048, 0)
        + copy_async(host(), buf(3), 2048, 6) + free(3, 0) + alloc(4, ASYNC, 2, 2048, 0),
    "cpu-kernel-release": alloc(0, DEV, 1, 4096) + cpu_kernel(1, 0, 0) + cpu_kernel(1, 3, 5, 0, 7, 100)
        + cpu_kernel(1, 1) + verify(0, 2),
}

env = [
    (0, "info"), (0, "INFO"), (0, "loud"), (1, "0"), (1, "-1"), (2, "cuda,hip,cpu"), (2, "^cuda"),
    (2, "cuda, cpu"), (3, "host-alloc:3"), (3, "device-alloc:1,thread-create:2+"),
    (3, "stream-enqueue:p=0.01:seed=42"), (3, "compile:0"), (4, "/tmp:/nonexistent"), (5, "64"),
    (6, "1025"), (7, "512M"), (7, "16E"), (8, "ccache gcc"), (9, "-O2 -g"), (10, "1"), (10, "2"),
    (11, "fallback"), (11, "Vendor"), (11, "openblas"),
]

def main(top):
    os.makedirs(os.path.join(top, "api"), exist_ok=True)
    os.makedirs(os.path.join(top, "env"), exist_ok=True)
    for name, ops in api.items():
        with open(os.path.join(top, "api", name), "wb") as f:
            f.write(bytes(ops))
    for i, (var, value) in enumerate(env):
        with open(os.path.join(top, "env", "%02d" % i), "wb") as f:
            f.write(bytes([var]) + value.encode())

main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus"))
