"""tinyformer's random number generator: one seeded NumPy generator behind every random op.

`manual_seed(s)` makes `randn`, `rand`, dropout masks and parameter initialisation reproducible.
The generator is created on first use (never at import), from fresh entropy unless seeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["generator", "get_rng_state", "manual_seed", "set_rng_state"]

_generator: np.random.Generator | None = None


def manual_seed(seed: int) -> None:
    """Reset tinyformer's generator to a known state. As in PyTorch, any integer in
    [-2**63, 2**64) is a seed, a negative one standing for seed + 2**64 (`manual_seed(-1)` is
    common in PyTorch code; NumPy's generators take only seeds >= 0)."""
    global _generator
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed: the seed must be an integer, got {seed!r}")
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"manual_seed: the seed must be in [-2**63, 2**64), got {seed}")
    _generator = np.random.default_rng(int(seed) % 2**64)


def generator() -> np.random.Generator:
    """The generator every random op draws from."""
    global _generator
    if _generator is None:
        _generator = np.random.default_rng()
    return _generator


def get_rng_state() -> dict[str, Any]:
    """The generator's state as plain data (a dict of ints and strings), for checkpoints."""
    return generator().bit_generator.state


def set_rng_state(state: dict[str, Any]) -> None:
    generator().bit_generator.state = state
