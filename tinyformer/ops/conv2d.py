"""conv2d: 2-D cross-correlation of an image batch with a bank of filters, as in PyTorch.

Shapes    x (N, C, H, W), w (O, C/g, kh, kw), b (O,) or None -> y (N, O, Ho, Wo),
          Ho = floor((H + 2 ph - dh (kh - 1) - 1) / sh) + 1 (likewise Wo); g = groups.
Forward   y[n, o, r, s]
            = b[o] + sum_{c,i,j} w[o, c, i, j] x_pad[n, G(o) + c, r sh + i dh, s sw + j dw]
          with x_pad = x zero-padded by (ph, pw), G(o) the first channel of o's group.
          Computed as im2col: view x_pad's windows as columns cols (g, K, N L) with
          K = C/g kh kw (one column per output position of every image, L = Ho Wo), then one
          matrix product per group, y = W cols with W = w reshaped to (g, O/g, K).
Backward  gx, gw, gb from gy and the saved x and w. (The derivation sits with the code, in
          `conv2d_backward`.)
Saved     x and w. The columns (kh kw times the size of x) are rebuilt in backward from x's
          strided view rather than kept between the passes.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._im2col import check_image, pad2d, pair, scatter_windows, windows
from tinyformer.ops.shared import out_size
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["conv2d"]


def _columns(x, kh, kw, stride, padding, dilation, groups):
    """x (N, C, H, W) -> cols (g, C/g kh kw, N Ho Wo) and (Ho, Wo).

    Positions of all N images side by side in one matrix, so each pass is one large matrix
    product per group rather than one small product per image."""
    ### BEGIN SOLUTION A4.1 im2col columns
    n, c, h, w_ = x.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    ho, wo = out_size(h, kh, sh, ph, dh), out_size(w_, kw, sw, pw, dw)
    view = windows(pad2d(x, ph, pw), kh, kw, ho, wo, sh, sw, dh, dw)  # (N, C, kh, kw, Ho, Wo)
    view = view.transpose(1, 2, 3, 0, 4, 5)  # (C, kh, kw, N, Ho, Wo)
    return view.reshape(groups, c // groups * kh * kw, n * ho * wo), (ho, wo)  # the one copy
    ### END SOLUTION


@registry.reference("conv2d.forward")
def conv2d_forward(x, w, b, stride, padding, dilation, groups):
    ### BEGIN SOLUTION A4.1 forward
    xp = backend.get_array_module(x)
    n, o = x.shape[0], w.shape[0]
    cols, (ho, wo) = _columns(x, *w.shape[2:], stride, padding, dilation, groups)
    y = w.reshape(groups, o // groups, -1) @ cols  # (g, O/g, K) @ (g, K, N L) -> (g, O/g, N L)
    y = y.reshape(o, n, ho, wo).transpose(1, 0, 2, 3)  # (O, N, Ho, Wo) -> (N, O, Ho, Wo)
    return xp.ascontiguousarray(y) if b is None else y + b[:, None, None]
    ### END SOLUTION


@registry.reference("conv2d.backward")
def conv2d_backward(gy, x, w, stride, padding, dilation, groups):
    """-> gx, gw, gb."""
    ### BEGIN SOLUTION A4.1 backward
    # gW = sum over n and positions of gy cols^T (a matrix product per group);
    # gcols = W^T gy, then "col2im": every column entry is added back onto the input pixel it
    # was read from (overlapping windows add up), and the padding is cropped off: gx.
    # gb = sum of gy over n and positions.
    n, c, h, w_ = x.shape
    o, _, kh, kw = w.shape
    cols, (ho, wo) = _columns(x, kh, kw, stride, padding, dilation, groups)
    gyg = gy.transpose(1, 0, 2, 3).reshape(groups, o // groups, -1)  # (g, O/g, N L)
    gw = (gyg @ cols.transpose(0, 2, 1)).reshape(w.shape)  # sum over images and positions
    gcols = w.reshape(groups, o // groups, -1).transpose(0, 2, 1) @ gyg  # (g, K, N L)
    gcols = gcols.reshape(c, kh, kw, n, ho, wo).transpose(3, 0, 1, 2, 4, 5)  # (N, C, kh, kw, ..)
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    gxp = scatter_windows(gcols, h + 2 * ph, w_ + 2 * pw, sh, sw, dh, dw)
    return gxp[:, :, ph : ph + h, pw : pw + w_], gw, gy.sum(axis=(0, 2, 3))
    ### END SOLUTION


class Conv2d(Function):
    @staticmethod
    def forward(ctx, x, w, b, *, stride, padding, dilation, groups):
        ctx.save_for_backward(x, w)
        ctx.params = (stride, padding, dilation, groups)
        return registry.call("conv2d.forward", x, w, b, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gx, gw, gb = registry.call("conv2d.backward", gy, x, w, *ctx.params)
        need_x, need_w, need_b = ctx.needs_input_grad
        return gx if need_x else None, gw if need_w else None, gb if need_b else None


def check_groups(op: str, channels: int, groups: int, filters: int, per_group: int) -> None:
    if groups < 1 or channels % groups or filters % groups:
        raise OpError(
            f"{op}: groups={groups} must divide the input channels ({channels}) and the "
            f"output channels ({filters})"
        )
    if per_group * groups != channels:
        raise OpError(
            f"{op}: weight expects {per_group * groups} input channels ({per_group} per group "
            f"x {groups} groups), the input has {channels}"
        )


def conv2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    """2-D convolution (cross-correlation) as `torch.nn.functional.conv2d`."""
    check_image("conv2d", input)
    if weight.ndim != 4:
        raise OpError(f"conv2d: weight must be (O, C/groups, kh, kw), got shape {weight.shape}")
    o, per_group, kh, kw = weight.shape
    check_groups("conv2d", input.shape[1], groups, o, per_group)
    if bias is not None and tuple(bias.shape) != (o,):
        raise OpError(f"conv2d: bias must have shape ({o},), got {bias.shape}")
    stride, padding = pair("conv2d", "stride", stride, 1), pair("conv2d", "padding", padding)
    dilation = pair("conv2d", "dilation", dilation, 1)
    ho = out_size(input.shape[2], kh, stride[0], padding[0], dilation[0])
    wo = out_size(input.shape[3], kw, stride[1], padding[1], dilation[1])
    if ho < 1 or wo < 1:
        raise OpError(
            f"conv2d: a {kh}x{kw} kernel (dilation {dilation}) does not fit the input "
            f"{input.shape[2]}x{input.shape[3]} with padding {padding}"
        )
    return Conv2d.apply(
        input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups
    )


def _sample(draw) -> Sample:
    groups = draw.choice([1, 1, 2])
    c, o = groups * draw.integers(1, 2), groups * draw.integers(1, 2)
    kh, kw = draw.integers(1, 3), draw.integers(1, 3)
    # stride 1, the Numba kernel's only case, in half the draws or more
    stride = (1, 1) if draw.integers(0, 1) == 0 else (draw.integers(1, 2), draw.integers(1, 2))
    dilation = draw.choice([1, (1, 2)])
    padding = (draw.integers(0, 1), draw.integers(0, 2))
    h, w = draw.integers(kh + 2, 7), draw.integers(kw + 3, 7)
    x = floats(draw, (draw.integers(1, 2), c, h, w))
    weight = floats(draw, (o, c // groups, kh, kw))
    bias = floats(draw, (o,)) if draw.integers(0, 1) else None
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    return Sample([x, weight, bias], kwargs)


SPECS = [
    OpSpec(
        "conv2d", conv2d, _sample, functions=(Conv2d,),
        primitives=("conv2d.forward", "conv2d.backward"),
    )
]  # fmt: skip
