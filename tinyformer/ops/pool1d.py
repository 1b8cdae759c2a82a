"""max_pool1d and avg_pool1d: pooling along sequences (text CNNs), as in PyTorch.

Shapes    x (N, C, L) -> y (N, C, Lo),  Lo = floor((L + 2 p - d (k - 1) - 1) / s) + 1
Forward   max: y[n, c, t] = max_i x_pad[n, c, t s + i d]   (padding with -inf)
          avg: y[n, c, t] = sum_i x_pad[n, c, t s + i] / k (padding zeros, counted unless
               count_include_pad=False)
Backward  through max_pool2d and avg_pool2d: a sequence is an image of height 1, viewed as
          (N, C, 1, L), as conv1d goes through conv2d; so these share those ops' kernels.
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.avg_pool2d import avg_pool2d
from tinyformer.ops.max_pool2d import max_pool2d
from tinyformer.opspec import Draw, OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["avg_pool1d", "max_pool1d"]


def _int(op: str, name: str, value: object, low: int) -> int:
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]  # PyTorch takes (k,) too
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OpError(f"{op}: {name} must be an int >= {low}, got {value!r}")
    return value


def _sequences(op: str, x: Tensor) -> None:
    if x.ndim != 3:
        raise OpError(f"{op}: input must be (N, C, L), got shape {x.shape}")


def max_pool1d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    dilation: int = 1,
) -> Tensor:
    """Max over windows of `kernel_size` along the last axis (stride defaults to the kernel)."""
    op = "max_pool1d"
    _sequences(op, input)
    k = _int(op, "kernel_size", kernel_size, 1)
    s = k if stride is None else _int(op, "stride", stride, 1)
    p, d = _int(op, "padding", padding, 0), _int(op, "dilation", dilation, 1)
    y = max_pool2d(input.unsqueeze(2), (1, k), (1, s), (0, p), (1, d))  # (N, C, 1, Lo)
    return y.squeeze(2)


def avg_pool1d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    kernel_size: int,
    stride: int | None = None,
    padding: int = 0,
    *,  # keywords only: PyTorch's fifth argument is ceil_mode, which this one does not take
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over windows of `kernel_size` along the last axis (stride defaults to the kernel)."""
    op = "avg_pool1d"
    _sequences(op, input)
    k = _int(op, "kernel_size", kernel_size, 1)
    s = k if stride is None else _int(op, "stride", stride, 1)
    p = _int(op, "padding", padding, 0)
    y = avg_pool2d(input.unsqueeze(2), (1, k), (1, s), (0, p), count_include_pad=count_include_pad)
    return y.squeeze(2)


def _sample(draw: Draw, maximum: bool) -> Sample:
    k = draw.integers(1, 3)
    length = draw.integers(k + 1, 7)
    shape = (draw.integers(1, 2), draw.integers(1, 3), length)
    x = draw.rng.permutation(shape[0] * shape[1] * length).reshape(shape) * 0.1  # distinct: no ties
    kwargs = {"kernel_size": k, "stride": draw.integers(1, 2), "padding": draw.integers(0, k // 2)}
    if maximum:
        return Sample([x.astype(float)], kwargs)
    return Sample([floats(draw, shape)], {**kwargs, "count_include_pad": bool(draw.integers(0, 1))})


SPECS = [
    OpSpec("max_pool1d", max_pool1d, lambda draw: _sample(draw, True)),
    OpSpec("avg_pool1d", avg_pool1d, lambda draw: _sample(draw, False)),
]
