"""max_unpool2d: put each pooled value back where max_pool2d found it; zeros elsewhere.

SegNet-style decoders upsample this way: the encoder's pooling indices remember where each
maximum came from, so the decoder restores the spatial detail that pooling threw away.

Shapes    x (N, C, H, W) pooled values, indices (N, C, H, W) int64 from
          max_pool2d(return_indices=True) -> y (N, C, Ho, Wo), by default
          Ho = (H - 1) sh - 2 ph + kh (the size the pooled input had, up to rounding), or
          `output_size`.
Forward   y = 0; y[n, c].flat[indices[n, c, h, w]] = x[n, c, h, w]
Backward  gx (N, C, H, W) from gy and the saved indices. (The derivation sits with the code,
          in `max_unpool2d_backward`.)
Saved     the indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._im2col import check_image, pair
from tinyformer.opspec import OpSpec, Sample, distinct
from tinyformer.tensor import Tensor

__all__ = ["max_unpool2d"]


@registry.reference("max_unpool2d.forward")
def max_unpool2d_forward(x, indices, out_hw):
    ### BEGIN SOLUTION A4.4 forward
    xp = backend.get_array_module(x)
    n, c = x.shape[:2]
    y = xp.zeros((n, c, out_hw[0] * out_hw[1]), x.dtype)
    xp.put_along_axis(y, indices.reshape(n, c, -1), x.reshape(n, c, -1), axis=2)
    return y.reshape(n, c, *out_hw)
    ### END SOLUTION


@registry.reference("max_unpool2d.backward")
def max_unpool2d_backward(gy, indices):
    ### BEGIN SOLUTION A4.4 backward
    # gx[n, c, h, w] = gy[n, c].flat[indices[n, c, h, w]]: a gather, the adjoint of the scatter
    # (when two windows chose the same element, both read its gradient, matching PyTorch).
    xp = backend.get_array_module(gy)
    n, c = gy.shape[:2]
    gx = xp.take_along_axis(gy.reshape(n, c, -1), indices.reshape(n, c, -1), axis=2)
    return gx.reshape(indices.shape)
    ### END SOLUTION


class MaxUnpool2d(Function):
    @staticmethod
    def forward(ctx, x, indices, *, out_hw):
        ctx.save_for_backward(indices)
        return registry.call("max_unpool2d.forward", x, indices, out_hw)

    @staticmethod
    def backward(ctx, gy):
        (indices,) = ctx.saved_tensors
        return registry.call("max_unpool2d.backward", gy, indices), None


def max_unpool2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    indices: Any,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """Inverse of max_pool2d where it kept a value, as `torch.nn.functional.max_unpool2d`."""
    op = "max_unpool2d"
    check_image(op, input)
    if isinstance(indices, Tensor):
        idx = indices.data  # on another device than input: Function.apply reports the mix
    else:  # host data from the user (a list, an ndarray): to the data's device
        idx = backend.to_device(indices, input.device)
    if idx.shape != tuple(input.shape) or idx.dtype.kind not in "iu":
        raise OpError(
            f"{op}: indices must be integers of the input's shape {input.shape}, got "
            f"{idx.dtype} {idx.shape} (pass the indices max_pool2d returned)"
        )
    kernel = pair(op, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None else pair(op, "stride", stride, 1)
    padding = pair(op, "padding", padding)
    h, w = input.shape[2:]
    default = tuple(
        (s - 1) * st - 2 * p + k for s, st, p, k in zip((h, w), stride, padding, kernel)
    )
    out_hw = default if output_size is None else tuple(int(s) for s in output_size)[-2:]
    if idx.size and (idx.min() < 0 or idx.max() >= out_hw[0] * out_hw[1]):
        raise OpError(
            f"{op}: an index ({int(idx.min())}..{int(idx.max())}) falls outside the "
            f"{out_hw[0]}x{out_hw[1]} output; give output_size (the pooled input's size)"
        )
    return MaxUnpool2d.apply(input, idx.astype(np.int64, copy=False), out_hw=out_hw)


def _sample(draw) -> Sample:
    from tinyformer.ops.max_pool2d import max_pool2d_forward

    k = draw.integers(1, 3)
    h, w = draw.integers(k, 6), draw.integers(k, 6)
    shape = (draw.integers(1, 2), draw.integers(1, 2), h, w)
    _, indices = max_pool2d_forward(distinct(draw, shape), (k, k), (k, k), (0, 0), (1, 1))
    x = distinct(draw, indices.shape)
    return Sample([x, indices], {"kernel_size": k, "output_size": (h, w)})


SPECS = [
    OpSpec(
        "max_unpool2d", max_unpool2d, _sample, functions=(MaxUnpool2d,),
        primitives=("max_unpool2d.forward", "max_unpool2d.backward"),
    )
]  # fmt: skip
