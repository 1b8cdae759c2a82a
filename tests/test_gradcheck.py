"""gradcheck itself: it passes correct backwards, catches wrong ones, and reports usefully."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
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
    for piece in ("input 1 (shape (3,))", "analytic", "numeric", "rel error", "Jacobian entry"):
        assert piece in report
    # the relative error of 2.02 x vs 2 x is 1%
    rel = float(report.split("rel error ")[1].split(" ")[0])
    assert 0.009 < rel < 0.011


def test_returns_false_instead_of_raising_when_asked():
    assert tf.gradcheck(BadSquare.apply, [_x()], raise_exception=False) is False


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
    with pytest.raises(tf.GradcheckError, match="input 0 \\(shape \\(3, 2\\)\\)"):
        tf.gradcheck(m, [x])
