# SPDX-License-Identifier: MIT
"""Keel from Python: one script for CUDA, HIP or the CPU, chosen by KEEL_BACKEND.

Arrays move between Keel, NumPy, PyTorch and CuPy without copies through
DLPack: ``keel.from_dlpack(t)`` wraps another library's array, and
``torch.from_dlpack(a)`` / ``numpy.from_dlpack(a)`` wrap a Keel Array.
"""
from ._keel import (  # noqa: F401
    Array, Buffer, Device, Event, Graph, GraphExec, Kernel, KeelError, Module, Stream,
    abs, add, argmax, array_from_buffer, backends, cast, dense, devices, div, empty, exp, fill,
    from_dlpack, gelu, gelu_tanh, init, layer_norm, log, log_softmax, matmul, max, maximum, mean,
    min, minimum, mul, neg, norm2, relu, sigmoid, silu, softmax, sqrt, sub, sum, tanh, version,
)
from ._keel import __dict__ as _c

globals().update({k: v for k, v in _c.items() if k.startswith("KEEL_")})
__version__ = version()


def default_device() -> Device:
    """The device KEEL_BACKEND and KEEL_DEVICE select."""
    return Device()


def zeros(shape, dtype="float32", device=None, kind="device") -> Array:
    """A new Array of zeros."""
    a = empty(shape, dtype, device, kind)
    a.buffer.copy_from(bytes(a.buffer.nbytes))
    return a


def asarray(obj, dtype=None, device=None, copy=None) -> Array:
    """An Array of obj: a Keel Array as it is, a DLPack producer without a
    copy where the device can address its memory (copy=True forces one), or a
    copy of any buffer-protocol object (a NumPy array, bytes, array.array)."""
    if isinstance(obj, Array) and copy is not True:
        a = obj
    elif hasattr(obj, "__dlpack__") and copy is not True:
        a = from_dlpack(obj, device=device, copy=copy)
    else:
        a = array_from_buffer(obj, device=device)
    if dtype is not None and a.dtype != str(dtype):
        a = cast(a, dtype)
    return a


def to_numpy(a: Array):
    """A NumPy copy of an Array (on any device)."""
    import numpy as np
    out = np.empty(a.shape, dtype=a.dtype)
    a.copy_to(out)
    return out
