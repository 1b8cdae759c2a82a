"""adaptive_max_pool2d: max pooling to a fixed output size, as in PyTorch.

Shapes    x (N, C, H, W) or (C, H, W) -> y (N, C, Ho, Wo) or (C, Ho, Wo).
Windows   output row i takes input rows [floor(i H / Ho), ceil((i + 1) H / Ho)), as
          adaptive_avg_pool2d's: they cover the input, may overlap and differ in size by one;
          columns alike.
Forward   a rectangle's max is the max over its columns of the max over its rows, so two
          passes of one step: gather each window's elements with an index matrix
          I (Ho, K), I[i, k] = min(start_i + k, end_i - 1) (a short window repeats its last
          element, which changes no max), then amax over the K axis. Rows, then columns.
Backward  through getitem and amax: the gradient goes to each window's maximum; an element
          gathered twice into one window shares it between the copies (amax's ties) and
          getitem's scatter-add sums them back, so the element gets it whole. Between distinct
          elements that tie, amax shares the gradient where PyTorch gives it to one.
Saved     what those ops save.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer.autograd import OpError
from tinyformer.ops.amax import amax
from tinyformer.opspec import OpSpec, Sample, distinct
from tinyformer.tensor import Tensor

__all__ = ["adaptive_max_pool2d"]


def window_indices(size: int, out: int) -> np.ndarray:
    """(out, K) int: row i lists adaptive window i's positions, its last one repeated up to K,
    the longest window's length."""
    i = np.arange(out)
    start, end = (i * size) // out, -((-(i + 1) * size) // out)  # floor and ceil
    k = np.arange(int((end - start).max()))
    return np.minimum(start[:, None] + k[None, :], end[:, None] - 1)


def window_max(x: Tensor, axis: int, out: int) -> Tensor:
    """Adaptive max over axis -1 or -2 of x, to `out` positions."""
    index = window_indices(x.shape[axis], out)
    if axis == -1:
        return amax(x[..., index], axis=-1)  # (..., out, K) -> (..., out)
    return amax(x[..., index, :], axis=-2)  # (..., out, K, W) -> (..., out, W)


def output_sizes(
    op: str, x: Tensor, output_size: int | None | Sequence[int | None], dims: int
) -> tuple[int, ...]:
    """The output's `dims` trailing sizes from an int or a sequence of ints and Nones (None:
    the input's size)."""
    sizes = (output_size,) * dims if not isinstance(output_size, Sequence) else output_size
    if len(sizes) != dims:
        raise OpError(f"{op}: output_size must be an int or {dims} of them, got {output_size!r}")
    out = tuple(x.shape[a - dims] if s is None else s for a, s in enumerate(sizes))
    if not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1 for s in out
    ):
        raise OpError(f"{op}: output_size must hold ints >= 1 (or None), got {output_size!r}")
    return tuple(int(s) for s in out)


def check_input(op: str, x: Tensor, dims: int, return_indices: bool) -> None:
    if return_indices:
        raise OpError(
            f"{op}: return_indices=True is not supported (there is no adaptive max_unpool to "
            "take the indices); call it with return_indices=False"
        )
    layout = "(N, C, H, W) or (C, H, W)" if dims == 2 else "(N, C, L) or (C, L)"
    if x.ndim not in (dims + 1, dims + 2) or min(x.shape[-dims:]) < 1:
        raise OpError(f"{op}: input must be {layout}, not empty, got shape {x.shape}")


def adaptive_max_pool2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    output_size: int | None | Sequence[int | None],
    return_indices: bool = False,
) -> Tensor:
    """Adaptive max pooling as `torch.nn.functional.adaptive_max_pool2d` (values only)."""
    op = "adaptive_max_pool2d"
    check_input(op, input, 2, return_indices)
    ho, wo = output_sizes(op, input, output_size, 2)
    return window_max(window_max(input, -2, ho), -1, wo)


def _sample(draw) -> Sample:
    shape = (draw.integers(1, 2), draw.integers(1, 2), draw.integers(1, 7), draw.integers(1, 7))
    if draw.integers(0, 3) == 0:
        shape = shape[1:]
    out = draw.choice([draw.integers(1, 5), (draw.integers(1, 5), None), (2, 3)])
    return Sample([distinct(draw, shape)], {"output_size": out})  # no ties: one maximum each


SPECS = [OpSpec("adaptive_max_pool2d", adaptive_max_pool2d, _sample)]
