# SPDX-License-Identifier: MIT
"""DLPack 1.x: versioned capsules both ways, the fallback to unversioned
producers, and the read-only flag. NumPy here makes only unversioned
capsules, so the producers are small objects over Keel's own exports."""
import ctypes
import gc
import sys

import numpy as np
import pytest

import keel

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]
_get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_get_ptr.restype = ctypes.c_void_p
_get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]

# DLManagedTensorVersioned: version (2 x uint32), manager_ctx, deleter, flags (uint64).
FLAGS_OFFSET = 8 + 2 * ctypes.sizeof(ctypes.c_void_p)
READ_ONLY, IS_COPIED = 1, 2


def name_of(cap):
    return _get_name(cap).decode()


def versioned_header(cap):
    p = _get_ptr(cap, b"dltensor_versioned")
    major = ctypes.c_uint32.from_address(p).value
    minor = ctypes.c_uint32.from_address(p + 4).value
    return major, minor, ctypes.c_uint64.from_address(p + FLAGS_OFFSET)


class Producer:
    """A DLPack 1.x producer: the capsule kind follows max_version."""

    def __init__(self, arr, read_only=False):
        self.arr, self.read_only, self.asked = arr, read_only, []

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.asked.append(max_version)
        cap = self.arr.__dlpack__(stream=stream, max_version=max_version)
        if self.read_only:
            versioned_header(cap)[2].value |= READ_ONLY
        return cap


class OldProducer:
    """A producer from before DLPack 1.0: max_version is a TypeError."""

    def __init__(self, arr):
        self.arr, self.calls = arr, 0

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.arr.__dlpack__(stream=stream)


def test_export_kind_follows_max_version(dev):
    a = keel.empty((6,), device=dev)
    assert name_of(a.__dlpack__()) == "dltensor"
    assert name_of(a.__dlpack__(max_version=None)) == "dltensor"
    assert name_of(a.__dlpack__(max_version=(0, 8))) == "dltensor"
    for asked in ((1, 0), (1, 3), (2, 0)):
        cap = a.__dlpack__(max_version=asked)
        assert name_of(cap) == "dltensor_versioned"
        major, _, flags = versioned_header(cap)
        assert major == 1 and flags.value == 0
    copied = a.__dlpack__(max_version=(1, 0), copy=True)
    assert versioned_header(copied)[2].value & IS_COPIED
    with pytest.raises(TypeError):
        a.__dlpack__(max_version=1)


def test_unconsumed_versioned_capsule_releases_its_reference(dev):
    a = keel.empty((10,), device=dev)
    before = sys.getrefcount(a)
    cap = a.__dlpack__(max_version=(1, 0))
    assert sys.getrefcount(a) == before + 1 and a.buffer.exports == 1
    del cap
    gc.collect()
    assert sys.getrefcount(a) == before and a.buffer.exports == 0


@pytest.mark.parametrize("make", [Producer, OldProducer], ids=["versioned", "unversioned"])
def test_from_dlpack_reads_either_kind_in_place(rng, dev, make):
    src = rng.standard_normal((3, 17)).astype(np.float32)
    a = keel.asarray(src, device=dev, copy=True)
    p = make(a)
    b = keel.from_dlpack(p)
    if make is Producer:
        assert p.asked == [(1, 0)]
    else:
        assert p.calls == 1  # asked again without max_version after its TypeError
    assert b.ptr == a.ptr and b.shape == (3, 17) and b.dtype == "float32"
    keel.neg(b, out=b)  # the same memory: a sees it
    b.synchronize()
    np.testing.assert_array_equal(keel.to_numpy(a), -src)
    del b
    gc.collect()
    assert a.buffer.exports == 0  # the producer's deleter ran


def test_versioned_capsule_passed_directly_is_consumed_once(rng, dev):
    src = rng.standard_normal(40)
    a = keel.asarray(src, device=dev)
    cap = a.__dlpack__(max_version=(1, 0))
    b = keel.from_dlpack(cap)
    assert b.ptr == a.ptr
    np.testing.assert_array_equal(keel.to_numpy(b), src)
    assert name_of(cap) == "used_dltensor_versioned"
    with pytest.raises(BufferError, match="consumed"):
        keel.from_dlpack(cap)


def test_read_only_tensor_is_copied_never_wrapped(rng, dev):
    src = rng.standard_normal((5, 8)).astype(np.float64)
    a = keel.asarray(src, device=dev)
    b = keel.from_dlpack(Producer(a, read_only=True))
    assert b.ptr != a.ptr
    np.testing.assert_array_equal(keel.to_numpy(b), src)
    keel.fill(b, 2.0)  # the copy is Keel's: writing it leaves the producer's alone
    b.synchronize()
    np.testing.assert_array_equal(keel.to_numpy(a), src)
    with pytest.raises(BufferError, match="read-only"):
        keel.from_dlpack(Producer(a, read_only=True), copy=False)
    c = keel.from_dlpack(Producer(a, read_only=True), copy=True)
    assert c.ptr != a.ptr
    del b, c
    gc.collect()
    assert a.buffer.exports == 0  # the unconsumed capsules released theirs


def test_newer_major_version_is_refused(dev):
    a = keel.empty((4,), device=dev)
    cap = a.__dlpack__(max_version=(1, 0))
    p = _get_ptr(cap, b"dltensor_versioned")
    ctypes.c_uint32.from_address(p).value = 2
    with pytest.raises(BufferError, match="DLPack 2.0"):
        keel.from_dlpack(cap)
    ctypes.c_uint32.from_address(p).value = 1  # its deleter is 1.x's
