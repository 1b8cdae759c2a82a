"""Op specs: each op file declares how to test it, and one battery of checks runs them all.

This is the spec type below the ops: a leaf of the spine (NumPy only), which every op file
imports; `tinyformer.testing` re-exports it for users and holds the checks that run the specs.

An `OpSpec` names the op's functional wrapper, the `Function` classes the file defines and a
`sample(draw)` function that draws one test case: the input arrays (float arrays are the
differentiable inputs; integer and boolean arrays are indices, targets and masks) and keyword
arguments. `draw` is any object with the `Draw` methods below: the test suite passes one backed by
hypothesis (so failures shrink to a minimal case), `RandomDraw` uses a seeded NumPy generator (no
hypothesis needed, e.g. for an autograder). Input values always come from `draw.rng`.

This module imports nothing beyond NumPy, so importing an op never imports a test framework
nor the testing package. The checks themselves are in `tinyformer.testing.checks`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "Draw",
    "OpSpec",
    "RandomDraw",
    "Sample",
    "binary_sample",
    "broadcast_pair",
    "broadcastable",
    "distinct",
    "floats",
    "reduction_sample",
    "unary_sample",
]


class Draw(Protocol):
    """What a spec's `sample` function may ask for."""

    rng: np.random.Generator

    def integers(self, low: int, high: int) -> int:
        """An int in [low, high], both ends included."""

    def choice(self, options: Sequence[Any]) -> Any: ...

    def shape(
        self, min_dims: int = 1, max_dims: int = 3, min_side: int = 1, max_side: int = 4
    ) -> tuple[int, ...]: ...


class RandomDraw:
    """A `Draw` backed by a seeded NumPy generator."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def __repr__(self) -> str:  # failure reports name the draw, so it can be replayed
        return f"RandomDraw({self.seed})"

    def integers(self, low: int, high: int) -> int:
        return int(self.rng.integers(low, high + 1))

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.integers(0, len(options) - 1)]

    def shape(self, min_dims=1, max_dims=3, min_side=1, max_side=4) -> tuple[int, ...]:
        ndim = self.integers(min_dims, max_dims)
        return tuple(self.integers(min_side, max_side) for _ in range(ndim))


@dataclass
class Sample:
    """One test case: positional inputs and keyword arguments for the op's wrapper."""

    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OpSpec:
    """How to test one op.

    Attributes:
        name: the op's name, as in the test ids.
        fn: the functional wrapper, called as `fn(*tensors, **kwargs)`.
        sample: draws a `Sample`.
        functions: the `Function` classes this op's file defines (the planted-bug check scales
            their gradients and expects the generic suite to notice).
        primitives: registry primitives the op dispatches to (their kernels are compared with
            the reference through this op).
        atol, rtol: float64 gradcheck tolerances (finite differences vs backward).
        float32_tol: (atol, rtol) for comparing float32 results with float64 ones and kernels
            with references.
    """

    name: str
    fn: Callable[..., Any]
    sample: Callable[[Draw], Sample]
    functions: tuple[type, ...] = ()
    primitives: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-3
    float32_tol: tuple[float, float] = (1e-4, 1e-4)


# -- helpers for sample functions ---------------------------------------------------------------


def floats(
    draw: Draw,
    shape: tuple[int, ...],
    low: float = -2.0,
    high: float = 2.0,
    *,
    avoid: Sequence[float] = (),
    margin: float = 0.05,
) -> np.ndarray:
    """Uniform float64 values in [low, high], kept `margin` away from each point in `avoid`
    (kinks such as 0 for relu and abs, where finite differences are meaningless)."""
    x = draw.rng.uniform(low, high, size=shape)
    for point in avoid:
        near = np.abs(x - point) < margin
        x = np.where(near, point + np.where(x >= point, margin, -margin) * 2, x)
    return x


def distinct(draw: Draw, shape: tuple[int, ...], spacing: float = 0.1) -> np.ndarray:
    """Values with no ties and at least `spacing` between any two (for max, min, sort-like ops)."""
    n = int(np.prod(shape))
    return (draw.rng.permutation(n) * spacing - n * spacing / 2).reshape(shape).astype(np.float64)


def broadcastable(draw: Draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `shape`: some leading axes dropped, some axes set to 1."""
    dropped = draw.integers(0, len(shape))
    return tuple(n if draw.integers(0, 2) else 1 for n in shape[dropped:])


def broadcast_pair(draw: Draw, max_dims: int = 3) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast together, either of which may be the smaller one."""
    shape = draw.shape(min_dims=0, max_dims=max_dims)
    a, b = shape, broadcastable(draw, shape)
    return (a, b) if draw.integers(0, 1) else (b, a)


def unary_sample(low: float = -2.0, high: float = 2.0, avoid: Sequence[float] = ()):
    """A `sample` for elementwise ops of one input."""

    def sample(draw: Draw) -> Sample:
        return Sample([floats(draw, draw.shape(min_dims=0), low, high, avoid=avoid)])

    return sample


def binary_sample(low: float = -2.0, high: float = 2.0, *, positive_second: bool = False):
    """A `sample` for elementwise ops of two broadcasting inputs."""

    def sample(draw: Draw) -> Sample:
        s1, s2 = broadcast_pair(draw)
        x2 = floats(draw, s2, 0.5, 2.0) if positive_second else floats(draw, s2, low, high)
        return Sample([floats(draw, s1, low, high), x2])

    return sample


def reduction_sample(values: Callable[[Draw, tuple[int, ...]], np.ndarray] = floats):
    """A `sample` for reductions: a tensor and an axis (None, one axis or several) and keepdims."""

    def sample(draw: Draw) -> Sample:
        shape = draw.shape(min_dims=1)
        ndim = len(shape)
        axis = draw.choice([None, draw.integers(-ndim, ndim - 1), tuple(range(ndim))[::2]])
        return Sample([values(draw, shape)], {"axis": axis, "keepdims": bool(draw.integers(0, 1))})

    return sample
