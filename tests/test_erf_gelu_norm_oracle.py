"""Numbers the generic checks compare too loosely, against independent oracles:

- float32 erf and erfc against `math.erf`/`math.erfc` to about 1e-6 (the generic float32 check
  allows 1e-4), over a grid that reaches the tails, and the exact GELU of every backend the
  same way;
- norm with p = inf where |x| ties: the gradient is split evenly among the tied maxima, as the
  docstring promises and PyTorch does.

Each check takes the module it tests, so that tests/test_mutation_dedicated.py can run it on a
copy with a planted bug.
"""

from __future__ import annotations

import importlib
import math
import warnings
from types import ModuleType

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import registry
from tinyformer.fake_device import to_fake

# the modules, not the functions of the same names that tinyformer.ops exports
erf_module = importlib.import_module("tinyformer.ops.erf")
norm_op = importlib.import_module("tinyformer.ops.norm")

# every float32 from -9 to 9 in steps of 1/1024 (erfc(9) ~ 4e-37 is still a normal float32),
# the switch between erf's series and 1 - erfc at |x| = 1/2, and tiny arguments
GRID = np.concatenate(
    [np.arange(-9 * 1024, 9 * 1024 + 1) / 1024, [0.4999999, 0.5000001, 1e-30, -1e-20, 1e-6]]
).astype(np.float32)


def _exact(fn, x: np.ndarray) -> np.ndarray:
    return np.array([fn(v) for v in x.astype(np.float64)])


def check_erf(module: ModuleType = erf_module) -> None:
    """float32 erf within 1e-6 of the exact value relative to max(|erf|, 1e-30) (relative
    near 0, where the series keeps it so), erfc within a relative 1e-6 everywhere."""
    got = module.erf_array(GRID)
    assert got.dtype == np.float32
    want = _exact(math.erf, GRID)
    error = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    assert error.max() < 1e-6, (
        f"erf: relative error {error.max():.3g} at x = {GRID[error.argmax()]}"
    )
    got = module.erfc(GRID)
    assert got.dtype == np.float32
    want = _exact(math.erfc, GRID)
    error = np.abs(got - want) / want
    assert error.max() < 1e-6, f"erfc: relative error {error.max():.3g} at {GRID[error.argmax()]}"


def check_erf_extremes(module: ModuleType = erf_module) -> None:
    """erf of infinities, NaN and numbers whose square overflows, and its gradient there,
    without a floating-point warning (the series must not run on them)."""
    for dtype in (np.float32, np.float64):
        x = np.array([np.inf, -np.inf, np.nan, 1e30, -3e19, 0.25], dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            t = tf.Tensor(x, requires_grad=True)
            y = module.Erf.apply(t)
            y.backward(np.ones_like(x))
        np.testing.assert_array_equal(y.data[:5], [1, -1, np.nan, 1, -1])
        assert abs(y.data[5] - math.erf(0.25)) < 1e-7
        np.testing.assert_array_equal(t.grad[:5], [0, 0, np.nan, 0, 0])


def _gelu_exact(x: float) -> tuple[float, float]:
    """GELU and its derivative, Phi(x) + x phi(x), in float64 from math.erfc."""
    cdf = 0.5 * math.erfc(-x / math.sqrt(2))
    return x * cdf, cdf + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def check_gelu(backend: str) -> None:
    """float32 exact GELU and its gradient within 1e-6 of float64 math, times max(1, |value|)."""
    x = GRID[::4].copy()
    exact = np.array([_gelu_exact(v) for v in x.astype(np.float64)])  # (n, 2)
    ones = np.ones_like(x)
    args = [(x, "none"), (ones, x, "none")]
    if backend == "cuda":  # on the fake device, through the CPU emulator
        args = [tuple(to_fake(a) if isinstance(a, np.ndarray) else a for a in t) for t in args]
    with registry.prefer(backend):
        for i, name in enumerate(("gelu.forward", "gelu.backward")):
            impl = registry.choose(name, *args[i])
            assert impl.backend == backend, registry.explain(name, np.float32)
            got = impl.fn(*args[i])
            got = got.get() if hasattr(got, "get") else got
            assert got.dtype == np.float32
            error = np.abs(got - exact[:, i]) / np.maximum(1.0, np.abs(exact[:, i]))
            where = x[error.argmax()]
            assert error.max() < 1e-6, f"{name} [{backend}]: error {error.max():.3g} at {where}"


def check_norm_ties(module: ModuleType = norm_op) -> None:
    """The p = inf gradient against PyTorch's where maxima of |x| tie: within a vector, across
    signs, along either axis, and for all axes at once."""
    torch = pytest.importorskip("torch")
    x = np.array([[3.0, -3.0, 1.0, 3.0], [-2.0, 0.5, -2.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    gy = {0: np.array([1.0, -2.0, 0.5, 3.0]), 1: np.array([1.5, -1.0, 2.0]), None: np.array(2.0)}
    for axis, g in gy.items():
        ours = tf.Tensor(x, requires_grad=True)
        module.norm(ours, math.inf, axis).backward(g)
        theirs = torch.tensor(x, requires_grad=True)
        torch.linalg.vector_norm(theirs, ord=math.inf, dim=axis).backward(torch.tensor(g))
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-15, atol=0,
                                   err_msg=f"norm(x, inf, axis={axis})")  # fmt: skip


def test_float32_erf_and_erfc_are_accurate_into_the_tails():
    check_erf()


def test_erf_of_infinities_and_huge_numbers_without_warnings():
    check_erf_extremes()


@pytest.mark.parametrize("backend", registry.backends("gelu.forward"))
def test_float32_exact_gelu_is_accurate_into_the_tails(backend):
    check_gelu(backend)


@pytest.mark.torch
def test_inf_norm_splits_the_gradient_among_ties_as_pytorch():
    check_norm_ties()
