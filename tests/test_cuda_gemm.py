"""The tiled GEMM of kernels/cuda/gemm.cu against NumPy, on the CPU emulator (the GPU where there
is one): both dtypes, shapes that are not multiples of the 64 x 64 x 16 tiles, batches (shared
and strided operands), the four transpose cases, each epilogue; and when the linear layers'
CUDA kernels (built on it) run instead of cuBLAS.

Shapes stay small: the emulator runs each CUDA thread as an OS thread."""

from __future__ import annotations

import numpy as np
import pytest

from tinyformer import backend, cuda_graphs, registry
from tinyformer.kernels.cuda.gemm import gemm
from tinyformer.ops.gelu import gelu_forward
from tinyformer.ops.linear import linear_backward as linear_backward_reference

DEVICE = "cuda" if backend.cuda_available() else "fake"
DTYPES = [np.float32, np.float64]
needs_gpu = pytest.mark.skipif(not backend.cuda_available(), reason="needs CuPy and a GPU")


def _dev(a):
    return backend.to_device(a, DEVICE)


def _host(a):
    return backend.to_host(a)


def _close(got, want, dtype):
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def _randn(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _stored(op, trans):
    """How an operand whose op() is `op` is stored: as is, or transposed (contiguous)."""
    return np.ascontiguousarray(np.swapaxes(op, -1, -2)) if trans else op


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_every_transpose_case_with_shapes_off_the_tiles(dtype, trans_a, trans_b):
    rng = np.random.default_rng(0)
    for m, n, k in [(67, 9, 19), (5, 70, 33)]:  # a second row or column tile; K past 16
        a, b = _randn(rng, (m, k), dtype), _randn(rng, (k, n), dtype)
        got = gemm(_dev(_stored(a, trans_a)), _dev(_stored(b, trans_b)),
                   trans_a=trans_a, trans_b=trans_b)  # fmt: skip
        assert got.shape == (m, n) and got.dtype == dtype
        _close(_host(got), a @ b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batches_strided_and_shared(dtype):
    rng = np.random.default_rng(1)
    a3, b3 = _randn(rng, (3, 10, 7), dtype), _randn(rng, (3, 7, 12), dtype)
    a2, b2 = a3[0], b3[0]
    _close(_host(gemm(_dev(a3), _dev(b3))), a3 @ b3, dtype)
    _close(_host(gemm(_dev(a3), _dev(b2))), a3 @ b2, dtype)  # b shared by every batch
    _close(_host(gemm(_dev(a2), _dev(b3))), a2 @ b3, dtype)  # a shared
    got = gemm(_dev(_stored(a3, True)), _dev(_stored(b3, True)), trans_a=True, trans_b=True)
    _close(_host(got), a3 @ b3, dtype)


def test_batches_past_the_grid_limit_loop(monkeypatch):
    from tinyformer.kernels.cuda import gemm as module

    monkeypatch.setattr(module, "MAX_GRID_Z", 2)  # 5 batches on a grid of 2: the loop covers them
    rng = np.random.default_rng(2)
    a, b = _randn(rng, (5, 3, 4), np.float64), _randn(rng, (5, 4, 6), np.float64)
    _close(_host(gemm(_dev(a), _dev(b))), a @ b, np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_bias_and_gelu_epilogue_match_the_ops(dtype, approximate):
    rng = np.random.default_rng(3)
    x, w, b = _randn(rng, (9, 20), dtype), _randn(rng, (11, 20), dtype), _randn(rng, (11,), dtype)
    h = x @ w.T + b  # linear's forward: W stored (out, in), hence trans_b
    pre = _dev(np.zeros((9, 11), dtype))
    y = gemm(_dev(x), _dev(w), trans_b=True, bias=_dev(b), gelu=approximate, pre=pre)
    _close(_host(pre), h, dtype)
    _close(_host(y), gelu_forward(h, approximate), dtype)
    _close(_host(gemm(_dev(x), _dev(w), trans_b=True, bias=_dev(b))), h, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_accumulate_adds_into_out(dtype):
    rng = np.random.default_rng(4)
    gy, x, gw0 = (
        _randn(rng, (13, 6), dtype),
        _randn(rng, (13, 5), dtype),
        _randn(rng, (6, 5), dtype),
    )
    gw = _dev(gw0.copy())
    same = gemm(_dev(gy), _dev(x), trans_a=True, out=gw, accumulate=True)  # gW += gy^T x
    assert same is gw
    _close(_host(gw), gw0 + gy.T @ x, dtype)
    gemm(_dev(gy), _dev(x), trans_a=True, out=gw)  # without accumulate: overwritten
    _close(_host(gw), gy.T @ x, dtype)


def test_empty_products():
    z = gemm(_dev(np.zeros((0, 3), np.float32)), _dev(np.zeros((3, 4), np.float32)))
    assert z.shape == (0, 4)
    z = gemm(_dev(np.zeros((2, 0), np.float32)), _dev(np.zeros((0, 4), np.float32)))
    np.testing.assert_array_equal(_host(z), np.zeros((2, 4)))  # K = 0: the sum of nothing


def test_errors_name_the_problem():
    a, b = _dev(np.zeros((2, 3), np.float32)), _dev(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match=r"gemm: op\(a\).*do not multiply"):
        gemm(a, b)
    with pytest.raises(TypeError, match="float32 or float64"):
        gemm(a, _dev(np.zeros((3, 5), np.float64)))
    c = _dev(np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="accumulate=True adds into `out`"):
        gemm(a, c, accumulate=True)
    with pytest.raises(ValueError, match="pre .* only with gelu"):
        gemm(a, c, pre=_dev(np.zeros((2, 5), np.float32)))
    with pytest.raises(ValueError, match=r"out must be a C-contiguous \(2, 5\) float32"):
        gemm(a, c, out=_dev(np.zeros((5, 2), np.float32)))
    with pytest.raises(ValueError, match="gelu must be"):
        gemm(a, c, gelu="erf")


# -- the linear layer's kernels -------------------------------------------------------------------


def _linear_args(dtype):
    rng = np.random.default_rng(5)
    return _randn(rng, (7, 10), dtype), _randn(rng, (6, 10), dtype), _randn(rng, (6,), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_kernels_match_the_references(dtype, bias):
    x, w, b = _linear_args(dtype)
    b = b if bias else None
    gy = np.random.default_rng(6).standard_normal((7, 6)).astype(dtype)
    with registry.prefer("cuda", force=True):
        assert registry.choose("linear.forward", _dev(x), _dev(w), b).backend == "cuda"
        y = registry.call("linear.forward", _dev(x), _dev(w), None if b is None else _dev(b))
        grads = registry.call("linear.backward", _dev(gy), _dev(x), _dev(w), True, True, bias)
    _close(_host(y), x @ w.T + (0 if b is None else b), dtype)
    want = linear_backward_reference(gy, x, w, True, True, bias)
    for got, expected in zip(grads, want):
        if expected is None:
            assert got is None
        else:
            _close(_host(got), expected, dtype)


def test_eager_calls_keep_cublas_and_graphs_get_the_gemm():
    """cuBLAS is faster, and only capture refuses it: the GEMM runs while a graph is warmed up
    or captured (or when forced), the reference (`@`, cuBLAS on a GPU) otherwise."""
    x, w, b = (_dev(a) for a in _linear_args(np.float32))
    with registry.prefer("cuda"):
        assert registry.choose("linear.forward", x, w, b).backend == registry.REFERENCE
        with cuda_graphs._graph_safe(recording=False):
            assert registry.choose("linear.forward", x, w, b).backend == "cuda"
            assert registry.choose("linear.backward", x, x, w, True, True, True).backend == "cuda"
            mixed = _dev(np.zeros((6, 10), np.float64))  # the GEMM does not promote dtypes
            assert registry.choose("linear.forward", x, mixed, None).backend == registry.REFERENCE
        assert registry.choose("linear.forward", x, w, b).backend == registry.REFERENCE


@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_baby_sized_products_on_the_gpu(dtype):
    """The linear layers of the baby GPT (rows = 12 x 64, C = 128, 4C = 512) against cuBLAS."""
    rng = np.random.default_rng(7)
    x, w, b = (
        _randn(rng, (768, 128), dtype),
        _randn(rng, (512, 128), dtype),
        _randn(rng, (512,), dtype),
    )
    gy = _randn(rng, (768, 512), dtype)
    with registry.prefer("cuda", force=True):
        y = registry.call("linear.forward", _dev(x), _dev(w), _dev(b))
        gx, gw, gb = registry.call("linear.backward", _dev(gy), _dev(x), _dev(w), True, True, True)
    _close(_host(y), x @ w.T + b, dtype)
    for got, want in zip((gx, gw, gb), linear_backward_reference(gy, x, w, True, True, True)):
        _close(_host(got), want, dtype)
