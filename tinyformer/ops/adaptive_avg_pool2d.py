"""adaptive_avg_pool2d: average pooling to a fixed output size, as in PyTorch.

Shapes    x (N, C, H, W) or (C, H, W) -> y (N, C, Ho, Wo) or (C, Ho, Wo).
Windows   output row i averages input rows [floor(i H / Ho), ceil((i + 1) H / Ho)): windows
          cover the whole input, may overlap, and may differ in size by one; columns alike.
Forward   a window's mean over a rectangle is the row-mean of the column-means, so with the
          averaging matrices A (Ho, H), A[i, h] = 1 / |window i| if h is in window i, and
          B (Wo, W) for columns:   y = A x B^T   (per image and channel).
Backward  the adjoint of that product:   gx = A^T gy B.
Saved     only x's spatial size and the output size: A and B are rebuilt from them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["adaptive_avg_pool2d"]


def averaging_matrix(size: int, out: int, dtype, xp) -> np.ndarray:
    """(out, size): row i holds 1 / len over adaptive window i, 0 elsewhere."""
    i = np.arange(out)
    start, end = (i * size) // out, -((-(i + 1) * size) // out)  # floor and ceil
    h = np.arange(size)
    inside = (h[None, :] >= start[:, None]) & (h[None, :] < end[:, None])
    return xp.asarray(inside / (end - start)[:, None], dtype=dtype)


@registry.reference("adaptive_avg_pool2d.forward")
def adaptive_avg_pool2d_forward(x, output_size):
    xp = backend.get_array_module(x)
    a = averaging_matrix(x.shape[-2], output_size[0], x.dtype, xp)
    b = averaging_matrix(x.shape[-1], output_size[1], x.dtype, xp)
    return a @ x @ b.T  # (Ho, H) (..., H, W) (W, Wo) -> (..., Ho, Wo)


@registry.reference("adaptive_avg_pool2d.backward")
def adaptive_avg_pool2d_backward(gy, input_size):
    xp = backend.get_array_module(gy)
    a = averaging_matrix(input_size[0], gy.shape[-2], gy.dtype, xp)
    b = averaging_matrix(input_size[1], gy.shape[-1], gy.dtype, xp)
    return a.T @ gy @ b  # (H, Ho) (..., Ho, Wo) (Wo, W) -> (..., H, W)


class AdaptiveAvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, *, output_size):
        ctx.input_size = x.shape[-2:]
        return registry.call("adaptive_avg_pool2d.forward", x, output_size)

    @staticmethod
    def backward(ctx, gy):
        return registry.call("adaptive_avg_pool2d.backward", gy, ctx.input_size)


def _output_size(x: Tensor, output_size: int | None | Sequence[int | None]) -> tuple[int, int]:
    """(Ho, Wo) from an int, a pair, or a pair with None for "the input's size"."""
    op = "adaptive_avg_pool2d"
    pair = (output_size, output_size) if not isinstance(output_size, Sequence) else output_size
    if len(pair) != 2:
        raise OpError(f"{op}: output_size must be an int or a pair, got {output_size!r}")
    out = tuple(x.shape[-2 + a] if s is None else s for a, s in enumerate(pair))
    if not all(isinstance(s, (int, np.integer)) and s >= 1 for s in out):
        raise OpError(f"{op}: output_size must hold ints >= 1 (or None), got {output_size!r}")
    return int(out[0]), int(out[1])


def adaptive_avg_pool2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    output_size: int | None | Sequence[int | None],
) -> Tensor:
    """Adaptive average pooling as `torch.nn.functional.adaptive_avg_pool2d`."""
    if input.ndim not in (3, 4) or min(input.shape[-2:]) < 1:
        raise OpError(
            f"adaptive_avg_pool2d: input must be (N, C, H, W) or (C, H, W) with H, W >= 1, "
            f"got shape {input.shape}"
        )
    return AdaptiveAvgPool2d.apply(input, output_size=_output_size(input, output_size))


def _sample(draw) -> Sample:
    shape = (draw.integers(1, 2), draw.integers(1, 2), draw.integers(1, 7), draw.integers(1, 7))
    if draw.integers(0, 3) == 0:
        shape = shape[1:]
    out = draw.choice([draw.integers(1, 5), (draw.integers(1, 5), None), (2, 3)])
    return Sample([floats(draw, shape)], {"output_size": out})


SPECS = [
    OpSpec(
        "adaptive_avg_pool2d", adaptive_avg_pool2d, _sample, functions=(AdaptiveAvgPool2d,),
        primitives=("adaptive_avg_pool2d.forward", "adaptive_avg_pool2d.backward"),
    )
]  # fmt: skip
