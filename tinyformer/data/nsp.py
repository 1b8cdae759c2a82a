"""Next-sentence prediction data, as BERT makes it (Devlin et al., 2019, section 3.1, "Task #2").

Each example is a pair of sentences (A, B) packed into one sequence,

    [CLS] A [SEP] B [SEP]      token_type_ids  0 ... 0 0  1 ... 1 1      (0 at padding too)

and the label says whether B is the sentence that follows A in the text (label 0, "IsNext")
or a sentence drawn at random from the corpus (label 1, "NotNext"), each half of the time.
The labels are Hugging Face's (`next_sentence_label`). A random B that happens to be A's true
next sentence (or A itself) is drawn again, so a NotNext label is never wrong.

The model reads the pair through the pooled [CLS] vector, so NSP is what trains BERT's pooler.
Later work (RoBERTa, Liu et al., 2019) found the task adds little to masked LM; it is here
because it is how the pooler and the segment embeddings were meant to be trained.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["IS_NEXT", "NOT_NEXT", "consecutive_pairs", "nsp_examples", "pack_pairs"]

IS_NEXT, NOT_NEXT = 0, 1


def consecutive_pairs(runs: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """Runs of consecutive sentences (`split_runs`) -> every (sentence, its next) pair."""
    return [(a, b) for run in runs for a, b in zip(run, run[1:])]


def nsp_examples(
    pairs: Sequence[tuple[str, str]], pool: Sequence[str], rng: np.random.Generator
) -> tuple[list[str], list[str], np.ndarray]:
    """For each (A, true next) pair: B is the true next (IS_NEXT) or, by a fair coin, a
    sentence of `pool` that is neither A nor A's true next (NOT_NEXT).
    -> (first sentences, second sentences, labels (N,) int64)."""
    if len(set(pool)) < 3:  # with 2 distinct sentences a random B can be impossible to draw
        raise ValueError(f"nsp_examples: the pool needs 3 distinct sentences, got {len(set(pool))}")
    labels = rng.integers(0, 2, size=len(pairs)).astype(np.int64)
    firsts, seconds = [], []
    for (a, b), label in zip(pairs, labels, strict=True):
        if label == NOT_NEXT:
            b_true, b = b, pool[rng.integers(len(pool))]
            while b in (a, b_true):  # redraw: a NotNext label must never be wrong
                b = pool[rng.integers(len(pool))]
        firsts.append(a)
        seconds.append(b)
    return firsts, seconds, labels


def pack_pairs(
    ids_a: Sequence[Sequence[int]],
    ids_b: Sequence[Sequence[int]],
    *,
    cls_id: int,
    sep_id: int,
    pad_id: int,
    max_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids of first and second sentences -> [CLS] A [SEP] B [SEP], padded:
    (input_ids, attention_mask, token_type_ids), each (N, T) int64 with T the longest row.
    A pair longer than `max_length` loses tokens from the end of its longer sentence, one at a
    time (BERT's "longest first"), as `WordPieceTokenizer.encode(a, b, max_length)` does."""
    if len(ids_a) != len(ids_b):
        raise ValueError(f"pack_pairs: {len(ids_a)} first sentences but {len(ids_b)} second")
    if max_length < 5:  # [CLS] [SEP] [SEP] and one token of each sentence
        raise ValueError(f"pack_pairs: max_length must be at least 5, got {max_length}")
    rows, firsts = [], []
    for a, b in zip(ids_a, ids_b, strict=True):
        a, b = list(a), list(b)
        while len(a) + len(b) > max_length - 3:
            (b if len(b) >= len(a) else a).pop()
        rows.append([cls_id, *a, sep_id, *b, sep_id])
        firsts.append(len(a) + 2)  # [CLS] A [SEP]: segment 0
    width = max(map(len, rows))
    lengths = np.array([len(r) for r in rows])[:, None]
    ids = np.full((len(rows), width), pad_id, np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    position = np.arange(width)
    mask = (position < lengths).astype(np.int64)
    types = ((position >= np.array(firsts)[:, None]) & (position < lengths)).astype(np.int64)
    return ids, mask, types
