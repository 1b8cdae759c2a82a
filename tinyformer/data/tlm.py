"""Batches for cross-lingual language modelling (XLM, Lample & Conneau 2019), as id arrays.

Every batch is four (B, T) arrays: token ids, positions, language ids, attention mask (1 at
real tokens). Two kinds of row:

- monolingual (MLM): [CLS] sentence [SEP], positions 0, 1, 2, ..., one language throughout;
- translation pair (TLM): [CLS] sentence [SEP] translation [SEP]. Positions restart at 0 where
  the translation starts, so a word and its translation can sit at the same position; the
  language ids change there too. Masking the pair (`tinyformer.data.mlm.mask_tokens`) hides
  words on both sides, and the model may read the other side to fill them in.
  `mask_first_sentence` masks the first sentence only, and more of it: every blank then has
  its answer, unmasked, in the translation. `switch_blanks` then writes some blanks in the
  other language: the translation's word at their place instead of [MASK].

Padding (on the right) gets id `pad_id`, position 0, the row's last language and mask 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer.data.mlm import pad_batch

__all__ = ["mask_first_sentence", "pack_monolingual", "pack_translation_pairs", "switch_blanks"]

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
    translation alone. With this masking, as with BERT's (an exact share, 80/10/10), our
    models learned to fill the blanks perfectly, but their languages lined up (the alignment
    probe of `tinyformer.train.xlm`) in one run of five; with some blanks code-switched
    (`switch_blanks`), in every run we tried."""
    if not 0.0 < mlm_probability <= 1.0:
        raise ValueError(f"mask_first_sentence: mlm_probability must be in (0, 1], got "
                         f"{mlm_probability}")  # fmt: skip
    ids = np.asarray(ids)
    first = np.cumsum(ids == sep_id, axis=1) == 0  # (B, T): [CLS] and the first sentence
    chosen = first & ~np.isin(ids, np.asarray(list(special_ids))) & (
        rng.random(ids.shape) < mlm_probability
    )  # fmt: skip
    return np.where(chosen, mask_id, ids), np.where(chosen, ids, ignore_index)


def switch_blanks(
    inputs: np.ndarray, labels: np.ndarray, *, sep_id: int, rng: np.random.Generator,
    probability: float, ignore_index: int = -100,
) -> np.ndarray:  # fmt: skip
    """Code-switch some blanks of `mask_first_sentence`'s packed pairs (B, T): each masked
    token becomes, with `probability`, the translation's token at its place (the k-th token of
    the first sentence <-> the k-th of the translation), in rows whose two sentences have as
    many tokens; labels are unchanged -> inputs (B, T).

    Why: a [MASK] can be filled by copying the word at the same position of the translation
    through attention, and the model then translates inside that copy, with no need for a
    word and its translation to share a vector. A blank that holds the other language's word
    must be read where it stands, in the first sentence's language and position, just as the
    word itself would be: the cheapest way is for the two words to look alike to the encoder.
    With a fifth of the blanks switched, our encoders' languages lined up at every seed we
    tried; with none, in one run of five."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"switch_blanks: probability must be in [0, 1], got {probability}")
    inputs = np.asarray(inputs)
    part = np.cumsum(inputs == sep_id, axis=1)  # (B, T): 0 up to the first [SEP], then 1, ...
    n1 = (part == 0).sum(1) - 1  # first sentence, without [CLS]
    n2 = ((part == 1) & (inputs != sep_id)).sum(1)  # the translation
    draw = rng.random(inputs.shape) < probability
    chosen = (labels != ignore_index) & (n1 == n2)[:, None] & draw
    rows, cols = np.nonzero(chosen)
    out = inputs.copy()
    # token k sits at column k of the row ([CLS] first) and at column n1 + 1 + k
    out[rows, cols] = inputs[rows, cols + n1[rows] + 1]
    return out
