"""gradcheck: compare backward's gradients with central finite differences, in float64.

For f with inputs x and outputs y, backward computes vector-Jacobian products v^T J. Finite
differences estimate each column of J independently of any backward code:

    J[:, i] ~ (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)      error O(eps^2)

in float64, where rounding in f (about 1e-16 |f| / eps) stays far below the tolerance; in float32
it is about 1e-7 / 1e-6, around 1% (measured in tutorial 2), so gradcheck refuses float32 inputs.

Three ways to compare (pick by input size):
- full (default, as PyTorch): every entry of J: 2 forwards per input element, 1 backward per
  output element.
- upstream="random": one random upstream gradient v, so v^T J (one backward) is compared element
  by element with the finite differences of v . f. This is what the op test suite runs.
- fast_mode=True: random v and u, the scalar v^T J u per input: 2 forwards and 1 backward per
  input, for inputs too large for the others.

On failure it raises `GradcheckError` naming the input, the element, both values, the errors and
the op that produced the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tinyformer import autograd, engine
from tinyformer.tensor import Tensor

__all__ = ["GradcheckError", "GradcheckResult", "gradcheck"]


class GradcheckError(AssertionError):
    """Backward disagrees with finite differences (or is not deterministic)."""


class GradcheckResult:
    """What `gradcheck(..., raise_exception=False)` returns: true when the check passed, else
    false with the report that `GradcheckError` would have carried in `.report`."""

    def __init__(self, report: str | None = None) -> None:
        self.report = report

    @property
    def passed(self) -> bool:
        return self.report is None

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return (
            "GradcheckResult(passed)" if self.passed else f"GradcheckResult(failed)\n{self.report}"
        )


def _outputs(fn: Callable, inputs: Sequence[Any]) -> list[Tensor]:
    out = fn(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    kept = [o for o in outs if isinstance(o, Tensor) and o.dtype.kind == "f"]
    if not kept:  # with no output to compare, every backward would pass
        raise ValueError(
            f"gradcheck: the function returned {type(out).__name__} {out!r:.60}, with no "
            "floating Tensor to check (.item(), .numpy() and .data leave autograd; comparisons "
            "give booleans)"
        )
    return kept


def _flat_output(fn: Callable, inputs: Sequence[Any]) -> np.ndarray:
    with autograd.no_grad():
        outs = _outputs(fn, inputs)
    return np.concatenate([o.data.ravel() for o in outs]) if outs else np.zeros(0)


def _numeric_columns(fn, inputs, t: Tensor, eps: float, directions=None):
    """Central differences of the flattened outputs, one column per element of `t` (or per
    direction in `directions`)."""
    columns = []
    steps = directions if directions is not None else range(t.size)
    for step in steps:
        original = t.data.copy() if directions is not None else None
        if directions is None:
            index = np.unravel_index(step, t.shape)
            value = t.data[index]
            t.data[index] = value + eps
            plus = _flat_output(fn, inputs)
            t.data[index] = value - eps
            minus = _flat_output(fn, inputs)
            t.data[index] = value
        else:
            t.data[...] = original + eps * step
            plus = _flat_output(fn, inputs)
            t.data[...] = original - eps * step
            minus = _flat_output(fn, inputs)
            t.data[...] = original
        columns.append((plus - minus) / (2 * eps))
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))


def _analytic_vjp(fn, inputs, checked, v: np.ndarray) -> list[np.ndarray]:
    """v^T J for every checked tensor, from one forward and one backward."""
    outs = _outputs(fn, inputs)
    grads_out, offset = [], 0
    for o in outs:
        grads_out.append(v[offset : offset + o.size].reshape(o.shape).astype(o.dtype))
        offset += o.size
    live = [(o, g) for o, g in zip(outs, grads_out) if o.requires_grad]
    result = [np.zeros(t.shape) for t in checked]
    if live:
        grads = autograd.grad([o for o, _ in live], checked, [g for _, g in live])
        result = [np.zeros(t.shape) if g is None else g for t, g in zip(checked, grads)]
    return result


def _producers(fn, inputs) -> str:
    outs = _outputs(fn, inputs)
    names = [o.grad_fn.name if o.grad_fn is not None else "no op (a leaf)" for o in outs]
    return ", ".join(dict.fromkeys(names)) or "nothing"


def _index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _diagnosis(analytic: np.ndarray, numeric: np.ndarray, atol: float) -> str:
    """What the disagreement looks like, in the terms of the usual mistakes."""
    a, n = analytic.ravel(), numeric.ravel()
    big = np.abs(n) > max(atol, 1e-8 * np.abs(n).max(initial=0))
    if not np.any(np.abs(a) > atol) and big.any():
        return (
            "the analytic gradient is zero everywhere (backward returns zeros, or is not connected)"
        )
    if big.any() and n @ n > 0:
        c = (a @ n) / (n @ n)  # the best single factor a = c n
        if np.abs(a - c * n).max() <= 1e-3 * np.abs(a).max() + atol and abs(c - 1) > 1e-3:
            if abs(c + 1) < 1e-3:
                return "the analytic gradient is the negative of the numeric one: a sign flip"
            return (
                f"the analytic gradient is a constant multiple of the numeric one: {c:.6g} x "
                "numeric (a missing or extra factor)"
            )
    if analytic.ndim == 2 and analytic.shape[0] == analytic.shape[1] > 1:
        if np.allclose(analytic.T, numeric, rtol=1e-3, atol=atol):
            return "the analytic gradient is the transpose of the numeric one"
    zeros = int(np.sum((np.abs(a) <= atol) & big))
    if zeros:
        return (
            f"the analytic gradient is 0 at {zeros} elements where the numeric one is not (a "
            "missing term, or a sum over broadcast axes that leaves some out)"
        )
    return (
        "no simple pattern (not a constant factor, sign or transpose): compare the failing "
        "elements with the op's formula"
    )


def _worst(analytic: np.ndarray, numeric: np.ndarray, atol: float, rtol: float) -> tuple:
    """The index of the largest error among the values out of tolerance."""
    err = np.abs(analytic - numeric)
    bad = err > atol + rtol * np.abs(numeric)
    return np.unravel_index(int(np.argmax(np.where(bad, err, -1))), analytic.shape)


def _report(kind, label, t, analytic, numeric, atol, rtol, producer, worst, where) -> str:
    bad = np.abs(analytic - numeric) > atol + rtol * np.abs(numeric)
    a, n = analytic[worst], numeric[worst]
    # relative to 0 the error is meaningless (1e-300 as the floor made it 4e+300)
    rel = f"rel error {abs(a - n) / abs(n):.3g}" if n != 0 else "numeric gradient is 0 here"
    return (
        f"gradcheck failed ({kind}): the gradient for {label} (shape {t.shape}) disagrees with "
        f"finite differences.\n"
        f"  output produced by: {producer}\n"
        f"  worst at {where}:\n"
        f"    analytic (backward)  {a:.8g}\n"
        f"    numeric (finite diff) {n:.8g}\n"
        f"    abs error {abs(a - n):.3g}, {rel} "
        f"(allowed: atol {atol:g} + rtol {rtol:g} * |numeric|)\n"
        f"  {int(bad.sum())} of {bad.size} compared values are out of tolerance.\n"
        f"  Looks like: {_diagnosis(analytic, numeric, atol)}."
    )


def _labels(fn: Any, inputs: list[Any]) -> dict[int, str]:
    """A name for every tensor gradcheck may check, by id: its position among the inputs, or
    its parameter name when `fn` is a module."""
    labels = {id(t): f"input {i}" for i, t in enumerate(inputs) if isinstance(t, Tensor)}
    if hasattr(fn, "named_parameters"):
        labels.update({id(p): f"parameter {name}" for name, p in fn.named_parameters()})
    elif hasattr(fn, "parameters"):
        labels.update({id(p): f"parameter {j}" for j, p in enumerate(fn.parameters())})
    return labels


def _output_index(flat: int, shapes: list[tuple[int, ...]]) -> str:
    """`output[i, j]` (or `output k[i, j]` among several) for a flat index into all outputs."""
    for k, shape in enumerate(shapes):
        size = int(np.prod(shape))
        if flat < size:
            name = "output" if len(shapes) == 1 else f"output {k}"
            return name + _index(np.unravel_index(flat, shape))
        flat -= size
    raise IndexError(flat)


def _localize(fn: Callable, inputs: Sequence[Any]) -> str:
    """Gradcheck every op the forward recorded, each on its own inputs, and name those that
    fail: the last op before the output is rarely the broken one."""
    with autograd.detect_anomaly():  # records each op's inputs (ctx._call)
        outs = _outputs(fn, inputs)
    nodes = engine._toposort([o.grad_fn for o in outs if o.grad_fn is not None])
    failures = []
    for node in nodes:  # inputs before outputs: the first failure is the earliest op
        arrays, params = node._call
        args = [
            Tensor(np.array(a, np.float64), requires_grad=True)
            if need and getattr(a, "dtype", None) is not None and a.dtype.kind == "f"
            else a
            for a, need in zip(arrays, node.needs_input_grad)
        ]
        if not any(isinstance(a, Tensor) for a in args):
            continue
        result = gradcheck(
            lambda *xs, f=node.function, kw=params: f.apply(*xs, **kw),
            args, upstream="random", check_reentrant=False, raise_exception=False,
        )  # fmt: skip
        if not result:
            failures.append((node.name, result.report))
    if not failures:
        return (
            f"Localized: each of the {len(nodes)} ops the forward recorded passes its own "
            "gradcheck, so the fault is in how they are combined (an array changed in place, "
            "or .data / .numpy() used inside the forward, which cuts the graph)."
        )
    names = ", ".join(name for name, _ in failures)
    return (
        f"Localized: of the {len(nodes)} ops the forward recorded, {len(failures)} fail their "
        f"own gradcheck: {names}. The first one's report:\n{failures[0][1]}"
    )


def _fail(message: str, raise_exception: bool) -> GradcheckResult:
    if raise_exception:
        raise GradcheckError(message)
    return GradcheckResult(message)


def gradcheck(
    fn: Callable[..., Any],
    inputs: Tensor | Sequence[Any],
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    upstream: str | Sequence[np.ndarray] | None = None,
    check_reentrant: bool = True,
    raise_exception: bool = True,
    seed: int = 0,
    localize: bool = False,
) -> GradcheckResult:
    """Check `fn`'s backward against finite differences; return a true `GradcheckResult` or
    raise GradcheckError.

    Args:
        fn: a function of the inputs returning a Tensor or a tuple of Tensors, or a module (then
            its `parameters()` are checked too).
        inputs: the inputs; float64 tensors with requires_grad=True are checked.
        eps, atol, rtol: step and tolerances: |analytic - numeric| <= atol + rtol * |numeric|.
        fast_mode: compare random projections v^T J u only (cheap, for large inputs).
        upstream: None for the full Jacobian; "random" (or arrays, one per output) to compare
            v^T J for one upstream gradient v.
        check_reentrant: run backward twice and require identical results.
        raise_exception: raise on failure (default) instead of returning a false
            `GradcheckResult` whose `.report` says what failed.
        seed: for the random v and u.
        localize: on failure, also gradcheck every op the forward recorded on its own inputs
            and name the ones that fail (the report otherwise names only the last op).
    """
    # eps = 0 would divide by zero, and the failure would blame the backward
    if not (eps > 0 and atol >= 0 and rtol >= 0):
        raise ValueError(
            f"gradcheck: need eps > 0, atol >= 0, rtol >= 0; got {eps}, {atol}, {rtol}"
        )
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    params = list(fn.parameters()) if hasattr(fn, "parameters") else []
    checked = [t for t in (*inputs, *params) if isinstance(t, Tensor) and t.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad; nothing to check")
    for i, t in enumerate(checked):
        if t.dtype != np.float64:
            raise ValueError(
                f"gradcheck: input {i} is {t.dtype}; use float64 (x.data.astype('float64')): "
                "float32 finite differences carry ~1e-2 relative rounding error at eps=1e-6, far "
                "more than the tolerance, so the check would fail for correct backwards"
            )
    rng = np.random.default_rng(seed)
    n_out = _flat_output(fn, inputs).size
    producer = _producers(fn, inputs)
    labels = _labels(fn, inputs)

    def fail(message: str) -> GradcheckResult:
        if localize:
            message += "\n" + _localize(fn, inputs)
        return _fail(message, raise_exception)

    names = [labels.get(id(t), f"checked tensor {i}") for i, t in enumerate(checked)]

    if fast_mode or upstream is not None:
        if upstream is None or isinstance(upstream, str):
            v = rng.standard_normal(n_out)
        else:
            v = np.concatenate([np.asarray(g, np.float64).ravel() for g in upstream])
        analytic = _analytic_vjp(fn, inputs, checked, v)
        for i, (t, a) in enumerate(zip(checked, analytic)):
            if fast_mode:
                u = rng.standard_normal(t.shape)
                numeric = v @ _numeric_columns(fn, inputs, t, eps, directions=[u])
                a_proj = np.array([np.sum(a * u)])
                if not np.allclose(a_proj, numeric, rtol=rtol, atol=atol):
                    where = (
                        "the random projection v^T J u (rerun with fast_mode=False for elements)"
                    )
                    args = (a_proj, numeric, atol, rtol, producer, (0,), where)
                    return fail(_report("fast", names[i], t, *args))
            else:
                numeric = (v @ _numeric_columns(fn, inputs, t, eps)).reshape(t.shape)
                if not np.allclose(a, numeric, rtol=rtol, atol=atol):
                    worst = _worst(a, numeric, atol, rtol)
                    args = (a, numeric, atol, rtol, producer, worst, names[i] + _index(worst))
                    return fail(_report("random upstream", names[i], t, *args))
    else:
        with autograd.no_grad():
            out_shapes = [o.shape for o in _outputs(fn, inputs)]
        for i, t in enumerate(checked):
            numeric = _numeric_columns(fn, inputs, t, eps)  # (n_out, t.size)
            rows = [
                _analytic_vjp(fn, inputs, [t], np.eye(1, n_out, j)[0])[0].ravel()
                for j in range(n_out)
            ]
            analytic = np.stack(rows) if rows else np.zeros_like(numeric)
            if not np.allclose(analytic, numeric, rtol=rtol, atol=atol):
                worst = _worst(analytic, numeric, atol, rtol)  # (output element, input element)
                element = _index(np.unravel_index(int(worst[1]), t.shape))
                where = f"{_output_index(int(worst[0]), out_shapes)} w.r.t. {names[i]}{element}"
                args = (analytic, numeric, atol, rtol, producer, worst, where)
                return fail(_report("full Jacobian", names[i], t, *args))

    if check_reentrant:
        v = rng.standard_normal(n_out)
        first = _analytic_vjp(fn, inputs, checked, v)
        second = _analytic_vjp(fn, inputs, checked, v)
        for i, (a, b) in enumerate(zip(first, second)):
            if not np.array_equal(a, b):
                return fail(
                    f"gradcheck failed (reentrant): backward gave different gradients for "
                    f"{names[i]} on two identical runs (max difference {np.abs(a - b).max():.3g}); "
                    f"output produced by: {producer}",
                )
    return GradcheckResult()
