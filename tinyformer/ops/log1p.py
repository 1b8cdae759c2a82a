"""log1p: y = log(1 + x), accurate for small x (where 1 + x would round x away).

Forward   y = log1p(x)
Backward  gx = gy / (1 + x)
Saved     x.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["log1p"]


class Log1p(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.get_array_module(x).log1p(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy / (1.0 + x)


def log1p(x: Tensor) -> Tensor:
    """Elementwise `log(1 + x)`, exact also where x is tiny (`torch.log1p`)."""
    return Log1p.apply(x)


SPECS = [OpSpec("log1p", log1p, unary_sample(-0.8, 3.0), functions=(Log1p,))]
