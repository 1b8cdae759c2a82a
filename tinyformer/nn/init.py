"""In-place parameter initialisers (`torch.nn.init` names), drawing from tinyformer's generator
so that `tinyformer.manual_seed(s)` makes a model's initial weights reproducible. Each takes a
tensor or a tensor's array (`p.data`)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from tinyformer import random, versions
from tinyformer.tensor import Tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "fan_in_uniform_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "skip_init",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

_skipping = [False]


@contextlib.contextmanager
def skip_init() -> Iterator[None]:
    """Inside the block every initialiser leaves its tensor as it is (zeros, as the layers
    allocate them). For models whose weights are loaded right after they are built: drawing
    110M random numbers for bert-base takes seconds, and the draws would be overwritten."""
    _skipping.append(True)
    try:
        yield
    finally:
        _skipping.pop()


def _write(tensor: Tensor, values: Any, name: str) -> Tensor:
    """Fill `tensor` in place, as a PyTorch initialiser does: a write that bumps its version.
    It may also be a tensor's array, `p.data`, as PyTorch code passes (`normal_(m.weight.data,
    0.0, 0.02)`)."""
    array = tensor.data if isinstance(tensor, Tensor) else tensor
    array[...] = values
    versions.bump(array, f"nn.init.{name}()")
    return tensor


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    if _skipping[-1]:
        return tensor
    draw = random.generator().standard_normal(tensor.shape)
    return _write(tensor, (mean + std * draw).astype(tensor.dtype), "normal_")


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    if _skipping[-1]:
        return tensor
    return _write(
        tensor, random.generator().uniform(a, b, tensor.shape).astype(tensor.dtype), "uniform_"
    )


def trunc_normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0
) -> Tensor:
    """N(mean, std^2) restricted to [a, b] (bounds in the tensor's units, not in stds, as in
    PyTorch; ViT's `trunc_normal_(w, std=0.02)` is cut at +-2, a hundred stds out). Draws outside
    are drawn again until none is left, so the interval must hold a fair share of the mass."""
    if not a < b:
        raise ValueError(f"trunc_normal_: needs a < b, got a={a}, b={b}")
    if not std > 0:
        raise ValueError(f"trunc_normal_: std must be > 0, got {std}")
    # Each round redraws only the values that fell outside, ~size/mass draws in all.
    mass = (
        math.erfc((a - mean) / std / math.sqrt(2)) - math.erfc((b - mean) / std / math.sqrt(2))
    ) / 2
    if mass < 1e-3:
        raise ValueError(
            f"trunc_normal_: [{a}, {b}] holds {mass:.2g} of N({mean}, {std}^2)'s mass; "
            "redrawing until every value falls inside would take too long"
        )
    if _skipping[-1]:
        return tensor
    rng = random.generator()
    x = mean + std * rng.standard_normal(tensor.shape)
    outside = (x < a) | (x > b)
    while outside.any():
        x[outside] = mean + std * rng.standard_normal(int(outside.sum()))
        outside = (x < a) | (x > b)
    return _write(tensor, x.astype(tensor.dtype), "trunc_normal_")


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _write(tensor, val, "constant_")


def zeros_(tensor: Tensor) -> Tensor:
    return _write(tensor, 0, "zeros_")


def ones_(tensor: Tensor) -> Tensor:
    return _write(tensor, 1, "ones_")


def fan_in_uniform_(tensor: Tensor, fan_in: int) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for Linear weights and biases."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return uniform_(tensor, -bound, bound)


def _fans(tensor: Tensor, name: str) -> tuple[int, int]:
    """(fan_in, fan_out) as PyTorch counts them: a weight (out, in, *kernel) has
    fan_in = in * prod(kernel) inputs per output and fan_out = out * prod(kernel)."""
    if tensor.ndim < 2:
        raise ValueError(
            f"{name}: fan in and fan out need a tensor of 2 or more axes, got shape {tensor.shape}"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The factor that keeps activations' variance steady through `nonlinearity` (PyTorch's
    values): 1 for linear layers and sigmoid, 5/3 for tanh, sqrt(2) for relu (it zeroes half
    its inputs' variance), sqrt(2 / (1 + slope^2)) for leaky_relu (slope `param`, 0.01 if None)."""
    if nonlinearity in ("linear", "identity", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}")


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot and Bengio (2010): std = gain sqrt(2 / (fan_in + fan_out)), drawn uniformly
    (U(-a, a) has std a / sqrt(3))."""
    fan_in, fan_out = _fans(tensor, "xavier_uniform_")
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor, "xavier_normal_")
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str, name: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{name}: mode must be fan_in or fan_out, got {mode!r}")
    fan_in, fan_out = _fans(tensor, name)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """He et al. (2015): std = gain / sqrt(fan), drawn uniformly. With a = sqrt(5) it is
    PyTorch's default Linear and Conv2d weight, U(+-1/sqrt(fan_in))."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(
    tensor: Tensor, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"
) -> Tensor:
    """N(0, std^2), std = gain / sqrt(fan): for relu networks, sqrt(2 / fan_in)."""
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_"))


def orthogonal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix, as PyTorch draws it (Saxe et al., 2013; RL agents' layers):
    the tensor seen as (rows, everything else), the Q of a Gaussian matrix's QR factorisation
    with its columns' signs fixed by R's diagonal, so that Q is uniform over orthogonal
    matrices, times `gain`."""
    if tensor.ndim < 2:
        raise ValueError(f"nn.init.orthogonal_: needs at least 2 axes, got shape {tensor.shape}")
    if _skipping[-1]:
        return tensor
    rows = tensor.shape[0]
    cols = math.prod(tensor.shape) // rows if rows else 0
    draw = random.generator().standard_normal((rows, cols))
    if rows < cols:
        draw = draw.T
    q, r = np.linalg.qr(draw)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _write(tensor, (gain * q).reshape(tensor.shape).astype(tensor.dtype), "orthogonal_")
