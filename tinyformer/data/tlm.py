"""Batches for cross-lingual language modelling (XLM, Lample & Conneau 2019), as id arrays.

Every batch is four (B, T) arrays: token ids, positions, language ids, attention mask (1 at
real tokens). Two kinds of row:

- monolingual (MLM): [CLS] sentence [SEP], positions 0, 1, 2, ..., one language throughout;
- translation pair (TLM): [CLS] sentence [SEP] translation [SEP]. Positions restart at 0 where
  the translation starts, so a word and its translation can sit at the same position; the
  language ids change there too. Masking the pair (`tinyformer.data.mlm.mask_tokens`) hides
  words on both sides, and the model may read the other side to fill them in.
  `mask_first_sentence` masks the first sentence only, and more of it: every blank then has
  its answer, unmasked, in the translation.

Padding (on the right) gets id `pad_id`, position 0, the row's last language and mask 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer.data.mlm import pad_batch

__all__ = ["mask_first_sentence", "pack_monolingual", "pack_translation_pairs"]

Batch = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _pad(rows: list[list[int]], fill: int) -> np.ndarray:
    return pad_batch(rows, fill)[0]


def pack_monolingual(
    sentences: Sequence[Sequence[int]], langs: Sequence[int], *, cls_id: int, sep_id: int,
    pad_id: int,
) -> Batch:  # fmt: skip
    """Token-id sentences and each one's language -> (ids, positions, langs, mask) (B, T)."""
    if len(sentences) != len(langs) or not sentences:
        raise ValueError(f"pack_monolingual: {len(sentences)} sentences and {len(langs)} "
                         f"languages; need as many of each, at least one")  # fmt: skip
    rows = [[cls_id, *s, sep_id] for s in sentences]
    ids, mask = pad_batch(rows, pad_id)
    positions = _pad([list(range(len(r))) for r in rows], 0)
    lang_ids = _pad([[lang] * len(r) for r, lang in zip(rows, langs)], 0)
    lang_ids = np.where(mask == 1, lang_ids, np.asarray(langs)[:, None])
    return ids, positions, lang_ids, mask


def pack_translation_pairs(
    first: Sequence[Sequence[int]], second: Sequence[Sequence[int]],
    first_langs: Sequence[int], second_langs: Sequence[int], *, cls_id: int, sep_id: int,
    pad_id: int,
) -> Batch:  # fmt: skip
    """Sentence pairs (each sentence and its translation, in their languages) -> (ids,
    positions, langs, mask) (B, T), packed as [CLS] first [SEP] second [SEP]; positions restart
    at the second sentence."""
    n = len(first)
    if not n or not len(second) == len(first_langs) == len(second_langs) == n:
        raise ValueError(f"pack_translation_pairs: {len(first)} first and {len(second)} second "
                         f"sentences, {len(first_langs)} and {len(second_langs)} languages; "
                         f"need as many of each, at least one")  # fmt: skip
    heads = [[cls_id, *a, sep_id] for a in first]
    tails = [[*b, sep_id] for b in second]
    rows = [h + t for h, t in zip(heads, tails)]
    ids, mask = pad_batch(rows, pad_id)
    positions = _pad([list(range(len(h))) + list(range(len(t))) for h, t in zip(heads, tails)], 0)
    langs = _pad([[la] * len(h) + [lb] * len(t)
                  for h, t, la, lb in zip(heads, tails, first_langs, second_langs)], 0)  # fmt: skip
    langs = np.where(mask == 1, langs, np.asarray(second_langs)[:, None])
    return ids, positions, langs, mask


def mask_first_sentence(
    ids: np.ndarray, *, sep_id: int, mask_id: int, special_ids: Sequence[int],
    rng: np.random.Generator, mlm_probability: float = 0.5, ignore_index: int = -100,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Mask packed pairs ids (B, T) in the first sentence only (up to the first [SEP]): each of
    its tokens, other than `special_ids`, becomes [MASK] with probability `mlm_probability`,
    on its own; the translation stays whole -> (inputs, labels) (B, T), labels the original
    ids at the masked positions and `ignore_index` elsewhere.

    Unlike BERT's masking, no token is kept or swapped for a random one, and the count per row
    is not fixed: sometimes the whole first sentence is hidden and must be rebuilt from the
    translation alone. With BERT's masking (an exact share, 80/10/10) our models learned to
    fill the blanks perfectly, but their languages did not line up (the alignment probe of
    `tinyformer.train.xlm` stayed near chance); with this masking they do."""
    if not 0.0 < mlm_probability <= 1.0:
        raise ValueError(f"mask_first_sentence: mlm_probability must be in (0, 1], got "
                         f"{mlm_probability}")  # fmt: skip
    ids = np.asarray(ids)
    first = np.cumsum(ids == sep_id, axis=1) == 0  # (B, T): [CLS] and the first sentence
    chosen = first & ~np.isin(ids, np.asarray(list(special_ids))) & (
        rng.random(ids.shape) < mlm_probability
    )  # fmt: skip
    return np.where(chosen, mask_id, ids), np.where(chosen, ids, ignore_index)
