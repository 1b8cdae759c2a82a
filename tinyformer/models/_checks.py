"""Checks every model configuration makes in its __post_init__, with one wording."""

from __future__ import annotations

from typing import Any


def check_sizes(config: Any, *names: str) -> None:
    """ValueError naming the configuration and the first of `names` below 1."""
    for name in names:
        value = getattr(config, name)
        if value < 1:
            raise ValueError(f"{type(config).__name__}: {name} must be >= 1, got {value}")


def check_dropout(config: Any) -> None:
    """ValueError unless 0 <= config.dropout < 1 (1 would drop everything)."""
    if not 0.0 <= config.dropout < 1.0:
        raise ValueError(
            f"{type(config).__name__}: dropout must be in [0, 1), got {config.dropout}"
        )
