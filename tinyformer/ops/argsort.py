"""argsort: the positions that sort x along an axis (integers: no gradient).

Forward   i = the permutation of positions along `axis` that puts x in ascending order
          (descending with `descending=True`), int64, so that `take_along_axis(x, i, axis)` is
          sorted. The sort is always stable: equal elements keep the order of their positions,
          in descending order too, as `torch.argsort(..., stable=True)`; `stable=False` allows
          any order of ties, and this is one. NaN sorts as the largest value, as in PyTorch.
          Descending: argsort the reversed line, then reverse the result and map its positions
          back (n - 1 - i); sorting -x instead would put ties (and NaN) in the wrong order, and
          overflow on unsigned and boolean tensors.
Backward  none: the positions are integers, a piecewise-constant function of x whose derivative
          is zero wherever it exists; as in PyTorch, the result carries no gradient.
Saved     nothing (no node is recorded).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import OpError
from tinyformer.opspec import OpSpec, Sample, distinct
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["argsort"]


def argsort_reference(x: Any, axis: int, descending: bool) -> Any:
    """The int64 positions that sort array `x` along `axis` (stably), on x's device."""
    xp = backend.get_array_module(x)
    if x.ndim == 0:
        return xp.zeros((), np.int64)
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    n = x.shape[axis]
    backwards = xp.argsort(xp.flip(x, axis), axis=axis, kind="stable")
    return (n - 1 - xp.flip(backwards, axis)).astype(np.int64, copy=False)


@torch_names
def argsort(x: Tensor, axis: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The int64 positions that sort `x` along `axis` (`dim=`), ascending or `descending`, as
    `torch.argsort`; stable whatever `stable` says. `tf.rand(b, n).argsort(dim=-1)` draws a
    random permutation per row (a masked autoencoder's shuffle). No gradient."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise OpError(f"argsort: axis must be an int, got {axis!r}")
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise OpError(f"argsort: axis {axis} is out of range for a tensor of shape {x.shape}")
    return Tensor(argsort_reference(x.data, int(axis), bool(descending)))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_side=5)
    return Sample(
        [distinct(draw, shape)],
        {
            "axis": draw.integers(-len(shape), len(shape) - 1),
            "descending": bool(draw.integers(0, 1)),
            "stable": bool(draw.integers(0, 1)),
        },
    )


def _weighted(x: Tensor, axis: int, descending: bool, stable: bool) -> Tensor:
    # The generic tests need a differentiable output: x times (1 + the position that sorts it
    # there), so that a wrong position shows as a wrong value (and gradient).
    order = argsort(x, axis, descending, stable)
    return x * (order.astype(x.dtype) + 1)


SPECS = [OpSpec("argsort", _weighted, _sample)]
