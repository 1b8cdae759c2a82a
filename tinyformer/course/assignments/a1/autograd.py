"""A1: reverse-mode autograd, from a scalar `Value` to the gradient rule of broadcasting.

The student writes three pieces of an engine like tinyformer's own (`tinyformer/autograd.py`,
which stays complete: everything else runs on it):

- A1.1, the local derivatives: `Value`'s add, mul, pow, tanh and exp. Each returns a new
  `Value` whose `grad_fn(g)` maps the gradient g = dL/d(out) to one gradient per parent,
  g * d(out)/d(parent).
- A1.2, the graph walk: `topological_sort(root)` (iterative: a recursive sort hits Python's
  recursion limit on a chain of a few thousand nodes) and `Value.backward`, which visits the
  nodes from the root down and adds (`+=`) each gradient into its parent, so that a value used
  twice receives both.
- A1.3, broadcasting: `unbroadcast(g, shape)` sums a gradient of a broadcast result back to
  the input's shape, over the leading axes the input lacked and its size-1 axes that grew.

A `Value` is built from a number, or by an op from its parents and their `grad_fn`:
`Value(data, parents, grad_fn)`. `grad_fn` is a pure function, so A1.1 can be checked without
A1.2's walk, and A1.2 on graphs built by hand without A1.1's ops.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Value", "topological_sort", "unbroadcast"]

GradFn = Callable[[float], tuple[float, ...]]


def _no_parents(g: float) -> tuple[float, ...]:
    return ()


class Value:
    """A scalar that remembers how it was computed.

    Attributes:
        data: the number.
        grad: dL/d(this value), filled in by `backward` (0.0 until then).
        parents: the values this one was computed from.
        grad_fn: g -> one gradient per parent (g times the local derivative).
    """

    def __init__(
        self, data: float, parents: tuple[Value, ...] = (), grad_fn: GradFn = _no_parents
    ) -> None:
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents
        self.grad_fn = grad_fn

    def __repr__(self) -> str:
        return f"Value(data={self.data!r}, grad={self.grad!r})"

    # -- A1.1: the ops and their local derivatives ------------------------------------------

    def __add__(self, other: Value | float) -> Value:
        other = _lift(other)
        ### BEGIN SOLUTION A1.1 add
        return Value(self.data + other.data, (self, other), lambda g: (g, g))
        ### END SOLUTION

    def __mul__(self, other: Value | float) -> Value:
        other = _lift(other)
        ### BEGIN SOLUTION A1.1 mul
        a, b = self.data, other.data
        return Value(a * b, (self, other), lambda g: (g * b, g * a))
        ### END SOLUTION

    def __pow__(self, k: float) -> Value:
        """self ** k for a constant number k (not a Value)."""
        if isinstance(k, Value):
            raise TypeError("Value ** Value is not supported: the exponent must be a number")
        ### BEGIN SOLUTION A1.1 pow
        a = self.data
        return Value(a**k, (self,), lambda g: (g * k * a ** (k - 1),))
        ### END SOLUTION

    def tanh(self) -> Value:
        ### BEGIN SOLUTION A1.1 tanh
        t = math.tanh(self.data)  # not (e^2x - 1) / (e^2x + 1): that overflows for x > 355
        return Value(t, (self,), lambda g: (g * (1.0 - t * t),))
        ### END SOLUTION

    def exp(self) -> Value:
        ### BEGIN SOLUTION A1.1 exp
        e = math.exp(self.data)
        return Value(e, (self,), lambda g: (g * e,))
        ### END SOLUTION

    # Given: the rest of the arithmetic, built on the ops above.
    def __radd__(self, other: float) -> Value:
        return self + other

    def __rmul__(self, other: float) -> Value:
        return self * other

    def __neg__(self) -> Value:
        return self * -1.0

    def __sub__(self, other: Value | float) -> Value:
        return self + (-_lift(other))

    def __rsub__(self, other: float) -> Value:
        return _lift(other) + (-self)

    def __truediv__(self, other: Value | float) -> Value:
        return self * _lift(other) ** -1

    def __rtruediv__(self, other: float) -> Value:
        return _lift(other) * self**-1

    # -- A1.2: backward -----------------------------------------------------------------------

    def backward(self) -> None:
        """Fill in `grad` of every value this one depends on: d(self)/d(value).

        The walk visits each node once, after every node that uses it, so a node's `grad` is
        complete before it is passed on. Gradients accumulate (`+=`), as in PyTorch: call it on
        a fresh graph, or reset the leaves' `grad` to 0 first.
        """
        ### BEGIN SOLUTION A1.2 sweep
        self.grad = 1.0
        for node in reversed(topological_sort(self)):
            for parent, g in zip(node.parents, node.grad_fn(node.grad)):
                parent.grad += g  # += : a value used twice receives both gradients
        ### END SOLUTION


def _lift(x: Value | float) -> Value:
    return x if isinstance(x, Value) else Value(x)


def topological_sort(root: Any) -> list[Any]:
    """Every node `root` depends on through `.parents`, each once, each after its parents.

    Args:
        root: any object with a `parents` sequence (a `Value`, or a node of a test's graph).

    Returns:
        The nodes, `root` last; a node reached by several paths appears once. Iterative, so a
        chain of any length works (Python's recursion limit is about 1000).
    """
    ### BEGIN SOLUTION A1.2 topological_sort
    order: list[Any] = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:  # depth-first; a node is emitted when all of its parents have been
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in seen)
    return order
    ### END SOLUTION


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `g`, the gradient of a broadcast result, back to an input of shape `shape`.

    Broadcasting (NumPy's rules) copies the input along the leading axes it lacks and along its
    size-1 axes; each input element fed every one of its copies, so its gradient is their sum.

    Shapes:
        g: the broadcast shape, e.g. (B, T, C); shape: one that broadcasts to it, e.g. (T, 1)
        or (C,) or (). Returns an array of `shape`, with g's dtype.
    """
    ### BEGIN SOLUTION A1.3
    lead = g.ndim - len(shape)
    grown = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(axis=tuple(range(lead)) + grown, keepdims=True).reshape(shape)
    ### END SOLUTION
