"""pixel_shuffle and pixel_unshuffle: move channels into space and back (Shi et al., 2016's
sub-pixel convolution for super-resolution).

Shapes    pixel_shuffle:   x (*, C r^2, H, W) -> y (*, C, H r, W r)
          pixel_unshuffle: x (*, C, H r, W r) -> y (*, C r^2, H, W)
Forward   pixel_shuffle: y[..., c, h r + i, w r + j] = x[..., c r^2 + i r + j, h, w], that is
          reshape to (*, C, r, r, H, W), permute to (*, C, H, r, W, r), reshape.
          pixel_unshuffle is its inverse: reshape to (*, C, H, r, W, r), permute to
          (*, C, r, r, H, W), reshape.
Backward  through reshape and permute: each moves the gradient back where its element came
          from (the other function of the pair, applied to gy).
Saved     the shapes and axis orders.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.permute import permute
from tinyformer.ops.reshape import reshape
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def _check(op: str, name: str, x: Tensor, factor: int) -> int:
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise OpError(f"{op}: {name} must be an int >= 1, got {factor!r}")
    if x.ndim < 3:
        raise OpError(f"{op}: input must be (*, C, H, W), got shape {x.shape}")
    return factor


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C r^2, H, W) -> (*, C, H r, W r), r = `upscale_factor`."""
    op = "pixel_shuffle"
    r = _check(op, "upscale_factor", input, upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise OpError(
            f"{op}: the channels (axis -3) must be divisible by upscale_factor^2 = {r * r}, "
            f"got shape {input.shape}"
        )
    n = len(lead)
    y = reshape(input, *lead, c // (r * r), r, r, h, w)  # (*, C, r, r, H, W)
    y = permute(y, *range(n), n, n + 3, n + 1, n + 4, n + 2)  # (*, C, H, r, W, r)
    return reshape(y, *lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:  # noqa: A002
    """(*, C, H r, W r) -> (*, C r^2, H, W), r = `downscale_factor`."""
    op = "pixel_unshuffle"
    r = _check(op, "downscale_factor", input, downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise OpError(
            f"{op}: height and width (axes -2, -1) must be divisible by downscale_factor = "
            f"{r}, got shape {input.shape}"
        )
    n = len(lead)
    y = reshape(input, *lead, c, h // r, r, w // r, r)  # (*, C, H, r, W, r)
    y = permute(y, *range(n), n, n + 2, n + 4, n + 1, n + 3)  # (*, C, r, r, H, W)
    return reshape(y, *lead, c * r * r, h // r, w // r)


def _sample(draw, shuffle: bool) -> Sample:
    r = draw.integers(1, 3)
    lead = draw.shape(min_dims=0, max_dims=2, max_side=2)
    c, h, w = draw.integers(1, 2), draw.integers(1, 3), draw.integers(1, 3)
    if shuffle:
        return Sample([floats(draw, (*lead, c * r * r, h, w))], {"upscale_factor": r})
    return Sample([floats(draw, (*lead, c, h * r, w * r))], {"downscale_factor": r})


SPECS = [
    OpSpec("pixel_shuffle", pixel_shuffle, lambda draw: _sample(draw, True)),
    OpSpec("pixel_unshuffle", pixel_unshuffle, lambda draw: _sample(draw, False)),
]
