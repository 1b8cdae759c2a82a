"""The grader's checks, run in the parent with the instructor's code: every verdict is computed
here, from the arrays the task's child returns, against the instructor's reference values
(`data`, `_gradcheck`), never against anything else the child reports.

Each check is `fn(child, task, ...) -> (passed, output)`, `passed` None for "not available".
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import registry
from tinyformer.course.definition import Task
from tinyformer.course.grader import secret
from tinyformer.course.grader._compare import bad, describe, first_difference, number, numeric
from tinyformer.course.grader._gradcheck import FORWARD_TOL, backward_case, forward_case
from tinyformer.course.grader._remote import StudentError, student_tinyformer
from tinyformer.course.grader._sandbox import ChildGone

__all__ = ["FORWARD_TOL", "forward", "gradcheck", "kernel", "number", "run_tests", "inputs_rng"]
LAYOUTS = ("C order", "strided")
DEVICE_NAMES = {None: "on the host", "fake": "on the CPU emulator", "cuda": "on the GPU"}


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


def _graded(task: Task, meta: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """(spec name, number, sample) for every sample the task's forward and backward grade."""
    from tinyformer.testing import Sample

    out = []
    for name, stored in (meta.get("tasks", {}).get(task.id) or {}).items():
        for k, s in enumerate(stored):
            if task.forward_keep is None or task.forward_keep(Sample(s["args"], s["kwargs"])):
                out.append((name, k, s))
    return out


def _where(task: Task, name: str, k: int, s: dict, what: str, spec: Any) -> str:
    wide = " (widened: where a skill hides)" if s.get("wide") else ""
    head = f"{task.id} {name} {what}, sample {k} (seed {s['seed']}){wide}:\n"
    names = _names(spec, len(s["args"]))
    return head + describe(names, list(s["args"]), s["kwargs"], s.get("layouts"))


def _run_samples(task: Task, meta: dict[str, Any], specs: dict[str, Any], what: str, case):
    samples = _graded(task, meta)
    if not samples:
        return False, f"{task.id}: the grading data has no samples for this task"
    for done, (name, k, s) in enumerate(samples):
        why = case(name, s)
        if why is not None:
            head = _where(task, name, k, s, what, specs[name])
            return False, f"{head}\n{why}\n({done} earlier samples passed)"
    return True, len(samples)


def forward(child: Any, task: Task, meta: dict[str, Any], specs: dict[str, Any]):
    """The student's forward equals the instructor's reference on every graded sample."""
    ok, out = _run_samples(
        task, meta, specs, "forward", lambda name, s: forward_case(child, f"spec:{name}", s)
    )
    if not ok:
        return ok, out
    return True, f"{out} samples match the reference's forward (float64)"


def gradcheck(child: Any, task: Task, meta: dict[str, Any], specs: dict[str, Any]):
    """The student's backward equals the reference's vector-Jacobian product on every graded
    sample, each with a random upstream gradient and random memory layouts, and only where the
    forward is right."""

    def case(name: str, s: dict[str, Any]) -> str | None:
        names = _names(specs[name], len(s["args"]))
        return backward_case(child, f"spec:{name}", specs[name], s, names)

    ok, out = _run_samples(task, meta, specs, "gradcheck", case)
    if not ok:
        return ok, out
    return True, (
        f"{out} samples: the backward equals the reference's vector-Jacobian product (float64, "
        "random upstream gradients and memory layouts)"
    )


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
    if not isinstance(reply, dict):
        return "the child's reply is not a message"
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
    if not isinstance(got, np.ndarray) or not isinstance(after, list) or len(after) != len(before):
        return "the kernel returned something other than an array"
    for a, b in zip(after, before):
        a = numeric(a, "the input after the kernel ran", b.shape)
        if not np.array_equal(a, b, equal_nan=True):
            return "the kernel wrote into its input"
    if device is not None and reply.get("device") != device:
        return f"returned an array on {reply.get('device') or 'the host'}, not on {device}"
    with registry.prefer(registry.REFERENCE):
        want = registry.call(k.primitive, *[np.array(b) for b in before])
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"returned {got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
    atol, rtol = tol
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    if bad(got64, want64, atol, rtol).any():
        return f"differs from the NumPy reference {first_difference(got64, want64, atol, rtol)}"
    return None


def kernel(child: Any, task: Task, meta: dict[str, Any], specs: dict[str, Any]):
    """The student's kernel of one primitive equals the parent's NumPy reference (KernelCheck)
    on inputs the parent draws (from the secret salt's seed, when grading for real)."""
    k = task.kernel
    assert k is not None
    seed = (meta.get("kernel_seeds") or {}).get(task.id, k.seed)
    rng, done, devices = np.random.default_rng(seed), 0, _devices(k.backend)
    for device in devices:
        for dtype in k.dtypes:
            for shape in k.shapes:
                for layout in LAYOUTS:
                    args = k.draw(rng, shape, dtype, strided=layout == "strided")
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


PUBLIC = b"public self-check"  # the salt of the inputs a self-check's tests draw


def inputs_rng(task: Task, name: str, seeds: dict[str, int] | None) -> np.random.Generator:
    """The generator test `name` of `task` draws its inputs from: seeded from the grading
    secret (`seeds`, the grading data's `test_seeds[task.id]`, `secret.seed(salt, NAME, task,
    name)`) when grading, so no submission can know them, else from public seeds."""
    seed = (seeds or {}).get(name)
    return np.random.default_rng(seed if seed is not None else secret.seed(PUBLIC, task.id, name))


def run_tests(
    child: Any, task: Task, checks: Any, table: str, source: str | None, module: str,
    reference: bool = False, seeds: dict[str, int] | None = None,
):  # fmt: skip
    """The task's tests in `checks.<table>` (PROPERTIES or HIDDEN). A test of arrays runs here,
    on the student's functions run in the child, with `tf.reference` the instructor's own
    tinyformer when `reference` (None in a self-check), `tf.rng` the generator its inputs are
    drawn from (`inputs_rng`), and every primitive of this process forced to its NumPy
    reference; one marked in `checks.IN_CHILD` (its subject is a Python
    object, not arrays) runs in the child (which finds the module named `module` in its tree,
    or runs `source`), and the child reports its verdict."""
    tests = (getattr(checks, table, None) or {}).get(task.id, [])
    if not tests:
        return None, "no tests of this kind in this copy of the course"
    lines, ok = [], True
    for test in tests:
        try:
            if _in_child(checks, test):
                message = {"op": "test", "name": test.__name__, "checks": module, "source": source}
                reply = child.request(message, test.__name__)
                if not isinstance(reply, dict):
                    raise StudentError("the child's reply is not a message")
                if "error" in reply:
                    raise StudentError(str(reply["error"]))
                if reply.get("passed") is not True:
                    raise StudentError("the test did not report a result")
                note = reply.get("note")
            else:
                student = student_tinyformer(child, reference)
                student.rng = inputs_rng(task, test.__name__, seeds)
                with registry.prefer(registry.REFERENCE):
                    note = test(student)
            lines.append(f"{test.__name__}: passed" + (f" ({note})" if note else ""))
        except ChildGone:
            raise
        except Exception as err:  # AssertionError, the student's error, the engine's checks
            ok = False
            text = f"{type(err).__name__}: {err}" if not isinstance(err, StudentError) else err
            lines.append(f"{test.__name__}: FAILED\n{text}")
    return ok, "\n".join(lines)
