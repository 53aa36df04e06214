# SPDX-License-Identifier: MIT
"""Zero-copy exchange with NumPy through DLPack, and lifetimes."""
import gc
import sys

import numpy as np
import pytest

import keel

CPU = keel.default_device().backend == "cpu"
host_only = pytest.mark.skipif(not CPU, reason="NumPy reads device memory in place only on the CPU backend")


@host_only
def test_numpy_into_keel_is_the_same_memory(rng):
    x = rng.standard_normal((7, 13)).astype(np.float32)
    a = keel.from_dlpack(x)
    assert a.ptr == x.ctypes.data
    assert a.shape == (7, 13) and a.dtype == "float32" and a.strides == (13, 1)
    assert a.buffer.imported
    ref = x.copy()
    keel.neg(a, out=a)  # in place, on Keel's stream
    a.synchronize()
    np.testing.assert_array_equal(x, -ref)
    ref = x.copy()
    keel.exp(a, out=a)
    a.synchronize()
    np.testing.assert_allclose(x, np.exp(ref.astype(np.float64)), rtol=1e-6)


@host_only
def test_keel_into_numpy_is_the_same_memory(rng, dev):
    src = rng.standard_normal(100)
    a = keel.asarray(src, device=dev)
    y = np.from_dlpack(a)
    assert y.ctypes.data == a.ptr
    assert y.dtype == np.float64 and y.shape == (100,)
    np.testing.assert_array_equal(y, src)
    keel.fill(a, 3.5)
    a.synchronize()
    assert np.all(y == 3.5)  # the same bytes


@host_only
def test_round_trip_keeps_the_address(rng):
    x = rng.standard_normal((4, 6)).astype(np.float64)
    a = keel.from_dlpack(x)
    y = np.from_dlpack(a)
    b = keel.from_dlpack(a)  # NumPy marks arrays of unversioned capsules read-only and will not export them
    assert not y.flags.writeable
    assert x.ctypes.data == a.ptr == y.ctypes.data == b.ptr


@host_only
def test_strided_and_offset_views(rng):
    base = rng.standard_normal((8, 10)).astype(np.float32)
    view = base[2:5, 1::3]  # an offset and strides
    a = keel.from_dlpack(view)
    assert a.ptr == view.ctypes.data
    assert a.strides == (10, 3)
    assert not a.is_compact
    back = np.from_dlpack(a)
    np.testing.assert_array_equal(back, view)
    assert back.ctypes.data == view.ctypes.data


@host_only
def test_dlpack_device_and_stream_argument(dev):
    a = keel.empty((3,), device=dev)
    assert a.__dlpack_device__() == (1, 0)  # kDLCPU
    a.__dlpack__(stream=None)
    a.__dlpack__(stream=-1)
    with pytest.raises(ValueError):
        a.__dlpack__(stream=5)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))
    cap = a.__dlpack__(max_version=(1, 0))  # the unversioned capsule, which every consumer takes
    assert "dltensor" in repr(cap)


def test_copy_true_gives_other_memory(rng, dev):
    src = rng.standard_normal(32).astype(np.float32)
    a = keel.asarray(src, device=dev)
    c = keel.from_dlpack(a, copy=True)
    assert c.ptr != a.ptr
    np.testing.assert_array_equal(keel.to_numpy(c), src)


def test_export_outlives_its_array(rng, dev):
    if not CPU:
        pytest.skip("NumPy needs host memory")
    src = rng.standard_normal(1000)
    a = keel.asarray(src, device=dev)
    buf = a.buffer
    y = np.from_dlpack(a)
    assert buf.exports == 1
    del a
    gc.collect()
    np.testing.assert_array_equal(y, src)  # the memory is still there
    del y
    gc.collect()
    assert buf.exports == 0


@host_only
def test_free_while_a_consumer_holds_it_is_deferred(rng, dev):
    src = rng.standard_normal(500)
    a = keel.asarray(src, device=dev)
    y = np.from_dlpack(a)
    a.buffer.free()  # the consumer still holds it: freed when it lets go
    np.testing.assert_array_equal(y, src)
    with pytest.raises(ValueError, match="freed"):
        keel.exp(a)
    with pytest.raises(ValueError, match="freed"):
        a.__dlpack__()
    del y
    gc.collect()
    assert a.buffer.ptr == 0


@host_only
def test_imported_memory_keeps_its_producer_alive(rng):
    x = rng.standard_normal(64)
    before = sys.getrefcount(x)
    a = keel.from_dlpack(x)
    assert sys.getrefcount(x) == before + 1  # the capsule's deleter holds it
    del a
    gc.collect()
    assert sys.getrefcount(x) == before


def test_capsule_not_consumed_releases_its_reference(dev):
    a = keel.empty((10,), device=dev)
    before = sys.getrefcount(a)
    cap = a.__dlpack__(stream=-1)
    assert sys.getrefcount(a) == before + 1
    assert a.buffer.exports == 1
    del cap
    gc.collect()
    assert sys.getrefcount(a) == before
    assert a.buffer.exports == 0


def test_capsule_is_consumed_once(dev):
    if not CPU:
        pytest.skip("host memory")
    a = keel.empty((4,), device=dev)
    cap = a.__dlpack__()
    b = keel.from_dlpack(cap)
    assert b.ptr == a.ptr
    with pytest.raises((BufferError, ValueError)):
        keel.from_dlpack(cap)


def test_from_dlpack_refuses_bad_input(dev):
    with pytest.raises(AttributeError):
        keel.from_dlpack(object())
    with pytest.raises(TypeError):
        keel.from_dlpack()
    x = np.zeros(3, dtype=np.float32)
    if CPU:
        with pytest.raises(keel.KeelError) as e:
            keel.from_dlpack(x, device="cpu:99")
        assert e.value.status_name == "KEEL_ERROR_NO_DEVICE"
    else:
        with pytest.raises(BufferError):
            keel.from_dlpack(x, device=dev, copy=False)  # pageable host memory on a GPU


def test_buffer_protocol_copies_both_ways(rng, dev):
    src = rng.standard_normal((5, 9)).astype(np.float32)
    a = keel.asarray(src, device=dev, copy=True)
    assert a.shape == (5, 9)
    out = np.empty_like(src)
    a.copy_to(out)
    np.testing.assert_array_equal(out, src)
    b = keel.Buffer(64, device=dev)
    b.copy_from(bytes(range(64)))
    got = bytearray(64)
    b.copy_to(got)
    assert got == bytes(range(64))
    with pytest.raises(ValueError):
        b.copy_from(bytes(65))
    with pytest.raises(TypeError):
        b.copy_from(3)
    with pytest.raises(ValueError):
        a.copy_to(np.empty(3, dtype=np.float32))
