# SPDX-License-Identifier: MIT
"""Exchanges with PyTorch and CuPy on a GPU, both directions, with stream
ordering: run with KEEL_BACKEND=cuda. Skipped without CUDA, torch or CuPy."""
import numpy as np
import pytest

import keel

DEV = keel.default_device()
cuda_only = pytest.mark.skipif(DEV.backend != "cuda", reason="needs KEEL_BACKEND=cuda and a GPU")


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


@cuda_only
def test_torch_into_keel_and_back_without_copies():
    torch = torch_cuda()
    t = torch.randn(64, 32, device=f"cuda:{DEV.index}", dtype=torch.float32)
    a = keel.from_dlpack(t)
    assert a.ptr == t.data_ptr() and a.shape == (64, 32)
    y = keel.relu(a)
    back = torch.from_dlpack(y)
    assert back.data_ptr() == y.ptr
    torch.testing.assert_close(back, torch.relu(t))


@cuda_only
def test_torch_work_is_ordered_before_keel():
    """Torch's queued work on its stream must finish before Keel's stream reads."""
    torch = torch_cuda()
    s = keel.Stream(DEV)
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        t = torch.zeros(1 << 22, device=f"cuda:{DEV.index}")
        for _ in range(20):  # a long queue on torch's stream
            t.add_(1.0)
        a = keel.from_dlpack(t, stream=s)  # __dlpack__(stream=s's handle): s waits for ts
    total = keel.sum(a, stream=s)
    s.synchronize()
    assert keel.to_numpy(total)[()] == 20.0 * (1 << 22)


@cuda_only
def test_keel_work_is_ordered_before_torch():
    torch = torch_cuda()
    s = keel.Stream(DEV)
    a = keel.empty(1 << 22, "float32", DEV)
    keel.fill(a, 1.0, stream=s)
    for _ in range(20):  # a long queue on Keel's stream: a = 2a
        keel.add(a, a, 1.0, 1.0, out=a, stream=s)
    t = torch.from_dlpack(a)  # torch passes its current stream; Keel's stream orders before it
    assert float(t[0]) == 2.0 ** 20 and float(t[-1]) == 2.0 ** 20


@cuda_only
def test_cupy_both_ways():
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal((100, 10), dtype=cp.float64)
    a = keel.from_dlpack(x)
    assert a.ptr == x.data.ptr
    y = cp.from_dlpack(keel.exp(a))
    cp.testing.assert_allclose(y, cp.exp(x), rtol=1e-12)
    z = cp.asarray(a)  # through __cuda_array_interface__
    assert z.data.ptr == a.ptr


@cuda_only
def test_cuda_array_interface():
    a = keel.empty((3, 4), "float32", DEV)
    cai = a.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<f4"
    assert cai["data"] == (a.ptr, False) and cai["strides"] is None
    assert cai["stream"] == a.device.default_stream.native_handle


@cuda_only
def test_dlpack_device_of_each_kind():
    assert keel.empty(4, device=DEV).__dlpack_device__() == (2, DEV.index)  # kDLCUDA
    assert keel.empty(4, device=DEV, kind="pinned").__dlpack_device__() == (3, 0)  # kDLCUDAHost
    assert keel.empty(4, device=DEV, kind="managed").__dlpack_device__() == (13, DEV.index)  # kDLCUDAManaged


@cuda_only
def test_numpy_onto_the_gpu_is_a_copy():
    x = np.random.default_rng().standard_normal(50)
    a = keel.from_dlpack(x, device=DEV)
    assert a.ptr != x.ctypes.data
    np.testing.assert_array_equal(keel.to_numpy(a), x)


def test_no_cuda_array_interface_off_cuda():
    if DEV.backend == "cuda":
        pytest.skip("on CUDA it exists")
    assert not hasattr(keel.empty(2, device=DEV), "__cuda_array_interface__")
