"""embedding: look up rows of a weight table by integer index.

Shapes    indices (...) of ints in [0, V), weight (V, D) -> y (..., D)
Forward   y[...] = weight[indices[...]]
Backward  gweight[v] = sum of gy over every position whose index is v (a scatter-add; a token
          that appears twice gets both gradients), 0 for rows never looked up and for
          `padding_idx`. The indices get no gradient.
Saved     the indices and the table's size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend, device_checks, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import data_of
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["embedding"]


@registry.reference("embedding.backward")
def embedding_backward(gy, indices, num_embeddings, padding_idx):
    """gy (R, D), indices (R,) -> gweight (V, D). `add.at` sums repeated indices."""
    xp = backend.get_array_module(gy)
    gw = xp.zeros((num_embeddings, gy.shape[1]), gy.dtype)
    xp.add.at(gw, indices, gy)
    if padding_idx is not None:
        gw[padding_idx] = 0
    return gw


class Embedding(Function):
    @staticmethod
    def forward(ctx, indices, weight, *, padding_idx):
        ctx.save_for_backward(indices)
        ctx.num_embeddings, ctx.padding_idx = weight.shape[0], padding_idx
        return weight[indices]

    @staticmethod
    def backward(ctx, gy):
        (indices,) = ctx.saved_tensors
        d = gy.shape[-1]
        gw = registry.call(
            "embedding.backward",
            gy.reshape(-1, d),
            indices.reshape(-1),
            ctx.num_embeddings,
            ctx.padding_idx,
        )
        return None, gw


def _out_of_range(indices: Any, n: int) -> Any:
    """indices < 0 or >= n, in one comparison where it can be (each operation is a launch on a
    GPU): read as unsigned (a view: no bits change), a negative index of b bits is at least
    2^(b-1), past any n up to that."""
    if indices.dtype.kind == "u":
        return indices >= n
    if n <= np.iinfo(indices.dtype).max + 1:
        return indices.view(indices.dtype.str.replace("i", "u")) >= n
    return (indices < 0) | (indices >= n)


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:  # noqa: A002
    """Rows of `weight` (V, D) picked by the integer tensor `input`."""
    indices = data_of(input)
    if not isinstance(input, Tensor) and not backend.is_device_array(indices):
        indices = np.asarray(indices)  # host data: checked here, then moved to the table
    if indices.dtype.kind not in "iu":
        raise OpError(f"embedding: indices must be integers, got {indices.dtype}")
    if weight.ndim != 2:
        raise OpError(f"embedding: weight must be (num_embeddings, dim), got {weight.shape}")
    n = weight.shape[0]

    def out_of_range() -> OpError:
        position = tuple(int(i) for i in np.argwhere(backend.to_host(bad))[0])
        return OpError(
            f"embedding: index {int(indices[position])} at position {position} is out of range "
            f"for a table of {n} rows (valid: 0..{n - 1})"
            + (" (found on the device, raised at the next read)" if on_device else "")
        )

    bad = _out_of_range(indices, n)
    on_device = backend.is_device_array(bad)
    device_checks.check(bad, out_of_range)  # on a device: at the next read, not a sync now
    if not isinstance(input, Tensor) and not backend.is_device_array(indices):
        indices = backend.to_device(indices, backend.device_of(data_of(weight)))
    if padding_idx is not None and not -n <= padding_idx < n:
        raise OpError(f"embedding: padding_idx {padding_idx} is out of range for {n} rows")
    padding_idx = None if padding_idx is None else padding_idx % n
    return Embedding.apply(indices, weight, padding_idx=padding_idx)


def _embedding_checked(indices: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """embedding, with the outputs that read the padding row zeroed in value but not in gradient.

    padding_idx is a deliberate stop-gradient: the forward reads its row, backward gives it none,
    and finite differences would see the read. Subtracting a detached copy of those outputs
    leaves a function that truly does not depend on the padding row, while every output's
    gradient still flows through embedding's backward, whose padding row must then be zero.
    """
    y = embedding(indices, weight, padding_idx)
    if padding_idx is None:
        return y
    idx = data_of(indices)
    idx = idx if backend.is_device_array(idx) else np.asarray(idx)
    read = idx == padding_idx % weight.shape[0]  # if on the host, the product with y moves it
    return y - y.detach() * read[..., None].astype(y.dtype)


def _sample(draw) -> Sample:
    v, d = draw.integers(1, 6), draw.integers(1, 4)
    indices = draw.rng.integers(0, v, size=draw.shape(min_dims=0, max_dims=2, max_side=6))
    padding_idx = draw.choice([draw.integers(-v, v - 1), None])
    if padding_idx is not None:  # padded batches read the padding row often
        indices = np.where(draw.rng.random(indices.shape) < 0.3, padding_idx % v, indices)
    return Sample([indices, floats(draw, (v, d))], {"padding_idx": padding_idx})


SPECS = [
    OpSpec(
        "embedding",
        _embedding_checked,
        _sample,
        functions=(Embedding,),
        primitives=("embedding.backward",),
    )
]
