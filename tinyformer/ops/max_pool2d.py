"""max_pool2d: the largest value in each window, and where it was, as in PyTorch.

Shapes    x (N, C, H, W) -> y (N, C, Ho, Wo), Ho = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1,
          and indices (N, C, Ho, Wo) int64: the position of each maximum in its input plane,
          flattened as h W + w (PyTorch's layout, which max_unpool2d reads).
Forward   y[n, c, y_, x_] = max over the window of x_pad, x_pad = x padded with -inf (padding can
          never be chosen); ties go to the first maximum in row-major window order.
Backward  gx (N, C, H, W) from gy and the saved indices. (The derivation sits with the code,
          in `max_pool2d_backward`.)
Saved     the indices, and x's shape.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError, is_grad_enabled
from tinyformer.ops._im2col import check_image, pad2d, pair, windows
from tinyformer.ops.shared import out_size
from tinyformer.opspec import OpSpec, Sample, distinct
from tinyformer.tensor import Tensor

__all__ = ["max_pool2d"]


@registry.reference("max_pool2d.forward")
def max_pool2d_forward(x, kernel, stride, padding, dilation):
    """-> y, indices."""
    ### BEGIN SOLUTION A4.3 forward
    xp = backend.get_array_module(x)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    ho, wo = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    view = windows(pad2d(x, ph, pw, -np.inf), kh, kw, ho, wo, sh, sw, dh, dw)
    flat = view.reshape(n, c, kh * kw, ho, wo)  # (N, C, window, Ho, Wo)
    tap = flat.argmax(axis=2)  # (N, C, Ho, Wo): which window entry won
    y = xp.take_along_axis(flat, tap[:, :, None], axis=2)[:, :, 0]
    i, j = xp.divmod(tap, kw)  # kernel tap -> input row and column (unpadded)
    rows = xp.arange(ho)[:, None] * sh + i * dh - ph
    cols = xp.arange(wo)[None, :] * sw + j * dw - pw
    return y, (rows * w + cols).astype(np.int64)
    ### END SOLUTION


@registry.reference("max_pool2d.backward")
def max_pool2d_backward(gy, indices, x_shape):
    ### BEGIN SOLUTION A4.3 backward
    # The gradient flows only to the chosen element of each window:
    # gx[n, c, indices[n, c, y_, x_]] += gy[n, c, y_, x_] (overlapping windows that chose the
    # same element add up), done as one bincount over flat positions.
    xp = backend.get_array_module(gy)
    n, c, h, w = x_shape
    planes = xp.arange(n * c, dtype=np.int64).reshape(n, c, 1, 1) * (h * w)
    gx = xp.bincount((planes + indices).ravel(), weights=gy.ravel(), minlength=n * c * h * w)
    return gx.astype(gy.dtype, copy=False).reshape(x_shape)
    ### END SOLUTION


class MaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, *, kernel, stride, padding, dilation):
        y, indices = registry.call("max_pool2d.forward", x, kernel, stride, padding, dilation)
        ctx.indices = indices  # also read by max_pool2d(return_indices=True)
        ctx.x_shape = x.shape
        return y

    @staticmethod
    def backward(ctx, gy):
        return registry.call("max_pool2d.backward", gy, ctx.indices, ctx.x_shape)


def max_pool2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    *,  # keywords only: PyTorch's sixth argument is ceil_mode, which this one does not take
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Max pooling as `torch.nn.functional.max_pool2d` (stride defaults to the kernel size).
    With `return_indices=True` also returns the int64 positions that `max_unpool2d` needs."""
    op = "max_pool2d"
    check_image(op, input)
    kernel = pair(op, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None else pair(op, "stride", stride, 1)
    padding, dilation = pair(op, "padding", padding), pair(op, "dilation", dilation, 1)
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise OpError(f"{op}: padding {padding} must be at most half the kernel size {kernel}")
    sizes = [
        out_size(input.shape[2 + a], kernel[a], stride[a], padding[a], dilation[a]) for a in (0, 1)
    ]
    if min(sizes) < 1:
        raise OpError(f"{op}: a {kernel} window does not fit the input {input.shape[2:]}")
    params = dict(kernel=kernel, stride=stride, padding=padding, dilation=dilation)
    if return_indices and _untracked(input):  # no node to read the indices from
        y, indices = registry.call("max_pool2d.forward", input.data, *params.values())
        return Tensor._make(y, None), Tensor._make(indices, None)
    y = MaxPool2d.apply(input, **params)
    return (y, Tensor._make(y.grad_fn.indices, None)) if return_indices else y


def _untracked(x: Tensor) -> bool:
    return not (is_grad_enabled() and x.requires_grad)


def _sample(draw) -> Sample:
    kernel, dilation = (draw.integers(1, 3), draw.integers(2, 3)), draw.choice([1, 2])
    stride = draw.choice([None, 1, (2, 1)])
    padding = (draw.integers(0, kernel[0] // 2), draw.integers(0, kernel[1] // 2))
    low_h, low_w = (dilation * (k - 1) + 1 for k in kernel)  # the window must fit
    shape = (
        draw.integers(1, 2), draw.integers(1, 2), draw.integers(low_h, 6), draw.integers(low_w, 7)
    )  # fmt: skip
    # distinct values: at a tie the max's gradient is not defined (finite differences split it)
    kwargs = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation)
    return Sample([distinct(draw, shape)], kwargs)


SPECS = [
    OpSpec(
        "max_pool2d", max_pool2d, _sample, functions=(MaxPool2d,),
        primitives=("max_pool2d.forward", "max_pool2d.backward"),
    )
]  # fmt: skip
