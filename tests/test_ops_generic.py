"""Generic op tests, driven by the `SPECS` of every file in tinyformer/ops.

For every op: its backward matches finite differences (float64, random upstream gradient,
hypothesis-drawn shapes with broadcasting, size-1 axes and non-contiguous layouts); float32 stays
float32 and agrees with float64; no graph is recorded under no_grad; and every registered kernel
backend agrees with the NumPy reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyformer as tf
from tests.op_checks import (
    HypothesisDraw,
    check_backend,
    check_backward,
    forward_backward,
    tensors,
)
from tinyformer import registry
from tinyformer.testing import all_specs

SPECS = all_specs()
IDS = [spec.name for spec in SPECS]


# Ops whose outputs are integers: nothing to differentiate, so no OpSpec (their values are tested
# in test_tensor.py and test_nn.py). The test below holds them to it.
INTEGER_OUTPUTS = {"argmax": (np.ones((2, 3)),), "argmin": (np.ones(3),), "one_hot": ([0, 2],)}


def test_every_op_file_has_specs():
    names = {spec.name for spec in SPECS}
    for op in tf.ops.__all__:
        if op == "getitem" or getattr(tf.ops, op).__name__ != op:
            continue  # getitem is spec'd; an alias (concatenate, clamp) is its original's spec
        if op in INTEGER_OUTPUTS:
            args = [tf.tensor(a, requires_grad=True) if isinstance(a, np.ndarray) else a
                    for a in INTEGER_OUTPUTS[op]]  # fmt: skip
            y = getattr(tf.ops, op)(*args)
            assert y.dtype.kind == "i" and not y.requires_grad, f"ops.{op} needs an OpSpec"
            continue
        assert op in names, f"ops.{op} has no OpSpec"


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_backward_matches_finite_differences(spec, data):
    check_backward(spec, HypothesisDraw(data))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_float32_stays_float32_and_agrees_with_float64(spec, data):
    sample = spec.sample(HypothesisDraw(data))
    y32, g32, leaves32 = forward_backward(spec, sample, np.float32)
    y64, g64, _ = forward_backward(spec, sample, np.float64)
    atol, rtol = spec.float32_tol
    assert y32.dtype == np.float32, f"{spec.name} returned {y32.dtype} for float32 inputs"
    np.testing.assert_allclose(y32.data, y64.data, atol=atol, rtol=rtol)
    for leaf, a, b in zip(leaves32, g32, g64):
        if a is not None:
            assert a.dtype == np.float32 and a.shape == leaf.shape
            np.testing.assert_allclose(a, b, atol=atol * 10, rtol=rtol * 10)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_no_graph_under_no_grad(spec):
    from tinyformer.testing import RandomDraw

    sample = spec.sample(RandomDraw(0))
    with tf.no_grad():
        y = spec.fn(*tensors(sample, np.float64), **sample.kwargs)
    assert y.grad_fn is None and not y.requires_grad


def _kernel_cases():
    cases = []
    for spec in SPECS:
        found = {b for p in spec.primitives for b in registry.backends(p)} - {registry.REFERENCE}
        cases += [pytest.param(spec, b, id=f"{spec.name}-{b}") for b in sorted(found)]
    return cases


@pytest.mark.parametrize("spec, backend", _kernel_cases())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_backend_matches_reference(spec, backend, dtype, data):
    check_backend(spec, backend, dtype, HypothesisDraw(data))
