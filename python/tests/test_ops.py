# SPDX-License-Identifier: MIT
"""The built-in operations against NumPy in float64, on fresh random data."""
import math

import numpy as np
import pytest

import keel
from conftest import to_keel

F64_TOL = dict(rtol=1e-12, atol=1e-12)
F32_TOL = dict(rtol=2e-5, atol=2e-6)


def erf(x):
    return np.vectorize(math.erf)(x)


UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "sqrt": lambda x: np.sqrt(np.abs(x)),
    "log": lambda x: np.log(np.abs(x) + 0.5), "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1 + np.exp(-x)), "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh,
}
PREP = {"sqrt": np.abs, "log": lambda x: np.abs(x) + 0.5}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype, rng, dev):
    x = rng.standard_normal((17, 33))
    x = PREP.get(name, lambda v: v)(x).astype(dtype)
    y = keel.to_numpy(getattr(keel, name)(to_keel(x, dev)))
    ref = UNARY[name](x.astype(np.float64)) if name not in PREP else getattr(np, name)(x.astype(np.float64))
    np.testing.assert_allclose(y, ref, **(F64_TOL if dtype == "float64" else F32_TOL))


@pytest.mark.parametrize("name,fn", [("add", lambda a, b: 1.5 * a + -0.25 * b), ("sub", lambda a, b: 1.5 * a - -0.25 * b),
                                     ("mul", lambda a, b: (1.5 * a) * (-0.25 * b)),
                                     ("div", lambda a, b: (1.5 * a) / (-0.25 * b))])
def test_binary_scaled(name, fn, rng, dev):
    a = rng.standard_normal((9, 31))
    b = rng.uniform(0.5, 2.0, (9, 31))
    y = keel.to_numpy(getattr(keel, name)(to_keel(a, dev), to_keel(b, dev), 1.5, -0.25))
    np.testing.assert_allclose(y, fn(a, b), **F64_TOL)


def test_binary_broadcasts_rows_and_columns(rng, dev):
    a = rng.standard_normal((6, 11))
    row = rng.standard_normal(11)
    col = rng.standard_normal((6, 1))
    np.testing.assert_allclose(keel.to_numpy(keel.add(to_keel(a, dev), to_keel(row, dev))), a + row, **F64_TOL)
    np.testing.assert_allclose(keel.to_numpy(keel.maximum(to_keel(a, dev), to_keel(col, dev))), np.maximum(a, col),
                               **F64_TOL)
    np.testing.assert_allclose(keel.to_numpy(keel.minimum(to_keel(a, dev), to_keel(a[::-1].copy(), dev))),
                               np.minimum(a, a[::-1]), **F64_TOL)


@pytest.mark.parametrize("name,fn", [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean),
                                     ("norm2", lambda x, axis=None: np.sqrt(np.sum(x * x, axis=axis)))])
def test_reductions(name, fn, rng, dev):
    x = rng.standard_normal((23, 45))
    k = to_keel(x, dev)
    f = getattr(keel, name)
    np.testing.assert_allclose(keel.to_numpy(f(k)), fn(x), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(keel.to_numpy(f(k, -1)), fn(x, axis=1), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(keel.to_numpy(f(k, 0)), fn(x, axis=0), rtol=1e-11, atol=1e-11)


def test_argmax_softmax_layer_norm(rng, dev):
    x = rng.standard_normal((12, 70))
    k = to_keel(x, dev)
    np.testing.assert_array_equal(keel.to_numpy(keel.argmax(k)), np.argmax(x, axis=1))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    sm = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(keel.to_numpy(keel.softmax(k)), sm, **F64_TOL)
    np.testing.assert_allclose(keel.to_numpy(keel.log_softmax(k)), np.log(sm), rtol=1e-11, atol=1e-11)
    g, b = rng.standard_normal(70), rng.standard_normal(70)
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * g + b
    got = keel.to_numpy(keel.layer_norm(k, to_keel(g, dev), to_keel(b, dev), 1e-5))
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_and_batches(dtype, rng, dev):
    a, b = rng.standard_normal((37, 19)), rng.standard_normal((19, 41))
    tol = F64_TOL if dtype == "float64" else dict(rtol=1e-4, atol=1e-4)
    got = keel.to_numpy(keel.matmul(to_keel(a.astype(dtype), dev), to_keel(b.astype(dtype), dev)))
    np.testing.assert_allclose(got, a.astype(dtype).astype(np.float64) @ b.astype(dtype).astype(np.float64), **tol)
    A, B = rng.standard_normal((3, 8, 5)), rng.standard_normal((3, 5, 7))
    np.testing.assert_allclose(keel.to_numpy(keel.matmul(to_keel(A, dev), to_keel(B, dev))), A @ B, **F64_TOL)


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "gelu_tanh"])
def test_dense_is_torch_linear(act, rng, dev):
    x, w, bias = rng.standard_normal((10, 24)), rng.standard_normal((16, 24)), rng.standard_normal(16)
    z = x @ w.T + bias
    ref = {"none": z, "relu": np.maximum(z, 0), "gelu": UNARY["gelu"](z), "gelu_tanh": UNARY["gelu_tanh"](z)}[act]
    got = keel.to_numpy(keel.dense(to_keel(x, dev), to_keel(w, dev), to_keel(bias, dev), act))
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)


def test_fill_and_cast(rng, dev):
    x = rng.standard_normal(300)
    k = to_keel(x, dev)
    f = keel.to_numpy(keel.cast(k, "float32"))
    np.testing.assert_array_equal(f, x.astype(np.float32))
    h = keel.cast(k, "float16")
    np.testing.assert_array_equal(keel.to_numpy(keel.cast(h, "float64")), x.astype(np.float16).astype(np.float64))
    keel.fill(k, -2.25)
    assert np.all(keel.to_numpy(k) == -2.25)


def test_out_and_stream_arguments(rng, dev):
    x = rng.standard_normal(1000)
    k = to_keel(x, dev)
    out = keel.empty(1000, "float64", dev)
    s = keel.Stream(dev)
    r = keel.exp(k, out=out, stream=s)
    assert r is out
    s.synchronize()
    np.testing.assert_allclose(keel.to_numpy(out), np.exp(x), **F64_TOL)


def test_ops_refuse_bad_input(dev):
    a = keel.empty((4, 4), "float32", dev)
    with pytest.raises(TypeError, match="keel.Array"):
        keel.exp(np.zeros(4))
    with pytest.raises(TypeError, match="float32"):
        keel.exp(keel.empty(4, "int32", dev))
    with pytest.raises(ValueError, match="out"):
        keel.exp(a, out=keel.empty(3, "float32", dev))
    with pytest.raises(TypeError):
        keel.add(a, keel.empty((4, 4), "float64", dev))
    with pytest.raises(ValueError):
        keel.matmul(a, keel.empty((3, 4), "float32", dev))
    with pytest.raises(ValueError, match="activation"):
        keel.dense(a, a, None, "swish")
    with pytest.raises(ValueError, match="axis"):
        keel.sum(a, 5)
    with pytest.raises(TypeError, match="unexpected keyword"):
        keel.exp(a, bogus=1)
    with pytest.raises(keel.KeelError) as e:
        keel.mean(keel.empty((0, 3), "float32", dev))  # the mean of nothing
    assert e.value.status == keel.KEEL_ERROR_INVALID_ARGUMENT and e.value.message
