"""The arrays behind a parameter's `.data` and a leaf's `.grad`: NumPy arrays that also take
PyTorch's in-place methods.

PyTorch code writes into them directly: `self.encoder.weight.data.uniform_(-r, r)` and
`self.decoder.bias.data.zero_()` (the Transformer tutorial's `init_weights`),
`target.data.copy_(tau * p.data + (1 - tau) * target.data)` (soft target updates in RL),
`w.grad.zero_()` ("What is torch.nn really?"), `p.grad.data.zero_()` (older code). In
tinyformer `.data` and `.grad` are arrays, not tensors (docs/pytorch.md), so those calls
failed. Parameters keep their data, and the backward engine hands leaves their gradient, as an
`InPlaceArray`: a view of the same memory whose class adds `zero_`, `fill_`, `uniform_`,
`normal_`, `add_`, `sub_`, `mul_`, `div_`, `clamp_`, `copy_` and a `data` that is itself. It
is an `np.ndarray` in every other way, and arithmetic on it gives plain arrays, so the class
does not spread into activations or other gradients. Arrays on a GPU (CuPy) stay as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import random

__all__ = ["InPlaceArray", "with_inplace"]


class InPlaceArray(np.ndarray):
    """A parameter's or a gradient's array, with PyTorch's in-place methods (module
    docstring). Each returns the array, so calls chain as PyTorch's do."""

    def __array_wrap__(self, obj: Any, context: Any = None, return_scalar: bool = False) -> Any:
        if obj is self:  # an in-place op (`g *= s`) keeps the name bound to this array
            return self
        plain = obj.view(np.ndarray) if isinstance(obj, np.ndarray) else obj
        return plain[()] if return_scalar else plain

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __str__(self) -> str:
        return str(self.view(np.ndarray))

    def __reduce__(self) -> Any:  # pickled and copied as the plain array
        return self.view(np.ndarray).__reduce__()

    @property
    def data(self) -> InPlaceArray:  # type: ignore[override]
        """Itself: PyTorch's `p.data` and `p.grad.data` are the values without a graph."""
        return self

    def zero_(self) -> InPlaceArray:
        self[...] = 0
        return self

    def fill_(self, value: float) -> InPlaceArray:
        self[...] = value
        return self

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> InPlaceArray:
        """Uniform values in [a, b), from tinyformer's generator (`tinyformer.manual_seed`)."""
        self[...] = random.generator().uniform(a, b, self.shape)
        return self

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> InPlaceArray:
        """Normal values, from tinyformer's generator (`tinyformer.manual_seed`)."""
        self[...] = mean + std * random.generator().standard_normal(self.shape)
        return self

    def copy_(self, src: Any) -> InPlaceArray:
        self[...] = _values(src)
        return self

    def add_(self, other: Any, *, alpha: float = 1) -> InPlaceArray:
        self += alpha * _values(other)
        return self

    def sub_(self, other: Any, *, alpha: float = 1) -> InPlaceArray:
        self -= alpha * _values(other)
        return self

    def mul_(self, other: Any) -> InPlaceArray:
        self *= _values(other)
        return self

    def div_(self, other: Any) -> InPlaceArray:
        self /= _values(other)
        return self

    def clamp_(self, min: float | None = None, max: float | None = None) -> InPlaceArray:  # noqa: A002
        np.clip(self, min, max, out=self)
        return self


def _values(x: Any) -> Any:
    """A tensor's array, or `x` as an array (a plain array's own `.data` is its buffer)."""
    return x.data if hasattr(x, "grad_fn") else np.asarray(x)


def with_inplace(array: Any) -> Any:
    """`array` as an InPlaceArray view (the same memory); anything but a plain NumPy array (a
    CuPy one, an InPlaceArray already) as it is."""
    return array.view(InPlaceArray) if type(array) is np.ndarray else array
