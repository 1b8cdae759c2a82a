"""The grader's gradcheck of a student's op: the comparison here, the op's code in the child.

What `tinyformer.testing.checks.check_backward` does (float64, a random upstream gradient v,
each float input in a layout drawn by `RandomDraw(seed)`, central differences with eps 1e-6,
|analytic - numeric| <= atol + rtol |numeric| with the spec's tolerances), with the student's
forward and backward run in the task's child: one request for the outputs, two for v^T J
(which must agree: a backward that reads stale state fails), and one batch of perturbed
forwards per input for the finite differences, so that a gradcheck costs a few round trips,
not one per element. The same seeds draw the same layouts and v as `check_backward`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.course._remote import StudentError, layout_of
from tinyformer.gradcheck import _report, _worst  # the library's report, word for word
from tinyformer.testing import RandomDraw, Sample
from tinyformer.testing.checks import draw_layouts, relayout

__all__ = ["EPS", "student_gradcheck"]

EPS = 1e-6


def _is_float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _slot(a: Any, layout: str, grad: bool) -> Any:
    if not isinstance(a, np.ndarray):
        return a
    a = relayout(a, layout) if _is_float(a) else a
    return {"tensor": np.ascontiguousarray(a), "grad": grad, "layout": layout_of(a)}


def _ask(child: Any, message: dict[str, Any], during: str) -> dict[str, Any]:
    reply = child.request(message, during)
    if "error" in reply:
        raise StudentError(str(reply["error"]))
    return reply


def _arrays(items: Any, what: str) -> list[np.ndarray]:
    if not isinstance(items, list) or not all(isinstance(o, np.ndarray) for o in items):
        raise StudentError(f"the code returned something other than arrays ({what})")
    return items


def _describe(names: list[str], args: list[Any], layouts: list[str], kwargs: dict) -> str:
    parts = []
    for name, a, layout in zip(names, args, layouts):
        if _is_float(a):
            parts.append(f"{name} float64 {a.shape} {layout}")
        elif isinstance(a, np.ndarray):
            parts.append(f"{name} {a.dtype} {a.shape}")
        else:
            parts.append(f"{name} {a!r}"[:60])
    keywords = ", ".join(f"{k}={v!r}"[:60] for k, v in kwargs.items()) or "none"
    return f"  inputs: {'; '.join(parts) or 'none'}\n  kwargs: {keywords}"


def student_gradcheck(
    child: Any, target: str, spec: Any, stored: dict[str, Any], names: list[str]
) -> str | None:
    """Why the student's backward disagrees with finite differences on the stored sample, or
    None if it agrees. Raises StudentError when the student's code raises."""
    draw = RandomDraw(stored["seed"])
    sample = Sample(list(stored["args"]), dict(stored["kwargs"]))
    layouts = draw_layouts(draw, sample)
    args = [a.astype(np.float64) if _is_float(a) else a for a in sample.args]
    checked = [i for i, a in enumerate(args) if _is_float(a)]
    if not checked:
        return None
    rng = np.random.default_rng(draw.integers(0, 2**16))
    base = {"op": "call", "target": target, "kwargs": sample.kwargs}
    slots = [_slot(a, layouts[i % len(layouts)], _is_float(a)) for i, a in enumerate(args)]
    outs = _arrays(_ask(child, {**base, "args": slots}, "gradcheck").get("outs"), "outputs")
    v = rng.standard_normal(sum(o.size for o in outs))
    upstream, at = [], 0
    for o in outs:
        upstream.append(v[at : at + o.size].reshape(o.shape).astype(o.dtype))
        at += o.size
    vjp = {**base, "args": slots, "upstream": upstream}
    first = _arrays(_ask(child, vjp, "gradcheck (backward)").get("grads"), "gradients")
    again = _arrays(_ask(child, vjp, "gradcheck (backward)").get("grads"), "gradients")
    head = f"gradcheck of {spec.name} on the sample drawn by RandomDraw({stored['seed']}):\n"
    head += _describe(names, args, layouts, sample.kwargs) + "\n"
    if len(first) != len(checked):
        return head + f"the backward gave {len(first)} gradients for {len(checked)} inputs"
    for k, i in enumerate(checked):
        a = np.asarray(first[k], dtype=np.float64)
        if a.shape != args[i].shape:
            return head + f"the gradient of {names[i]} has shape {a.shape}, not {args[i].shape}"
        if not np.array_equal(a, again[k], equal_nan=True):
            return head + f"two backward passes gave different gradients for {names[i]}"
        numeric = _numeric(child, base, slots, i, args[i], v)
        if not np.allclose(a, numeric, rtol=spec.rtol, atol=spec.atol):
            worst = _worst(a, numeric, spec.atol, spec.rtol)
            where = names[i] + "[" + ", ".join(str(int(j)) for j in worst) + "]"
            report = (a, numeric, spec.atol, spec.rtol, "the student's op", worst, where)
            return head + _report("random upstream", names[i], args[i], *report)
    return None


def _numeric(child, base, slots, i, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v^T J for input i by central differences: one batch of 2 x.size forwards in the child."""
    values = []
    for j in range(x.size):
        for sign in (1.0, -1.0):
            step = x.copy()
            step.flat[j] += sign * EPS
            values.append(step)  # the child lays it out as the input's slot says
    message = {**base, "op": "batch", "args": slots, "slot": i, "values": values}
    flat = _arrays(_ask(child, message, "gradcheck (finite differences)").get("outs"), "outputs")
    if len(flat) != len(values) or any(f.shape != (v.size,) for f in flat):
        raise StudentError("the forward's outputs changed shape under a small step")
    plus, minus = np.stack(flat[0::2]), np.stack(flat[1::2])
    return (((plus - minus) / (2 * EPS)) @ v).reshape(x.shape)
