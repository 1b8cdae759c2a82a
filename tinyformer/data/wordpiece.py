"""BERT's WordPiece tokenizer, written out: it reproduces `BertTokenizer` (uncased) from a
`vocab.txt`, one token per line, the line number being the id.

Two stages, as in Devlin et al. (2019) and Google's `tokenization.py`:

1. Basic tokenization: drop control characters and map whitespace to spaces; put spaces around
   CJK ideographs (they are written without spaces, so each becomes a word); NFC-normalise;
   split on whitespace; lowercase and strip accents (NFD, then drop combining marks: "Café" ->
   "cafe"); split every punctuation character off as its own word.
2. WordPiece: each word is cut greedily into the longest vocabulary entries, left to right;
   pieces after the first carry a "##" prefix ("unaffable" -> "un", "##aff", "##able"). A word
   with no full cover, or longer than 100 characters, becomes [UNK].

Special tokens written in the text ("[MASK]", "[SEP]", ...) are kept whole. `encode` adds
[CLS] ... [SEP] (and ... [SEP] for a second sentence), truncating the longer sentence first;
calling the tokenizer on a list pads to a batch with an attention mask, as Hugging Face does.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tinyformer.data.mlm import pad_batch
from tinyformer.data.tokenizers import Tokenizer

__all__ = ["SPECIAL_TOKENS", "WordPieceTokenizer", "basic_tokenize"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_WORD_CHARS = 100  # longer "words" are [UNK] (BERT's max_input_chars_per_word)

_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


@functools.lru_cache(maxsize=1 << 16)  # a text has few distinct characters: classify each once
def _is_punctuation(ch: str) -> bool:
    # ASCII symbols such as "$", "^" and "`" are not Unicode punctuation but BERT splits them too
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _strip_accents(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def _split_punctuation(word: str) -> list[str]:
    out: list[str] = []
    start_new = True
    for ch in word:
        if _is_punctuation(ch):
            out.append(ch)
            start_new = True
        else:
            if start_new:
                out.append("")
            out[-1] += ch
            start_new = False
    return out


@functools.lru_cache(maxsize=1 << 16)
def _cleaned(ch: str) -> str:
    """What stage 1 puts in place of one character: nothing for a control character, a space
    for whitespace, a CJK ideograph with a space on each side, else the character itself."""
    if ch == "\0" or ch == "\ufffd" or _is_control(ch):
        return ""
    if _is_whitespace(ch):
        return " "
    if _is_cjk(ch):
        return f" {ch} "
    return ch


def basic_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Stage 1: text -> words and punctuation marks (see the module docstring)."""
    words = []
    for word in unicodedata.normalize("NFC", "".join(map(_cleaned, text))).split():
        if lowercase:
            word = _strip_accents(word.lower())
        words.extend(_split_punctuation(word))
    return " ".join(words).split()


class WordPieceTokenizer(Tokenizer):
    """Text <-> ids with a WordPiece vocabulary (BERT uncased conventions by default)."""

    def __init__(self, vocab: Sequence[str], lowercase: bool = True) -> None:
        self.itos = list(vocab)
        self.vocab = {tok: i for i, tok in enumerate(self.itos)}
        if len(self.vocab) != len(self.itos):
            dup = [t for t, n in Counter(self.itos).items() if n > 1][:5]
            raise ValueError(f"WordPieceTokenizer: vocabulary has repeated entries, e.g. {dup}")
        missing = [t for t in SPECIAL_TOKENS if t not in self.vocab]
        if missing:
            raise ValueError(f"WordPieceTokenizer: vocabulary lacks the special tokens {missing}")
        self.lowercase = lowercase
        self.pad_id, self.unk_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.cls_id, self.sep_id = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.mask_id = self.vocab["[MASK]"]
        self.special_ids = frozenset(self.vocab[t] for t in SPECIAL_TOKENS)
        self._special_re = re.compile("(" + "|".join(map(re.escape, SPECIAL_TOKENS)) + ")")

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @classmethod
    def from_file(cls, path: str | os.PathLike, lowercase: bool = True) -> WordPieceTokenizer:
        """Read a BERT `vocab.txt` (one token per line). A file that is not UTF-8 or not a
        vocabulary is a ValueError naming it."""
        try:
            with open(path, encoding="utf-8") as f:
                return cls([line.rstrip("\n") for line in f], lowercase)
        except UnicodeDecodeError as err:
            raise ValueError(
                f"{path} is not UTF-8 text ({err}); a vocab.txt holds one UTF-8 token per line"
            ) from None
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    @classmethod
    def train(cls, text: str, vocab_size: int = 4000, lowercase: bool = True) -> WordPieceTokenizer:
        """A vocabulary for a corpus: the special tokens, every character (alone and as a "##"
        continuation, so any word can be spelled), then the most frequent words until
        `vocab_size`. Simpler than Google's likelihood-driven WordPiece training, and enough
        for a small corpus, where frequent words cover most of the text."""
        words = Counter(basic_tokenize(text, lowercase))
        chars = sorted({ch for word in words for ch in word})
        vocab = [*SPECIAL_TOKENS, *chars, *(f"##{ch}" for ch in chars)]
        if vocab_size < len(vocab):
            raise ValueError(
                f"WordPieceTokenizer.train: vocab_size {vocab_size} is below the {len(vocab)} "
                "special and character tokens this corpus needs"
            )
        seen = set(vocab)
        for word, _ in words.most_common():
            if len(vocab) >= vocab_size:
                break
            if word not in seen:
                vocab.append(word)
                seen.add(word)
        return cls(vocab, lowercase)

    def _wordpiece(self, word: str) -> list[str]:
        """Greedy longest-match-first: the longest vocabulary entry at each position."""
        if len(word) > MAX_WORD_CHARS:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
            else:
                return ["[UNK]"]  # no entry covers this position: the whole word is unknown
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Text -> WordPiece strings (special tokens in the text are kept whole)."""
        out = []
        for part in self._special_re.split(text):
            if part in SPECIAL_TOKENS:
                out.append(part)
            else:
                for word in basic_tokenize(part, self.lowercase):
                    out.extend(self._wordpiece(word))
        return out

    def encode(
        self,
        text: str,
        pair: str | None = None,
        max_length: int | None = None,
        add_special_tokens: bool = True,
    ) -> list[int]:
        """[CLS] text [SEP] (pair [SEP]) as ids, truncated to `max_length` by dropping tokens
        from the end of the longer sentence (BERT's "longest first")."""
        ids_a, ids_b = self._ids(text), self._ids(pair) if pair is not None else None
        if max_length is not None:
            specials = (2 + (ids_b is not None)) if add_special_tokens else 0
            budget = max_length - specials
            if budget < 0:
                raise ValueError(f"encode: max_length {max_length} leaves no room for tokens")
            while len(ids_a) + len(ids_b or ()) > budget:
                if ids_b is not None and len(ids_b) >= len(ids_a):
                    ids_b.pop()
                else:
                    ids_a.pop()
        if not add_special_tokens:
            return ids_a + (ids_b or [])
        out = [self.cls_id, *ids_a, self.sep_id]
        return out + [*ids_b, self.sep_id] if ids_b is not None else out

    def _ids(self, text: str) -> list[int]:
        return [self.vocab.get(t, self.unk_id) for t in self.tokenize(text)]

    def __call__(
        self,
        texts: str | Iterable[str],
        pairs: Iterable[str] | None = None,
        max_length: int | None = 512,
    ) -> dict[str, np.ndarray]:
        """A padded batch: input_ids, attention_mask (1 = real token) and token_type_ids
        (0 for the first sentence, 1 for the second), each (B, T) int64."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        pairs = [None] * len(texts) if pairs is None else list(pairs)
        if len(pairs) != len(texts):
            raise ValueError(f"tokenizer: {len(texts)} texts but {len(pairs)} pairs")
        rows = [self.encode(a, b, max_length) for a, b in zip(texts, pairs, strict=True)]
        ids, mask = pad_batch(rows, self.pad_id)
        types = np.zeros_like(ids)
        for i, row in enumerate(rows):  # segment 1: after the first [SEP], up to the padding
            types[i, row.index(self.sep_id) + 1 : len(row)] = 1
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        """Ids -> text: "##" pieces rejoin their word; punctuation is re-attached."""
        tokens = [self.itos[i] for i in self._checked_ids(ids)]
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in SPECIAL_TOKENS]
        text = " ".join(tokens).replace(" ##", "")
        return re.sub(r" ([.,!?;:)\]}'])|([(\[{]) ", r"\1\2", text)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "wordpiece", "vocab": self.itos, "lowercase": self.lowercase}

    def save_vocab(self, path: str | os.PathLike) -> None:
        """Write `vocab.txt`, one token per line (atomically)."""
        from tinyformer.fileio import save_text

        save_text(path, "".join(f"{t}\n" for t in self.itos))
