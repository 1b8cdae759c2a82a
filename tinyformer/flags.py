"""What a numeric command-line flag accepts (`Range`, with the ranges the commands share:
`COUNT`, `FRACTION`, ...), an argparse `type=` that holds a flag to one (`ranged`), and the
`--device` flag. A leaf (the standard library only), so that the command line of the spine and
of the wings (`tinyformer.cli`, `tinyformer.train.args`, the launcher) reads its flags from one
place without loading the trainer."""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "BELOW_ONE", "COUNT", "EXAMPLES", "FRACTION", "NONNEGATIVE", "POSITIVE",
    "PROPER_FRACTION", "Range", "add_device_flag", "ranged",
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric flag accepts: from `low` (excluded if `open_low`) to `high`
    (excluded if `open_high`); None: no bound."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def __contains__(self, value: float) -> bool:
        # NaN fails every comparison, so it would pass them all (an int is always finite, and
        # one too large for a float would overflow math.isfinite)
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            return False
        return self.high is None or (value < self.high if self.open_high else value <= self.high)

    def __str__(self) -> str:
        low, high = _number(self.low), _number(self.high)
        if self.low is None and self.high is None:
            return "a finite number"
        if self.low is None:
            return f"{'below' if self.open_high else 'at most'} {high}"
        if self.high is None:
            return f"{'above' if self.open_low else 'at least'} {low}"
        left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
        return f"in {left}{low}, {high}{right}"


def _number(x: float | None) -> str:
    """1000000 as 1000000 (not 1e+06, which reads as a float), 0.5 as 0.5."""
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


COUNT = Range(1)  # sizes, steps, intervals: at least 1
NONNEGATIVE = Range(0)  # 0 allowed (often "off")
POSITIVE = Range(0, open_low=True)  # learning rates
FRACTION = Range(0, 1)  # [0, 1]
PROPER_FRACTION = Range(0, 1, open_low=True, open_high=True)  # (0, 1): a split with both sides
BELOW_ONE = Range(0, 1, open_high=True)  # [0, 1): dropout probabilities, Adam's betas
# Counts of examples generated before the first step, all held in memory: a sane ceiling, so
# that a slip of the keyboard (a few zeros too many) is refused at once instead of building
# data for minutes, beyond the reach of Ctrl-C.
EXAMPLES = Range(1, 1_000_000)


def ranged(kind: type, valid: Range) -> Callable[[str], Any]:
    """An argparse `type=` for flags that are not dataclass fields: `kind(text)`, or argparse's
    one-line error naming the flag (exit status 2) when that fails or falls outside `valid`
    (NaN and infinities are outside every range). The dataclass flags are checked by
    `check_ranges` when the settings are made, the first thing a command does."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value not in valid:
            raise argparse.ArgumentTypeError(f"must be {valid}, got {value}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def add_device_flag(parser: argparse.ArgumentParser) -> None:
    """`--device` for a command whose flags are not a dataclass's (`demo`, `eval`, `sample`,
    ...); the training configs have a `device` field of their own."""
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda (an NVIDIA GPU, through CuPy) (default: cpu)"
    )
