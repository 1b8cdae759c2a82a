"""`nn.utils.parameters_to_vector` and `nn.utils.vector_to_parameters`: all of a model's
parameters as one flat vector and back (for second-order methods, evolution strategies,
weight averaging), as PyTorch's."""

from __future__ import annotations

from collections.abc import Iterable

from tinyformer import backend
from tinyformer.ops.cat import cat
from tinyformer.ops.reshape import reshape
from tinyformer.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _same_device(op: str, parameters: Iterable[Tensor]) -> list[Tensor]:
    params = list(parameters)
    if not params:
        raise ValueError(f"{op}: no parameters given")
    devices = {str(p.device) for p in params}
    if len(devices) > 1:
        raise TypeError(f"{op}: found parameters on different devices: {sorted(devices)}")
    return params


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and joined in order into one 1-D tensor. It is differentiable,
    as PyTorch's: a loss of the vector sends gradients to the parameters."""
    params = _same_device("parameters_to_vector", parameters)
    return cat([reshape(p, -1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D `vec` into the parameters, in order, each reshaped to
    its parameter's shape. Each parameter gets a new array (cast to its dtype), as PyTorch's
    `param.data = ...` gives it new storage; not recorded in any graph."""
    op = "vector_to_parameters"
    if not isinstance(vec, Tensor):
        raise TypeError(f"{op}: expected a Tensor, but got {type(vec).__name__}")
    params = _same_device(op, parameters)
    total = sum(p.data.size for p in params)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ValueError(
            f"{op}: the parameters hold {total} numbers, so vec must be ({total},), got shape "
            f"{vec.shape}"
        )
    backend.check_same_device(op, params[0].data, vec.data)
    start = 0
    for p in params:
        n = p.data.size
        p.data = vec.data[start : start + n].reshape(p.shape).astype(p.dtype, copy=True)
        start += n
