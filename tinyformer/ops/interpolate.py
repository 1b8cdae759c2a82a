"""interpolate: resize images by nearest-neighbour or bilinear interpolation, as in PyTorch.

Both modes are linear maps that act on rows and columns separately, so each is two small
matrices: A_h (Ho, H) and A_w (Wo, W), row r of A_h holding the weights with which output row r
mixes the input rows.

Shapes    x (N, C, H, W) -> y (N, C, Ho, Wo)
Forward   y[n, c] = A_h x[n, c] A_w^T
          nearest:  output row r copies input row floor(r * ratio)
          bilinear: output row r sits at src = (r + 0.5) ratio - 0.5 (align_corners=False,
                    clamped at 0) or r (H - 1) / (Ho - 1) (align_corners=True), and mixes rows
                    floor(src) and floor(src) + 1 with weights 1 - frac and frac
          ratio = H / Ho, or 1 / scale_factor when a scale factor is given (PyTorch's rule)
Backward  gx[n, c] = A_h^T gy[n, c] A_w: the transpose of a linear map
Saved     the two matrices (a few kilobytes), not x.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._im2col import check_image
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["interpolate"]

MODES = ("nearest", "bilinear")


def interpolation_matrix(
    size: int, out: int, ratio: float, mode: str, align_corners: bool
) -> np.ndarray:
    """(out, size) weights: row r says how output position r mixes the input positions."""
    a = np.zeros((out, size))
    rows = np.arange(out)
    if mode == "nearest":
        a[rows, np.minimum(np.floor(rows * ratio).astype(np.int64), size - 1)] = 1.0
        return a
    if align_corners:
        src = rows * ((size - 1) / (out - 1) if out > 1 else 0.0)
    else:
        src = np.maximum((rows + 0.5) * ratio - 0.5, 0.0)
    low = np.minimum(np.floor(src).astype(np.int64), size - 1)
    high = np.minimum(low + 1, size - 1)
    frac = src - low
    np.add.at(a, (rows, low), 1.0 - frac)
    np.add.at(a, (rows, high), frac)
    return a


@registry.reference("interpolate.forward")
def interpolate_forward(x, a_h, a_w):
    xp = backend.get_array_module(x)
    return xp.einsum("rh,nchw,sw->ncrs", a_h, x, a_w, optimize=True)


@registry.reference("interpolate.backward")
def interpolate_backward(gy, a_h, a_w):
    xp = backend.get_array_module(gy)
    return xp.einsum("rh,ncrs,sw->nchw", a_h, gy, a_w, optimize=True)


class Interpolate(Function):
    @staticmethod
    def forward(ctx, x, *, a_h, a_w):
        a_h, a_w = a_h.astype(x.dtype), a_w.astype(x.dtype)
        ctx.matrices = (a_h, a_w)
        return registry.call("interpolate.forward", x, a_h, a_w)

    @staticmethod
    def backward(ctx, gy):
        return registry.call("interpolate.backward", gy, *ctx.matrices)


def interpolate(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """Resize (N, C, H, W) images to `size` or by `scale_factor`, as
    `torch.nn.functional.interpolate` for modes "nearest" and "bilinear"."""
    op = "interpolate"
    check_image(op, input)
    if mode not in MODES:
        raise OpError(f"{op}: mode must be one of {MODES}, got {mode!r}")
    if (size is None) == (scale_factor is None):
        raise OpError(f"{op}: give exactly one of size and scale_factor")
    if align_corners is not None and mode == "nearest":
        raise OpError(f"{op}: align_corners applies to bilinear mode only")
    h, w = input.shape[2:]
    if size is not None:
        out = (size, size) if isinstance(size, int) else tuple(size)
        ratios = (h / out[0], w / out[1])
    else:
        scales = (scale_factor,) * 2 if np.isscalar(scale_factor) else tuple(scale_factor)
        out = (int(np.floor(h * scales[0])), int(np.floor(w * scales[1])))
        ratios = (1.0 / scales[0], 1.0 / scales[1])
    if min(out) < 1:
        raise OpError(f"{op}: output size {out} from input {h}x{w} is empty")
    corners = bool(align_corners)
    # Built from sizes alone, on the host (a few small arrays), then moved to the data.
    a_h = interpolation_matrix(h, out[0], ratios[0], mode, corners)
    a_w = interpolation_matrix(w, out[1], ratios[1], mode, corners)
    a_h, a_w = backend.to_device(a_h, input.device), backend.to_device(a_w, input.device)
    return Interpolate.apply(input, a_h=a_h, a_w=a_w)


def _sample(draw) -> Sample:
    shape = (draw.integers(1, 2), draw.integers(1, 2), draw.integers(2, 5), draw.integers(2, 5))
    mode = draw.choice(MODES)
    kwargs: dict = {"mode": mode}
    if draw.integers(0, 1):
        kwargs["scale_factor"] = draw.choice([2, 3, (2, 1)])
    else:
        kwargs["size"] = (draw.integers(1, 7), draw.integers(1, 7))
    if mode == "bilinear":
        kwargs["align_corners"] = draw.choice([False, True])
    return Sample([floats(draw, shape)], kwargs)


SPECS = [
    OpSpec(
        "interpolate", interpolate, _sample, functions=(Interpolate,),
        primitives=("interpolate.forward", "interpolate.backward"),
    )
]  # fmt: skip
