"""A2's property tests (shipped to students) and hidden tests (removed by every release).

The grader runs each test itself: it gets a `tf` whose `tf.nn.functional` and `tf.ops` are the
student's, run in the task's child process, and raises AssertionError on failure. `PROPERTIES`
and `HIDDEN` map a task id to its tests. Properties explain the op; the hidden tests probe huge
logits and large offsets, where a naive formula overflows or cancels.

Expected values never come from the student's code itself (a constant function agrees with
itself): they are exact values, closed forms, or, when the grader runs the instructor's tree,
`tf.reference` (the instructor's tinyformer, run in the grader's process). In a self-check,
`tf.reference` is None and only the properties' own values are checked.

Inputs come from `tf.rng`, a NumPy Generator seeded per test from the grading secret when
grading (from a public seed in a self-check): a submission that knows this file still cannot
know the inputs, so it cannot answer them from a table.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

__all__ = ["PROPERTIES"]


def _leaf(tf: ModuleType, a: np.ndarray):
    return tf.Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _upstream(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(1).standard_normal(shape)


def _like_reference(tf: ModuleType, op: str, args: list, kwargs: dict, y, gy=None, grads=()):
    """The student's output y (and gradients `grads` of <y, gy> for the float inputs) equal the
    reference's on the same inputs; nothing to compare in a self-check."""
    ref = getattr(tf, "reference", None)
    if ref is None:
        return
    leaves = [
        ref.Tensor(np.asarray(a, np.float64), requires_grad=True)
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
        for a in args
    ]  # fmt: skip
    want = getattr(ref.nn.functional, op)(*leaves, **kwargs)
    np.testing.assert_allclose(
        np.asarray(y), want.data, rtol=1e-9, atol=1e-12, err_msg=f"{op}: not the reference's output"
    )
    if gy is not None:
        floats = [t for t in leaves if isinstance(t, ref.Tensor)]
        for k, (g, w) in enumerate(zip(grads, ref.grad(want, floats, gy))):
            np.testing.assert_allclose(
                g, w, rtol=1e-7, atol=1e-10, err_msg=f"{op}: gradient {k} is not the reference's"
            )


def _closed_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_rows_sum_to_one(tf: ModuleType) -> None:
    """Each row is a probability distribution, and moving along it leaves the sum at 1, so the
    gradient of any upstream gradient sums to 0 over the row."""
    F = tf.nn.functional

    x = _leaf(tf, tf.rng.uniform(-3, 3, (3, 5)))
    y = F.softmax(x, axis=-1)
    np.testing.assert_allclose(y.data.sum(axis=-1), 1.0, rtol=1e-12)
    assert (y.data > 0).all() and (y.data < 1).all(), "softmax values must lie in (0, 1)"
    np.testing.assert_allclose(y.data, _closed_softmax(x.data, -1), rtol=1e-12)
    (gx,) = tf.grad(y, [x], _upstream(y.shape))
    np.testing.assert_allclose(gx.sum(axis=-1), 0.0, atol=1e-12)
    _like_reference(tf, "softmax", [x.data], {"axis": -1}, y.data, _upstream(y.shape), [gx])


def softmax_large_logits(tf: ModuleType) -> None:
    """Logits of +-800 (exp(800) overflows float64): a stable softmax subtracts each row's
    maximum first, and gives the exact values and a finite gradient."""
    F = tf.nn.functional

    logits = tf.rng.choice([-800.0, 0.0, 800.0], (2, 3)) + tf.rng.uniform(-1, 1, (2, 3))
    logits[np.arange(2), tf.rng.integers(0, 3, 2)] = 800.0  # every row overflows a naive exp
    x = _leaf(tf, logits)
    y = F.softmax(x, axis=-1)
    assert np.isfinite(y.data).all(), "softmax is not finite for logits of +-800"
    np.testing.assert_allclose(y.data, _closed_softmax(x.data, -1), rtol=1e-10, atol=1e-12)
    (gx,) = tf.grad(y, [x], _upstream(y.shape))
    assert np.isfinite(gx).all(), "softmax backward is not finite for logits of +-800"
    _like_reference(tf, "softmax", [x.data], {"axis": -1}, y.data, _upstream(y.shape), [gx])


def log_softmax_exponentiates_to_distribution(tf: ModuleType) -> None:
    """exp(log_softmax(x)) is softmax(x); the gradient's rows sum to 0 (sum_j y_j is fixed)."""
    F = tf.nn.functional

    x = _leaf(tf, tf.rng.uniform(-3, 3, (4, 6)))
    y = F.log_softmax(x, axis=1)
    np.testing.assert_allclose(np.exp(y.data).sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(y.data), _closed_softmax(x.data, 1), rtol=1e-12)
    (gx,) = tf.grad(y, [x], _upstream(y.shape))
    np.testing.assert_allclose(gx.sum(axis=1), 0.0, atol=1e-12)
    _like_reference(tf, "log_softmax", [x.data], {"axis": 1}, y.data, _upstream(y.shape), [gx])


def cross_entropy_of_uniform_logits(tf: ModuleType) -> None:
    """Equal logits give loss log C; the gradient is (p - onehot) / N, whose rows sum to 0."""
    F = tf.nn.functional

    n, c = 4, 5
    x = _leaf(tf, np.zeros((n, c)))
    target = np.arange(n) % c
    loss = F.cross_entropy(x, target)
    np.testing.assert_allclose(loss.item(), np.log(c), rtol=1e-12)
    loss.backward()
    expected = (np.full((n, c), 1 / c) - np.eye(c)[target]) / n
    np.testing.assert_allclose(x.grad, expected, atol=1e-12)


def layer_norm_rows_are_standardised(tf: ModuleType) -> None:
    """Without weight and bias each row has mean 0 and variance 1 (up to eps); shifting all of
    x's row by the same amount changes nothing, so sum(y) has zero gradient."""
    F = tf.nn.functional

    x = _leaf(tf, tf.rng.normal(2.0, 3.0, (5, 16)))
    y = F.layer_norm(x, 16, eps=0.0)
    np.testing.assert_allclose(y.data.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.data.var(axis=1), 1.0, rtol=1e-10)
    centred = x.data - x.data.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(y.data, centred / centred.std(axis=1, keepdims=True), atol=1e-10)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, 0.0, atol=1e-10)
    (gx,) = tf.grad(F.layer_norm(x, 16, eps=0.0), [x], _upstream(y.shape))
    _like_reference(tf, "layer_norm", [x.data, 16], {"eps": 0.0}, y.data, _upstream(y.shape), [gx])


PROPERTIES = {
    "A2.1": [softmax_rows_sum_to_one, softmax_large_logits],
    "A2.2": [log_softmax_exponentiates_to_distribution],
    "A2.3": [cross_entropy_of_uniform_logits],
    "A2.4": [layer_norm_rows_are_standardised],
}

### BEGIN HIDDEN TESTS A2
BIG = 1e4  # exp(1e4) overflows float64 (its largest is about exp(709))


def _huge_rows(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Logits of size ~BIG in rows ~BIG apart: exp of any overflows, and a maximum taken over
    the whole array, not per row, leaves the lowest row at 0 / 0. Drawn from the test's
    generator (the grading secret's when grading), so no table of inputs answers them."""
    offsets = rng.permutation([BIG, -BIG, *rng.uniform(-BIG, BIG, rows - 2)])
    x = offsets[:, None] + rng.uniform(-20, 20, (rows, cols))
    far = rng.random((rows, cols)) < 0.3  # entries BIG below their row: exp underflows to 0
    return np.where(far, x - BIG, x)


def _logsumexp(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def softmax_huge_logits(tf: ModuleType) -> None:
    F = tf.nn.functional

    x = _leaf(tf, _huge_rows(tf.rng, int(tf.rng.integers(2, 5)), int(tf.rng.integers(3, 7))))
    y = F.softmax(x, axis=-1)
    np.testing.assert_allclose(y.data, _closed_softmax(x.data, -1), rtol=1e-10, atol=1e-12)
    (gx,) = tf.grad(y, [x], _upstream(y.shape))
    assert np.isfinite(gx).all(), "softmax backward is not finite for logits of +-1e4"
    _like_reference(tf, "softmax", [x.data], {"axis": -1}, y.data, _upstream(y.shape), [gx])


def log_softmax_huge_logits(tf: ModuleType) -> None:
    F = tf.nn.functional

    x = _leaf(tf, _huge_rows(tf.rng, int(tf.rng.integers(2, 5)), int(tf.rng.integers(2, 6))))
    y = F.log_softmax(x, axis=-1)
    np.testing.assert_allclose(y.data, x.data - _logsumexp(x.data), rtol=1e-12, atol=1e-9)
    (gx,) = tf.grad(y, [x], np.ones(y.shape))
    want = 1.0 - x.shape[-1] * _closed_softmax(x.data, -1)  # gy - softmax * sum(gy)
    np.testing.assert_allclose(gx, want, atol=1e-12)


def cross_entropy_huge_logits_and_ignored_rows(tf: ModuleType) -> None:
    F = tf.nn.functional

    rng = tf.rng
    n, c = int(rng.integers(3, 6)), int(rng.integers(3, 6))
    x = _leaf(tf, _huge_rows(rng, n, c))
    target = rng.integers(0, c, n)
    target[rng.integers(0, n)] = -100  # one ignored row
    loss = F.cross_entropy(x, target, reduction="none")
    kept = target != -100
    want = np.zeros(n)
    want[kept] = (_logsumexp(x.data)[:, 0] - x.data[np.arange(n), np.maximum(target, 0)])[kept]
    np.testing.assert_allclose(loss.data, want, rtol=1e-12, atol=1e-9)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad[~kept], 0.0, atol=0, err_msg="an ignored row got a gradient")
    assert np.isfinite(x.grad).all(), "cross_entropy backward is not finite for logits of 1e4"
    onehot = np.eye(c)[np.maximum(target, 0)]
    np.testing.assert_allclose(
        x.grad[kept], (_closed_softmax(x.data, -1) - onehot)[kept], atol=1e-12
    )
    args, kwargs = [x.data, target], {"reduction": "none"}
    _like_reference(tf, "cross_entropy", args, kwargs, loss.data, np.ones(n), [x.grad])


def layer_norm_large_offset(tf: ModuleType) -> None:
    """A one-pass variance, E[x^2] - E[x]^2, cancels catastrophically at an offset of 1e6."""
    F = tf.nn.functional

    rng = tf.rng
    d = int(rng.integers(8, 17))
    base = rng.normal(size=(int(rng.integers(2, 5)), d))
    x = _leaf(tf, base + rng.choice([-1.0, 1.0]) * rng.uniform(1e6, 4e6))
    y1 = F.layer_norm(x, d)
    centred = base - base.mean(axis=1, keepdims=True)  # the same rows, without the offset
    want = centred / np.sqrt(centred.var(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y1.data, want, atol=1e-6)
    (gx,) = tf.grad(y1, [x], _upstream(y1.shape))
    _like_reference(tf, "layer_norm", [x.data, d], {}, y1.data, _upstream(y1.shape), [gx])


HIDDEN = {
    "A2.1": [softmax_huge_logits],
    "A2.2": [log_softmax_huge_logits],
    "A2.3": [cross_entropy_huge_logits_and_ignored_rows],
    "A2.4": [layer_norm_large_offset],
}
### END HIDDEN TESTS
