"""The data of `tinyformer train xlm`: the shared BPE vocabulary, the task's labelled pairs,
and the batches of its runs (masked monolingual sentences, masked translation pairs, number
pairs to classify)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyformer.data.mlm import mask_tokens
from tinyformer.data.numerals import MAX_NUMBER, compare_pairs, write_number, write_numbers
from tinyformer.data.tlm import (
    mask_first_sentence,
    pack_monolingual,
    pack_translation_pairs,
    switch_blanks,
)
from tinyformer.data.tokenizers import BPETokenizer
from tinyformer.train.xlm.config import TrainXLMConfig

__all__ = [
    "NumeralData", "monolingual_rows", "pair_batch", "prepare", "pretrain_batch",
    "translation_rows",
]  # fmt: skip


@dataclass
class NumeralData:
    """The shared vocabulary and the task's pairs. Special tokens follow the BPE tokens."""

    tokenizer: BPETokenizer
    train: tuple[np.ndarray, np.ndarray]  # pairs (N, 2) and labels (N,), fine-tuned in A
    test: tuple[np.ndarray, np.ndarray]  # held out, tested in A and in B
    unlabelled: np.ndarray  # pairs (M, 2) drawn as the task's, their labels unused
    _numbers: dict = dataclasses.field(default_factory=dict, repr=False)  # (n, lang) -> ids

    @property
    def pad_id(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def cls_id(self) -> int:
        return self.tokenizer.vocab_size + 1

    @property
    def sep_id(self) -> int:
        return self.tokenizer.vocab_size + 2

    @property
    def mask_id(self) -> int:
        return self.tokenizer.vocab_size + 3

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size + 4

    def encode(self, n: int, lang: int) -> list[int]:
        """One number's token ids; every word starts with a space, as it does in a sentence,
        so that a word is the same token wherever it stands."""
        key = (int(n), lang)
        if key not in self._numbers:
            self._numbers[key] = self.tokenizer.encode(" " + write_number(int(n), "ab"[lang]))
        return self._numbers[key]

    def sentence(self, numbers: Any, lang: int) -> list[int]:
        return self.tokenizer.encode(" " + write_numbers(numbers, "ab"[lang]))

    def special(self) -> dict[str, int]:
        return {"cls_id": self.cls_id, "sep_id": self.sep_id, "pad_id": self.pad_id}

    def special_ids(self) -> tuple[int, ...]:
        return (self.pad_id, self.cls_id, self.sep_id, self.mask_id)


def prepare(cfg: TrainXLMConfig) -> NumeralData:
    """The BPE vocabulary (trained on every number in both languages), the task's training
    and test pairs (no test pair is a training pair), and 256 pairs whose labels are never
    read."""
    text = "\n".join(" " + write_numbers(range(MAX_NUMBER + 1), lang) for lang in "ab")
    tokenizer = BPETokenizer.train(text, cfg.vocab_size)
    rng = np.random.default_rng([cfg.seed, 0])
    test = compare_pairs(cfg.test_pairs, rng, cfg.near)
    seen = {tuple(p) for p in test[0]}
    pairs, labels = compare_pairs(2 * cfg.train_pairs + cfg.test_pairs, rng, cfg.near)
    keep = np.flatnonzero([tuple(p) not in seen for p in pairs])[: cfg.train_pairs]
    unlabelled = compare_pairs(256, rng, cfg.near)[0]
    return NumeralData(tokenizer, (pairs[keep], labels[keep]), test, unlabelled)


def _stack(batches: list[tuple[np.ndarray, ...]], fills: tuple[int, ...]) -> tuple:
    """Row-stack batches of (B_i, T_i) arrays, padding each to the widest T with `fills`."""
    width = max(b[0].shape[1] for b in batches)
    return tuple(
        np.concatenate(
            [
                np.pad(b[k], ((0, 0), (0, width - b[k].shape[1])), constant_values=fill)
                for b in batches
            ]
        )  # fmt: skip
        for k, fill in enumerate(fills)
    )


def monolingual_rows(
    data: NumeralData, cfg: TrainXLMConfig, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """`size` sentences of random numbers in random languages, BERT-masked (15%) -> (inputs,
    positions, langs, mask, labels) (size, T)."""
    numbers = rng.integers(0, MAX_NUMBER + 1, (size, cfg.sentence_len))
    langs = rng.integers(0, 2, size)
    ids, positions, lang_ids, mask = pack_monolingual(
        [data.sentence(x, lang) for x, lang in zip(numbers, langs)], langs, **data.special()
    )  # fmt: skip
    inputs, labels = mask_tokens(ids, mask_id=data.mask_id, vocab_size=data.tokenizer.vocab_size,
                                 special_ids=data.special_ids(), rng=rng)  # fmt: skip
    return inputs, positions, lang_ids, mask, labels


def translation_rows(
    data: NumeralData, cfg: TrainXLMConfig, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """`size` translation pairs (each direction equally often), `cfg.tlm_mask` of the first
    sentence masked, `cfg.tlm_switch` of those blanks holding the translation's word instead
    of [MASK], the translation whole -> (inputs, positions, langs, mask, labels)."""
    numbers = rng.integers(0, MAX_NUMBER + 1, (size, cfg.sentence_len))
    first = rng.integers(0, 2, size)
    a = [data.sentence(x, lang) for x, lang in zip(numbers, first)]
    b = [data.sentence(x, 1 - lang) for x, lang in zip(numbers, first)]
    ids, positions, lang_ids, mask = pack_translation_pairs(
        a, b, first, 1 - first, **data.special()
    )
    inputs, labels = mask_first_sentence(
        ids, sep_id=data.sep_id, mask_id=data.mask_id, special_ids=data.special_ids(), rng=rng,
        mlm_probability=cfg.tlm_mask,
    )  # fmt: skip
    inputs = switch_blanks(inputs, labels, sep_id=data.sep_id, rng=rng,
                           probability=cfg.tlm_switch)  # fmt: skip
    return inputs, positions, lang_ids, mask, labels


def pretrain_batch(
    data: NumeralData, cfg: TrainXLMConfig, tlm: bool, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """A batch for MLM (`monolingual_rows` only) or MLM + TLM (half of it
    `translation_rows`) -> ((inputs, positions, langs, mask) (B, T), labels (B, T))."""
    n_pairs = cfg.batch_size // 2 if tlm else 0
    parts = [monolingual_rows(data, cfg, cfg.batch_size - n_pairs, rng)]
    if n_pairs:
        parts.append(translation_rows(data, cfg, n_pairs, rng))
    inputs, positions, lang_ids, mask, labels = _stack(parts, (data.pad_id, 0, 0, 0, -100))
    return (inputs, positions, lang_ids, mask), labels


def pair_batch(
    data: NumeralData, pairs: np.ndarray, lang: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Number pairs (N, 2) written in `lang`, packed as [CLS] x [SEP] y [SEP] with positions
    restarting at y, as TLM's pairs are: (ids, positions, langs, mask) (N, T)."""
    first = [data.encode(x, lang) for x in pairs[:, 0]]
    second = [data.encode(y, lang) for y in pairs[:, 1]]
    langs = [lang] * len(pairs)
    return pack_translation_pairs(first, second, langs, langs, **data.special())
