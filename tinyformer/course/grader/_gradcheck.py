"""The grader's forward and backward checks of one sample: the child runs the student's op, the
parent compares with the instructor's reference values (`data`), never with anything else the
child reports.

The child is asked two questions only: "this input -> this output" and "this input, this
upstream gradient -> these input gradients" (each float input in the memory layout the sample
names). The backward is asked twice and must answer the same twice (a backward that reads stale
state fails). Its gradients must equal the reference's vector-Jacobian product on the same input
and upstream gradient, |yours - reference| <= atol + rtol |reference| with the op spec's
tolerances, and they count only where the forward on the same sample is right. Finite
differences of the reference's forward, taken here, only annotate a failure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.course.grader import _compare
from tinyformer.course.grader._remote import StudentError, ask, layout_of
from tinyformer.course.grader.data import is_float, reference_call
from tinyformer.testing.checks import relayout

__all__ = ["EPS", "FORWARD_TOL", "backward_case", "forward_case", "outputs", "slots"]

EPS = 1e-6  # central differences of the reference forward (feedback only)
FORWARD_TOL = {"atol": 1e-8, "rtol": 1e-6}  # float64 values, any order of summation


def slots(args: list[Any], layouts: list[str], grad: bool) -> list[Any]:
    """The arguments as the child rebuilds them: arrays in their layouts, floats wanting a
    gradient when `grad`."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            laid = relayout(a, layouts[i % len(layouts)]) if is_float(a) else a
            a = {"tensor": np.ascontiguousarray(laid), "grad": grad and is_float(a),
                 "layout": layout_of(laid)}  # fmt: skip
        out.append(a)
    return out


def outputs(reply: dict[str, Any], stored: dict[str, Any]) -> list[np.ndarray]:
    """The reply's outputs as float64 arrays of the reference's shapes; StudentError if not."""
    outs, want = reply.get("outs"), stored["out"]
    if not isinstance(outs, list):
        raise StudentError("the code returned something other than arrays")
    if len(outs) != len(want):
        raise StudentError(f"the op returned {len(outs)} outputs, expected {len(want)}")
    return [_compare.numeric(o, f"output {i}", w.shape) for i, (o, w) in enumerate(zip(outs, want))]


def forward_error(got: list[np.ndarray], stored: dict[str, Any]) -> str | None:
    for i, (a, b) in enumerate(zip(got, stored["out"])):
        b = b.astype(np.float64)
        if _compare.bad(a, b, **FORWARD_TOL).any():
            looks = _compare.diagnose(a, b)
            return (
                f"  output {i} differs from the reference: "
                f"{_compare.first_difference(a, b, **FORWARD_TOL)}"
                + (f"\n  Looks like: {looks}." if looks else "")
            )
    return None


def forward_case(child: Any, target: str, stored: dict[str, Any]) -> str | None:
    """Why the student's forward differs from the reference on the sample, or None."""
    message = {"op": "call", "target": target, "kwargs": stored["kwargs"],
               "args": slots(list(stored["args"]), stored["layouts"], grad=False)}  # fmt: skip
    try:
        got = outputs(ask(child, message, "forward"), stored)
    except StudentError as err:
        return f"  {err}"
    return forward_error(got, stored)


def _grads(reply: dict[str, Any], args: list[Any], checked: list[int], names: list[str]):
    grads = reply.get("grads")
    if not isinstance(grads, list) or len(grads) != len(checked):
        n = len(grads) if isinstance(grads, list) else "no"
        raise StudentError(f"the backward gave {n} gradients for {len(checked)} inputs")
    return [
        np.zeros(args[i].shape)
        if g is None  # None: no path, as in PyTorch: zero
        else _compare.numeric(g, f"the gradient of {names[i]}", args[i].shape)
        for g, i in zip(grads, checked)
    ]


def backward_case(child: Any, target: str, spec: Any, stored: dict, names: list[str]):
    """Why the student's backward differs from the reference's on the sample, or None."""
    args = list(stored["args"])
    checked = [i for i, a in enumerate(args) if is_float(a)]
    if not checked:
        return None
    message = {"op": "call", "target": target, "kwargs": stored["kwargs"],
               "args": slots(args, stored["layouts"], grad=True),
               "upstream": list(stored["upstream"])}  # fmt: skip
    try:
        reply = ask(child, message, "backward")
        wrong = forward_error(outputs(reply, stored), stored)
        if wrong is not None:
            return (
                "the forward is wrong on this sample, and a backward counts only where its "
                f"forward is right:\n{wrong}"
            )
        first = _grads(reply, args, checked, names)
        again = _grads(ask(child, message, "backward"), args, checked, names)
    except StudentError as err:
        return f"  {err}"
    for k, i in enumerate(checked):
        if not np.array_equal(first[k], again[k], equal_nan=True):
            return f"  two backward passes gave different gradients for {names[i]}"
        want = stored["vjp"][k]
        out = _compare.bad(first[k], want, spec.atol, spec.rtol)
        if out.any():
            return _report(spec, stored, names[i], i, first[k], want, out)
    return None


def _fd(spec: Any, stored: dict[str, Any], i: int, j: tuple) -> float | None:
    """d<reference(x), upstream>/dx_i[j] by central differences of the reference forward."""

    def value(step: float) -> float:
        args = [np.array(a) if isinstance(a, np.ndarray) else a for a in stored["args"]]
        args[i][j] += step
        outs, _ = reference_call(spec, args, stored["kwargs"])
        return sum(float((o * g).sum()) for o, g in zip(outs, stored["upstream"])
                   if o.dtype.kind == "f")  # fmt: skip

    try:
        with np.errstate(all="ignore"):
            return (value(EPS) - value(-EPS)) / (2 * EPS)
    except Exception:  # the reference may refuse a perturbed input: no annotation then
        return None


def _report(spec, stored, name: str, i: int, got: np.ndarray, want: np.ndarray, out) -> str:
    j = _compare.worst(got, want, out)
    fd = _fd(spec, stored, i, j)
    numeric = "" if fd is None else f", finite differences of the reference forward {fd:.8g}"
    looks = _compare.diagnose(got, want)
    return (
        f"  your backward disagrees with the reference's (the same input and upstream gradient)"
        f" for {name} (shape {got.shape}):\n"
        f"    worst at {name}{_compare.index(j)}: yours {_compare.number(got[j])}, the "
        f"reference's {_compare.number(want[j])}{numeric}\n"
        f"    {int(out.sum())} of {out.size} values out of tolerance "
        f"(allowed: atol {spec.atol:g} + rtol {spec.rtol:g} * |reference|)"
        + (f"\n  Looks like: {looks}." if looks else "")
    )
