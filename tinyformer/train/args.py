"""Command-line flags from a dataclass: each field becomes `--field-name`, typed and documented
by the field's default and its `help` metadata. No exec, no globals: the parsed flags build a
new dataclass instance. Also the checks of flags that are no dataclass's (`ranged`) and the
`--device` flag of the commands that run a model outside training (`add_device_flag`)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "BELOW_ONE", "COUNT", "EXAMPLES", "FRACTION", "NONNEGATIVE", "POSITIVE",
    "PROPER_FRACTION", "Range", "add_dataclass_flags", "add_device_flag", "check_ranges",
    "dataclass_from_args", "flag", "ranged",
]  # fmt: skip

T = TypeVar("T")


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


def flag(
    default: Any,
    help: str,  # noqa: A002
    choices: list[str] | None = None,
    valid: Range | None = None,
) -> Any:
    """A dataclass field that becomes a documented command-line flag; `valid`: its values'
    range, checked by `check_ranges` (flags passed on to a model configuration, an optimizer or
    a schedule are left to the checks there)."""
    metadata = {"help": help, "choices": choices, "valid": valid}
    return dataclasses.field(default=default, metadata=metadata)


def check_ranges(config: Any) -> None:
    """ValueError for the first field of the dataclass `config` outside its flag's range, or
    any number field that is NaN or infinite (with or without a range: the checks further on
    compare, and NaN passes every comparison), naming the flag, the range and the value, and
    any field outside its flag's choices. None means "the default", and is not checked. Also
    refuses flags that contradict each other (--resume with --overwrite; --data-dir with a
    dataset that is not read from one) and an empty --out-dir. Call it from the dataclass's
    __post_init__, so that the CLI and the Python API both check."""
    if getattr(config, "device", None) is not None:  # a GPU asked for and missing: say so now
        from tinyformer import backend

        backend.device(config.device)
    for field in dataclasses.fields(config):
        valid, value = field.metadata.get("valid"), getattr(config, field.name)
        name = "--" + field.name.replace("_", "-")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value}")
        if valid is not None and value is not None and value not in valid:
            raise ValueError(f"{name} must be {valid}, got {value}")
        choices = field.metadata.get("choices")  # argparse checks them; Python callers too
        if choices is not None and value is not None and value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    if getattr(config, "resume", False) and getattr(config, "overwrite", False):
        raise ValueError(
            "--resume and --overwrite conflict: --resume continues the run in --out-dir, "
            "--overwrite replaces it with a new one; pass one of them"
        )
    if getattr(config, "out_dir", None) == "":
        raise ValueError("--out-dir must name a folder, got ''")
    data_dir = getattr(config, "data_dir", None)
    if data_dir is not None:
        data = getattr(config, "data", None)
        if data not in ("mnist", "fashion-mnist"):  # it would be ignored, silently
            raise ValueError(
                f"--data-dir {data_dir} is where MNIST's files are read from; it needs --data "
                f"mnist or fashion-mnist, not {'the default' if data is None else data}"
            )
        if not Path(data_dir).expanduser().is_dir():
            raise ValueError(f"--data-dir {data_dir}: no such folder")


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


def _base_type(annotation: Any) -> Any:
    """int for `int` and `int | None`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else annotation


def add_dataclass_flags(
    parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()
) -> None:
    """One flag per field of `cls`, except those in `skip` (set them with set_defaults)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        kind = _base_type(hints[field.name])
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        text = field.metadata.get("help", "")
        # None means "the configuration's own value", which the help text says in its words
        if default is not None:
            text = f"{text} (default: {default})"
        if kind is bool:
            parser.add_argument(
                flag, dest=field.name, action=argparse.BooleanOptionalAction, default=default,
                help=text,
            )  # fmt: skip
        else:
            parser.add_argument(
                flag, dest=field.name, type=kind, default=default,
                choices=field.metadata.get("choices"), help=text,
            )  # fmt: skip


def dataclass_from_args(cls: type[T], args: argparse.Namespace) -> T:
    names = [f.name for f in dataclasses.fields(cls)]
    return cls(**{name: getattr(args, name) for name in names})
