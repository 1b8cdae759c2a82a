"""The checks the generic op tests run, shared with the planted-bug check (test_mutation.py),
so that the mutants face exactly the generic suite."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyformer as tf
from tinyformer import registry
from tinyformer.testing import OpSpec, Sample

LAYOUTS = ("contiguous", "fortran", "strided", "reversed")


class HypothesisDraw:
    """A `tinyformer.testing.Draw` whose choices come from hypothesis (so failures shrink); array
    values come from a generator seeded by one hypothesis-drawn integer."""

    def __init__(self, data: st.DataObject) -> None:
        self._data = data
        self.rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))

    def integers(self, low: int, high: int) -> int:
        return self._data.draw(st.integers(low, high))

    def choice(self, options):
        return self._data.draw(st.sampled_from(list(options)))

    def shape(self, min_dims=1, max_dims=3, min_side=1, max_side=4):
        strategy = hnp.array_shapes(
            min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
        )
        return self._data.draw(strategy, label="shape")


def relayout(a: np.ndarray, layout: str) -> np.ndarray:
    """The same values in another memory layout (non-contiguous for all but the first)."""
    if a.ndim == 0 or layout == "contiguous":
        return a
    if layout == "fortran":
        return np.asfortranarray(a)
    if layout == "strided":  # every other element of a twice-as-wide buffer
        buffer = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
        buffer[..., ::2] = a
        return buffer[..., ::2]
    return a[::-1].copy()[::-1]  # "reversed": negative strides


def tensors(sample: Sample, dtype, layouts=None) -> list:
    """The sample's arrays as Tensors: float arrays cast to `dtype`, laid out as asked, and
    requiring grad; integer and boolean arrays (indices, targets, masks) as plain Tensors."""
    out = []
    for i, a in enumerate(sample.args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            layout = layouts[i % len(layouts)] if layouts else "contiguous"
            out.append(tf.Tensor(relayout(a.astype(dtype), layout), requires_grad=True))
        elif isinstance(a, np.ndarray):
            out.append(tf.Tensor(a))
        else:
            out.append(a)
    return out


def draw_layouts(draw: HypothesisDraw, sample: Sample) -> list[str]:
    return [draw.choice(LAYOUTS) for _ in sample.args]


def check_backward(spec: OpSpec, draw) -> None:
    """float64 gradcheck with a random upstream gradient, on any memory layout."""
    sample = spec.sample(draw)
    inputs = tensors(sample, np.float64, draw_layouts(draw, sample))
    if not any(isinstance(t, tf.Tensor) and t.requires_grad for t in inputs):
        return  # e.g. embedding of an empty index: nothing differentiable drawn
    tf.gradcheck(
        lambda *xs: spec.fn(*xs, **sample.kwargs),
        inputs,
        upstream="random",
        atol=spec.atol,
        rtol=spec.rtol,
        seed=draw.integers(0, 2**16),
    )


def check_reference_backward(spec: OpSpec, draw) -> None:
    """check_backward with every primitive forced to its NumPy reference: where a kernel is
    registered, the registry's own choice may never run the reference's branches."""
    with registry.prefer(registry.REFERENCE):
        check_backward(spec, draw)


def check_backend(spec: OpSpec, backend: str, dtype, draw) -> None:
    """The op's forward and backward with `backend`'s kernels equal the NumPy reference's."""
    sample = spec.sample(draw)
    layouts = draw_layouts(draw, sample)  # the kernel gets the same strided inputs as the reference
    with registry.prefer(registry.REFERENCE):
        y_ref, g_ref, _ = forward_backward(spec, sample, dtype, layouts=layouts)
    with registry.prefer(backend):
        y, g, _ = forward_backward(spec, sample, dtype, layouts=layouts)
    atol, rtol = spec.float32_tol if dtype == np.float32 else (1e-10, 1e-9)
    np.testing.assert_allclose(y.data, y_ref.data, atol=atol, rtol=rtol)
    for a, b in zip(g, g_ref):
        if b is not None:
            np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)


def forward_backward(spec: OpSpec, sample: Sample, dtype, seed: int = 0, layouts=None):
    """Output and input gradients (for a fixed random upstream gradient) as float64 arrays."""
    inputs = tensors(sample, dtype, layouts)
    y = spec.fn(*inputs, **sample.kwargs)
    gy = np.random.default_rng(seed).standard_normal(y.shape).astype(y.dtype)
    leaves = [t for t in inputs if isinstance(t, tf.Tensor) and t.requires_grad]
    grads = tf.grad(y, leaves, gy) if y.requires_grad else [None] * len(leaves)
    return y, grads, leaves
