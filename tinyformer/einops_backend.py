"""einops on tinyformer tensors: `rearrange`, `repeat`, `reduce` and `einsum` through tinyformer's
own ops, so gradients flow through them.

    from einops import rearrange, repeat
    x = rearrange(x, "b n (h d) -> b h n d", h=nh)      # a reshape and a permute
    cls = repeat(cls_token, "1 1 d -> b 1 d", b=B)      # an unsqueeze and an expand

einops finds a backend for an array as the subclass of its `AbstractBackend` whose
`framework_name` module is imported and whose `is_appropriate_type` accepts the array. So
defining `TinyformerBackend` (importing this module) is all the registration there is; einops'
author describes this as the way to add a framework from outside einops. `tinyformer.nn`
imports this module whenever einops is installed, so `import tinyformer` is enough.

Each method is a tinyformer op (or a Tensor method built from ops):

    reshape -> ops.reshape         transpose -> ops.permute      add_axis -> ops.unsqueeze
    add_axes -> unsqueeze + expand (a view; its gradient sums the copies)
    tile -> Tensor.repeat          concat -> ops.cat             stack -> ops.stack
    reduce: sum, mean, max, min, prod -> those ops over a tuple of axes (prod looked up when
            called: older tinyformers lack it); any, all -> Tensor.any / .all (booleans)
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

try:
    from einops._backends import AbstractBackend
except ImportError as error:  # einops is optional: say how to get it
    raise ImportError(
        "tinyformer's einops support needs einops, which is not installed: "
        "pip install einops (or pip install 'tinyformer[einops]')"
    ) from error

from tinyformer import ops
from tinyformer.creation import arange
from tinyformer.tensor import Tensor

__all__ = ["TinyformerBackend"]

# einops' reductions that have a differentiable op taking a tuple of axes
_TUPLE_REDUCTIONS = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min}


class TinyformerBackend(AbstractBackend):
    """What einops needs to know about `tinyformer.Tensor`; einops creates the one instance."""

    framework_name = "tinyformer"  # einops uses the backend once this module is imported

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
        from tinyformer.nn import einops_layers  # nn imports this module: import it on use

        return einops_layers

    def einsum(self, pattern: str, *x: Tensor) -> Tensor:
        return ops.einsum(pattern, *x)
