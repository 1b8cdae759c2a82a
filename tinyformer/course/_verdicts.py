"""The grader's checks, run in the parent with the instructor's code: every verdict is computed
here, from the arrays the task's child returns (see `_remote`).

Each check is `fn(child, task, ...) -> (passed, output)`, `passed` None for "not available".
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import registry
from tinyformer.course._gradcheck import student_gradcheck
from tinyformer.course._remote import StudentError, StudentFunction, student_tinyformer
from tinyformer.course._sandbox import ChildGone
from tinyformer.course.definition import Task

__all__ = ["FORWARD_TOL", "forward", "gradcheck", "kernel", "number", "run_tests"]

FORWARD_TOL = {"atol": 1e-8, "rtol": 1e-6}  # float64 values, any order of summation
LAYOUTS = ("C order", "strided")
DEVICE_NAMES = {None: "on the host", "fake": "on the CPU emulator", "cuda": "on the GPU"}


def number(x: Any) -> str:
    """A plain number for a report: 0.5, not np.float64(0.5)."""
    x = np.asarray(x).item()
    return f"{x:.10g}" if isinstance(x, float) else str(x)


def _names(spec: Any, n: int) -> list[str]:
    """The op's parameter names (q, k, v), for the first n positional inputs."""
    try:
        params = [
            p.name
            for p in inspect.signature(spec.fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input {i}" for i in range(n)]


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"{v.dtype} {v.shape}"
    text = repr(v.item() if isinstance(v, np.generic) else v)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(names: list[str], args: list[Any], kwargs: dict[str, Any]) -> str:
    inputs = "; ".join(f"{n} {_short(a)}" for n, a in zip(names, args)) or "none"
    keywords = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items()) or "none"
    return f"  inputs: {inputs}\n  kwargs: {keywords}"


def _first_difference(a: np.ndarray, b: np.ndarray) -> str:
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    diff[np.isnan(diff)] = np.inf
    j = np.unravel_index(int(np.argmax(diff)), a.shape) if a.ndim else ()
    where = "[" + ", ".join(str(int(i)) for i in j) + "]"
    return f"at index {where}, got {number(a[j])}, expected {number(b[j])}"


def _tensors(args: list[Any]) -> list[Any]:
    return [tf.Tensor(a) if isinstance(a, np.ndarray) else a for a in args]


def forward(child: Any, task: Task, samples: dict[str, list], specs: dict[str, Any]):
    """The student's forward on the stored inputs equals the instructor's stored values."""
    from tinyformer.testing import Sample

    done = 0
    for name, stored in samples.items():
        for s in stored:
            if task.forward_keep is not None and not task.forward_keep(
                Sample(s["args"], s["kwargs"])
            ):
                continue
            names = _names(specs[name], len(s["args"]))
            where = f"{task.id} {name} forward, sample seed {s['seed']}:\n"
            where += _describe(names, s["args"], s["kwargs"])
            fn = StudentFunction(f"spec:{name}", child, "forward")
            try:
                with tf.no_grad():
                    y = fn(*_tensors(s["args"]), **s["kwargs"])
            except StudentError as err:
                return False, f"{where}\n{err}"
            got = [np.asarray(t.data) for t in (y if isinstance(y, tuple | list) else [y])]
            if len(got) != len(s["out"]):
                return False, f"{where}\n  {len(got)} outputs, expected {len(s['out'])}"
            for i, (a, b) in enumerate(zip(got, s["out"])):
                if a.shape != b.shape:
                    return False, f"{where}\n  output {i}: shape {a.shape}, expected {b.shape}"
                if a.dtype.kind not in "biuf" or not np.allclose(
                    a, b, equal_nan=True, **FORWARD_TOL
                ):
                    return False, (
                        f"{where}\n  output {i} differs from the instructor's: "
                        f"{_first_difference(a, b)} (atol {FORWARD_TOL['atol']:g}, "
                        f"rtol {FORWARD_TOL['rtol']:g})"
                    )
            done += 1
    if not done:
        return False, f"{task.id}: the grading data has no samples for this task"
    return True, f"{done} samples match the instructor's forward values"


def gradcheck(child: Any, task: Task, samples: dict[str, list], specs: dict[str, Any]):
    """The grader's gradcheck (float64, random upstream gradient and layouts) of the student's
    op, whose forward and backward run in the child (`_gradcheck`)."""
    done = 0
    for name, stored in samples.items():
        names = _names(specs[name], max((len(s["args"]) for s in stored), default=0))
        for s in stored:
            try:
                why = student_gradcheck(child, f"spec:{name}", specs[name], s, names)
            except StudentError as err:
                why = f"the code raised:\n{err}"
            if why is not None:
                head = f"{task.id} {name} gradcheck, RandomDraw({s['seed']}) "
                return False, f"{head}({done} earlier samples passed):\n{why}"
            done += 1
    if not done:
        return False, f"{task.id}: the grading data has no samples for this task"
    return True, f"{done} samples match finite differences (float64, random layouts)"


def _devices(backend: str) -> list[Any]:
    if backend != "cuda":
        return [None]
    return ["fake", "cuda"] if tf.cuda.is_available() else ["fake"]


def _kernel_case(child: Any, k: Any, args: list[np.ndarray], layout: str, device: Any, tol):
    """Why the student's kernel fails on these inputs, or None if it equals the reference."""
    message = {
        "op": "kernel", "primitive": k.primitive, "module": k.module, "backend": k.backend,
        "args": args, "layout": layout, "device": device,
    }  # fmt: skip
    reply = child.request(message, "the kernel check")
    if "error" in reply:
        return str(reply["error"])
    ran = reply.get("ran") or {}
    if reply.get("out") is None:
        return (
            f"the registry runs {ran.get('backend')}'s {ran.get('module')}.{ran.get('name')}; "
            f"register the kernel in {k.module} with @registry.kernel({k.primitive!r}, "
            f"backend={k.backend!r}, dtypes=...) for {args[0].dtype}"
        )
    before = [a[..., ::2] if layout == "strided" else a for a in args]
    got, after = reply["out"], reply.get("after", [])
    if not isinstance(got, np.ndarray) or len(after) != len(before):
        return "the kernel returned something other than an array"
    if any(not np.array_equal(a, b, equal_nan=True) for a, b in zip(after, before)):
        return "the kernel wrote into its input"
    if device is not None and reply.get("device") != device:
        return f"returned an array on {reply.get('device') or 'the host'}, not on {device}"
    with registry.prefer(registry.REFERENCE):
        want = registry.call(k.primitive, *[np.array(b) for b in before])
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"returned {got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
    atol, rtol = tol
    if not np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
        return (
            f"differs from the NumPy reference {_first_difference(got, want)} "
            f"(atol {atol:g}, rtol {rtol:g})"
        )
    return None


def kernel(child: Any, task: Task, samples: dict[str, list], specs: dict[str, Any]):
    """The student's kernel of one primitive equals the parent's NumPy reference (KernelCheck)
    on inputs the parent draws."""
    k = task.kernel
    assert k is not None
    rng, done, devices = np.random.default_rng(k.seed), 0, _devices(k.backend)
    for device in devices:
        for dtype in k.dtypes:
            for shape in k.shapes:
                for layout in LAYOUTS:
                    wide = (*shape[:-1], 2 * shape[-1]) if layout == "strided" else shape
                    args = [rng.standard_normal(wide).astype(dtype) for _ in range(k.arrays)]
                    failure = _kernel_case(child, k, args, layout, device, k.tol[dtype])
                    if failure:
                        where = f"{task.id} {k.primitive} kernel, {dtype} {tuple(shape)} {layout}"
                        where += "" if device is None else f" {DEVICE_NAMES[device]}"
                        return False, f"{where}:\n{failure}"
                    done += 1
    shapes = ", ".join(str(tuple(s)) for s in k.shapes)
    on = "" if devices == [None] else f"; {' and '.join(DEVICE_NAMES[d] for d in devices)}"
    return True, (
        f"{done} inputs match the NumPy reference ({' and '.join(k.dtypes)}; shapes "
        f"{shapes}; {' and '.join(LAYOUTS)}{on})"
    )


def _in_child(checks: Any, test: Any) -> bool:
    marked = getattr(checks, "IN_CHILD", ())
    return marked is True or test.__name__ in marked


def run_tests(child: Any, task: Task, checks: Any, table: str, source: str | None, file: str):
    """The task's tests in `checks.<table>` (PROPERTIES or HIDDEN). A test of arrays runs here,
    on the student's functions run in the child; one marked in `checks.IN_CHILD` (its subject
    is a Python object, not arrays) runs in the child, which reports its verdict."""
    tests = (getattr(checks, table, None) or {}).get(task.id, [])
    if not tests:
        return None, "no tests of this kind in this copy of the course"
    lines, ok = [], True
    for test in tests:
        try:
            if _in_child(checks, test):
                message = {"op": "test", "name": test.__name__, "checks": file, "source": source}
                reply = child.request(message, test.__name__)
                if "error" in reply:
                    raise StudentError(str(reply["error"]))
                if reply.get("passed") is not True:
                    raise StudentError("the test did not report a result")
                note = reply.get("note")
            else:
                note = test(student_tinyformer(child))
            lines.append(f"{test.__name__}: passed" + (f" ({note})" if note else ""))
        except ChildGone:
            raise
        except Exception as err:  # AssertionError, the student's error, the engine's checks
            ok = False
            text = f"{type(err).__name__}: {err}" if not isinstance(err, StudentError) else err
            lines.append(f"{test.__name__}: FAILED\n{text}")
    return ok, "\n".join(lines)
