"""gradcheck's own tolerance rule, |analytic - numeric| <= atol + rtol * |numeric| element by
element, in every mode at the default tolerances (atol 1e-5, rtol 1e-3): a backward 5% wrong in
one element of small gradients (about 0.02, where atol matters as much as rtol) fails, and
errors just inside the rule pass.

`check_tolerance_rule(gradcheck)` takes the gradcheck to test, so that
tests/test_mutation_dedicated.py can run it on a copy with a planted bug.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tinyformer as tf
from tinyformer.autograd import Function

K = 0.02  # y = K x^2 / 2: gradients K x, about 0.02 at the inputs below
X = (1.25, 0.0, 0.9, 1.0)  # a zero: an exact gradient of 0, where only atol allows any error
MODES = {
    "full": {},
    "upstream": {"upstream": [np.ones(len(X))]},  # v^T J element by element, with v = 1
    "random upstream": {"upstream": "random"},
    "fast": {"fast_mode": True},
}
ATOL, RTOL = 1e-5, 1e-3  # gradcheck's defaults, which the rule is checked at


def _op(relative: float = 0.0, absolute: float = 0.0, only: int | None = None) -> Callable:
    """y = K x^2 / 2 with a backward off by `relative` (times the exact gradient) plus
    `absolute` (in the direction of gy), everywhere or at element `only`."""

    class HalfSquare(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 0.5 * K * x * x

        @staticmethod
        def backward(ctx, gy):
            (x,) = ctx.saved_tensors
            exact = gy * K * x
            error = relative * exact + absolute * np.sign(gy)
            if only is None:
                return exact + error
            out = exact.copy()
            out.flat[only] += error.flat[only]
            return out

    return HalfSquare.apply


def _passes(gradcheck: Callable, op: Callable, mode: str) -> bool:
    x = tf.Tensor(np.array(X), requires_grad=True)
    return bool(gradcheck(op, [x], raise_exception=False, **MODES[mode]))


def check_tolerance_rule(gradcheck: Callable = tf.gradcheck) -> None:
    for mode in MODES:
        assert _passes(gradcheck, _op(), mode), f"{mode}: a correct backward fails"
        # 5% of 0.025 is 1.25e-3: far above atol + rtol * 0.025 = 3.5e-5 (and above 1e-3)
        assert not _passes(gradcheck, _op(0.05, only=0), mode), f"{mode}: 5% off passes"
        assert not _passes(gradcheck, _op(-0.05, only=2), mode), f"{mode}: -5% off passes"
        # a relative error just inside rtol: allowed whatever |numeric| is
        assert _passes(gradcheck, _op(0.9 * RTOL), mode), f"{mode}: 0.9 rtol fails"
    for mode in ("full", "upstream"):  # gy = 1 or 0 at every element: errors as planted
        # at the zero gradient only atol counts: just inside passes, twice it fails
        assert _passes(gradcheck, _op(absolute=0.9 * ATOL), mode), f"{mode}: 0.9 atol fails"
        assert not _passes(gradcheck, _op(absolute=2 * ATOL, only=1), mode), f"{mode}: 2 atol"
        # both at once, just inside atol + rtol * |numeric|
        just_inside = _op(relative=0.9 * RTOL, absolute=0.9 * ATOL)
        assert _passes(gradcheck, just_inside, mode), f"{mode}: just inside the rule fails"
        # 1.3 rtol on the gradient 0.025 passes only because atol is added to rtol * |numeric|
        assert _passes(gradcheck, _op(1.3 * RTOL, only=0), mode), f"{mode}: atol not added"


def test_gradchecks_tolerance_rule_in_every_mode():
    check_tolerance_rule()
