"""unfold: the sliding windows of an image as columns ("im2col"), as `torch.nn.functional.unfold`.

Shapes    x (N, C, H, W) -> y (N, C kh kw, L), L = Ho Wo, Ho = floor((H + 2 ph - dh (kh - 1) - 1)
          / sh) + 1 (Wo alike); (C, H, W) -> (C kh kw, L) without the batch axis.
Forward   y[n, (c, i, j), (oy, ox)] = x_pad[n, c, oy sh + i dh, ox sw + j dw], x_pad = x
          zero-padded by (ph, pw); rows run over c, then i, then j, as in PyTorch.
Backward  the adjoint ("col2im", `F.fold`): every column entry's gradient is added back onto
          the pixel it was read from; pixels under several windows collect several; the
          padding is cropped off.
Saved     x's shape and the window parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer import registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._im2col import pad2d, pair, scatter_windows, windows
from tinyformer.ops.shared import out_size
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["unfold"]


@registry.reference("unfold.forward")
def unfold_forward(x, kernel, dilation, padding, stride):
    """x (N, C, H, W) -> (N, C kh kw, L)."""
    n, c, h, w = x.shape
    ho, wo = (out_size((h, w)[a], kernel[a], stride[a], padding[a], dilation[a]) for a in (0, 1))
    view = windows(pad2d(x, *padding), *kernel, ho, wo, *stride, *dilation)  # (N,C,kh,kw,Ho,Wo)
    y = view.reshape(n, c * kernel[0] * kernel[1], ho * wo)
    return y if y.flags.owndata else y.copy()  # a 1x1 window reshapes to a view of x: copy it


@registry.reference("unfold.backward")
def unfold_backward(gy, x_shape, kernel, dilation, padding, stride):
    """gy (N, C kh kw, L) -> gx (N, C, H, W)."""
    n, c, h, w = x_shape
    (kh, kw), (ph, pw) = kernel, padding
    ho, wo = (out_size((h, w)[a], kernel[a], stride[a], padding[a], dilation[a]) for a in (0, 1))
    cols = gy.reshape(n, c, kh, kw, ho, wo)
    gxp = scatter_windows(cols, h + 2 * ph, w + 2 * pw, *stride, *dilation)
    return gxp[:, :, ph : ph + h, pw : pw + w]


class Unfold(Function):
    @staticmethod
    def forward(ctx, x, *, kernel, dilation, padding, stride):
        batched = x.ndim == 4
        x4 = x if batched else x[None]  # (C, H, W) is one image of a batch of one
        ctx.params = (batched, x4.shape, kernel, dilation, padding, stride)
        y = registry.call("unfold.forward", x4, kernel, dilation, padding, stride)
        return y if batched else y[0]

    @staticmethod
    def backward(ctx, gy):
        batched, *params = ctx.params
        gx = registry.call("unfold.backward", gy if batched else gy[None], *params)
        return gx if batched else gx[0]


def unfold(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    stride: int | Sequence[int] = 1,
) -> Tensor:
    """Sliding windows as columns, as `torch.nn.functional.unfold` (same arguments, same order)."""
    op = "unfold"
    if input.ndim not in (3, 4):
        raise OpError(f"{op}: input must be (N, C, H, W) or (C, H, W), got shape {input.shape}")
    kernel = pair(op, "kernel_size", kernel_size, 1)
    dilation, stride = pair(op, "dilation", dilation, 1), pair(op, "stride", stride, 1)
    padding = pair(op, "padding", padding)
    size = input.shape[-2:]
    if min(out_size(size[a], kernel[a], stride[a], padding[a], dilation[a]) for a in (0, 1)) < 1:
        raise OpError(
            f"{op}: a {kernel} window with dilation {dilation} and padding {padding} does not fit "
            f"the input {tuple(size)}"
        )
    return Unfold.apply(input, kernel=kernel, dilation=dilation, padding=padding, stride=stride)


def _sample(draw) -> Sample:
    # 5 pixels fit the widest window: 3 taps 2 apart
    shape = (draw.integers(1, 2), draw.integers(1, 2), draw.integers(5, 7), draw.integers(5, 7))
    if draw.integers(0, 3) == 0:
        shape = shape[1:]
    kwargs = dict(
        kernel_size=draw.choice([1, 2, (2, 3)]), dilation=draw.choice([1, (1, 2)]),
        padding=draw.choice([0, 1, (1, 0)]), stride=draw.choice([1, 2, (2, 1)]),
    )  # fmt: skip
    return Sample([floats(draw, shape)], kwargs)


SPECS = [
    OpSpec(
        "unfold", unfold, _sample, functions=(Unfold,),
        primitives=("unfold.forward", "unfold.backward"),
    )
]  # fmt: skip
