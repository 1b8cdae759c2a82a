"""dropout: zero each element with probability p in training, scale the rest by 1 / (1 - p).
dropout1d and dropout2d zero whole channels instead: one draw per (example, channel), the
product with that mask their whole forward and backward.

Forward   keep ~ Bernoulli(1 - p) per element,  y = x * keep / (1 - p)
          (inverted dropout: the expected value of y is x, so evaluation needs no rescaling)
          In eval mode (`training=False`) or with p = 0, y = x and nothing is recorded.
Backward  gx = gy * keep / (1 - p)
Saved     the boolean keep mask (one byte an element).

The mask comes from a counter-based generator: element i of a call seeded with s keeps
iff u(s, i) >= p, where u is the splitmix64 hash of (s, i) mapped to [0, 1). The seed is drawn
from tinyformer's generator, so `tinyformer.manual_seed` makes masks reproducible, and any
backend (a Numba or CUDA kernel) can regenerate the same mask from (s, i) alone.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from tinyformer import backend, random, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops.shared import GOLDEN, splitmix64_unit
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["dropout", "dropout1d", "dropout2d"]


def uniform_hash(seed: int, n: int, xp: ModuleType = np) -> np.ndarray:
    """n floats in [0, 1): splitmix64 of the counters seed * golden + i (i = 1..n), made by the
    array module `xp` (numpy, or a device's: the same values on every device)."""
    counters = xp.arange(1, n + 1, dtype=np.uint64) * GOLDEN
    # seed as an array: a NumPy uint64 scalar product would warn when it wraps, arrays do not
    return splitmix64_unit(counters + xp.full(n, seed, np.uint64) * GOLDEN)


def dropout_mask(shape: tuple[int, ...], p: float, seed: int, xp: ModuleType = np) -> np.ndarray:
    """The boolean keep mask of a call seeded with `seed`, made by the array module `xp`."""
    return (uniform_hash(seed, int(np.prod(shape)), xp) >= p).reshape(shape)


@registry.reference("dropout.forward")
def dropout_forward(x: np.ndarray, p: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """-> y, keep."""
    keep = dropout_mask(x.shape, p, seed, backend.get_array_module(x))
    return x * keep * x.dtype.type(1.0 / (1.0 - p)), keep


@registry.reference("dropout.backward")
def dropout_backward(gy: np.ndarray, keep: np.ndarray, p: float) -> np.ndarray:
    return gy * keep * gy.dtype.type(1.0 / (1.0 - p))


class Dropout(Function):
    @staticmethod
    def forward(ctx, x, *, p, seed):
        y, keep = registry.call("dropout.forward", x, p, seed)
        ctx.p = p
        ctx.save_for_backward(keep)
        return y

    @staticmethod
    def backward(ctx, gy):
        (keep,) = ctx.saved_tensors
        return registry.call("dropout.backward", gy, keep, ctx.p)


def dropout(x: Tensor, p: float = 0.5, training: bool = True, *, seed: int | None = None) -> Tensor:
    """Randomly zero elements with probability `p` while training; identity otherwise.

    `seed` fixes the mask (for tests); by default it is drawn from tinyformer's generator.
    """
    if (y := _without_draws("dropout", x, p, training)) is not None:
        return y
    return Dropout.apply(x, p=p, seed=_seed(seed))


def _without_draws(op: str, x: Tensor, p: float, training: bool) -> Tensor | None:
    """x itself where nothing is dropped (eval, p = 0), zeros where everything is (p = 1);
    None where a mask must be drawn."""
    if not 0.0 <= p <= 1.0:
        raise OpError(f"{op}: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    return x * 0.0 if p == 1.0 else None


def _seed(seed: int | None) -> int:
    """The mask's seed: `seed`, or a draw from tinyformer's generator."""
    return int(random.generator().integers(0, 2**63)) if seed is None else seed


def _channel_dropout(
    op: str, x: Tensor, p: float, training: bool, spatial: int, seed: int | None
) -> Tensor:
    """Zero whole channels: one keep draw per (example, channel), spread over its positions
    (neighbouring pixels are correlated, so dropping single ones regularises little)."""
    if x.ndim not in (spatial + 1, spatial + 2):
        raise OpError(
            f"{op}: input must be (N, C, ...) with {spatial} positional axes, or without N; "
            f"got shape {x.shape}"
        )
    if (y := _without_draws(op, x, p, training)) is not None:
        return y
    channels = x.shape[: x.ndim - spatial]  # (N, C) or (C,)
    keep = dropout_mask(channels, p, _seed(seed)).astype(x.dtype) * (1.0 / (1.0 - p))
    keep = keep.reshape(*channels, *([1] * spatial))
    return x * Tensor(backend.to_device(keep, x.device))


def dropout1d(
    x: Tensor, p: float = 0.5, training: bool = True, *, seed: int | None = None
) -> Tensor:
    """Zero whole channels of (N, C, L) or (C, L) with probability `p` while training."""
    return _channel_dropout("dropout1d", x, p, training, 1, seed)


def dropout2d(
    x: Tensor, p: float = 0.5, training: bool = True, *, seed: int | None = None
) -> Tensor:
    """Zero whole channels (feature maps) of (N, C, H, W) or (C, H, W) with probability `p`
    while training, as `torch.nn.functional.dropout2d`."""
    return _channel_dropout("dropout2d", x, p, training, 2, seed)


def _sample(draw) -> Sample:
    x = floats(draw, draw.shape(min_dims=0))
    return Sample([x], {"p": draw.choice([0.1, 0.5]), "seed": draw.integers(0, 2**31)})


def _channel_sample(spatial: int):
    def sample(draw) -> Sample:
        shape = draw.shape(min_dims=spatial + 1, max_dims=spatial + 2)
        return Sample(
            [floats(draw, shape)], {"p": draw.choice([0.3, 0.5]), "seed": draw.integers(0, 2**31)}
        )

    return sample


SPECS = [
    OpSpec(
        "dropout",
        dropout,
        _sample,
        functions=(Dropout,),
        primitives=("dropout.forward", "dropout.backward"),
    ),
    OpSpec("dropout1d", dropout1d, _channel_sample(1)),
    OpSpec("dropout2d", dropout2d, _channel_sample(2)),
]
