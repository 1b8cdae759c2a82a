"""More activations under PyTorch's names (`nn.ELU`, `nn.Softplus`, `nn.Mish`, `nn.Hardtanh`,
`nn.ReLU6`, `nn.PReLU`, `nn.SELU`, `nn.CELU`, `nn.LogSigmoid`, `nn.Softsign`, `nn.Hardsigmoid`,
`nn.GLU`, `nn.Softmax2d`) and the channel dropouts (`nn.Dropout1d`, `nn.Dropout2d`); each calls
its functional op (`tinyformer/ops/`). The common ones (`ReLU`, `LeakyReLU`, `GELU`, `Dropout`,
...) are in layers.py."""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = [
    "CELU", "ELU", "GLU", "SELU", "Dropout1d", "Dropout2d", "Hardsigmoid", "Hardtanh",
    "LogSigmoid", "Mish", "PReLU", "ReLU6", "Softmax2d", "Softplus", "Softsign",
]  # fmt: skip


class ELU(Module):
    """x where positive, else alpha (exp(x) - 1) (`F.elu`)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear above threshold (`F.softplus`)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Mish(Module):
    """x tanh(softplus(x)) (`F.mish`)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.mish(x)


class Hardtanh(Module):
    """x clamped into [min_val, max_val] (`F.hardtanh`)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if not min_val < max_val:
            raise ValueError(f"Hardtanh: min_val {min_val} must be below max_val {max_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) (MobileNet's)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)


class PReLU(Module):
    """max(x, 0) + a min(x, 0) with learned slopes a: one for all (num_parameters=1) or one per
    channel of axis 1, starting at `init` (`F.prelu`)."""

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, dtype: Any = np.float32
    ) -> None:
        super().__init__()
        if (
            isinstance(num_parameters, bool)
            or not isinstance(num_parameters, int)
            or num_parameters < 1
        ):
            raise ValueError(
                f"PReLU: num_parameters must be a whole number >= 1, got {num_parameters!r}"
            )
        self.num_parameters = num_parameters
        self.weight = Parameter(np.full(num_parameters, init, dtype))

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _ChannelDropout(Module):
    spatial = 1

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        drop = F.dropout1d if self.spatial == 1 else F.dropout2d
        return drop(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Dropout1d(_ChannelDropout):
    """Zero whole channels of (N, C, L) with probability p while training (`F.dropout1d`)."""


class Dropout2d(_ChannelDropout):
    """Zero whole feature maps of (N, C, H, W) with probability p while training
    (`F.dropout2d`)."""

    spatial = 2


class SELU(Module):
    """scale * elu(x, alpha) with SELU's fixed constants (`F.selu`): self-normalising."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.selu(x)


class CELU(Module):
    """x where positive, else alpha (exp(x / alpha) - 1) (`F.celu`)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if alpha == 0:
            raise ValueError("CELU: alpha must be nonzero (it divides the input)")
        self.alpha = alpha
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.celu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class LogSigmoid(Module):
    """log(sigmoid(x)), stable for any x (`F.logsigmoid`)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(x)


class Softsign(Module):
    """x / (1 + |x|) (`F.softsign`)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softsign(x)


class Hardsigmoid(Module):
    """relu6(x + 3) / 6 (`F.hardsigmoid`)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.hardsigmoid(x)


class GLU(Module):
    """a * sigmoid(b), a and b the halves of the input along `dim` (`F.glu`)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels at each pixel: axis -3 of (N, C, H, W) or (C, H, W)."""

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise ValueError(
                f"Softmax2d: input must be (N, C, H, W) or (C, H, W), got shape {x.shape}"
            )
        return F.softmax(x, -3)
