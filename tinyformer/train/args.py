"""Command-line flags from a dataclass: each field becomes `--field-name`, typed and documented
by the field's default and its `help` metadata. No exec, no globals: the parsed flags build a
new dataclass instance. The ranges, the checks of flags that are no dataclass's (`ranged`) and
the `--device` flag (`add_device_flag`) are in `tinyformer.flags`, a leaf, and re-exported here."""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from pathlib import Path
from typing import Any, TypeVar

from tinyformer.flags import (  # the flag helpers, re-exported for the commands
    BELOW_ONE,
    COUNT,
    EXAMPLES,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    PROPER_FRACTION,
    Range,
    add_device_flag,
    ranged,
)

__all__ = [
    "BELOW_ONE", "COUNT", "EXAMPLES", "FRACTION", "NONNEGATIVE", "POSITIVE",
    "PROPER_FRACTION", "Range", "RunFlags", "add_dataclass_flags", "add_device_flag",
    "check_ranges", "dataclass_from_args", "flag", "ranged",
]  # fmt: skip

T = TypeVar("T")


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


@dataclasses.dataclass
class RunFlags:
    """The flags of a run that every `tinyformer train ...` command has. A command's config
    subclasses it and gives `out_dir` its own default (and `resume`, `progress` their own help
    where the command starts several runs); `--help` lists them after the command's own."""

    out_dir: str = flag("out", "folder for ckpt.npz, log.json and loss.png")
    resume: bool = flag(False, "continue the run saved in --out-dir")
    overwrite: bool = flag(False, "start a new run in an --out-dir that holds one, replacing it")
    progress: bool = flag(True, "show a progress bar")
    device: str = flag("cpu", "where to train: cpu, or cuda (an NVIDIA GPU, through CuPy)")


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


def _base_type(annotation: Any) -> Any:
    """int for `int` and `int | None`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else annotation


def add_dataclass_flags(
    parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()
) -> None:
    """One flag per field of `cls`, except those in `skip` (set them with set_defaults)."""
    hints = typing.get_type_hints(cls)
    shared = {f.name for f in dataclasses.fields(RunFlags)}
    for field in sorted(dataclasses.fields(cls), key=lambda f: f.name in shared):
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
