"""A generated parallel corpus: numbers 0-999 written in two made-up languages.

The two languages share no letters (A spells with a-m, B with n-z), so a byte-level BPE
vocabulary trained on both has no token in common between them except the comma; the model
cannot line the languages up by spelling. They also disagree on word order:

- A writes big-endian, as English does: 247 -> "cel cem dafa kal" (2 hundred, 40, 7).
- B writes little-endian, with the hundreds word after its digit: 247 -> "wor sovo ny ruz"
  (7, 40, 2 hundred).

A "sentence" is a count of consecutive numbers separated by commas, "n, n+1, n+2": text with
structure for a masked LM to learn (which word may follow which, what comes next), in each
language on its own. The parallel corpus pairs a sentence with its translation.

The downstream task is an NLI-style relation between two numbers: is the first LESS than,
the SAME as, or GREATER than the second (labels 0, 1, 2)?
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "LABELS", "LANGUAGES", "MAX_NUMBER", "compare_pairs", "count_sentence", "parse_number",
    "write_number",
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
    """The words for `n` (0-999) in `language` ("a" or "b")."""
    _check(language, n)
    if n == 0:
        return _ZERO[language]
    h, t, u = n // 100, n // 10 % 10, n % 10
    units, tens, hundred = _UNITS[language], _TENS[language], _HUNDRED[language]
    if language == "a":  # big-endian: "2 hundred 40 7"
        words = [units[h], hundred if h else "", tens[t], units[u]]
    else:  # little-endian: "7 40 2 hundred"
        words = [units[u], tens[t], units[h], hundred if h else ""]
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
    if write_number(n, language) != " ".join(words):  # words out of their language's order
        raise ValueError(f"parse_number: {text!r} is not a number written in {language}")
    return n


def count_sentence(start: int, length: int, language: str) -> str:
    """ "start, start+1, ...": `length` consecutive numbers in words, comma-separated."""
    if length < 1 or start + length - 1 > MAX_NUMBER:
        raise ValueError(f"count_sentence: {length} numbers from {start} pass {MAX_NUMBER}")
    return ", ".join(write_number(start + i, language) for i in range(length))


def compare_pairs(size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """`size` number pairs (size, 2) and their relation labels (size,): 0 if the first is less
    than the second, 1 if they are the same, 2 if it is greater; the three equally often.
    Unequal pairs are near each other half of the time (a gap below 30), so that reading the
    hundreds word alone is not enough."""
    labels = rng.integers(0, 3, size)
    gap = np.where(rng.random(size) < 0.5, rng.integers(1, 30, size),
                   rng.integers(1, MAX_NUMBER + 1, size))  # fmt: skip
    low = rng.integers(0, MAX_NUMBER + 1 - gap)  # low + gap stays in 0-999
    high = low + gap
    x = np.where(labels == 2, high, low)
    y = np.where(labels == 0, high, np.where(labels == 1, low, low))
    return np.stack([x, y], axis=1), labels.astype(np.int64)
