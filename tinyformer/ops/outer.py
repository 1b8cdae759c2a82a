"""outer: the outer product of two vectors, y_ij = a_i b_j.

Shapes    a (n,), b (m,) -> y (n, m)
Forward   y = a[:, None] * b[None, :]
Backward  ga_i = sum_j gy_ij b_j = (gy @ b)_i,   gb_j = sum_i gy_ij a_i = (gy^T @ a)_j
Saved     a and b: each one's gradient is gy contracted with the other.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import binary_operands
from tinyformer.opspec import Draw, OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["outer"]


class Outer(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a[:, None] * b[None, :]

    @staticmethod
    def backward(ctx, gy):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return (gy @ b if need_a else None), (gy.T @ a if need_b else None)


def outer(a: Any, b: Any) -> Tensor:
    """The outer product of the vectors `a` (n,) and `b` (m,): an (n, m) matrix
    (`torch.outer`)."""
    a, b = binary_operands(a, b)
    if a.ndim != 1 or b.ndim != 1:
        raise OpError(
            f"outer: expects two 1-d tensors, got shapes {tuple(a.shape)} and "
            f"{tuple(b.shape)} (flatten them first, or use matmul / einsum)"
        )
    return Outer.apply(a, b)


def _sample(draw: Draw) -> Sample:
    n, m = draw.integers(1, 5), draw.integers(1, 5)
    return Sample([floats(draw, (n,)), floats(draw, (m,))])


SPECS = [OpSpec("outer", outer, _sample, functions=(Outer,))]
