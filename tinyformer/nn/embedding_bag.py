"""EmbeddingBag: the sum, mean or max of each bag of embedding rows, as `torch.nn.EmbeddingBag`
(the text classifier of PyTorch's tutorials averages a sentence's word vectors with it).

Bags come as a 2-D index array (B, N), B bags of N, or as a flat index array with `offsets`
(B,), where bag i holds input[offsets[i]:offsets[i + 1]] and the last runs to the end (with
include_last_offset=True offsets has B + 1 entries, the last one the input's length).

Built from ops that have their own backward: the rows are looked up with `embedding`; sum and
mean multiply them by a (B, N) matrix of each element's weight in its bag (1, its
per_sample_weight, or 1 / the bag's size), max gathers each bag's rows into (B, L, D) and takes
the maximum over the L axis. Rows at padding_idx count in no bag; an empty bag gives zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend
from tinyformer.nn import init
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = ["EmbeddingBag"]

MODES = ("sum", "mean", "max")


class EmbeddingBag(Module):
    """Embedding followed by a reduction over each bag, without the (B, N, D) intermediate that
    an Embedding and a mean would keep for sum and mean."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        mode: str = "mean",
        *,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        for name, value in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"EmbeddingBag: {name} must be a whole number >= 1, got {value!r}")
        if mode not in MODES:
            raise ValueError(f"EmbeddingBag: mode must be one of {MODES}, got {mode!r}")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"EmbeddingBag: padding_idx {padding_idx} is outside the table of "
                    f"{num_embeddings} rows"
                )
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, mode
        self.include_last_offset, self.padding_idx = include_last_offset, padding_idx
        self.weight = init.normal_(Parameter(np.zeros((num_embeddings, embedding_dim), dtype)))
        if padding_idx is not None:
            self.weight.data[padding_idx] = 0

    @classmethod
    def from_pretrained(
        cls, embeddings: Any, freeze: bool = True, mode: str = "mean", **kwargs: Any
    ) -> EmbeddingBag:
        """A bag layer over the table `embeddings` (V, D), frozen unless freeze=False."""
        table = embeddings.data if isinstance(embeddings, Tensor) else np.asarray(embeddings)
        if table.ndim != 2 or table.dtype.kind != "f":
            raise ValueError(
                "EmbeddingBag.from_pretrained: embeddings must be a 2-D float table (V, D), got "
                f"shape {table.shape} of {table.dtype}"
            )
        layer = cls(*table.shape, mode=mode, dtype=table.dtype, **kwargs)
        layer.weight = Parameter(table, requires_grad=not freeze)
        return layer

    def forward(
        self,
        input: Any,
        offsets: Any = None,
        per_sample_weights: Any = None,  # noqa: A002
    ) -> Tensor:
        """input (B, N), or (N,) with offsets (B,) -> (B, embedding_dim)."""
        idx, starts = self._bags(input, offsets)
        n, n_bags = idx.size, starts.size - 1
        bag = np.repeat(np.arange(n_bags), np.diff(starts))  # bag of each element
        counted = np.ones(n, bool) if self.padding_idx is None else idx != self.padding_idx
        rows = F.embedding(idx, self.weight)  # (N, D)
        if self.mode == "max":
            if per_sample_weights is not None:
                raise ValueError("EmbeddingBag: per_sample_weights needs mode='sum'")
            return self._max(rows, bag[counted], np.flatnonzero(counted), n_bags)
        share = counted.astype(self.weight.dtype)
        if self.mode == "mean":
            sizes = np.bincount(bag[counted], minlength=n_bags)
            share /= np.maximum(sizes, 1)[bag]
        spread = np.zeros((n_bags, n), self.weight.dtype)
        spread[bag, np.arange(n)] = share  # (B, N): element j's weight in its bag
        spread = Tensor(backend.to_device(spread, self.weight.device))
        if per_sample_weights is not None:
            if self.mode != "sum":
                raise ValueError("EmbeddingBag: per_sample_weights needs mode='sum'")
            w = per_sample_weights
            w = (
                w
                if isinstance(w, Tensor)
                else Tensor(backend.to_device(np.asarray(w), rows.device))
            )
            if w.shape != tuple(np.shape(input)):
                raise ValueError(
                    f"EmbeddingBag: per_sample_weights of shape {w.shape} must have the "
                    f"input's shape {tuple(np.shape(input))}"
                )
            spread = spread * w.reshape(1, n)
        return spread @ rows  # (B, D)

    def _bags(self, input: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray]:  # noqa: A002
        """The flat indices (N,) and the bags' bounds (B + 1,), checked, on the host."""
        idx = np.asarray(backend.to_host(input.data if isinstance(input, Tensor) else input))
        if idx.dtype.kind not in "iu":
            raise ValueError(f"EmbeddingBag: input must hold integers, got {idx.dtype}")
        if idx.ndim == 2:
            if offsets is not None:
                raise ValueError("EmbeddingBag: offsets must be None for a 2-D input (B, N)")
            n_bags, size = idx.shape
            return idx.reshape(-1), np.arange(n_bags + 1) * size
        if idx.ndim != 1 or offsets is None:
            raise ValueError(
                "EmbeddingBag: input must be (B, N), or (N,) with offsets (B,); got shape "
                f"{idx.shape}" + (" without offsets" if idx.ndim == 1 else "")
            )
        off = offsets.data if isinstance(offsets, Tensor) else offsets
        off = np.asarray(backend.to_host(off))
        least = 2 if self.include_last_offset else 1
        if off.ndim != 1 or off.dtype.kind not in "iu" or off.size < least:
            raise ValueError(
                f"EmbeddingBag: offsets must be a 1-D integer array of at least {least} "
                f"entries, got shape {off.shape} of {off.dtype}"
            )
        # With include_last_offset the last entry closes the last bag; PyTorch's CPU kernels
        # run that bag to the end of the input whatever the entry says, and so does this.
        starts = np.append(off[:-1] if self.include_last_offset else off, idx.size)
        if starts[0] != 0 or np.any(np.diff(starts) < 0) or starts[-1] > idx.size:
            raise ValueError(
                "EmbeddingBag: offsets must start at 0 and not decrease, within the input's "
                f"{idx.size} indices; got {off.tolist()}"
            )
        return idx, starts

    def _max(self, rows: Tensor, bag: np.ndarray, kept: np.ndarray, n_bags: int) -> Tensor:
        """Each bag's elementwise maximum: its rows gathered into (B, L, D), -inf beyond it."""
        sizes = np.bincount(bag, minlength=n_bags)
        width = max(int(sizes.max(initial=0)), 1)
        slot = np.arange(bag.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        take = np.zeros((n_bags, width), np.int64)
        take[bag, slot] = kept
        empty = np.ones((n_bags, width), bool)
        empty[bag, slot] = False
        dev = rows.device
        gathered = rows[backend.to_device(take, dev)]  # (B, L, D)
        gathered = gathered.masked_fill(backend.to_device(empty[..., None], dev), float("-inf"))
        top = gathered.amax(axis=1)
        return top.masked_fill(backend.to_device((sizes == 0)[:, None], dev), 0.0)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
