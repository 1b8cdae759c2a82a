"""Tokenizers: characters, and byte-level byte-pair encoding (BPE) trained from scratch.

Byte-level BPE (GPT-2's scheme, Sennrich et al. 2016 for BPE itself): text -> UTF-8 bytes, so
the 256 byte values are the first 256 tokens and any string can be encoded. Training repeats
"find the most frequent adjacent pair of tokens, make it a new token" until the vocabulary is
full. The text is first cut into chunks (words with their leading space, numbers, punctuation
runs, whitespace) and merges never cross a chunk boundary, so tokens do not glue a word to the
punctuation after it. Encoding applies the learned merges in the order they were learned.

Both tokenizers save to and load from plain JSON (`to_dict` / `from_dict`, `save` / `load`).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from tinyformer.fileio import save_json

__all__ = ["BPETokenizer", "CharTokenizer", "Tokenizer", "load_tokenizer", "tokenizer_from_dict"]

# Every character is whitespace, a digit, another word character, or neither: the pattern
# covers all four, so the chunks always concatenate back to the text.
CHUNK_PATTERN = r" ?[^\W\d]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+"


class Tokenizer:
    """Shared interface: `encode(str) -> list[int]`, `decode(ids) -> str`, `vocab_size`."""

    vocab_size: int

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Any) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _checked_ids(self, ids: Any) -> list[int]:
        """ids (any shape) as a flat list, each checked against the vocabulary for `decode`."""
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:  # a negative id would index from the end, silently
            raise ValueError(
                f"{type(self).__name__}.decode: token {bad[0]} is outside the vocabulary "
                f"(0..{self.vocab_size - 1})"
            )
        return ids

    def save(self, path: str | os.PathLike) -> None:
        """Write JSON atomically (a temporary file renamed into place)."""
        save_json(path, self.to_dict())


class CharTokenizer(Tokenizer):
    """One token per distinct character of the training text, in sorted order."""

    def __init__(self, chars: str | list[str]) -> None:
        self.chars = sorted(set(chars))
        if not self.chars:
            raise ValueError("CharTokenizer: no characters to build a vocabulary from")
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        return cls(text)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.index[c] for c in text]
        except KeyError as err:
            at = text.index(err.args[0])
            raise ValueError(
                f"CharTokenizer.encode: character {err.args[0]!r} at position {at} is not in the "
                f"vocabulary of {self.vocab_size} characters (it was not in the training text)"
            ) from None

    def decode(self, ids: Any) -> str:
        return "".join(self.chars[i] for i in self._checked_ids(ids))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "char", "chars": "".join(self.chars)}


def _merge(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """ids with every non-overlapping occurrence of `pair` (left to right) replaced by `new`."""
    out, i, n = [], 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _pairs(ids: list[int]) -> Counter:
    return Counter(zip(ids, ids[1:]))


class BPETokenizer(Tokenizer):
    """Byte-level BPE: tokens 0-255 are bytes, token 256 + i is the i-th learned merge."""

    def __init__(self, merges: list[tuple[int, int]], pattern: str = CHUNK_PATTERN) -> None:
        self.merges = [tuple(int(t) for t in m) for m in merges]
        self.pattern = pattern
        self._regex = re.compile(pattern)
        self.ranks = {pair: 256 + i for i, pair in enumerate(self.merges)}
        self.vocab = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            if not (a < len(self.vocab) and b < len(self.vocab)):
                raise ValueError(f"BPETokenizer: merge {(a, b)} refers to a later token")
            self.vocab.append(self.vocab[a] + self.vocab[b])
        self.vocab_size = len(self.vocab)
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(cls, text: str, vocab_size: int, pattern: str = CHUNK_PATTERN) -> BPETokenizer:
        """Learn `vocab_size - 256` merges from `text`.

        Counting is over distinct chunks weighted by how often they occur, and after each merge
        only the chunks that contain the merged pair are recounted (an index from pair to
        chunks), which keeps training on a 1 MB corpus to seconds. Ties between equally
        frequent pairs go to the smallest pair, so training is deterministic.
        """
        if vocab_size < 256:
            raise ValueError(f"BPETokenizer.train: vocab_size must be >= 256, got {vocab_size}")
        chunk_counts = Counter(re.findall(pattern, text))
        words = [list(chunk.encode("utf-8")) for chunk in chunk_counts]
        counts = list(chunk_counts.values())
        pair_counts: Counter = Counter()
        where: defaultdict[tuple[int, int], set[int]] = defaultdict(set)
        for w, ids in enumerate(words):
            for pair, c in _pairs(ids).items():
                pair_counts[pair] += c * counts[w]
                where[pair].add(w)
        merges: list[tuple[int, int]] = []
        while len(merges) < vocab_size - 256:
            best = max(
                pair_counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]), default=None
            )
            if best is None or best[1] < 1:
                break  # nothing left to merge: the text is fully merged into whole chunks
            pair, new = best[0], 256 + len(merges)
            merges.append(pair)
            for w in where.pop(pair, ()):
                old = words[w]
                for p, c in _pairs(old).items():
                    pair_counts[p] -= c * counts[w]
                    if pair_counts[p] <= 0:
                        del pair_counts[p]
                words[w] = _merge(old, pair, new)
                for p, c in _pairs(words[w]).items():
                    pair_counts[p] += c * counts[w]
                    where[p].add(w)
        return cls(merges, pattern)

    def _encode_chunk(self, chunk: str) -> list[int]:
        ids = self._cache.get(chunk)
        if ids is not None:
            return ids
        ids = list(chunk.encode("utf-8"))
        while len(ids) > 1:
            # the adjacent pair learned earliest; merges must replay in training order
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, 1 << 62))
            if pair not in self.ranks:
                break
            ids = _merge(ids, pair, self.ranks[pair])
        if len(self._cache) < 100_000:
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"BPETokenizer.encode: text is not encodable as UTF-8 ({err})"
            ) from None
        out: list[int] = []
        for chunk in self._regex.findall(text):
            out.extend(self._encode_chunk(chunk))
        return out

    def decode(self, ids: Any) -> str:
        """Bytes of every token joined, then UTF-8 decoded (a sampled sequence can end in the
        middle of a character: such bytes show as U+FFFD)."""
        return b"".join(self.vocab[i] for i in self._checked_ids(ids)).decode(
            "utf-8", errors="replace"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"type": "bpe", "merges": [list(m) for m in self.merges], "pattern": self.pattern}


def tokenizer_from_dict(data: dict[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from `to_dict()` output. Anything else (a damaged checkpoint or
    file) is a ValueError saying which entry is wrong."""

    def check(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"tokenizer: {what}")

    check(isinstance(data, dict), f"expected an object, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "char":
        check(isinstance(data.get("chars"), str), "'chars' must be a string")
        return CharTokenizer(data["chars"])
    if kind == "bpe":
        merges, pattern = data.get("merges"), data.get("pattern", CHUNK_PATTERN)
        pairs = isinstance(merges, (list, tuple)) and all(
            isinstance(m, (list, tuple)) and len(m) == 2 and all(map(_token_id, m)) for m in merges
        )
        check(pairs, "'merges' must be a list of pairs of token ids")
        check(isinstance(pattern, str), "'pattern' must be a string")
        try:
            re.compile(pattern)
        except re.error as err:
            raise ValueError(f"tokenizer: 'pattern' is not a regular expression ({err})") from None
        return BPETokenizer([tuple(m) for m in merges], pattern)
    if kind == "wordpiece":
        from tinyformer.data.wordpiece import WordPieceTokenizer

        vocab, lowercase = data.get("vocab"), data.get("lowercase", True)
        strings = isinstance(vocab, (list, tuple)) and all(isinstance(t, str) for t in vocab)
        check(strings, "'vocab' must be a list of strings")
        check(isinstance(lowercase, bool), "'lowercase' must be true or false")
        return WordPieceTokenizer(vocab, lowercase)
    raise ValueError(f"unknown tokenizer type {kind!r} (expected 'char', 'bpe' or 'wordpiece')")


def _token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    try:
        with open(path, encoding="utf-8") as f:
            return tokenizer_from_dict(json.load(f))
    except (ValueError, RecursionError) as err:  # not UTF-8, JSON or a tokenizer: say which file
        raise ValueError(f"{path}: {err}") from None
