"""CUDA kernels for clip_grad_norm_ over every gradient in two launches: the sums of squares,
then the norm and the scaling (plan in clip.cu)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, SUFFIX
from tinyformer.registry import kernel

THREADS = 256
MIN_CHUNK = THREADS * 16  # elements per work item: 16 per thread at least
# About this many work items at most (plus one per gradient): every block of the second launch
# sums all the items' partial sums, so they must stay few next to the gradients' size.
MOST_ITEMS = 1024


def _fits(grads: Sequence[Any]) -> bool:
    """One dtype the kernels have, every gradient contiguous (scaled in place as flat memory)."""
    dtype = grads[0].dtype
    return dtype.name in SUFFIX and all(g.dtype == dtype and g.flags.c_contiguous for g in grads)


def chunk_size(elements: int) -> int:
    """Elements per work item for gradients of `elements` in all: a multiple of THREADS, at
    least MIN_CHUNK, large enough for at most about MOST_ITEMS items."""
    per_item = -(-elements // MOST_ITEMS)
    return max(MIN_CHUNK, -(-per_item // THREADS) * THREADS)


@kernel("clip_grad_norm.many", backend="cuda", dtypes=FLOATS, accepts=lambda g, **_: _fits(g))
def clip_grad_norm_many(grads: Sequence[Any], *, max_norm: float, eps: float) -> Any:
    """Scale `grads` in place by min(max_norm / (norm + eps), 1); return the norm (0-d float64)."""
    xp = get_array_module(grads[0])
    sizes = [g.size for g in grads]
    chunk = chunk_size(sum(sizes))
    chunks = np.array([-(-s // chunk) for s in sizes], np.int64)
    items = int(chunks.sum())
    if items == 0:  # every gradient is empty: nothing to scale, a norm of 0
        return xp.zeros((), np.float64)
    tensor_of = np.repeat(np.arange(len(sizes)), chunks)
    first_item = np.cumsum(chunks) - chunks
    start = (np.arange(items) - first_item[tensor_of]) * chunk
    addresses = [_runtime.address(g) for g in grads]
    table = xp.asarray(np.concatenate([addresses, sizes, tensor_of, start]).astype(np.uint64))
    parts, total = xp.empty(items, np.float64), xp.empty((), np.float64)
    module, suffix, n = _runtime.load("clip"), SUFFIX[grads[0].dtype.name], len(grads)
    module.launch(f"grad_sumsq_{suffix}", items, THREADS, (table, parts, n, chunk))
    module.launch(
        f"grad_clip_{suffix}", items, THREADS, (table, parts, total, n, chunk, max_norm, eps)
    )
    return total
