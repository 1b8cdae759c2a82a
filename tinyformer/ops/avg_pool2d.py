"""avg_pool2d: the mean of each window, as in PyTorch.

Shapes    x (N, C, H, W) -> y (N, C, Ho, Wo), Ho = floor((H + 2 ph - kh) / sh) + 1.
Forward   y[n, c, y_, x_] = sum of the window of x_pad / divisor, x_pad = x zero-padded; the
          divisor is kh kw (count_include_pad=True, PyTorch's default) or the number of real
          (unpadded) pixels in the window.
Backward  each window spreads gy / divisor evenly over its pixels; overlapping windows add up
          ("col2im" of a constant per window), and the padding is cropped off.
Saved     x's shape and the divisors.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._im2col import check_image, pad2d, pair, scatter_windows, windows
from tinyformer.ops.shared import out_size, pool_divisors
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["avg_pool2d"]


@registry.reference("avg_pool2d.forward")
def avg_pool2d_forward(x, kernel, stride, padding, include_pad):
    xp = backend.get_array_module(x)
    h, w = x.shape[2:]
    div = pool_divisors(h, w, kernel, stride, padding, include_pad, x.dtype, xp)
    view = windows(pad2d(x, *padding), *kernel, *div.shape, *stride, 1, 1)
    return view.sum(axis=(2, 3)) / div


@registry.reference("avg_pool2d.backward")
def avg_pool2d_backward(gy, x_shape, kernel, stride, padding, include_pad):
    xp = backend.get_array_module(gy)
    n, c, h, w = x_shape
    (kh, kw), (ph, pw) = kernel, padding
    g = gy / pool_divisors(
        h, w, kernel, stride, padding, include_pad, gy.dtype, xp
    )  # (N, C, Ho, Wo)
    cols = xp.broadcast_to(g[:, :, None, None], (n, c, kh, kw, *g.shape[2:]))
    gxp = scatter_windows(cols, h + 2 * ph, w + 2 * pw, *stride, 1, 1)
    return gxp[:, :, ph : ph + h, pw : pw + w]


class AvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, *, kernel, stride, padding, include_pad):
        ctx.params = (x.shape, kernel, stride, padding, include_pad)
        return registry.call("avg_pool2d.forward", x, kernel, stride, padding, include_pad)

    @staticmethod
    def backward(ctx, gy):
        return registry.call("avg_pool2d.backward", gy, *ctx.params)


def avg_pool2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    *,  # keywords only: PyTorch's fifth argument is ceil_mode, which this one does not take
    count_include_pad: bool = True,
) -> Tensor:
    """Average pooling as `torch.nn.functional.avg_pool2d` (stride defaults to the kernel)."""
    op = "avg_pool2d"
    check_image(op, input)
    kernel = pair(op, "kernel_size", kernel_size, 1)
    stride = kernel if stride is None else pair(op, "stride", stride, 1)
    padding = pair(op, "padding", padding)
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise OpError(f"{op}: padding {padding} must be at most half the kernel size {kernel}")
    if min(out_size(input.shape[2 + a], kernel[a], stride[a], padding[a], 1) for a in (0, 1)) < 1:
        raise OpError(f"{op}: a {kernel} window does not fit the input {input.shape[2:]}")
    return AvgPool2d.apply(
        input, kernel=kernel, stride=stride, padding=padding, include_pad=count_include_pad
    )


def _sample(draw) -> Sample:
    kernel = (draw.integers(1, 3), draw.integers(2, 3))
    padding = (draw.integers(0, kernel[0] // 2), draw.integers(0, kernel[1] // 2))
    shape = (draw.integers(1, 2), draw.integers(1, 2), draw.integers(3, 6), draw.integers(3, 6))
    kwargs = dict(
        kernel_size=kernel, stride=draw.choice([None, 1, (1, 2)]), padding=padding,
        count_include_pad=draw.choice([True, False]),
    )  # fmt: skip
    return Sample([floats(draw, shape)], kwargs)


SPECS = [
    OpSpec(
        "avg_pool2d", avg_pool2d, _sample, functions=(AvgPool2d,),
        primitives=("avg_pool2d.forward", "avg_pool2d.backward"),
    )
]  # fmt: skip
