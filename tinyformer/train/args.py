"""Command-line flags from a dataclass: each field becomes `--field-name`, typed and documented
by the field's default and its `help` metadata. No exec, no globals: the parsed flags build a
new dataclass instance."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from typing import Any, TypeVar

__all__ = ["add_dataclass_flags", "dataclass_from_args", "flag"]

T = TypeVar("T")


def flag(default: Any, help: str, choices: list[str] | None = None) -> Any:  # noqa: A002
    """A dataclass field that becomes a documented command-line flag."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


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
