"""conv1d: 1-D cross-correlation of a batch of sequences with a bank of filters, as in PyTorch.

Shapes    x (N, C, L), w (O, C/g, k), b (O,) or None -> y (N, O, Lo),
          Lo = floor((L + 2 p - d (k - 1) - 1) / s) + 1; g = groups, s stride, p padding,
          d dilation.
Forward   y[n, o, t] = b[o] + sum_{c,i} w[o, c, i] x_pad[n, G(o) + c, t s + i d]
          with x_pad = x zero-padded by p on both ends, G(o) the first channel of o's group.
          Output t reads the k inputs t s, t s + d, ..., t s + (k - 1) d: stacking layers of
          dilation 1, k, k^2, ... lets the last output see an input 2^depth (k = 2) steps back.
Backward  gw[o, c, i] = sum_{n,t} gy[n, o, t] x_pad[n, G(o) + c, t s + i d]
          gx_pad[n, G(o) + c, t s + i d] += w[o, c, i] gy[n, o, t], padding cropped off: gx.
          gb = sum of gy over n and t.
Saved     x and w.

A sequence is an image of height 1: x viewed as (N, C, 1, L) and w as (O, C/g, 1, k) go
through conv2d's primitives (im2col, one matrix product per group; tinyformer/ops/conv2d.py),
so conv1d has no arithmetic of its own and shares conv2d's kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops.conv2d import check_groups
from tinyformer.ops.shared import out_size
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["conv1d"]


class Conv1d(Function):
    @staticmethod
    def forward(ctx, x, w, b, *, stride, padding, dilation, groups):
        ctx.save_for_backward(x, w)
        ctx.params = ((1, stride), (0, padding), (1, dilation), groups)
        # (N, C, L) -> (N, C, 1, L): a view, whatever x's memory layout
        y = registry.call("conv2d.forward", x[:, :, None], w[:, :, None], b, *ctx.params)
        return y[:, :, 0]  # (N, O, 1, Lo) -> (N, O, Lo)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gx, gw, gb = registry.call(
            "conv2d.backward", gy[:, :, None], x[:, :, None], w[:, :, None], *ctx.params
        )
        need_x, need_w, need_b = ctx.needs_input_grad
        gx, gw = gx[:, :, 0], gw[:, :, 0]  # drop the height axis of the image view
        return gx if need_x else None, gw if need_w else None, gb if need_b else None


def _single(name: str, value: int | Sequence[int], minimum: int) -> int:
    """An int or a 1-tuple of ints (PyTorch accepts both), checked against `minimum`."""
    out = value if isinstance(value, (int, np.integer)) else tuple(value)
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    if not isinstance(out, (int, np.integer)) or isinstance(out, bool):
        raise OpError(f"conv1d: {name} must be an int or a 1-tuple of ints, got {value!r}")
    if out < minimum:
        raise OpError(f"conv1d: {name} must be >= {minimum}, got {value!r}")
    return int(out)


def conv1d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """1-D convolution (cross-correlation) as `torch.nn.functional.conv1d`; x (N, C, L),
    weight (O, C/groups, k), bias (O,) -> (N, O, Lo). Padding is a number of zeros."""
    if input.ndim != 3:
        raise OpError(f"conv1d: input must be (N, C, L), got shape {input.shape}")
    if weight.ndim != 3:
        raise OpError(f"conv1d: weight must be (O, C/groups, k), got shape {weight.shape}")
    o, per_group, k = weight.shape
    check_groups("conv1d", input.shape[1], groups, o, per_group)
    if bias is not None and tuple(bias.shape) != (o,):
        raise OpError(f"conv1d: bias must have shape ({o},), got {bias.shape}")
    stride, padding = _single("stride", stride, 1), _single("padding", padding, 0)
    dilation = _single("dilation", dilation, 1)
    if out_size(input.shape[2], k, stride, padding, dilation) < 1:
        raise OpError(
            f"conv1d: a kernel of size {k} (dilation {dilation}) does not fit the input of "
            f"length {input.shape[2]} with padding {padding}"
        )
    return Conv1d.apply(
        input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups
    )


def _sample(draw) -> Sample:
    groups = draw.choice([1, 1, 2])
    c, o = groups * draw.integers(1, 2), groups * draw.integers(1, 2)
    k, stride, dilation = draw.integers(1, 3), draw.integers(1, 2), draw.integers(1, 2)
    padding = draw.integers(0, 2)
    length = draw.integers(dilation * (k - 1) + 1, 9)
    x = floats(draw, (draw.integers(1, 2), c, length))
    weight = floats(draw, (o, c // groups, k))
    bias = floats(draw, (o,)) if draw.integers(0, 1) else None
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return Sample([x, weight, bias], kwargs)


SPECS = [
    OpSpec(
        "conv1d", conv1d, _sample, functions=(Conv1d,),
        primitives=("conv2d.forward", "conv2d.backward"),
    )
]  # fmt: skip
