"""A1's property tests (shipped to students) and hidden tests (removed by every release).

The grader runs each test itself. A1's engine is a graph of Python objects, which cannot leave
the grader's child process: `tf.course.assignments.a1.drivers` builds them there from the
numbers and edge lists a test sends, runs the student's code on them and returns numbers
(`drivers.py`), and the test judges those here. `PROPERTIES` and `HIDDEN` map a task id to its
tests.

A1 has no op spec: `autograd.py`, beside this file, is a small engine of its own. Each task is
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


def _a1(tf: ModuleType):
    """The student's engine, driven by plain data in the grader's child (`drivers.py`)."""
    return tf.course.assignments.a1.drivers


def _close(got: float, want: float, what: str, tol: float = 1e-7) -> None:
    got, want = float(got), float(want)
    assert math.isclose(got, want, rel_tol=tol, abs_tol=tol), (
        f"{what}: got {got:.10g}, want {want:.10g}"
    )


def _float(name: str, x: tuple[float, ...] | list[float], k: float) -> float:
    """The op on floats: what the student's Value must compute."""
    if name == "add":
        return x[0] + x[1]
    if name == "mul":
        return x[0] * x[1]
    if name == "pow":
        return x[0] ** k
    return getattr(math, name)(x[0])


def _check_op(tf: ModuleType, label: str, name: str, xs: tuple[float, ...], k: float = 0.0):
    """op(*Values) has the forward of op(*floats), and its grad_fn(g) = g * central differences."""
    g = 0.7  # not 1: a grad_fn that ignores the upstream gradient fails
    data, is_value, parents, grads = _a1(tf).op(name, list(xs), g, k)
    assert float(is_value) == 1.0, f"{label} did not return a Value"
    _close(data, _float(name, xs, k), f"{label}{xs} forward")
    assert list(parents) == list(range(len(xs))), f"{label}: parents should be the inputs, in order"
    assert len(grads) == len(xs), f"{label}: grad_fn gave {len(grads)} gradients for {len(xs)}"
    for i in range(len(xs)):
        up, down = list(xs), list(xs)
        up[i] += _H
        down[i] -= _H
        numeric = g * (_float(name, up, k) - _float(name, down, k)) / (2 * _H)
        _close(grads[i], numeric, f"{label}{xs}: gradient {i}", tol=1e-6)


_OPS = {
    "add": ("add", 0.0, [(1.5, -2.0), (0.0, 3.25)]),
    "mul": ("mul", 0.0, [(1.5, -2.0), (-0.3, 0.0)]),
    "pow 3": ("pow", 3.0, [(1.3,), (-0.7,)]),
    "pow -1.5": ("pow", -1.5, [(0.8,), (2.0,)]),
    "tanh": ("tanh", 0.0, [(0.4,), (-1.2,)]),
    "exp": ("exp", 0.0, [(0.4,), (-1.2,)]),
}


def ops_match_central_differences(tf: ModuleType) -> None:
    """add, mul, pow, tanh, exp: forward values, and grad_fn(g) = g * d(out)/d(input)."""
    for label, (name, k, points) in _OPS.items():
        for xs in points:
            _check_op(tf, label, name, xs, k)


def ops_on_one_value_used_twice(tf: ModuleType) -> None:
    """x * x and x + x: one gradient per parent slot, each the local derivative (2 slots)."""
    *_, grads = _a1(tf).op("mul", [3.0, 3.0], 1.0, same=True)
    assert list(grads) == [3.0, 3.0], "x * x: each slot's gradient is the other x"
    *_, grads = _a1(tf).op("add", [3.0, 3.0], 2.0, same=True)
    assert list(grads) == [2.0, 2.0], "x + x: each slot gets the upstream gradient"


def _random_dag(rng: np.random.Generator, n: int) -> list[list[int]]:
    """A random DAG of n nodes, as each node's parents, and a last node that depends on all of
    them, some by several paths (and some edges twice)."""
    parents = []
    for i in range(n):
        k = int(rng.integers(0, min(i, 3) + 1))
        parents.append([int(j) for j in rng.choice(i, size=k, replace=True)] if i else [])
    return parents + [list(range(n))]


def _check_order(order: list[int], parents: list[list[int]]) -> None:
    root = len(parents) - 1
    position = {node: i for i, node in enumerate(order)}
    assert len(position) == len(order), "a node appears twice in the order"
    assert order and order[-1] == root, "the root must come last"
    reachable, stack = {root}, [root]
    while stack:
        for p in parents[stack.pop()]:
            if p not in reachable:
                reachable.add(p)
                stack.append(p)
    assert set(position) == reachable, "the order must hold exactly the nodes the root depends on"
    for node in order:
        for p in parents[node]:
            assert position[p] < position[node], "a parent comes after its child"


def sort_orders_random_dags(tf: ModuleType) -> None:
    """On random DAGs: every reachable node once, each after its parents, the root last."""
    rng = tf.rng
    for n in (0, 1, 5, 40):
        parents = _random_dag(rng, n)
        _check_order([int(i) for i in _a1(tf).sort(parents)], parents)


def backward_sums_the_gradients_of_a_value_used_twice(tf: ModuleType) -> None:
    """L = (a b + a) c, built by hand: dL/da = (b + 1) c sums both uses of a."""
    a, b, c = 2.0, -3.0, 0.5
    _a1(tf).sort([[]])  # this task's own code first: a stub fails here, on A1.2
    # the nodes: a, b, c, ab, s = ab + a, loss = s c
    data = [a, b, c, a * b, a * b + a, (a * b + a) * c]
    parents = [[], [], [], [0, 1], [3, 0], [4, 2]]
    local = [[], [], [], [b, a], [1.0, 1.0], [c, a * b + a]]
    grads = _a1(tf).backward(data, parents, local)
    for name, i, want in (("a", 0, (b + 1) * c), ("b", 1, a * c), ("c", 2, a * b + a)):
        _close(grads[i], want, f"dL/d{name}")
    _close(grads[5], 1.0, "dL/dL")


def _broadcast_pair(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A broadcast result's shape and an input shape that broadcasts to it (NumPy's rules)."""
    out = tuple(int(n) for n in rng.integers(1, 5, size=rng.integers(0, 5)))
    keep = int(rng.integers(0, len(out) + 1))  # the input lacks the leading axes
    shape = tuple(1 if rng.random() < 0.5 else n for n in out[len(out) - keep :])
    return out, shape


def unbroadcast_is_the_adjoint_of_broadcasting(tf: ModuleType) -> None:
    """Random shapes: <unbroadcast(g, s), x> = <g, broadcast_to(x)> for every x of shape s."""
    unbroadcast = tf.course.assignments.a1.autograd.unbroadcast
    rng = tf.rng
    for _ in range(30):
        out, shape = _broadcast_pair(rng)
        g, x = rng.normal(size=out), rng.normal(size=shape)
        assert np.broadcast_shapes(shape, out) == out  # the pair itself is right
        gx = np.asarray(unbroadcast(g, shape))
        assert gx.shape == shape, f"unbroadcast(g {out}, {shape}) has shape {gx.shape}"
        lhs, rhs = float((gx * x).sum()), float((g * np.broadcast_to(x, out)).sum())
        _close(lhs, rhs, f"<unbroadcast(g), x> for g {out}, input {shape}", tol=1e-10)


def unbroadcast_keeps_dtype_and_known_values(tf: ModuleType) -> None:
    """A bias (C,) added to (B, T, C) gets the sum over B and T; float32 stays float32."""
    unbroadcast = tf.course.assignments.a1.autograd.unbroadcast
    g = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    gb = unbroadcast(g, (4,))
    assert gb.dtype == np.float32, f"float32 came back {gb.dtype}"
    np.testing.assert_array_equal(gb, g.sum(axis=(0, 1)))
    np.testing.assert_array_equal(unbroadcast(g, (3, 1)), g.sum(axis=(0, 2))[:, None])
    np.testing.assert_array_equal(unbroadcast(g, (2, 3, 4)), g)


PROPERTIES = {
    "A1.1": [ops_match_central_differences, ops_on_one_value_used_twice],
    "A1.2": [sort_orders_random_dags, backward_sums_the_gradients_of_a_value_used_twice],
    "A1.3": [unbroadcast_is_the_adjoint_of_broadcasting, unbroadcast_keeps_dtype_and_known_values],
}


### BEGIN HIDDEN TESTS A1
def ops_at_extreme_inputs(tf: ModuleType) -> None:
    """tanh far past exp's overflow (a formula through exp(2x) overflows from x = 355), a
    gradient of 0 and not NaN; a negative base to an integer power; an exponent of 0; exp far
    below its underflow. The inputs are drawn from `tf.rng` (the grading secret's)."""
    rng = tf.rng
    big = float(rng.uniform(360.0, 700.0))
    for x in (big, -big):
        data, _, _, grads = _a1(tf).op("tanh", [x], 1.0)
        _close(data, math.copysign(1.0, x), f"tanh({x})")
        assert list(grads) == [0.0], f"tanh'({x}) should be 0, got {list(grads)}"
    base = -float(rng.uniform(1.5, 3.0))
    _check_op(tf, "pow 3", "pow", (base,), 3.0)
    *_, grads = _a1(tf).op("pow", [base], 1.0, 0.0)
    assert list(grads) == [0.0], f"d(x^0)/dx should be 0, got {list(grads)}"
    low = -float(rng.uniform(760.0, 1000.0))
    data, _, _, grads = _a1(tf).op("exp", [low], 1.0)
    assert float(data) == 0.0 and list(grads) == [0.0], f"exp({low}) is 0, and its gradient"


def deep_chain_and_wide_fan_in(tf: ModuleType) -> None:
    """A chain of 5000 nodes (a recursive sort passes Python's recursion limit) and one value
    used by 200 nodes (its gradient sums all 200)."""
    n = 5000
    chain = [[]] + [[i] for i in range(n)]
    order = [int(i) for i in _a1(tf).sort(chain)]
    assert order == list(range(n + 1)), "the chain's order is wrong"
    grads = _a1(tf).backward([1.0] * (n + 1), chain, [[]] + [[1.001]] * n)
    _close(grads[0], 1.001**n, "a 5000-node chain", tol=1e-9)
    data = [0.5] + [0.5 * i for i in range(200)] + [0.0]
    local = [[]] + [[float(i)] for i in range(200)] + [[1.0] * 200]
    grads = _a1(tf).backward(data, [[], *[[0]] * 200, list(range(1, 201))], local)
    _close(grads[0], float(sum(range(200))), "a value used 200 times")


def unbroadcast_edge_shapes(tf: ModuleType) -> None:
    """To a scalar shape (), across an empty axis, and from a strided view."""
    unbroadcast = tf.course.assignments.a1.autograd.unbroadcast
    g = tf.rng.normal(size=(3, 8))
    _close(float(unbroadcast(g, ())), float(g.sum()), "unbroadcast to ()", tol=1e-12)
    assert np.asarray(unbroadcast(g, ())).shape == (), "unbroadcast to () must be 0-d"
    empty = unbroadcast(np.ones((0, 4)), (1, 4))
    assert empty.shape == (1, 4) and not empty.any(), "an empty axis sums to zeros"
    view = g[:, ::2]  # (3, 4), not contiguous
    np.testing.assert_allclose(unbroadcast(view, (3, 1)), view.sum(axis=1, keepdims=True))


HIDDEN = {
    "A1.1": [ops_at_extreme_inputs],
    "A1.2": [deep_chain_and_wide_fan_in],
    "A1.3": [unbroadcast_edge_shapes],
}
### END HIDDEN TESTS
