"""softsign: a rational squashing function into (-1, 1) (Turian et al., 2009).

Forward   y = x / (1 + |x|)
Backward  through the ops it is made of (abs, add, div): y' = 1 / (1 + |x|)^2 (the abs kink
          at 0 is multiplied by x = 0, so the gradient is smooth there).
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.ops.abs import abs
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["softsign"]


def softsign(input: Tensor) -> Tensor:  # noqa: A002 (named as in PyTorch)
    """`input / (1 + |input|)`."""
    return input / (abs(input) + 1.0)


SPECS = [OpSpec("softsign", softsign, unary_sample(-4.0, 4.0))]
