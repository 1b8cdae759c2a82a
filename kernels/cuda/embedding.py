"""CUDA kernels for the embedding backward: a stable sort of the indices, then a deterministic
segmented sum of gy's rows in two passes (plan in embedding.cu)."""

from __future__ import annotations

from typing import Any

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, entry, row_threads
from tinyformer.registry import kernel

# Sorted positions per block of the first pass (at most EMB_MAX_CHUNK in embedding.cu): short
# enough that a block's serial walk is quick, long enough that the pieces stay few.
CHUNK = 32
_INT32_KEYS = 2**31  # tables with fewer rows sort int32 keys: half the radix passes of int64


@kernel("embedding.backward", backend="cuda", dtypes=FLOATS)
def embedding_backward(gy: Any, indices: Any, num_embeddings: int, padding_idx: int | None) -> Any:
    xp = get_array_module(gy)
    gy = xp.ascontiguousarray(gy)
    rows, cols = gy.shape
    if rows == 0 or cols == 0:
        return xp.zeros((num_embeddings, cols), gy.dtype)
    idx = xp.ascontiguousarray(indices.reshape(-1), dtype=xp.int64)
    keys = idx.astype(xp.int32) if num_embeddings < _INT32_KEYS else idx
    order = xp.argsort(keys, kind="stable").astype(xp.int64, copy=False)  # equal keys keep order
    chunks = -(-rows // CHUNK)
    gw = xp.empty((num_embeddings, cols), gy.dtype)  # every element written by one pass
    pieces = xp.empty((chunks, 2, cols), gy.dtype)
    span = xp.zeros(2 * num_embeddings, xp.int64)  # [start, end) of each index's run
    padding = -1 if padding_idx is None else padding_idx  # -1 matches no index
    module, threads = _runtime.load("embedding"), row_threads(cols)
    module.launch(
        entry("embedding_backward_pieces", gy), chunks, threads,
        (gy, idx, order, gw, pieces, span, rows, cols, CHUNK, padding),
    )  # fmt: skip
    module.launch(
        entry("embedding_backward_merge", gy), num_embeddings, threads,
        (pieces, span, gw, cols, CHUNK, padding),
    )  # fmt: skip
    return gw
