"""A1's property tests (shipped to students) and hidden tests (removed by every release).

Each test runs in the grader's child process (`IN_CHILD`), with the graded tree's `tinyformer`
module, and raises AssertionError on failure. `PROPERTIES` and `HIDDEN` map a task id to its
tests.

A1 has no op spec: `tinyformer/course/a1_autograd.py` is a small engine of its own. Each task is
tested alone: A1.1's ops through their `grad_fn` against central differences (no graph walk),
A1.2's walk on graphs built by hand from `Value(data, parents, grad_fn)` (no student op), A1.3
against NumPy's own broadcasting. A bug in one task then costs only that task's points, and a
fresh release fails each task on its own stub.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np

__all__ = ["PROPERTIES"]

_H = 1e-6  # central differences: error ~h^2 f''' ~ 1e-12, rounding ~1e-16 / h ~ 1e-10


def _a1():
    from tinyformer.course import a1_autograd

    return a1_autograd


def _close(got: float, want: float, what: str, tol: float = 1e-7) -> None:
    assert math.isclose(got, want, rel_tol=tol, abs_tol=tol), f"{what}: got {got!r}, want {want!r}"


def _check_op(name: str, op, xs: tuple[float, ...]) -> None:
    """op(*Values) has the forward of op(*floats), and its grad_fn(g) = g * central differences."""
    a1 = _a1()
    inputs = [a1.Value(x) for x in xs]
    out = op(*inputs)
    assert isinstance(out, a1.Value), f"{name} returned {type(out).__name__}, not a Value"
    _close(out.data, op(*xs), f"{name}{xs} forward")
    assert len(out.parents) == len(xs) and all(p is v for p, v in zip(out.parents, inputs)), (
        f"{name}: parents should be the inputs, in order"
    )
    g = 0.7  # not 1: a grad_fn that ignores the upstream gradient fails
    grads = out.grad_fn(g)
    assert len(grads) == len(xs), f"{name}: grad_fn gave {len(grads)} gradients for {len(xs)}"
    for i in range(len(xs)):
        up, down = list(xs), list(xs)
        up[i] += _H
        down[i] -= _H
        numeric = g * (op(*up) - op(*down)) / (2 * _H)
        _close(grads[i], numeric, f"{name}{xs}: gradient {i}", tol=1e-6)


_OPS = {
    "add": (lambda a, b: a + b, [(1.5, -2.0), (0.0, 3.25)]),
    "mul": (lambda a, b: a * b, [(1.5, -2.0), (-0.3, 0.0)]),
    "pow 3": (lambda a: a**3, [(1.3,), (-0.7,)]),
    "pow -1.5": (lambda a: a**-1.5, [(0.8,), (2.0,)]),
    "tanh": (lambda a: a.tanh() if hasattr(a, "grad_fn") else math.tanh(a), [(0.4,), (-1.2,)]),
    "exp": (lambda a: a.exp() if hasattr(a, "grad_fn") else math.exp(a), [(0.4,), (-1.2,)]),
}


def ops_match_central_differences(tf: ModuleType) -> None:
    """add, mul, pow, tanh, exp: forward values, and grad_fn(g) = g * d(out)/d(input)."""
    for name, (op, points) in _OPS.items():
        for xs in points:
            _check_op(name, op, xs)


def ops_on_one_value_used_twice(tf: ModuleType) -> None:
    """x * x and x + x: one gradient per parent slot, each the local derivative (2 slots)."""
    x = _a1().Value(3.0)
    assert tuple((x * x).grad_fn(1.0)) == (3.0, 3.0), "x * x: each slot's gradient is the other x"
    assert tuple((x + x).grad_fn(2.0)) == (2.0, 2.0), "x + x: each slot gets the upstream gradient"


class _Node:
    def __init__(self, name: int, parents: tuple[_Node, ...] = ()) -> None:
        self.name, self.parents = name, parents


def _random_dag(rng: np.random.Generator, n: int) -> _Node:
    """A random DAG of n nodes whose last node depends on all of them, some by several paths."""
    nodes: list[_Node] = []
    for i in range(n):
        k = int(rng.integers(0, min(i, 3) + 1))
        picks = rng.choice(i, size=k, replace=True) if i else []  # repeats: an edge used twice
        nodes.append(_Node(i, tuple(nodes[j] for j in picks)))
    return _Node(n, tuple(nodes))


def _check_order(order: list, root) -> None:
    position = {id(node): i for i, node in enumerate(order)}
    assert len(position) == len(order), "a node appears twice in the order"
    assert order[-1] is root, "the root must come last"
    reachable, stack = {id(root)}, [root]
    while stack:
        for p in stack.pop().parents:
            if id(p) not in reachable:
                reachable.add(id(p))
                stack.append(p)
    assert set(position) == reachable, "the order must hold exactly the nodes the root depends on"
    for node in order:
        for p in node.parents:
            assert position[id(p)] < position[id(node)], "a parent comes after its child"


def sort_orders_random_dags(tf: ModuleType) -> None:
    """On random DAGs: every reachable node once, each after its parents, the root last."""
    a1 = _a1()
    rng = np.random.default_rng(0)
    for n in (0, 1, 5, 40):
        root = _random_dag(rng, n)
        _check_order(a1.topological_sort(root), root)


def _leaf(v: float):
    return _a1().Value(v)


def _node(data: float, parents: tuple, local: tuple[float, ...]):
    """A Value built by hand: its grad_fn multiplies g by the given local derivatives."""
    return _a1().Value(data, parents, lambda g: tuple(g * d for d in local))


def backward_sums_the_gradients_of_a_value_used_twice(tf: ModuleType) -> None:
    """L = (a b + a) c, built by hand: dL/da = (b + 1) c sums both uses of a."""
    a1 = _a1()
    a, b, c = _leaf(2.0), _leaf(-3.0), _leaf(0.5)
    a1.topological_sort(a)  # this task's own code first: a stub fails here, on A1.2
    ab = _node(a.data * b.data, (a, b), (b.data, a.data))
    s = _node(ab.data + a.data, (ab, a), (1.0, 1.0))
    loss = _node(s.data * c.data, (s, c), (c.data, s.data))
    loss.backward()
    for name, v, want in (("a", a, (b.data + 1) * c.data), ("b", b, a.data * c.data)):
        _close(v.grad, want, f"dL/d{name}")
    _close(c.grad, s.data, "dL/dc")
    _close(loss.grad, 1.0, "dL/dL")


def _broadcast_pair(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A broadcast result's shape and an input shape that broadcasts to it (NumPy's rules)."""
    out = tuple(int(n) for n in rng.integers(1, 5, size=rng.integers(0, 5)))
    keep = int(rng.integers(0, len(out) + 1))  # the input lacks the leading axes
    shape = tuple(1 if rng.random() < 0.5 else n for n in out[len(out) - keep :])
    return out, shape


def unbroadcast_is_the_adjoint_of_broadcasting(tf: ModuleType) -> None:
    """Random shapes: <unbroadcast(g, s), x> = <g, broadcast_to(x)> for every x of shape s."""
    a1 = _a1()
    rng = np.random.default_rng(1)
    for _ in range(30):
        out, shape = _broadcast_pair(rng)
        g, x = rng.normal(size=out), rng.normal(size=shape)
        assert np.broadcast_shapes(shape, out) == out  # the pair itself is right
        gx = np.asarray(a1.unbroadcast(g, shape))
        assert gx.shape == shape, f"unbroadcast(g {out}, {shape}) has shape {gx.shape}"
        lhs, rhs = float((gx * x).sum()), float((g * np.broadcast_to(x, out)).sum())
        _close(lhs, rhs, f"<unbroadcast(g), x> for g {out}, input {shape}", tol=1e-10)


def unbroadcast_keeps_dtype_and_known_values(tf: ModuleType) -> None:
    """A bias (C,) added to (B, T, C) gets the sum over B and T; float32 stays float32."""
    a1 = _a1()
    g = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    gb = a1.unbroadcast(g, (4,))
    assert gb.dtype == np.float32, f"float32 came back {gb.dtype}"
    np.testing.assert_array_equal(gb, g.sum(axis=(0, 1)))
    np.testing.assert_array_equal(a1.unbroadcast(g, (3, 1)), g.sum(axis=(0, 2))[:, None])
    np.testing.assert_array_equal(a1.unbroadcast(g, (2, 3, 4)), g)


# A1's subject is a graph of Python objects (`Value`), not arrays: its tests run in the
# grader's child, which reports their verdict.
IN_CHILD = True

PROPERTIES = {
    "A1.1": [ops_match_central_differences, ops_on_one_value_used_twice],
    "A1.2": [sort_orders_random_dags, backward_sums_the_gradients_of_a_value_used_twice],
    "A1.3": [unbroadcast_is_the_adjoint_of_broadcasting, unbroadcast_keeps_dtype_and_known_values],
}


### BEGIN HIDDEN TESTS A1
def ops_at_extreme_inputs(tf: ModuleType) -> None:
    """tanh(±400) without overflow (a formula through exp(2x) overflows), a gradient of 0 and not
    NaN; a negative base to an integer power; an exponent of 0."""
    a1 = _a1()
    for x in (400.0, -400.0):
        t = a1.Value(x).tanh()
        _close(t.data, math.copysign(1.0, x), f"tanh({x})")
        (g,) = t.grad_fn(1.0)
        assert g == 0.0, f"tanh'({x}) should be 0, got {g!r}"
    _check_op("pow 3", _OPS["pow 3"][0], (-2.0,))
    (g,) = (a1.Value(-2.0) ** 0).grad_fn(1.0)
    assert g == 0.0, f"d(x^0)/dx should be 0, got {g!r}"
    e = a1.Value(-800.0).exp()
    assert e.data == 0.0 and tuple(e.grad_fn(1.0)) == (0.0,), "exp(-800) is 0, and its gradient"


def deep_chain_and_wide_fan_in(tf: ModuleType) -> None:
    """A chain of 5000 nodes (a recursive sort passes Python's recursion limit) and one value
    used by 200 nodes (its gradient sums all 200)."""
    a1 = _a1()
    x = _leaf(1.0)
    y = x
    for _ in range(5000):
        y = _node(y.data, (y,), (1.001,))
    order = a1.topological_sort(y)
    assert len(order) == 5001 and order[0] is x and order[-1] is y, "the chain's order is wrong"
    y.backward()
    _close(x.grad, 1.001**5000, "a 5000-node chain", tol=1e-9)
    w = _leaf(0.5)
    uses = [_node(w.data * i, (w,), (float(i),)) for i in range(200)]
    total = _node(0.0, tuple(uses), (1.0,) * 200)
    total.backward()
    _close(w.grad, float(sum(range(200))), "a value used 200 times")


def unbroadcast_edge_shapes(tf: ModuleType) -> None:
    """To a scalar shape (), across an empty axis, and from a strided view."""
    a1 = _a1()
    g = np.random.default_rng(2).normal(size=(3, 8))
    _close(float(a1.unbroadcast(g, ())), float(g.sum()), "unbroadcast to ()", tol=1e-12)
    assert np.asarray(a1.unbroadcast(g, ())).shape == (), "unbroadcast to () must be 0-d"
    empty = a1.unbroadcast(np.ones((0, 4)), (1, 4))
    assert empty.shape == (1, 4) and not empty.any(), "an empty axis sums to zeros"
    view = g[:, ::2]  # (3, 4), not contiguous
    np.testing.assert_allclose(a1.unbroadcast(view, (3, 1)), view.sum(axis=1, keepdims=True))


HIDDEN = {
    "A1.1": [ops_at_extreme_inputs],
    "A1.2": [deep_chain_and_wide_fan_in],
    "A1.3": [unbroadcast_edge_shapes],
}
### END HIDDEN TESTS
