"""Coordinate networks: an MLP that maps a pixel's coordinates to its value, so that the
weights *are* the image (an implicit neural representation).

Three networks of the same depth and width, compared by `tinyformer train siren`:

- `Siren` (Sitzmann et al., 2020, "Implicit Neural Representations with Periodic Activation
  Functions"): every hidden layer is `sin(w0 * (W x + b))`, with w0 = 30 and the paper's
  initialisation, which keeps every layer's pre-activations ~ N(0, 1) however deep the
  network is. The last layer is linear.
- `ReLUMLP`: the same MLP with ReLU. Its spectral bias (Rahaman et al., 2019) makes it learn
  low frequencies first and fine detail very slowly: fits come out blurry.
- `FourierFeatureMLP` (Tancik et al., 2020, "Fourier Features Let Networks Learn High
  Frequency Functions in Low Dimensional Domains"): the ReLU MLP on
  gamma(v) = [cos(2 pi B v), sin(2 pi B v)], B (m, 2) ~ N(0, sigma^2), fixed.

Shapes: N coordinates, D input dimensions (2 for an image), W width, O outputs (1 for a
grayscale image), m Fourier frequencies.

    coords (N, D) in [-1, 1]^D -> hidden layers (N, W) -> Linear -> values (N, O)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn
from tinyformer.models._checks import check_sizes
from tinyformer.models._inputs import to_device_of
from tinyformer.nn import init
from tinyformer.tensor import Tensor

__all__ = [
    "MODELS", "FourierFeatureMLP", "ReLUMLP", "SineLayer", "Siren", "SirenConfig",
    "build_model",
]  # fmt: skip


@dataclass(frozen=True)
class SirenConfig:
    in_features: int = 2  # D: (x, y) for an image
    out_features: int = 1  # O: 1 for grayscale
    hidden: int = 128  # W: the width of every hidden layer, in all three networks
    n_layers: int = 3  # hidden layers, in all three networks
    w0: float = 30.0  # SIREN's frequency factor: sin(w0 * (W x + b))
    sigma: float = 10.0  # std of the Fourier feature frequencies B (cycles per unit of x)

    def __post_init__(self) -> None:
        check_sizes(self, "in_features", "out_features", "hidden", "n_layers")
        if not self.w0 > 0 or not self.sigma > 0:
            raise ValueError(f"SirenConfig: w0 and sigma must be > 0, got {self.w0}, {self.sigma}")
        if self.hidden % 2:  # the Fourier features come as cos/sin pairs of width W
            raise ValueError(f"SirenConfig: hidden must be even, got {self.hidden}")


class SineLayer(nn.Module):
    """y = sin(w0 * (W x + b)).

    The paper's initialisation: the first layer's weights uniform in [-1/in, 1/in], so that
    w0 W x spans up to w0 / in radians per unit (~5 periods over [-1, 1] for (x, y)); later
    layers' weights uniform in [-c, c] with c = sqrt(6 / in) / w0. Then w0 W x has variance
    in * (6 / in) / 3 * Var(x) = 2 Var(x), and a sine of an argument spread over a period or
    more has variance ~ 1/2 (0.43 for a unit Gaussian): every layer's pre-activations stay
    ~ N(0, 1), however deep. The biases of later layers are drawn from the same range
    (the paper's code leaves PyTorch's wider default, which adds w0^2 / (3 in) to that
    variance); the first layer keeps PyTorch's default, which gives its sines random phases.
    """

    def __init__(self, in_features: int, out_features: int, w0: float, first: bool) -> None:
        super().__init__()
        self.w0, self.first = w0, first
        self.linear = nn.Linear(in_features, out_features)
        if first:
            init.uniform_(self.linear.weight, -1 / in_features, 1 / in_features)
        else:
            c = math.sqrt(6 / in_features) / w0
            init.uniform_(self.linear.weight, -c, c)
            init.uniform_(self.linear.bias, -c, c)

    def preactivation(self, x: Tensor) -> Tensor:
        """(N, in) -> w0 * (W x + b) (N, out)."""
        return self.linear(x) * self.w0

    def forward(self, x: Tensor) -> Tensor:
        return tf.sin(self.preactivation(x))

    def extra_repr(self) -> str:
        return f"w0={self.w0}, first={self.first}"


class _CoordinateMLP(nn.Module):
    """Hidden layers from `self.body`, then a linear head; forward returns (values, loss)."""

    body: nn.ModuleList
    head: nn.Linear

    def features(self, x: Tensor) -> Tensor:
        return x

    def forward(self, coords: Any, target: Any = None) -> tuple[Tensor, Tensor | None]:
        """coords (N, D) -> values (N, O), and the mean squared error against target (N, O).
        A Tensor stays as it is (so that the values can be differentiated with respect to
        it); arrays move to the model's device."""
        x = coords if isinstance(coords, Tensor) else Tensor(to_device_of(coords, self.head.weight))
        d = self.config.in_features
        if x.ndim != 2 or x.shape[1] != d:
            raise ValueError(f"{type(self).__name__}: coords must be (N, {d}), got {x.shape}")
        h = self.features(x)
        for layer in self.body:
            h = layer(h)  # (N, W)
        y = self.head(h)  # (N, O)
        return y, (None if target is None else F.mse_loss(y, target))


class Siren(_CoordinateMLP):
    def __init__(self, config: SirenConfig) -> None:
        super().__init__()
        self.config = cfg = config
        widths = [cfg.in_features] + [cfg.hidden] * cfg.n_layers
        self.body = nn.ModuleList(
            SineLayer(a, b, cfg.w0, first=i == 0)
            for i, (a, b) in enumerate(zip(widths, widths[1:]))
        )
        self.head = nn.Linear(cfg.hidden, cfg.out_features)
        c = math.sqrt(6 / cfg.hidden) / cfg.w0  # as the paper's code: the hidden layers' range
        init.uniform_(self.head.weight, -c, c)


class _ReLUBody(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.linear(x))


class ReLUMLP(_CoordinateMLP):
    def __init__(self, config: SirenConfig, in_features: int | None = None) -> None:
        super().__init__()
        self.config = cfg = config
        widths = [in_features or cfg.in_features] + [cfg.hidden] * cfg.n_layers
        self.body = nn.ModuleList(_ReLUBody(a, b) for a, b in zip(widths, widths[1:]))
        self.head = nn.Linear(cfg.hidden, cfg.out_features)


class FourierFeatureMLP(ReLUMLP):
    """gamma(v) = [cos(2 pi B v), sin(2 pi B v)] (N, 2m), with m = W / 2 so that the first
    layer is as wide as the others; B is a buffer (saved, never trained)."""

    def __init__(self, config: SirenConfig) -> None:
        m = config.hidden // 2
        super().__init__(config, in_features=2 * m)
        b = tf.randn(m, config.in_features).numpy() * config.sigma  # tinyformer's generator
        self.register_buffer("B", b.astype(np.float32))  # (m, D)

    def features(self, x: Tensor) -> Tensor:
        v = F.linear(x, self.B) * (2 * math.pi)  # (N, m) = 2 pi B v
        return tf.cat([tf.cos(v), tf.sin(v)], axis=1)  # (N, 2m)


MODELS = {"siren": Siren, "relu": ReLUMLP, "fourier": FourierFeatureMLP}


def build_model(name: str, config: SirenConfig) -> _CoordinateMLP:
    """One of MODELS by name."""
    if name not in MODELS:
        raise ValueError(f"build_model: unknown model {name!r}; choose from {', '.join(MODELS)}")
    return MODELS[name](config)
