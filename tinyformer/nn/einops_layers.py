"""einops on tinyformer: einops' backend for tinyformer tensors, and its layers `Rearrange` and
`Reduce` as tinyformer modules, as `einops.layers.torch` makes them for PyTorch.

    from einops import rearrange, repeat
    x = rearrange(x, "b n (h d) -> b h n d", h=nh)      # a reshape and a permute
    cls = repeat(cls_token, "1 1 d -> b 1 d", b=B)      # an unsqueeze and an expand

    patches = nn.Sequential(
        nn.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),  # image -> patches
        nn.Linear(4 * 4 * 3, 64),
    )
    pool = nn.Reduce("b n d -> b d", "mean")

einops finds a backend for an array as the subclass of its `AbstractBackend` whose
`framework_name` module is imported and whose `is_appropriate_type` accepts the array. So
defining `TinyformerBackend` (importing this module, which `tinyformer.nn` does) is all the
registration there is; einops' author describes this as the way to add a framework from outside
einops. The layers' mixins (einops') parse the pattern once; the backend runs it.

Each backend method is a tinyformer op (or a Tensor method built from ops), so gradients flow:

    reshape -> ops.reshape         transpose -> ops.permute      add_axis -> ops.unsqueeze
    add_axes -> unsqueeze + expand (a view; its gradient sums the copies)
    tile -> Tensor.repeat          concat -> ops.cat             stack -> ops.stack
    reduce: sum, mean, max, min, prod -> those ops over a tuple of axes (prod looked up when
            called: older tinyformers lack it); any, all -> Tensor.any / .all (booleans)

einops is optional: without it there is no backend, both layers still exist, and building one
raises an ImportError that says how to install it. `tinyformer.einops_backend` is the backend's
older import path.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from tinyformer import ops
from tinyformer.creation import arange
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = ["Rearrange", "Reduce"]  # and TinyformerBackend, where einops is installed

INSTALL = "pip install einops (or pip install 'tinyformer[einops]')"

try:
    from einops import EinopsError
    from einops._backends import AbstractBackend
    from einops.layers import RearrangeMixin, ReduceMixin
except ImportError as error:
    _missing: ImportError | None = error

    class _NeedsEinops:
        """Stands in for einops' mixins, so that the layers exist but cannot be built."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(
                f"tinyformer.nn.{type(self).__name__} needs einops, which is not installed: "
                f"{INSTALL}"
            ) from _missing

    RearrangeMixin = ReduceMixin = _NeedsEinops  # type: ignore[misc, assignment]
else:
    _missing = None

    # einops' reductions that have a differentiable op taking a tuple of axes
    _TUPLE_REDUCTIONS = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min}

    class TinyformerBackend(AbstractBackend):
        """What einops needs to know about `tinyformer.Tensor`; einops creates the one instance."""

        framework_name = "tinyformer"  # einops uses the backend once this class is defined

        def is_appropriate_type(self, tensor: Any) -> bool:
            return isinstance(tensor, Tensor)

        def from_numpy(self, x: np.ndarray) -> Tensor:
            return Tensor(x)

        def to_numpy(self, x: Tensor) -> np.ndarray:
            return x.detach().cpu().numpy()

        def arange(self, start: int, stop: int) -> Tensor:
            return arange(start, stop)

        def shape(self, x: Tensor) -> tuple[int, ...]:
            return tuple(x.shape)

        def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
            return ops.reshape(x, tuple(shape))

        def transpose(self, x: Tensor, axes: Sequence[int]) -> Tensor:
            return ops.permute(x, tuple(axes))

        def reduce(self, x: Tensor, operation: str, axes: Sequence[int]) -> Tensor:
            if operation in _TUPLE_REDUCTIONS:
                return _TUPLE_REDUCTIONS[operation](x, tuple(axes))
            if operation == "prod":
                # another op file may or may not provide it: look it up now, not at import
                prod = getattr(ops, "prod", None)
                if prod is None:
                    raise NotImplementedError(
                        "einops reduction 'prod' needs tinyformer.ops.prod, which this version of "
                        "tinyformer does not have; the reductions with gradients are 'sum', "
                        "'mean', 'max' and 'min'"
                    )
                return prod(x, tuple(axes))
            if operation in ("any", "all"):  # booleans: no gradient to keep
                return getattr(x, operation)(axis=tuple(axes))
            raise NotImplementedError(f"einops reduction {operation!r} is not known to tinyformer")

        def stack_on_zeroth_dimension(self, tensors: list[Tensor]) -> Tensor:
            return ops.stack(list(tensors), 0)

        def add_axis(self, x: Tensor, new_position: int) -> Tensor:
            return ops.unsqueeze(x, new_position)

        def add_axes(self, x: Tensor, n_axes: int, pos2len: dict[int, int]) -> Tensor:
            # unsqueeze, then broadcast the new axes: no copy until a later reshape needs one
            sizes = [-1] * n_axes
            for position, length in pos2len.items():
                x = ops.unsqueeze(x, position)
                sizes[position] = length
            return ops.expand(x, tuple(sizes))

        def tile(self, x: Tensor, repeats: Sequence[int]) -> Tensor:
            return x.repeat(tuple(repeats))

        def concat(self, tensors: Sequence[Tensor], axis: int) -> Tensor:
            return ops.cat(list(tensors), axis)

        def is_float_type(self, x: Tensor) -> bool:
            return x.dtype.kind == "f"

        def layers(self) -> ModuleType:
            return sys.modules[__name__]  # einops' layers for tinyformer: this module's

        def einsum(self, pattern: str, *x: Tensor) -> Tensor:
            return ops.einsum(pattern, *x)


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
