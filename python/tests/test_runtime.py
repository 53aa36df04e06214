# SPDX-License-Identifier: MIT
"""Devices, streams, events, host functions, graphs, kernels and errors."""
import sys
import threading

import numpy as np
import pytest

import keel
from conftest import to_keel

SAXPY = """
keel_kernel void saxpy(int n, float a, const float *x, float *y)
{
    int i = keel_global_x();
    if (i < n)
        y[i] = a * x[i] + y[i];
}
"""


def test_backends_and_device_properties(dev):
    names = [b["name"] for b in keel.backends()]
    assert "cpu" in names
    cpu = next(b for b in keel.backends() if b["name"] == "cpu")
    assert cpu["usable"] and cpu["device_count"] >= 1
    p = dev.properties
    assert p["backend"] == dev.backend and p["index"] == dev.index
    assert p["total_memory"] > 0 and p["max_threads_per_block"] > 0
    free, total = dev.memory_info()
    assert 0 < free <= total
    assert keel.Device(dev.name) is dev
    assert keel.devices(dev.backend)[dev.index] is dev
    with pytest.raises(keel.KeelError) as e:
        keel.Device("nosuchbackend")
    assert e.value.status_name == "KEEL_ERROR_NOT_FOUND"
    with pytest.raises(ValueError):
        keel.Device("cpu:x")


def test_events_time_and_order_streams(rng, dev):
    s1, s2 = keel.Stream(dev), keel.Stream(dev)
    x = rng.standard_normal(1 << 16)
    k = to_keel(x, dev)
    start, end = keel.Event(dev), keel.Event(dev)
    start.record(s1)
    y = keel.exp(k, stream=s1)
    ev = s1.record()
    end.record(s1)
    s2.wait(ev)
    z = keel.log(y, stream=s2)  # ordered after s1's exp by the event
    s2.synchronize()
    end.synchronize()
    assert end.query()
    s1.synchronize()
    assert s1.query()
    assert start.elapsed_time(end) >= 0
    np.testing.assert_allclose(keel.to_numpy(z), x, rtol=1e-12, atol=1e-12)
    nt = keel.Event(dev, timing=False)
    nt.record(s1)
    nt.synchronize()
    with pytest.raises(keel.KeelError):
        start.elapsed_time(nt)


def test_host_functions_run_in_order_and_take_the_gil(dev):
    s = keel.Stream(dev)
    seen = []
    for i in range(20):
        s.launch_host_func(lambda i=i: seen.append((i, threading.get_ident())))
    s.synchronize()  # releases the GIL, which the functions need
    assert [i for i, _ in seen] == list(range(20))
    with pytest.raises(TypeError):
        s.launch_host_func(3)


def test_host_function_exception_is_reported_not_raised(dev, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    s = keel.Stream(dev)
    def boom():
        raise RuntimeError("from a host function")
    s.launch_host_func(boom)
    s.synchronize()
    assert len(reported) == 1 and "from a host function" in str(reported[0])


def test_graph_replays_captured_work(rng, dev):
    s = keel.Stream(dev)
    x = rng.standard_normal(256)
    k = to_keel(x, dev)
    out = keel.empty(256, "float64", dev)
    s.begin_capture()
    keel.add(k, out, 1.0, 1.0, out=out, stream=s)  # out += x, once per replay
    g = s.end_capture()
    e = g.instantiate()
    keel.fill(out, 0.0, stream=s)
    for _ in range(5):
        e.launch(stream=s)
    s.synchronize()
    np.testing.assert_allclose(keel.to_numpy(out), 5 * x, rtol=1e-12)
    with pytest.raises(keel.KeelError) as err:
        s.end_capture()
    assert err.value.status_name == "KEEL_ERROR_INVALID_ARGUMENT"


def test_kernel_from_portable_source(rng, dev):
    m = keel.Module.build(SAXPY, "saxpy.kc", device=dev)
    k = m["saxpy"]
    assert k.name == "saxpy"
    assert [p[0] for p in k.params] == ["int", "float", "const float *", "float *"]
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    ref = 2.0 * x.astype(np.float64) + (0.5 * x.astype(np.float64) + y)  # y itself may be the kernel's memory
    kx, ky = to_keel(x, dev), to_keel(y, dev)
    k((n + 255) // 256, 256, n, 0.5, kx, ky)
    k.launch(((n + 127) // 128,), (128, 1, 1), n, 2.0, kx.buffer, ky, stream=dev.default_stream)
    ky.synchronize()
    np.testing.assert_allclose(keel.to_numpy(ky), ref, rtol=1e-6, atol=1e-6)


def test_kernel_launch_refuses_bad_arguments(dev):
    k = keel.Module.build(SAXPY, device=dev)["saxpy"]
    y = keel.empty(4, "float32", dev)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k(1, 32, 4, 1.0, y)
    with pytest.raises(TypeError, match="pointer"):
        k(1, 32, 4, 1.0, "x", y)
    with pytest.raises(OverflowError):
        k(1, 32, 1 << 40, 1.0, y, y)
    with pytest.raises(ValueError):
        k(0, 32, 4, 1.0, y, y)
    with pytest.raises(TypeError):
        k((1, 2, 3, 4), 32, 4, 1.0, y, y)
    with pytest.raises(keel.KeelError) as e:
        k(1, 1 << 20, 4, 1.0, y, y)  # a block past the device's limit
    assert e.value.status_name == "KEEL_ERROR_INVALID_ARGUMENT"


def test_compile_errors_carry_the_log(dev):
    with pytest.raises(keel.KeelError) as e:
        keel.Module.build("keel_kernel void broken(int n) { int x = ; }", "broken.kc", device=dev)
    assert e.value.status_name == "KEEL_ERROR_COMPILE_FAILED"
    assert "broken.kc" in e.value.message
    with pytest.raises(keel.KeelError) as e:
        keel.Module.build(SAXPY, device=dev)["nosuch"]
    assert e.value.status_name == "KEEL_ERROR_NOT_FOUND"


def test_unloaded_module_refuses_launches(dev):
    m = keel.Module.build(SAXPY, device=dev)
    k = m["saxpy"]
    m.unload()
    y = keel.empty(4, "float32", dev)
    with pytest.raises(ValueError, match="unloaded"):
        k(1, 4, 4, 1.0, y, y)


def test_buffers_of_every_kind(dev):
    for kind in ("device", "pinned", "managed"):
        if kind == "managed" and not dev.properties["managed_memory"]:
            continue
        b = keel.Buffer(4096, device=dev, kind=kind)
        assert b.kind == kind and b.nbytes == 4096 and b.ptr != 0
        data = np.arange(1024, dtype=np.float32)
        b.copy_from(data)
        out = np.empty_like(data)
        b.copy_to(out)
        np.testing.assert_array_equal(out, data)
        b.free()
        assert b.ptr == 0
        with pytest.raises(ValueError):
            b.copy_to(out)
    with pytest.raises(ValueError):
        keel.Buffer(0, device=dev)
    with pytest.raises(ValueError):
        keel.Buffer(16, device=dev, kind="swap")
    with pytest.raises(keel.KeelError) as e:
        keel.Buffer(1 << 62, device=dev)
    assert e.value.status == keel.KEEL_ERROR_OUT_OF_MEMORY
    assert "bytes" in str(e.value)
