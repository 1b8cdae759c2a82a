"""The basic layers (`torch.nn` names): Linear, Embedding, LayerNorm, Dropout, activations, and
the containers Sequential, ModuleList and ModuleDict. Each forward is one functional op."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn import init
from tinyformer.nn.module import Module, Parameter
from tinyformer.ops._util import normalized_shape_tuple
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = [
    "GELU",
    "LeakyReLU",
    "Dropout",
    "Hardswish",
    "Embedding",
    "Identity",
    "LayerNorm",
    "Linear",
    "LogSoftmax",
    "ModuleDict",
    "ModuleList",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
]


def _check_sizes(layer: str, **sizes: Any) -> None:
    """Each size a whole number >= 0 (NumPy's own errors would not name the layer)."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"{layer}: {name} must be a whole number >= 0, got {value!r}")


class Linear(Module):
    """y = x W^T + b, with W of shape (out_features, in_features) as in PyTorch.

    Initialised as PyTorch does: W and b uniform in (-1/sqrt(in), 1/sqrt(in)).
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, dtype: Any = np.float32
    ) -> None:
        super().__init__()
        _check_sizes("Linear", in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.zeros((out_features, in_features), dtype))
        init.fan_in_uniform_(self.weight, in_features)
        self.register_parameter("bias", Parameter(np.zeros(out_features, dtype)) if bias else None)
        if self.bias is not None:
            init.fan_in_uniform_(self.bias, in_features)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


class Embedding(Module):
    """A table of `num_embeddings` vectors of size `embedding_dim`, initialised N(0, 1)."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        _check_sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx {padding_idx} is outside the table of "
                    f"{num_embeddings} rows"
                )
            padding_idx %= num_embeddings  # a negative one counts from the end, as in PyTorch
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = init.normal_(Parameter(np.zeros((num_embeddings, embedding_dim), dtype)))
        if padding_idx is not None:
            self.weight.data[padding_idx] = 0

    def forward(self, idx: Any) -> Tensor:
        return F.embedding(idx, self.weight, self.padding_idx)

    @classmethod
    def from_pretrained(
        cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None
    ) -> Embedding:
        """A table holding `embeddings` (V, D) (word vectors, say), frozen unless freeze=False.
        As in PyTorch, the padding row keeps its pretrained values (it only gets no gradient)."""
        table = embeddings.data if isinstance(embeddings, Tensor) else np.asarray(embeddings)
        if table.ndim != 2 or table.dtype.kind != "f":
            raise ValueError(
                "Embedding.from_pretrained: embeddings must be a 2-D float table (V, D), got "
                f"shape {table.shape} of {table.dtype}"
            )
        layer = cls(*table.shape, padding_idx=padding_idx, dtype=table.dtype)
        layer.weight = Parameter(table, requires_grad=not freeze)
        return layer

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalise over the last axes to mean 0 and variance 1, then scale and shift."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        *,  # keywords only: PyTorch's third argument is elementwise_affine
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        self.normalized_shape, self.eps = normalized_shape_tuple(normalized_shape), eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype))
        self.register_parameter(
            "bias", Parameter(np.zeros(self.normalized_shape, dtype)) if bias else None
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    """Divide by the root mean square over the last axes, then scale (LLaMA's norm: no mean is
    subtracted, no bias). `eps=None` is the machine epsilon of the input's dtype, as in PyTorch."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float | None = None,
        elementwise_affine: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        self.normalized_shape, self.eps = normalized_shape_tuple(normalized_shape), eps
        weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None
        self.register_parameter("weight", weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zero each element with probability p in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardswish(Module):
    """x * relu6(x + 3) / 6 (`F.hardswish`), MobileNetV3's activation."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.hardswish(x)


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class LeakyReLU(Module):
    """x where positive, else negative_slope * x (`F.leaky_relu`)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class SiLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Softmax(Module):
    """`F.softmax(x, axis)`; PyTorch's `nn.Softmax(dim=-1)` works too."""

    @torch_names
    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = axis

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Softmax):
    """`F.log_softmax(x, axis)`: log-probabilities; `nn.LogSoftmax(dim=-1)` works too."""

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.axis)


class Identity(Module):
    def forward(self, x: Any) -> Any:
        return x


def _add_child(container: Module, name: str, module: Any) -> None:
    """Register `module` under `name`; anything but a Module is a TypeError. Module's
    __setattr__ would keep it as a plain attribute: left out of forward, modules() and
    parameters(), with no error."""
    if not isinstance(module, Module):
        kind = type(module).__name__
        raise TypeError(f"{type(container).__name__}: child {name!r} must be a Module, got {kind}")
    setattr(container, name, module)


class _Indexed(Module):
    """Children named "0", "1", ... that can be indexed, counted and iterated in order."""

    def __getitem__(self, i: int | slice) -> Module:
        if isinstance(i, slice):  # a container of the same kind, as PyTorch's
            return self._sliced(list(self._modules.items())[i])
        return list(self._modules.values())[i]

    def _sliced(self, children: list[tuple[str, Module]]) -> Module:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class Sequential(_Indexed):
    """Modules applied in order; children are named "0", "1", ..., or by the keys of one
    mapping given instead (`Sequential(OrderedDict(fc=..., act=...))`), as in PyTorch. A
    slice, `seq[1:]`, is a Sequential of the same modules under their names."""

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, module in modules[0].items():
                _add_child(self, name, module)
            return
        for i, module in enumerate(modules):
            _add_child(self, str(i), module)

    def _sliced(self, children: list[tuple[str, Module]]) -> Sequential:
        return Sequential(dict(children))

    def append(self, module: Module) -> Sequential:
        _add_child(self, str(len(self._modules)), module)
        return self

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(_Indexed):
    """A list of modules whose parameters are registered (a plain list's would be invisible)."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        _add_child(self, str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def _sliced(self, children: list[tuple[str, Module]]) -> ModuleList:
        return ModuleList(module for _, module in children)  # renumbered, as PyTorch's


class ModuleDict(Module):
    """A dict of modules whose parameters are registered."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        for name, module in (modules or {}).items():
            self[name] = module

    def __setitem__(self, name: str, module: Module) -> None:
        _add_child(self, name, module)

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __contains__(self, name: str) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()
