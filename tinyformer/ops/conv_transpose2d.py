"""conv_transpose2d: the "deconvolution" of segmentation networks, as in PyTorch.

Each input pixel stamps the kernel, scaled by its value, onto the output; stamps of
neighbouring pixels overlap and add. With stride s the stamps are placed s pixels apart, which
is how the op upsamples. It is the adjoint (transpose) of conv2d with the same weights: the map
that conv2d's backward applies to its output gradient.

Shapes    x (N, Ci, H, W), w (Ci, Co/g, kh, kw), b (Co,) or None -> y (N, Co, Ho, Wo),
          Ho = (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1 (likewise Wo); g = groups.
Forward   cols = W^T x per group: (g, Co/g kh kw, Ci/g) @ (g, Ci/g, N H W) -> (g, K, N H W),
          one kernel stamp per input pixel; "col2im" adds every stamp onto the full output
          grid (N, Co, Hf, Wf) at pixel (h sh + i dh, w sw + j dw); then the padding is cropped:
          y = full[:, :, ph : ph + Ho, pw : pw + Wo] (+ b). output_padding (oph, opw) only
          lengthens the full grid at the bottom and right, so an output size that stride
          rounding made ambiguous can be chosen.
Backward  gx, gw, gb from gy and the saved x and w. (The derivation sits with the code, in
          `conv_transpose2d_backward`.)
Saved     x and w.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._im2col import check_image, pair, scatter_windows, windows
from tinyformer.ops.conv2d import check_groups
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["conv_transpose2d"]


def _full_size(h, kh, sh, ph, oph, dh):
    """(rows of the full, uncropped grid, rows of the output)."""
    full = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    return full, full - 2 * ph


@registry.reference("conv_transpose2d.forward")
def conv_transpose2d_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    ### BEGIN SOLUTION A4.2 forward
    xp = backend.get_array_module(x)
    n, ci, h, w_ = x.shape
    _, co_g, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    wg = w.reshape(groups, ci // groups, co_g * kh * kw)  # (g, Ci/g, K)
    xg = x.transpose(1, 0, 2, 3).reshape(groups, ci // groups, n * h * w_)  # (g, Ci/g, N HW)
    cols = wg.transpose(0, 2, 1) @ xg  # (g, K, N HW): one stamp per input pixel
    cols = cols.reshape(groups * co_g, kh, kw, n, h, w_).transpose(3, 0, 1, 2, 4, 5)
    (hf, ho), (wf, wo) = _full_size(h, kh, sh, ph, oph, dh), _full_size(w_, kw, sw, pw, opw, dw)
    full = scatter_windows(cols, hf, wf, sh, sw, dh, dw)  # (N, Co, Hf, Wf)
    y = full[:, :, ph : ph + ho, pw : pw + wo]
    return y + b[:, None, None] if b is not None else xp.ascontiguousarray(y)
    ### END SOLUTION


@registry.reference("conv_transpose2d.backward")
def conv_transpose2d_backward(gy, x, w, stride, padding, output_padding, dilation, groups):
    """-> gx, gw, gb."""
    ### BEGIN SOLUTION A4.2 backward
    # Pad gy back onto the full grid; im2col reads, for every input pixel, the gy values under
    # its stamp: gcols (g, K, N H W). Then gx = W gcols (a conv2d of gy with w) and
    # gW = sum over n and pixels of x gcols^T; gb = sum of gy.
    xp = backend.get_array_module(gy)
    n, ci, h, w_ = x.shape
    _, co_g, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    (hf, ho), (wf, wo) = _full_size(h, kh, sh, ph, oph, dh), _full_size(w_, kw, sw, pw, opw, dw)
    full = xp.zeros((n, gy.shape[1], hf, wf), gy.dtype)
    full[:, :, ph : ph + ho, pw : pw + wo] = gy
    view = windows(full, kh, kw, h, w_, sh, sw, dh, dw)  # (N, Co, kh, kw, H, W)
    gcols = view.transpose(1, 2, 3, 0, 4, 5).reshape(groups, co_g * kh * kw, n * h * w_)
    wg = w.reshape(groups, ci // groups, co_g * kh * kw)  # (g, Ci/g, K)
    gx = (wg @ gcols).reshape(ci, n, h, w_).transpose(1, 0, 2, 3)  # (g, Ci/g, N HW) -> (N, Ci, ..)
    xg = x.transpose(1, 0, 2, 3).reshape(groups, ci // groups, n * h * w_)
    gw = (xg @ gcols.transpose(0, 2, 1)).reshape(w.shape)
    return xp.ascontiguousarray(gx), gw, gy.sum(axis=(0, 2, 3))
    ### END SOLUTION


class ConvTranspose2d(Function):
    @staticmethod
    def forward(ctx, x, w, b, *, stride, padding, output_padding, dilation, groups):
        ctx.save_for_backward(x, w)
        ctx.params = (stride, padding, output_padding, dilation, groups)
        return registry.call("conv_transpose2d.forward", x, w, b, *ctx.params)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gx, gw, gb = registry.call("conv_transpose2d.backward", gy, x, w, *ctx.params)
        need_x, need_w, need_b = ctx.needs_input_grad
        return gx if need_x else None, gw if need_w else None, gb if need_b else None


def conv_transpose2d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    """Transposed 2-D convolution as `torch.nn.functional.conv_transpose2d` (same argument
    order: groups before dilation)."""
    op = "conv_transpose2d"
    check_image(op, input)
    if weight.ndim != 4:
        raise OpError(f"{op}: weight must be (Ci, Co/groups, kh, kw), got shape {weight.shape}")
    ci, co_g, kh, kw = weight.shape
    check_groups(op, input.shape[1], groups, co_g * groups, ci // groups)
    if ci != input.shape[1]:
        raise OpError(f"{op}: weight is for {ci} input channels, the input has {input.shape[1]}")
    if bias is not None and tuple(bias.shape) != (co_g * groups,):
        raise OpError(f"{op}: bias must have shape ({co_g * groups},), got {bias.shape}")
    stride, padding = pair(op, "stride", stride, 1), pair(op, "padding", padding)
    dilation, output_padding = (
        pair(op, "dilation", dilation, 1),
        pair(op, "output_padding", output_padding),
    )
    for axis in (0, 1):
        if output_padding[axis] >= max(stride[axis], dilation[axis]):
            raise OpError(
                f"{op}: output_padding {output_padding} must be smaller than stride {stride} "
                f"or dilation {dilation}"
            )
    sizes = [
        _full_size(input.shape[2 + a], weight.shape[2 + a], stride[a], padding[a],
                   output_padding[a], dilation[a])[1]
        for a in (0, 1)
    ]  # fmt: skip
    if min(sizes) < 1:
        raise OpError(f"{op}: padding {padding} leaves an empty output ({sizes[0]}x{sizes[1]})")
    return ConvTranspose2d.apply(
        input, weight, bias, stride=stride, padding=padding, output_padding=output_padding,
        dilation=dilation, groups=groups,
    )  # fmt: skip


def _sample(draw) -> Sample:
    groups = draw.choice([1, 1, 2])
    ci, co = groups * draw.integers(1, 2), groups * draw.integers(1, 2)
    if draw.integers(0, 1) == 0:  # half the draws: stamps apart, the Numba kernel's only case
        kh, kw = draw.integers(1, 2), 2
        stride, dilation = (2, draw.integers(2, 3)), 1
    else:
        kh, kw = draw.integers(1, 3), draw.integers(2, 3)
        stride, dilation = (draw.integers(1, 2), draw.integers(1, 3)), draw.choice([1, (2, 1)])
    output_padding = (draw.integers(0, max(stride[0], dilation if dilation == 1 else 2) - 1), 0)
    padding = (draw.integers(0, 1) if kh >= 2 else 0, 0)  # keeps the output non-empty
    x = floats(draw, (draw.integers(1, 2), ci, draw.integers(2, 4), draw.integers(1, 4)))
    weight = floats(draw, (ci, co // groups, kh, kw))
    bias = floats(draw, (co,)) if draw.integers(0, 1) else None
    kwargs = dict(
        stride=stride, padding=padding, output_padding=output_padding, groups=groups,
        dilation=dilation,
    )  # fmt: skip
    return Sample([x, weight, bias], kwargs)


SPECS = [
    OpSpec(
        "conv_transpose2d", conv_transpose2d, _sample, functions=(ConvTranspose2d,),
        primitives=("conv_transpose2d.forward", "conv_transpose2d.backward"),
    )
]  # fmt: skip
