"""Masked-language-model data, as BERT makes it (Devlin et al., 2019, section 3.1 and appendix
A.1; Google's `create_pretraining_data.py`).

For each sequence, 15% of the positions that hold real tokens (not [CLS], [SEP] or padding) are
chosen (rounded, at least one). Of the chosen positions:

- 80% get [MASK],
- 10% get a token drawn uniformly from the whole vocabulary,
- 10% keep their token.

The model must predict the original token at every chosen position, and only there: the labels
hold the original id at chosen positions and `ignore_index` everywhere else, so the
cross-entropy counts nothing else. The random and unchanged 10%s mean the model cannot learn
that "a token I must predict always looks like [MASK]": it has to keep a good representation
of every token, because any of them might be a test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["mask_tokens", "pad_batch"]


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Token rows of different lengths -> ids (B, T) padded with `pad_id`, and attention mask
    (B, T), 1 at real tokens."""
    width = max(map(len, rows))
    ids = np.full((len(rows), width), pad_id, np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    mask = (np.arange(width) < np.array([len(r) for r in rows])[:, None]).astype(np.int64)
    return ids, mask


def mask_tokens(
    ids: np.ndarray,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Iterable[int],
    rng: np.random.Generator,
    mlm_probability: float = 0.15,
    ignore_index: int = -100,
) -> tuple[np.ndarray, np.ndarray]:
    """BERT's masking of a batch ids (B, T) -> (inputs (B, T), labels (B, T)); `ids` is not
    changed. Padding and the other `special_ids` are never chosen."""
    ids = np.asarray(ids)
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"mask_tokens: ids must be (B, T) integers, got {ids.dtype} {ids.shape}")
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mask_tokens: mlm_probability must be in (0, 1), got {mlm_probability}")
    candidate = ~np.isin(ids, np.fromiter(special_ids, np.int64))  # (B, T)
    n_candidates = candidate.sum(axis=1)  # (B,)
    n_chosen = np.where(
        n_candidates > 0, np.maximum(1, np.rint(mlm_probability * n_candidates)), 0
    ).astype(np.int64)
    # choose n_chosen[b] of row b's candidates uniformly: rank them by a random key
    keys = np.where(candidate, rng.random(ids.shape), 2.0)  # non-candidates rank last
    rank = np.argsort(np.argsort(keys, axis=1), axis=1)  # rank of each position in its row
    chosen = rank < n_chosen[:, None]  # (B, T)

    labels = np.where(chosen, ids, ignore_index).astype(np.int64)
    action = rng.random(ids.shape)  # < 0.8: [MASK]; < 0.9: random token; else unchanged
    inputs = ids.astype(np.int64, copy=True)
    inputs[chosen & (action < 0.8)] = mask_id
    random_slots = chosen & (action >= 0.8) & (action < 0.9)
    inputs[random_slots] = rng.integers(0, vocab_size, size=int(random_slots.sum()))
    return inputs, labels
