"""A generated parallel corpus: numbers 0-999 written in two made-up languages.

The two languages share no letters (A spells with a-m, B with n-z), so a byte-level BPE
vocabulary trained on both has no token in common between them except the comma; the model
cannot line the languages up by spelling. They share their grammar: both write big-endian, as
English does, so a number has the same shape in both and only the words differ:

- A: 247 -> "cel cem dafa kal" (2 hundred 40 7);
- B: 247 -> "ny ruz sovo wor" (2 hundred 40 7).

A "sentence" is a list of numbers separated by commas, "n1, n2, n3". Drawn at random, its
numbers say nothing about each other: one language alone teaches a masked LM its grammar
(which word may follow which), but nothing that tells B's "wor" is A's "kal", because every
digit word is as likely as any other. Only a sentence next to its translation says that.

The downstream task is an NLI-style relation between two numbers: is the first LESS than,
the SAME as, or GREATER than the second (labels 0, 1, 2)?
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = [
    "LABELS", "LANGUAGES", "MAX_NUMBER", "compare_pairs", "parse_number", "write_number",
    "write_numbers",
]  # fmt: skip

MAX_NUMBER = 999
LANGUAGES = ("a", "b")
LABELS = ("less", "same", "greater")

# index d: the word for digit d (units, and the hundreds digit), and for d tens
_UNITS = {
    "a": ("", "bam", "cel", "dif", "gak", "heb", "ilm", "kal", "lem", "mid"),
    "b": ("", "nup", "ny", "rot", "sux", "tov", "vun", "wor", "xyp", "zu"),
}
_TENS = {
    "a": ("", "bada", "ceda", "difa", "dafa", "hefa", "ilfa", "kafa", "lefa", "mifa"),
    "b": ("", "nopo", "ropo", "sopo", "sovo", "topo", "vono", "wopo", "xopo", "zopo"),
}
_HUNDRED = {"a": "cem", "b": "ruz"}
_ZERO = {"a": "hil", "b": "oz"}


def _check(language: str, n: int) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    if not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"number must be in [0, {MAX_NUMBER}], got {n}")


def write_number(n: int, language: str) -> str:
    """The words for `n` (0-999) in `language` ("a" or "b"), big-endian: "2 hundred 40 7"."""
    _check(language, n)
    if n == 0:
        return _ZERO[language]
    h, t, u = n // 100, n // 10 % 10, n % 10
    units, tens, hundred = _UNITS[language], _TENS[language], _HUNDRED[language]
    words = [units[h], hundred if h else "", tens[t], units[u]]
    return " ".join(w for w in words if w)


def parse_number(text: str, language: str) -> int:
    """The inverse of `write_number`; ValueError for words that are not a number there."""
    _check(language, 0)
    words = text.split()
    if words == [_ZERO[language]]:
        return 0
    units, tens, hundred = _UNITS[language], _TENS[language], _HUNDRED[language]
    n, last_unit = 0, None
    for word in words:
        if word == hundred and last_unit is not None:
            n += 100 * last_unit - last_unit  # the unit just read was the hundreds digit
            last_unit = None
        elif word in tens[1:]:
            n += 10 * tens.index(word)
        elif word in units[1:]:
            last_unit = units.index(word)
            n += last_unit
        else:
            raise ValueError(f"parse_number: {word!r} in {text!r} is not a number in {language}")
    if write_number(n, language) != " ".join(words):  # words out of order
        raise ValueError(f"parse_number: {text!r} is not a number written in {language}")
    return n


def write_numbers(numbers: Iterable[int], language: str) -> str:
    """A sentence: the numbers in words, comma-separated ("n1, n2, n3")."""
    return ", ".join(write_number(int(n), language) for n in numbers)


def compare_pairs(
    size: int, rng: np.random.Generator, near: float = 0.25
) -> tuple[np.ndarray, np.ndarray]:
    """`size` number pairs (size, 2) and their relation labels (size,): 0 if the first is less
    than the second, 1 if they are the same, 2 if it is greater; the three equally often.
    A fraction `near` of the unequal pairs differ by less than 30, so that reading the
    hundreds word alone is not enough."""
    if not 0.0 <= near <= 1.0:
        raise ValueError(f"compare_pairs: near must be in [0, 1], got {near}")
    labels = rng.integers(0, 3, size)
    gap = np.where(rng.random(size) < near, rng.integers(1, 30, size),
                   rng.integers(1, MAX_NUMBER + 1, size))  # fmt: skip
    low = rng.integers(0, MAX_NUMBER + 1 - gap)  # low + gap stays in 0-999
    high = low + gap
    x = np.where(labels == 2, high, low)
    y = np.where(labels == 0, high, low)
    return np.stack([x, y], axis=1), labels.astype(np.int64)
