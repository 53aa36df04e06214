#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Host cost per call of a Keel kernel launch and of a tiny built-in operation
from Python, side by side with the C API in the same process (a C loop over
the same kernel and the same arrays), and with cuda.core, CuPy and PyTorch
when they are importable and the device is CUDA.

Each side runs in batches of CALLS calls, alternating, REPS times; a row is
the median per call (us) with the spread (min..max of the batch medians).
The stream is synchronized between batches, outside the timer.

Targets (exit 1 on a miss):
  - Keel's Python launch and its tiny op each within 1.5 us of the C API's;
  - each no more than cuda.core's launch, when cuda.core was measured.

Usage: KEEL_BACKEND=cuda python3 python/bench/bench_launch.py [--quick]
"""
import statistics
import sys
import time

import numpy as np

import keel
from keel import _keel

QUICK = "--quick" in sys.argv
REPS = 7 if QUICK else 21
CALLS = 2000 if QUICK else 10000
N_OP = 1024
SLACK_US = 1.5

KERNEL = """
keel_kernel void scale(int n, float s, float *x)
{
    int i = keel_global_x();
    if (i < n)
        x[i] *= s;
}
"""
CUDA_KERNEL = r"""
extern "C" __global__ void scale(int n, float s, float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}
"""


def batches(sides, sync):
    """sides: name -> fn(calls) returning ns per call (or None to time it here)."""
    times = {name: [] for name in sides}
    for _ in range(REPS):
        for name, fn in sides.items():
            t0 = time.perf_counter_ns()
            r = fn(CALLS)
            per = r if r is not None else (time.perf_counter_ns() - t0) / CALLS
            sync[name]()
            times[name].append(per / 1000.0)
    return {n: (statistics.median(v), min(v), max(v)) for n, v in times.items()}


def keel_sides(dev):
    s = keel.Stream(dev)
    k = keel.Module.build(KERNEL, "scale.kc", device=dev)["scale"]
    x = keel.zeros(32, "float32", dev)
    a, b = keel.zeros(N_OP, "float32", dev), keel.zeros(N_OP, "float32", dev)
    y = keel.empty(N_OP, "float32", dev)
    sh = s.handle

    def py_launch(calls):
        for _ in range(calls):
            k(1, 32, 32, 1.0, x, stream=s)

    def c_launch(calls):
        return _keel._c_launch_loop(k.handle, sh, 32, calls, x.ptr)

    add = keel.add

    def py_add(calls):
        for _ in range(calls):
            add(a, b, out=y, stream=s)

    def c_add(calls):
        return _keel._c_add_loop(sh, a.ptr, b.ptr, y.ptr, N_OP, calls)

    return s, (py_launch, c_launch), (py_add, c_add)


def other_sides(dev, sides, sync):
    """cuda.core, CuPy and torch on the same GPU, where importable."""
    notes = []
    if dev.backend != "cuda":
        return ["cuda.core, CuPy, torch: not measured (the device is not CUDA)"]
    try:
        try:  # cuda.core's names moved out of .experimental in its later releases
            from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        except ImportError:
            from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
        d = Device(dev.index)
        d.set_current()
        cs = d.create_stream()
        arch = "".join(str(v) for v in d.compute_capability)
        prog = Program(CUDA_KERNEL, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}"))
        ker = prog.compile("cubin", name_expressions=("scale",)).get_kernel("scale")
        buf = d.memory_resource.allocate(32 * 4, stream=cs)
        cfg = LaunchConfig(grid=1, block=32)
        s32 = np.float32(1.0)
        n32 = np.int32(32)

        def cc_launch(calls):
            for _ in range(calls):
                launch(cs, cfg, ker, n32, s32, buf)

        sides["cuda.core launch"] = cc_launch
        sync["cuda.core launch"] = cs.sync
    except Exception as e:  # noqa: BLE001 - any failure means "not measured"
        notes.append(f"cuda.core: not measured ({type(e).__name__}: {e})")
    try:
        import cupy as cp
        with cp.cuda.Device(dev.index):
            rk = cp.RawKernel(CUDA_KERNEL, "scale")
            cx = cp.zeros(32, dtype=cp.float32)
            ca, cb = cp.zeros(N_OP, dtype=cp.float32), cp.zeros(N_OP, dtype=cp.float32)
            cy = cp.empty(N_OP, dtype=cp.float32)

            def cp_launch(calls):
                for _ in range(calls):
                    rk((1,), (32,), (np.int32(32), np.float32(1.0), cx))

            def cp_add(calls):
                for _ in range(calls):
                    cp.add(ca, cb, out=cy)

            sides["CuPy RawKernel launch"] = cp_launch
            sides["CuPy add 1k floats"] = cp_add
            sync["CuPy RawKernel launch"] = sync["CuPy add 1k floats"] = cp.cuda.Stream.null.synchronize
    except Exception as e:  # noqa: BLE001
        notes.append(f"CuPy: not measured ({type(e).__name__}: {e})")
    try:
        import torch
        ta = torch.zeros(N_OP, device=f"cuda:{dev.index}")
        tb, ty = torch.zeros_like(ta), torch.empty_like(ta)

        def t_add(calls):
            for _ in range(calls):
                torch.add(ta, tb, out=ty)

        sides["torch add 1k floats"] = t_add
        sync["torch add 1k floats"] = torch.cuda.synchronize
    except Exception as e:  # noqa: BLE001
        notes.append(f"torch: not measured ({type(e).__name__}: {e})")
    return notes


def main():
    dev = keel.default_device()
    s, (py_launch, c_launch), (py_add, c_add) = keel_sides(dev)
    sides = {"Keel Python launch": py_launch, "Keel C API launch": c_launch,
             "Keel Python add 1k floats": py_add, "Keel C API add 1k floats": c_add}
    sync = {name: s.synchronize for name in sides}
    notes = other_sides(dev, sides, sync)
    for fn in sides.values():  # warm-up: compilation, caches, lazy loading
        fn(100)
    for f in sync.values():
        f()
    r = batches(sides, sync)

    print(f"device {dev.name} ({dev.properties['name']}); {REPS} batches of {CALLS} calls; us per call")
    print(f"{'':34s} {'median':>8s} {'min':>8s} {'max':>8s}")
    for name, (med, lo, hi) in r.items():
        print(f"{name:34s} {med:8.2f} {lo:8.2f} {hi:8.2f}")
    for n in notes:
        print(n)

    misses = 0
    checks = [("Keel Python launch", "Keel C API launch"), ("Keel Python add 1k floats", "Keel C API add 1k floats")]
    for py, c in checks:
        target = r[c][0] + SLACK_US
        ok = r[py][0] <= target
        misses += not ok
        print(f"target {py}: {r[py][0]:.2f} us <= C API + {SLACK_US} = {target:.2f} us: {'ok' if ok else 'MISS'}")
        if "cuda.core launch" in r:
            target = r["cuda.core launch"][0]
            ok = r[py][0] <= target
            misses += not ok
            print(f"target {py}: {r[py][0]:.2f} us <= cuda.core launch {target:.2f} us: {'ok' if ok else 'MISS'}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
