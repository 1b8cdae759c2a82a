"""tinyformer's random number generator: one seeded NumPy generator behind every random op.

`manual_seed(s)` makes `randn`, `rand`, dropout masks and parameter initialisation reproducible.
The generator is created on first use (never at import), from fresh entropy unless seeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "Generator", "categorical", "generator", "get_rng_state", "manual_seed", "numpy_generator",
    "set_rng_state",
]  # fmt: skip

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


class Generator:
    """A generator of its own, as `torch.Generator`: `g = tf.Generator().manual_seed(0)`, then
    `tf.randperm(n, generator=g)` or `DataLoader(..., generator=g)` draw from it and not from
    the global generator. (A seed gives other numbers than PyTorch's generator gives.)"""

    def __init__(self, device: Any = "cpu") -> None:
        self._rng = np.random.default_rng()
        self._seed: int | None = None

    def manual_seed(self, seed: int) -> Generator:
        """Reset to a known state; returns the generator, so that it chains as in PyTorch."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"Generator.manual_seed: the seed must be an integer, got {seed!r}")
        self._seed = int(seed) % 2**64
        self._rng = np.random.default_rng(self._seed)
        return self

    def initial_seed(self) -> int | None:
        return self._seed

    def get_state(self) -> dict[str, Any]:
        return self._rng.bit_generator.state

    def set_state(self, state: dict[str, Any]) -> Generator:
        self._rng.bit_generator.state = state
        return self


def numpy_generator(source: Generator | None = None) -> np.random.Generator:
    """The NumPy generator behind `source` (a `generator=` argument), the global one for None."""
    if source is None:
        return generator()
    if not isinstance(source, Generator):
        raise TypeError(
            f"generator: expected a tinyformer.Generator (tf.Generator().manual_seed(0)), got "
            f"{type(source).__name__}"
        )
    return source._rng


def get_rng_state() -> dict[str, Any]:
    """The generator's state as plain data (a dict of ints and strings), for checkpoints."""
    return generator().bit_generator.state


def set_rng_state(state: dict[str, Any]) -> None:
    generator().bit_generator.state = state


def categorical(
    weights: np.ndarray, num_samples: int, rng: np.random.Generator | None = None
) -> np.ndarray:
    """`num_samples` category indices per row of `weights` (rows, categories), drawn with
    replacement, each with probability weight / row sum (the weights must be >= 0, with a
    positive sum). Inverse CDF: uniform u, then the first category whose cumulative share
    exceeds u. The CDF is divided by its own last entry, so that it ends at exactly 1 and a
    u < 1 always lands in a category of positive weight (clipping a u past a CDF that rounding
    left at 0.9999999 could pick a last category of weight 0)."""
    rng = generator() if rng is None else rng
    cdf = np.cumsum(weights, axis=-1, dtype=np.float64)
    cdf /= cdf[:, -1:]
    u = rng.random((weights.shape[0], num_samples))
    # side="right": the count of cumulative shares <= u, i.e. the category whose share holds u
    return np.stack([np.searchsorted(row, draws, side="right") for row, draws in zip(cdf, u)])
