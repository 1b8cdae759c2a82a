"""A1's engine driven by plain data: what the grader's child runs for A1's tests.

A1's subject is a graph of Python objects (`Value`), which cannot cross the grader's pipe. These
functions build the objects in the child from numbers and edge lists the grader sends, run the
student's code on them, and return numbers and arrays, which the grader judges
(`checks.py`, beside this file). They are no part of the assignment and hold no answer.
"""

from __future__ import annotations

import numpy as np

from tinyformer.course.assignments.a1 import autograd

__all__ = ["backward", "op", "sort"]


def _apply(name: str, inputs: list, k: float) -> object:
    if name == "add":
        return inputs[0] + inputs[1]
    if name == "mul":
        return inputs[0] * inputs[1]
    if name == "pow":
        return inputs[0] ** k
    if name in ("tanh", "exp"):
        return getattr(inputs[0], name)()
    raise ValueError(f"no A1 op named {name!r}")


def op(name: str, xs: list[float], g: float, k: float = 0.0, same: bool = False):
    """`name` ("add", "mul", "pow" to the `k`, "tanh", "exp") on Values of `xs` (one Value used
    for every slot if `same`) -> (out.data, 1.0 if out is a Value, the input index of each
    parent (-1: not an input), out.grad_fn(g))."""
    inputs = [autograd.Value(xs[0])] * len(xs) if same else [autograd.Value(x) for x in xs]
    out = _apply(name, inputs, k)
    if not isinstance(out, autograd.Value):
        return np.array(np.nan), np.array(0.0), np.zeros(0), np.zeros(0)
    ids = [id(v) for v in inputs]
    parents = [ids.index(id(p)) if id(p) in ids else -1 for p in out.parents]
    grads = np.asarray([float(x) for x in out.grad_fn(g)], dtype=np.float64)
    return np.array(float(out.data)), np.array(1.0), np.asarray(parents, np.int64), grads


class _Node:
    def __init__(self, name: int, parents: tuple) -> None:
        self.name, self.parents = name, parents


def sort(parents: list[list[int]]) -> np.ndarray:
    """Nodes 0..n-1, node i's parents the (earlier) nodes `parents[i]`: the names of
    `topological_sort(node n-1)`, in order."""
    nodes: list[_Node] = []
    for i, ps in enumerate(parents):
        nodes.append(_Node(i, tuple(nodes[int(j)] for j in ps)))
    order = autograd.topological_sort(nodes[-1])
    return np.asarray([int(node.name) for node in order], dtype=np.int64)


def backward(data: list[float], parents: list[list[int]], local: list[list[float]]):
    """Values built by hand: node i has `data[i]`, parents `parents[i]`, and a grad_fn that
    multiplies g by `local[i]`. `backward()` from the last node -> every node's grad."""
    nodes: list = []
    for d, ps, ds in zip(data, parents, local):
        fn = (lambda g, ds=tuple(ds): tuple(g * x for x in ds)) if ps else None
        extra = (tuple(nodes[int(j)] for j in ps), fn) if ps else ()
        nodes.append(autograd.Value(d, *extra))
    nodes[-1].backward()
    return np.asarray([float(v.grad) for v in nodes], dtype=np.float64)
