"""Two ops written outside tinyformer, with their test specs and a Numba kernel.

    pytest --tinyformer-ops examples/swiglu_ops.py        # docs/testing-your-own-op.md

swiglu: the gated activation of LLaMA-style MLPs, on the two halves of the last axis.
    Forward   x = [a, b] (halves of the last axis),  s = sigmoid(a),  y = a s b
    Backward  ga = gy b s (1 + a (1 - s)),  gb = gy a s      (d(a s)/da = s (1 + a (1 - s)))
    Saved     x; s is recomputed (one exp) rather than stored.
    Its forward and backward are registry primitives with NumPy references, and the forward
    has a Numba kernel too: the checks compare the kernel with the reference.

sin: y = sin(x),  gx = gy cos(x).  Saved: x.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import tinyformer as tf
from tinyformer import registry
from tinyformer.testing import OpSpec, Sample, floats, unary_sample

# -- swiglu: references, a kernel, the Function, the wrapper -------------------------------------


@registry.reference("swiglu.forward")
def swiglu_forward(x):
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    return a / (1 + np.exp(-a)) * b


@registry.reference("swiglu.backward")
def swiglu_backward(gy, x):
    h = x.shape[-1] // 2
    a, b = x[..., :h], x[..., h:]
    s = 1 / (1 + np.exp(-a))
    return np.concatenate([gy * b * s * (1 + a * (1 - s)), gy * a * s], axis=-1)


# No cache=True here: Numba's cache records the module's import name, and pytest may import
# this file under another name (--import-mode), which then fails to load the cached kernel.
@njit(parallel=True)
def _swiglu_rows(x):  # x: (N, 2h) contiguous -> (N, h), one row per thread
    n, h = x.shape[0], x.shape[1] // 2
    y = np.empty((n, h), x.dtype)
    for i in prange(n):
        for j in range(h):
            a = x[i, j]
            y[i, j] = a / (1.0 + np.exp(-a)) * x[i, h + j]  # float64 math, stored in x's dtype
    return y


@registry.kernel("swiglu.forward", backend="numba", dtypes=(np.float32, np.float64))
def swiglu_forward_numba(x):
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1])  # (N, 2h): the kernel wants rows
    return _swiglu_rows(rows).reshape(*x.shape[:-1], x.shape[-1] // 2)


class SwiGLU(tf.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return registry.call("swiglu.forward", x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return registry.call("swiglu.backward", gy, x)


def swiglu(x: tf.Tensor) -> tf.Tensor:
    """silu(a) * b for the halves a, b of the last axis: (..., 2h) -> (..., h)."""
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"swiglu: the last axis must have an even size, got shape {x.shape}")
    return SwiGLU.apply(x)


def swiglu_sample(draw) -> Sample:
    *batch, h = draw.shape(min_dims=1)
    return Sample([floats(draw, (*batch, 2 * h), -3.0, 3.0)])


# -- sin: a Function on plain NumPy, no primitives ----------------------------------------------


class Sin(tf.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.sin(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy * np.cos(x)


def sin(x: tf.Tensor) -> tf.Tensor:
    """Elementwise sine."""
    return Sin.apply(x)


SPECS = [
    OpSpec(
        "swiglu",
        swiglu,
        swiglu_sample,
        functions=(SwiGLU,),
        primitives=("swiglu.forward", "swiglu.backward"),
    ),
    OpSpec("sin", sin, unary_sample(-3.0, 3.0), functions=(Sin,)),
]
