"""one_hot: class indices as rows of zeros with a one at the index.

Forward   y[..., c] = 1 if index[...] == c else 0      (int64, one more axis of num_classes)
Backward  none: the output is integer, a function of integer indices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import OpError
from tinyformer.ops._util import data_of
from tinyformer.tensor import Tensor

__all__ = ["one_hot"]


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """(...) integer indices -> (..., num_classes) int64; num_classes = -1 takes max + 1."""
    index = data_of(tensor)
    if not backend.is_device_array(index):
        index = np.asarray(index)
    xp = backend.get_array_module(index)  # the result lives where the indices do
    if index.dtype.kind not in "iu":
        raise OpError(f"one_hot: indices must be integers, got {index.dtype}")
    if index.size and index.min() < 0:
        raise OpError(f"one_hot: indices must be >= 0, got {int(index.min())}")
    top = int(index.max()) if index.size else -1
    if num_classes == -1:
        if not index.size:
            raise OpError("one_hot: cannot infer num_classes from an empty tensor; pass it")
        num_classes = top + 1
    if num_classes < 1 or top >= num_classes:
        raise OpError(
            f"one_hot: index {top} does not fit num_classes={num_classes} (valid indices: 0.."
            f"{num_classes - 1})"
        )
    out = xp.zeros((*index.shape, num_classes), np.int64)
    xp.put_along_axis(out, index[..., None].astype(np.intp), 1, axis=-1)
    return Tensor(out)
