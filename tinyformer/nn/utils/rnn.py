"""`torch.nn.utils.rnn`'s names for sequences of different lengths: `pad_sequence`,
`pack_padded_sequence`, `pack_sequence`, `pad_packed_sequence` and `PackedSequence`, so that
code written for PyTorch's packed sequences runs as written.

What differs: PyTorch's PackedSequence stores the real steps only, time-major, in one flat
`data`; ours keeps the padded batch and the lengths, which is what `nn.GRU`, `nn.LSTM` and
`nn.RNN` read (their `lengths=` argument), and builds `data`, `batch_sizes`, `sorted_indices`
and `unsorted_indices` as PyTorch's when they are asked for. The recurrent layers take a
PackedSequence wherever PyTorch's do and then return one; the states h_n (and c_n) are
each sequence's last real step, in the batch's own order, as PyTorch's.

Shapes: B batch, T longest length, * the features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend
from tinyformer.ops import stack, transpose, where
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = [
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
]


class PackedSequence:
    """A batch of sequences of different lengths: `padded` (B, T, *) and `lengths` (B,)."""

    def __init__(self, padded: Tensor, lengths: np.ndarray) -> None:
        self.padded, self.lengths = padded, lengths

    @property
    def sorted_indices(self) -> np.ndarray:
        """The batch order by decreasing length (stable), as PyTorch's."""
        return np.argsort(-self.lengths, kind="stable")

    @property
    def unsorted_indices(self) -> np.ndarray:
        return np.argsort(self.sorted_indices, kind="stable")

    @property
    def batch_sizes(self) -> np.ndarray:
        """How many sequences are still running at each step: (T,) int64."""
        steps = np.arange(int(self.lengths.max()))
        return (self.lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)

    @property
    def data(self) -> Tensor:
        """The real steps, time-major, longest sequence first within each step: (sum of
        lengths, *), as PyTorch's PackedSequence.data (a gather of the padded batch)."""
        order = self.sorted_indices
        rows, steps = [], []
        for t, size in enumerate(self.batch_sizes):
            rows.extend(order[:size])
            steps.extend([t] * int(size))
        return self.padded[np.array(rows), np.array(steps)]

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return PackedSequence(self.padded.to(*args, **kwargs), self.lengths)

    def __repr__(self) -> str:
        return (
            f"PackedSequence(padded of shape {self.padded.shape}, lengths={self.lengths.tolist()})"
        )


def _lengths(lengths: Any, b: int, t: int) -> np.ndarray:
    lengths = np.asarray(backend.to_host(array_of(lengths)))
    if lengths.shape != (b,) or lengths.dtype.kind not in "iu":
        raise ValueError(
            f"pack_padded_sequence: lengths must be {b} integers (one per sequence), got "
            f"{lengths.tolist()!r}"
        )
    if (lengths <= 0).any():
        raise RuntimeError("pack_padded_sequence: the length of every sequence must be > 0")
    if (lengths > t).any():
        raise ValueError(
            f"pack_padded_sequence: lengths {lengths.tolist()} exceed the padded length {t}"
        )
    return lengths.astype(np.int64)


def pack_padded_sequence(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    lengths: Any,
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Mark the padding of `input` ((T, B, *), or (B, T, *) with batch_first) as such; with
    `enforce_sorted`, lengths must decrease, as in PyTorch."""
    x = input if batch_first else transpose(input, 0, 1)  # (B, T, *)
    lengths = _lengths(lengths, x.shape[0], x.shape[1])
    if enforce_sorted and (np.diff(lengths) > 0).any():
        raise RuntimeError(
            "pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
            "`enforce_sorted` is True. You can pass `enforce_sorted=False` to pack_padded_sequence "
            "and/or pack_sequence to sidestep this requirement if you do not need ONNX "
            "exportability."
        )
    return PackedSequence(x[:, : int(lengths.max())], lengths)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """The padded batch ((T, B, *), or (B, T, *) with batch_first) and the lengths (B,)."""
    x, lengths = sequence.padded, sequence.lengths
    t = int(lengths.max())
    if total_length is not None:
        if total_length < t:
            raise ValueError(
                f"Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being {t}"
            )
        t = total_length
    x = x[:, : min(t, x.shape[1])]
    if t > x.shape[1]:  # pad the time axis (axis 1) at its end
        x = F.pad(x, (0, 0) * (x.ndim - 2) + (0, t - x.shape[1]), value=padding_value)
    if padding_value != 0.0:
        real = np.arange(t)[None, :] < lengths[:, None]  # (B, T)
        real = real.reshape(real.shape + (1,) * (x.ndim - 2))
        real = backend.to_device(real, backend.device_of(x.data))
        x = where(real, x, padding_value)
    return (x if batch_first else transpose(x, 0, 1)), Tensor(lengths.copy())


def pad_sequence(
    sequences: Sequence[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences (T_i, *) of different lengths into (T, B, *) (or (B, T, *)), padded
    with `padding_value` on the right (or the left) to the longest."""
    if padding_side not in ("right", "left"):
        raise ValueError(
            f"pad_sequence: padding_side must be 'right' or 'left', got {padding_side!r}"
        )
    if not sequences:
        raise RuntimeError("pad_sequence: received an empty list of sequences")
    t = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        gap = t - s.shape[0]
        tail = (0, 0) * (s.ndim - 1)
        pads = tail + ((0, gap) if padding_side == "right" else (gap, 0))
        padded.append(F.pad(s, pads, value=padding_value) if gap else s)
    return stack(padded, axis=0 if batch_first else 1)


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """`pack_padded_sequence(pad_sequence(sequences), lengths)`."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
