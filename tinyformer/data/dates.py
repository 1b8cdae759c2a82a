"""A generated translation task: dates as people write them -> ISO 8601.

    "tuesday, march 5, 1997"  -> "1997-03-05"
    "5th of mar. 1997"        -> "1997-03-05"
    "05.03.1997"              -> "1997-03-05"

Translating needs attention and alignment: the output starts with the year, which most inputs
write last, so each output character must find its source characters wherever the format put
them (the cross-attention plot shows this re-ordering). Numeric formats are day-first
throughout, so every input has exactly one answer. Weekdays are correct for their date and
carry no information the model needs: it has to learn to ignore them.

Tokens are characters: one vocabulary for the sources, one for the targets ("0"-"9" and
"-"), both starting with [PAD], [BOS], [EOS] (ids 0, 1, 2).
"""

from __future__ import annotations

import datetime as dt
import string

import numpy as np

__all__ = ["FORMATS", "CharVocab", "DateTask", "render_date"]

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]  # fmt: skip
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


FORMATS = {  # name -> how to write a date
    "long": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "long_dmy": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",
    "short": lambda d: f"{MONTHS[d.month - 1][:3]} {d.day} {d.year}",
    "short_dot": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]}. {d.year}",
    "weekday": lambda d: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {d.day}, {d.year}",
    "ordinal": lambda d: f"the {_ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",
    "ordinal_short": lambda d: f"{_ordinal(d.day)} of {MONTHS[d.month - 1][:3]}. {d.year}",
    "dotted": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "slashed": lambda d: f"{d.day}/{d.month}/{d.year}",
    "compact": lambda d: f"{d.day:02d}{MONTHS[d.month - 1][:3]}{d.year}",
}


def render_date(date: dt.date, fmt: str) -> str:
    return FORMATS[fmt](date)


class CharVocab:
    """Characters <-> ids, after the three specials."""

    SPECIALS = ("[PAD]", "[BOS]", "[EOS]")

    def __init__(self, chars: str) -> None:
        self.itos = [*self.SPECIALS, *chars]
        self.stoi = {ch: i for i, ch in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as err:
            raise ValueError(f"CharVocab: character {err.args[0]!r} is not in the vocabulary "
                             f"{''.join(self.itos[3:])!r}") from None  # fmt: skip

    def decode(self, ids: np.ndarray) -> str:
        """Ids -> text, stopping at the first [EOS] or [PAD]."""
        out = []
        for i in np.asarray(ids).ravel():
            if i in (0, 2):
                break
            out.append(self.itos[i] if i >= 3 else "")
        return "".join(out)


class DateTask:
    """Train and test dates, disjoint by calendar day: every test date is one the model never
    saw in any format. Batches draw a date and a format uniformly."""

    SOURCE = CharVocab(string.ascii_lowercase + string.digits + " ,./")
    TARGET = CharVocab(string.digits + "-")
    MAX_SOURCE, MAX_TARGET = 32, 12  # the longest rendering is 29 characters; ISO is 10 + EOS
    # the dates of the default years, 1900-2099: a held-out set must leave some to train on
    DATES = dt.date(2099, 12, 31).toordinal() - dt.date(1900, 1, 1).toordinal() + 1

    def __init__(self, seed: int = 0, test_dates: int = 1000, first_year: int = 1900,
                 last_year: int = 2099) -> None:  # fmt: skip
        start = dt.date(first_year, 1, 1).toordinal()
        days = np.arange(start, dt.date(last_year, 12, 31).toordinal() + 1)
        order = np.random.default_rng(seed).permutation(len(days))
        self.test_days, self.train_days = days[order[:test_dates]], days[order[test_dates:]]
        self.formats = sorted(FORMATS)

    def examples(
        self, days: np.ndarray, formats: list[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], list[str]]:
        """src (B, S), tgt_in (B, T), tgt_out (B, T) padded id arrays, and the source and
        target strings, for dates (ordinals) written in the given formats."""
        dates = [dt.date.fromordinal(int(d)) for d in days]
        sources = [render_date(d, f) for d, f in zip(dates, formats, strict=True)]
        targets = [d.isoformat() for d in dates]
        src = np.zeros((len(dates), max(map(len, sources))), np.int64)
        tgt = np.zeros((len(dates), self.MAX_TARGET), np.int64)  # [BOS] y [EOS], padded
        for i, (s, t) in enumerate(zip(sources, targets, strict=True)):
            src[i, : len(s)] = self.SOURCE.encode(s)
            tgt[i, : len(t) + 2] = [1, *self.TARGET.encode(t), 2]
        return src, tgt[:, :-1], tgt[:, 1:], sources, targets

    def batch(self, size: int, rng: np.random.Generator) -> tuple:
        days = self.train_days[rng.integers(len(self.train_days), size=size)]
        formats = [self.formats[i] for i in rng.integers(len(self.formats), size=size)]
        return self.examples(days, formats)[:3]

    def test_set(self) -> tuple:
        """Each test date in one format, round robin: every format is tested."""
        formats = [self.formats[i % len(self.formats)] for i in range(len(self.test_days))]
        return self.examples(self.test_days, formats)
