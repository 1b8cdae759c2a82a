"""Generic op tests, driven by the `SPECS` of every file in tinyformer/ops; the checks are
tinyformer.testing.checks, which `check_op` and `pytest --tinyformer-ops` run on anyone's op.

For every op: its backward matches finite differences (float64, random upstream gradient,
hypothesis-drawn shapes with broadcasting, size-1 axes and non-contiguous layouts), also with its
primitives forced to their NumPy references; float32 stays float32 and agrees with float64; no
graph is recorded under no_grad; and every registered kernel backend agrees with the NumPy
reference, on samples that draw every keyword the op takes.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinyformer as tf
from tinyformer.testing import RandomDraw, all_specs
from tinyformer.testing.checks import (
    check_backend,
    check_backward,
    check_float32,
    check_no_grad,
    check_reference_backward,
    has_kernels,
    kernel_backends,
)
from tinyformer.testing.hypothesis_draw import HypothesisDraw

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


# Ops with kernels; the others run their references in the test above already.
KERNEL_SPECS = [spec for spec in SPECS if has_kernels(spec)]


@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=[spec.name for spec in KERNEL_SPECS])
@given(data=st.data())
def test_reference_backward_matches_finite_differences(spec, data):
    check_reference_backward(spec, HypothesisDraw(data))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@given(data=st.data())
def test_float32_stays_float32_and_agrees_with_float64(spec, data):
    check_float32(spec, HypothesisDraw(data))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_no_graph_under_no_grad(spec):
    check_no_grad(spec, RandomDraw(0))


def _kernel_cases():
    cases = []
    for spec in SPECS:
        cases += [pytest.param(spec, b, id=f"{spec.name}-{b}") for b in kernel_backends(spec)]
    return cases


@pytest.mark.parametrize("spec, backend", _kernel_cases())
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_backend_matches_reference(spec, backend, dtype, data):
    check_backend(spec, backend, dtype, HypothesisDraw(data))


# Keywords of ops with kernels that their specs leave at the default, and why.
UNDRAWN_KEYWORDS = {
    "scaled_dot_product_attention": {
        "dropout_p": "runs the unfused ops (dropout's own spec compares its kernel)",
        "return_weights": "adds an output computed by the reference alone",
    },
    "dropout": {"training": "False returns the input: no kernel runs"},
    "max_pool2d": {"return_indices": "hands out the indices the kernel computes anyway"},
    "max_unpool2d": {
        "stride": "sets only the default output size, and the spec gives output_size",
        "padding": "sets only the default output size, and the spec gives output_size",
    },
}


def _differs(value, default) -> bool:
    if default is None or value is None:
        return value is not default
    return not (type(value) is type(default) and value == default)


@pytest.mark.parametrize("spec", KERNEL_SPECS, ids=[spec.name for spec in KERNEL_SPECS])
def test_specs_draw_every_keyword_of_ops_with_kernels(spec):
    """An argument never drawn away from its default is a kernel branch that the comparison
    with the reference never runs (and a reference branch the gradcheck never runs)."""
    signature = inspect.signature(spec.fn)
    defaults = {
        name: p.default for name, p in signature.parameters.items() if p.default is not p.empty
    }
    drawn = set()
    for seed in range(50):
        sample = spec.sample(RandomDraw(seed))
        bound = signature.bind(*sample.args, **sample.kwargs).arguments
        drawn |= {k for k, v in bound.items() if k in defaults and _differs(v, defaults[k])}
    missing = set(defaults) - drawn - set(UNDRAWN_KEYWORDS.get(spec.name, {}))
    assert not missing, f"{spec.name}: the spec never draws {sorted(missing)}"
