"""selu: the self-normalising ELU (Klambauer et al., 2017), scaled so that activations keep
mean 0 and variance 1 through many layers (with LeCun-normal weights).

Forward   y = scale * elu(x, alpha), with PyTorch's constants alpha = 1.6732632423543772,
          scale = 1.0507009873554805: scale x above 0, scale alpha (e^x - 1) below.
Backward  through elu: scale above 0, scale alpha e^x below (and at 0, as PyTorch).
Saved     what elu saves.
"""

from __future__ import annotations

from tinyformer.ops.softplus import elu
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["selu"]

ALPHA = 1.6732632423543772848170429916717
SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 (named as in PyTorch)
    """`scale * elu(input, alpha)` with SELU's fixed constants. `inplace` is accepted for
    PyTorch's signature; the result is a new tensor."""
    return elu(input, ALPHA) * SCALE


SPECS = [OpSpec("selu", selu, unary_sample(-3.0, 3.0, avoid=(0.0,)))]
