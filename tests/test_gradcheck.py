"""gradcheck itself: it passes correct backwards, catches wrong ones, and reports usefully."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.autograd import Function


class BadSquare(Function):
    """x^2 with a deliberately wrong backward (2.02 x instead of 2 x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy * 2.02 * x


def _x(shape=(3, 4), seed=0):
    return tf.Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("mode", [{}, {"upstream": "random"}, {"fast_mode": True}])
def test_correct_backward_passes_in_every_mode(mode):
    w = _x((4, 2), 1)
    assert tf.gradcheck(lambda x, w: (x @ w).tanh(), [_x(), w], **mode)


@pytest.mark.parametrize("mode", [{}, {"upstream": "random"}, {"fast_mode": True}])
def test_wrong_backward_is_caught_in_every_mode(mode):
    with pytest.raises(tf.GradcheckError, match="BadSquare"):
        tf.gradcheck(BadSquare.apply, [_x()], **mode)


def test_report_names_input_element_values_and_errors():
    with pytest.raises(tf.GradcheckError) as info:
        tf.gradcheck(lambda a, b: a * 2 + BadSquare.apply(b), [_x((3,), 1), _x((3,), 2)])
    report = str(info.value)
    for piece in ("input 1 (shape (3,))", "analytic", "numeric", "rel error", "w.r.t. input 1["):
        assert piece in report
    # the relative error of 2.02 x vs 2 x is 1%
    rel = float(report.split("rel error ")[1].split(" ")[0])
    assert 0.009 < rel < 0.011


def test_returns_a_false_result_with_the_report_instead_of_raising_when_asked():
    result = tf.gradcheck(BadSquare.apply, [_x()], raise_exception=False)
    assert not result and not result.passed and "BadSquare" in result.report
    assert "BadSquare" in repr(result)
    passed = tf.gradcheck(lambda x: x * x, [_x()], raise_exception=False)
    assert passed and passed.passed and passed.report is None


def test_the_worst_element_is_named_by_its_indices_in_each_shape():
    with pytest.raises(tf.GradcheckError) as info:
        tf.gradcheck(BadSquare.apply, [_x((2, 3))])
    # elementwise: the worst Jacobian entry is on the diagonal, output[i, j] w.r.t. input[i, j]
    found = re.search(
        r"worst at output\[(\d), (\d)\] w.r.t. input 0\[(\d), (\d)\]", str(info.value)
    )
    assert found and found.group(1, 2) == found.group(3, 4)
    with pytest.raises(tf.GradcheckError, match=r"worst at input 0\[\d, \d\]"):
        tf.gradcheck(BadSquare.apply, [_x((2, 3))], upstream="random")


class _ScaledBackward(Function):
    """y = x @ w with the gradient of w computed by `mistake`."""

    mistake = staticmethod(lambda gw: gw)

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @classmethod
    def backward(cls, ctx, gy):
        x, w = ctx.saved_tensors
        return gy @ w.T, cls.mistake(x.T @ gy)


MISTAKES = {
    "factor": (lambda gw: 0.5 * gw, "a constant multiple of the numeric one: 0.5 x numeric"),
    "sign": (lambda gw: -gw, "the negative of the numeric one: a sign flip"),
    "transpose": (lambda gw: gw.T, "the transpose of the numeric one"),
    "zero": (lambda gw: 0 * gw, "zero everywhere"),
}
# The transpose shows in w's shape, which the random-upstream mode compares; the full Jacobian
# of w, (12, 9) here, has no transpose to see.
CASES = [(name, mode) for name in MISTAKES for mode in ("full", "random")]
CASES.remove(("transpose", "full"))


@pytest.mark.parametrize("name, mode", CASES)
def test_the_report_says_what_the_mistake_looks_like(name, mode):
    mistake, looks_like = MISTAKES[name]
    bad = type("Bad", (_ScaledBackward,), {"mistake": staticmethod(mistake)})
    # not checked (w only); not seed 0, which draws the upstream gradient: x^T v is symmetric
    x = tf.Tensor(np.random.default_rng(7).standard_normal((4, 3)))
    w = _x((3, 3), 1)
    upstream = {"upstream": "random"} if mode == "random" else {}
    with pytest.raises(
        tf.GradcheckError, match=f"Looks like: the analytic gradient is {looks_like}"
    ):
        tf.gradcheck(bad.apply, [x, w], **upstream)


def test_float32_inputs_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="float64"):
        tf.gradcheck(lambda x: x * 2, [tf.randn(3, requires_grad=True)])


def test_nothing_to_check_is_an_error():
    with pytest.raises(ValueError, match="no input requires grad"):
        tf.gradcheck(lambda x: x * 2, [tf.Tensor(np.ones(3))])
    x = tf.randn(3, dtype=np.float64, requires_grad=True)
    for bad in ({"eps": 0.0}, {"atol": -1.0}, {"rtol": -1.0}):  # eps=0 blamed the backward
        with pytest.raises(ValueError, match="gradcheck: need eps > 0, atol >= 0, rtol >= 0"):
            tf.gradcheck(lambda x: x * 2, [x], **bad)
    # no output to compare passed whatever the backward did: a TA's .item() made a vacuous test
    for fn, returned in ((lambda x: (x * x).sum().item(), "float"), (lambda x: x > 0, "Tensor")):
        with pytest.raises(ValueError, match=f"returned {returned} .* no floating Tensor to check"):
            tf.gradcheck(fn, [x])


def test_non_deterministic_backward_fails_the_reentrant_check():
    rng = np.random.default_rng(0)

    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, gy):
            return gy * (1.0 + 1e-9 * rng.standard_normal())

    with pytest.raises(tf.GradcheckError, match="reentrant"):
        tf.gradcheck(Noisy.apply, [_x()])


def test_multiple_outputs_and_inputs():
    def f(a, b):
        return a * b, (a + b).exp()

    assert tf.gradcheck(f, [_x((3,), 1), _x((3,), 2)])


def test_modules_parameters_are_checked_too():
    class TinyModule:
        def __init__(self):
            self.w = _x((3, 2), 5)

        def parameters(self):
            return [self.w]

        def __call__(self, x):
            return BadSquare.apply(x @ self.w)

    m = TinyModule()
    x = tf.Tensor(np.ones((1, 3)))  # the input does not require grad: only the parameter
    with pytest.raises(tf.GradcheckError, match="parameter 0 \\(shape \\(3, 2\\)\\)"):
        tf.gradcheck(m, [x])


def test_a_modules_parameters_are_named_in_the_report():
    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            return BadSquare.apply(self.lin(x))

    layer = Layer().to(tf.float64)
    x = tf.Tensor(np.ones((1, 3)))
    with pytest.raises(tf.GradcheckError, match=r"parameter lin\.weight \(shape \(2, 3\)\)"):
        tf.gradcheck(layer, [x])


class Cube(Function):
    """x^3 with a wrong backward (2 x^2 instead of 3 x^2), hidden under two correct ops."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy * 2 * x**2


def test_localize_blames_the_broken_op_not_the_last_one():
    def f(x):
        return (Cube.apply(x.tanh()) * 2).sum()

    with pytest.raises(tf.GradcheckError) as plain:
        tf.gradcheck(f, [_x()])
    assert "output produced by: Sum" in str(plain.value)  # the last op: not the culprit
    with pytest.raises(tf.GradcheckError) as info:
        tf.gradcheck(f, [_x()], localize=True)
    report = str(info.value)
    assert (
        "Localized: of the 4 ops the forward recorded, 1 fail their own gradcheck: Cube" in report
    )
    assert (
        "Looks like: the analytic gradient is a constant multiple" in report.split("Localized")[1]
    )


def test_localize_says_when_every_op_is_right_on_its_own():
    def f(x):
        y = x * x
        return y * tf.Tensor(y.data)  # .data cuts the graph: half the product rule is lost

    report = str(tf.gradcheck(f, [_x()], localize=True, raise_exception=False).report)
    assert "each of the 2 ops the forward recorded passes its own gradcheck" in report
