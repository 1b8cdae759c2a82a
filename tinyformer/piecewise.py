"""Elementwise results that carry no gradient: the step functions `sign`, `round`, `floor`,
`ceil` and `trunc`, and the tests `isnan`, `isinf`, `isfinite`, as functions (`tf.round(x)`)
and as Tensor methods (`x.round()`).

Why no gradient: a step function is flat wherever its derivative exists, so the gradient
through it is zero; PyTorch's results require grad and backpropagate those zeros, tinyformer's
are cut from the graph (as `x > 0` is). The other terms of a loss get their gradients either
way; a loss made of nothing else has no graph to run `backward()` on. For a gradient through
rounding write the straight-through estimator, `x + (x.round() - x).detach()`.

`round(decimals=)` rounds half to even, as PyTorch and NumPy do (`round(2.5) == 2`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinyformer import backend

if TYPE_CHECKING:
    from tinyformer.tensor import Tensor

__all__ = ["PiecewiseMethods", "ceil", "floor", "isfinite", "isinf", "isnan", "round", "sign",
           "trunc"]  # fmt: skip


def _apply(name: str, x: Any, **kwargs: Any) -> Tensor:
    from tinyformer.tensor import Tensor

    data = x.data if isinstance(x, Tensor) else Tensor(x).data
    xp = backend.get_array_module(data)
    return Tensor._make(getattr(xp, name)(data, **kwargs), None)


def sign(input: Any) -> Tensor:  # noqa: A002
    """-1, 0 or 1 by the sign of each element (NaN stays NaN)."""
    return _apply("sign", input)


def round(input: Any, *, decimals: int = 0) -> Tensor:  # noqa: A001, A002
    """Each element to the nearest integer (or `decimals` places), halves to even."""
    return _apply("round", input, decimals=decimals)


def floor(input: Any) -> Tensor:  # noqa: A002
    """The largest integer <= each element."""
    return _apply("floor", input)


def ceil(input: Any) -> Tensor:  # noqa: A002
    """The smallest integer >= each element."""
    return _apply("ceil", input)


def trunc(input: Any) -> Tensor:  # noqa: A002
    """Each element with its fraction dropped (towards zero)."""
    return _apply("trunc", input)


def isnan(input: Any) -> Tensor:  # noqa: A002
    """True where an element is NaN."""
    return _apply("isnan", input)


def isinf(input: Any) -> Tensor:  # noqa: A002
    """True where an element is +inf or -inf."""
    return _apply("isinf", input)


def isfinite(input: Any) -> Tensor:  # noqa: A002
    """True where an element is neither NaN nor infinite."""
    return _apply("isfinite", input)


class PiecewiseMethods:
    """The functions above as Tensor methods (`Tensor` inherits them)."""

    __slots__ = ()  # Tensor keeps a fixed set of attributes

    def sign(self) -> Tensor:
        return sign(self)

    def round(self, *, decimals: int = 0) -> Tensor:
        return round(self, decimals=decimals)

    def floor(self) -> Tensor:
        return floor(self)

    def ceil(self) -> Tensor:
        return ceil(self)

    def trunc(self) -> Tensor:
        return trunc(self)

    def isnan(self) -> Tensor:
        return isnan(self)

    def isinf(self) -> Tensor:
        return isinf(self)

    def isfinite(self) -> Tensor:
        return isfinite(self)
