"""`Rearrange` and `Reduce`: einops' layers as tinyformer modules, as `einops.layers.torch` makes
them for PyTorch (einops' mixins parse the pattern once; tinyformer's einops backend runs it).

    patches = nn.Sequential(
        nn.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),  # image -> patches
        nn.Linear(4 * 4 * 3, 64),
    )
    pool = nn.Reduce("b n d -> b d", "mean")

einops is optional: without it both classes still exist, and building one raises an
ImportError that says how to install it.
"""

from __future__ import annotations

from typing import Any

from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = ["Rearrange", "Reduce"]

_INSTALL = "pip install einops (or pip install 'tinyformer[einops]')"

try:
    from einops import EinopsError
    from einops.layers import RearrangeMixin, ReduceMixin
except ImportError as error:
    _missing: ImportError | None = error

    class _NeedsEinops:
        """Stands in for einops' mixins, so that the layers exist but cannot be built."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(
                f"tinyformer.nn.{type(self).__name__} needs einops, which is not installed: "
                f"{_INSTALL}"
            ) from _missing

    RearrangeMixin = ReduceMixin = _NeedsEinops  # type: ignore[misc, assignment]
else:
    _missing = None
    from tinyformer import einops_backend  # noqa: F401  (defining the backend registers it)


def _check_ndim(layer: Any, x: Any) -> None:
    """A tensor the pattern has no recipe for would otherwise fail as a bare KeyError."""
    ndims = sorted(layer._multirecipe)  # einops prepares one recipe per number of axes
    if len(x.shape) not in layer._multirecipe:
        expected = f"{ndims[0]}" if len(ndims) == 1 else f"{ndims[0]} to {ndims[-1]}"
        raise EinopsError(
            f"{layer!r}: its pattern takes a tensor of {expected} axes, got one of shape "
            f"{tuple(x.shape)}"
        )


class Rearrange(RearrangeMixin, Module):
    """`einops.rearrange(x, pattern, **axes_lengths)` as a layer: reshapes, permutes and
    repeats with named axes, differentiable, with no parameters.

    Args:
        pattern: an einops pattern such as "b c (h p1) (w p2) -> b (h w) (p1 p2 c)".
        axes_lengths: the lengths einops cannot infer from the input, e.g. p1=16, p2=16.

    Shapes:
        x: as the left side of `pattern`; output: as its right side.
    """

    def __init__(self, pattern: str, **axes_lengths: int) -> None:
        super().__init__(pattern, **axes_lengths)

    def forward(self, x: Tensor) -> Tensor:
        _check_ndim(self, x)
        return self._apply_recipe(x)


class Reduce(ReduceMixin, Module):
    """`einops.reduce(x, pattern, reduction, **axes_lengths)` as a layer: the axes missing on
    the right of `pattern` are reduced.

    Args:
        pattern: an einops pattern such as "b n d -> b d" (mean pooling over tokens with "mean").
        reduction: "sum", "mean", "max", "min" or "prod" (differentiable); "any" and "all"
            give booleans.
        axes_lengths: the lengths einops cannot infer from the input.

    Shapes:
        x: as the left side of `pattern`; output: as its right side.
    """

    def __init__(self, pattern: str, reduction: str, **axes_lengths: int) -> None:
        super().__init__(pattern, reduction, **axes_lengths)

    def forward(self, x: Tensor) -> Tensor:
        _check_ndim(self, x)
        return self._apply_recipe(x)
