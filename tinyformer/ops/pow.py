"""pow: y = x1 ** x2 (an exponent that is a number or a tensor), with NumPy broadcasting.

Forward   y = x1^x2
Backward  gx1 = unbroadcast(gy * x2 * x1^(x2 - 1), shape(x1))
          gx2 = unbroadcast(gy * y * log(x1), shape(x2))   (defined for x1 > 0 only; NaN else)
Saved     x1, x2 and y (y saves recomputing x1^x2 for gx2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, unbroadcast
from tinyformer.opspec import OpSpec, Sample, broadcast_pair, floats
from tinyformer.tensor import Tensor

__all__ = ["pow"]


class Pow(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        y = x1**x2
        ctx.save_for_backward(x1, x2, y)
        return y

    @staticmethod
    def backward(ctx, gy):
        x1, x2 = ctx.saved_tensors[:2]
        y = ctx.saved_tensors[2]
        gx1 = gx2 = None
        if ctx.needs_input_grad[0]:
            gx1 = unbroadcast(gy * x2 * x1 ** (x2 - 1), x1.shape)
        if ctx.needs_input_grad[1]:
            xp = backend.get_array_module(x1)
            # NumPy's errstate silences NumPy's warnings; CuPy has no errstate and never warns.
            with np.errstate(invalid="ignore", divide="ignore"):
                gx2 = unbroadcast(gy * y * xp.log(x1), x2.shape)
        return gx1, gx2


def pow(x1: Any, x2: Any) -> Tensor:  # noqa: A001 (named as torch.pow)
    """Elementwise `x1 ** x2`."""
    return Pow.apply(*binary_operands(x1, x2))


def _sample(draw) -> Sample:
    s1, s2 = broadcast_pair(draw)
    return Sample([floats(draw, s1, 0.5, 2.0), floats(draw, s2, -2.0, 2.0)])


def _sample_number_exponent(draw) -> Sample:
    exponent = draw.choice([2, 3, 0.5, -1.5])
    return Sample([floats(draw, draw.shape(min_dims=0), 0.5, 2.0)], {"exponent": exponent})


SPECS = [
    OpSpec("pow", pow, _sample, functions=(Pow,)),
    OpSpec("pow_number", lambda x, exponent: x**exponent, _sample_number_exponent, (Pow,)),
]
