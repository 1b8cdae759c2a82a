"""split and chunk: cut a tensor into pieces along an axis.

Each piece is a slice, `x[..., start:stop, ...]`, so both reuse `GetItem`: the gradient of each
piece is scattered back into its place, and pieces that feed the loss add up in x's gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer.autograd import OpError
from tinyformer.ops.cat import cat
from tinyformer.ops.getitem import GetItem
from tinyformer.ops.reshape import reshape
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, Sample, floats


def _pieces(x: Tensor, sizes: Sequence[int], axis: int) -> list[Tensor]:
    axis %= x.ndim
    out, start = [], 0
    for size in sizes:
        index = (slice(None),) * axis + (slice(start, start + size),)
        out.append(GetItem.apply(x, index=index))
        start += size
    return out


def split(x: Tensor, split_size_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """Pieces of `split_size` along `axis` (the last may be smaller), or of the given sizes,
    as `torch.split`."""
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise OpError(f"split: axis {axis} is out of range for shape {x.shape}")
    n = x.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise OpError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, n - start) for start in range(0, n, step)]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise OpError(f"split: sizes {sizes} do not add up to {n} (axis {axis} of {x.shape})")
    return _pieces(x, sizes, axis)


def chunk(x: Tensor, chunks: int, axis: int = 0) -> list[Tensor]:
    """At most `chunks` pieces of equal size (the last may be smaller), as `torch.chunk`."""
    if chunks <= 0:
        raise OpError(f"chunk: chunks must be positive, got {chunks}")
    n = x.shape[axis] if x.ndim else 0
    return split(x, max(1, -(-n // chunks)), axis)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_side=5)
    axis = draw.integers(-len(shape), len(shape) - 1)
    return Sample([floats(draw, shape)], {"size": draw.integers(1, 3), "axis": axis})


def _concat_pieces(pieces: list[Tensor]) -> Tensor:
    # The generic tests need one output: weight the pieces differently so a swap would show.
    return cat([reshape(p * (i + 1), -1) for i, p in enumerate(pieces)])


SPECS = [
    OpSpec(
        "split",
        lambda x, size, axis: _concat_pieces(split(x, size, axis)),
        _sample,
        functions=(GetItem,),
    ),
    OpSpec(
        "chunk",
        lambda x, size, axis: _concat_pieces(chunk(x, size, axis)),
        _sample,
        functions=(GetItem,),
    ),
]
