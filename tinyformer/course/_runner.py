"""The grader's subprocess: grades the tree it is pointed at, never the installed tinyformer.

    python -I -S _runner.py JOB.json

Run by path with `-I -S` (no site-packages processing, so no editable-install finder maps
`tinyformer` or `tinyformer.kernels` back to the instructor's checkout). The job puts the graded
tree first on `sys.path` and appends the site-packages folders for NumPy. It imports nothing of
the instructor's tinyformer: the codec and the checks module are loaded by file path, and they
import `tinyformer`, which resolves to the graded tree.

Every primitive runs its NumPy reference (`registry.prefer(registry.REFERENCE)`): a kernel must
not stand in for the student's reference code. The one exception is the "kernel" check, whose
subject is the student's kernel: it prefers the kernel's backend for that one primitive, inside
the check. A CUDA kernel runs on the fake device, through the tree's CPU emulator, and on the
GPU too where CuPy sees one. For an assignment with kernel checks the job asks for the tree's
`kernels/` folder as `tinyformer.kernels`, as an installed tree has it (setup.py's
`package_dir`): the student's CUDA kernel runs on the tree's runtime and emulator, and the
library's kernel files load before the student's registrations. Other assignments never load
a kernel file. One JSON line per check goes to the job's results file as soon as the check ends,
so a run cut short by the timeout keeps what it did.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

FORWARD_TOL = {"atol": 1e-8, "rtol": 1e-6}  # float64 values, any order of summation
LAYOUTS = ("C order", "strided")
DEVICE_NAMES = {None: "on the host", "fake": "on the CPU emulator", "cuda": "on the GPU"}


def _load(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _error(err: BaseException, tree: str) -> str:
    """The error, its notes (the checks add the inputs there), and where in the tree it rose."""
    lines = [f"{type(err).__name__}: {err}", *getattr(err, "__notes__", ())]
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename.startswith(tree)]
    if frames:
        f = frames[-1]
        lines.append(f"  at {Path(f.filename).relative_to(tree)}:{f.lineno} in {f.name}")
    return "\n".join(lines)


def _first_difference(a: Any, b: Any) -> str:
    """Where `a` differs most from `b`, for a failure message."""
    import numpy as np

    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    diff[np.isnan(diff)] = np.inf
    j = np.unravel_index(int(np.argmax(diff)), a.shape) if a.ndim else ()
    return f"at index {j}, got {a[j]!r}, expected {b[j]!r}"


def _kernel_input(rng: Any, shape: list[int], dtype: str, layout: str, device: Any) -> Any:
    """A standard-normal array of `shape` on `device` (None: a NumPy array); "strided": every
    other element of a wider last axis, sliced on the device so that the view stays strided."""
    from tinyformer.backend import to_device

    wide = layout == "strided"
    a = rng.standard_normal((*shape[:-1], 2 * shape[-1]) if wide else shape).astype(dtype)
    a = a if device is None else to_device(a, device)
    return a[..., ::2] if wide else a


def _kernel_devices(backend: str) -> list[Any]:
    """Where a backend's kernels are checked: NumPy arrays (None), or the fake device (the CPU
    emulator, on every machine) and the GPU where CuPy sees one."""
    if backend != "cuda":
        return [None]
    from tinyformer import cuda

    return ["fake", "cuda"] if cuda.is_available() else ["fake"]


def _describe(args: list[Any], kwargs: dict[str, Any]) -> str:
    def short(v: Any) -> str:
        shape = getattr(v, "shape", None)
        return f"{v.dtype} {tuple(shape)}" if shape is not None else repr(v)

    return (
        f"  inputs: {'; '.join(short(a) for a in args) or 'none'}\n"
        f"  kwargs: {', '.join(f'{k}={short(v)}' for k, v in kwargs.items()) or 'none'}"
    )


class Grader:
    def __init__(self, job: dict[str, Any], tf: Any, specs: dict[str, Any], checks: Any) -> None:
        self.job, self.tf, self.specs, self.checks = job, tf, specs, checks
        self.tree = job["tree"]

    def spec(self, name: str) -> Any:
        if name not in self.specs:
            raise LookupError(f"the graded tree has no op spec named {name!r}")
        return self.specs[name]

    def forward(self, task: dict[str, Any], samples: dict[str, list]) -> tuple[bool, str]:
        import numpy as np

        tf = self.tf
        done = 0
        for name, stored in samples.items():
            for s in stored:
                args = [tf.Tensor(a) if isinstance(a, np.ndarray) else a for a in s["args"]]
                where = f"{task['id']} {name} forward, sample seed {s['seed']}:\n"
                where += _describe(s["args"], s["kwargs"])
                try:
                    with tf.no_grad():
                        y = self.spec(name).fn(*args, **s["kwargs"])
                except Exception as err:
                    return False, f"{where}\n{_error(err, self.tree)}"
                got = [np.asarray(t.data) for t in (y if isinstance(y, tuple | list) else [y])]
                for i, (a, b) in enumerate(zip(got, s["out"])):
                    if a.shape != b.shape:
                        return False, f"{where}\n  output {i}: shape {a.shape}, expected {b.shape}"
                    if not np.allclose(a, b, equal_nan=True, **FORWARD_TOL):
                        return False, (
                            f"{where}\n  output {i} differs from the instructor's: "
                            f"{_first_difference(a, b)} (tolerance {FORWARD_TOL})"
                        )
                done += 1
        return True, f"{done} samples match the instructor's forward values"

    def gradcheck(self, task: dict[str, Any], samples: dict[str, list]) -> tuple[bool, str]:
        from dataclasses import replace

        from tinyformer.testing import RandomDraw, Sample
        from tinyformer.testing.checks import check_backward

        done = 0
        for name, stored in samples.items():
            for s in stored:
                # The stored inputs, not the tree's sample function: that one may call code of
                # another task (max_unpool2d draws its indices with max_pool2d's reference).
                sample = Sample(list(s["args"]), dict(s["kwargs"]))
                spec = replace(self.spec(name), sample=lambda draw, sample=sample: sample)
                try:
                    check_backward(spec, RandomDraw(s["seed"]))
                except Exception as err:  # OpCheckError's message has the inputs and report
                    head = f"{task['id']} {name} gradcheck, RandomDraw({s['seed']}) "
                    head += f"({done} earlier samples passed):"
                    return False, f"{head}\n{_error(err, self.tree)}"
                done += 1
        return True, f"{done} samples match finite differences (float64, random layouts)"

    def kernel(self, task: dict[str, Any], samples: dict[str, list]) -> tuple[bool, str]:
        """The student's kernel of one primitive equals its NumPy reference (see KernelCheck)."""
        import numpy as np

        from tinyformer import registry

        k = task["kernel"]
        library = registry.BACKEND_LIBRARIES.get(k["backend"], k["backend"])
        if k["backend"] != "cuda":  # a CUDA kernel needs no CuPy: the emulator runs it
            try:
                importlib.import_module(library)
            except ImportError as err:
                return False, (
                    f"{task['id']}: the {k['backend']} kernel cannot run: {library} does not "
                    f"import in the grading environment ({type(err).__name__}: {err}). Install "
                    f"it (`pip install {library}`) and grade again."
                )
        registry.primitives()  # the library's own kernel files first, so the student's wins
        importlib.import_module(k["module"])
        rng, done, devices = np.random.default_rng(k["seed"]), 0, _kernel_devices(k["backend"])
        for device in devices:
            for dtype in k["dtypes"]:
                for shape in k["shapes"]:
                    for layout in LAYOUTS:
                        args = [
                            _kernel_input(rng, shape, dtype, layout, device)
                            for _ in range(k["arrays"])
                        ]
                        where = (
                            f"{task['id']} {k['primitive']} kernel, {dtype} {tuple(shape)} "
                            f"{layout}" + ("" if device is None else f" {DEVICE_NAMES[device]}")
                        )
                        failure = self._kernel_case(k, args, k["tol"][dtype])
                        if failure:
                            return False, f"{where}:\n{failure}"
                        done += 1
        shapes = ", ".join(str(tuple(s)) for s in k["shapes"])
        on = "" if devices == [None] else f"; {' and '.join(DEVICE_NAMES[d] for d in devices)}"
        return True, (
            f"{done} inputs match the NumPy reference ({' and '.join(k['dtypes'])}; shapes "
            f"{shapes}; {' and '.join(LAYOUTS)}{on})"
        )

    def _kernel_case(self, k: dict[str, Any], args: list[Any], tol: list[float]) -> str | None:
        """Why the kernel fails on `args`, or None if it equals the reference there."""
        import numpy as np

        from tinyformer import registry
        from tinyformer.backend import device_of, host_copy, to_host

        with registry.prefer(k["backend"]):
            impl = registry.choose(k["primitive"], *args)
        if impl.backend != k["backend"] or impl.fn.__module__ != k["module"]:
            return (
                f"the registry runs {impl.backend}'s {impl.fn.__module__}.{impl.fn.__name__}; "
                f"register the kernel in {k['module']} with @registry.kernel("
                f"{k['primitive']!r}, backend={k['backend']!r}, dtypes=...) for {args[0].dtype}"
            )
        before = [host_copy(a) for a in args]
        try:
            got = impl.fn(*args)
        except Exception as err:
            return _error(err, self.tree)
        if any(not np.array_equal(host_copy(a), b, equal_nan=True) for a, b in zip(args, before)):
            return "the kernel wrote into its input"
        if device_of(got) != device_of(args[0]):
            return f"returned an array on {device_of(got)}, not on its input's {device_of(args[0])}"
        got = to_host(got)
        with registry.prefer(registry.REFERENCE):
            want = registry.call(k["primitive"], *before)
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"returned {got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
        atol, rtol = tol
        if not np.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
            return (
                f"differs from the NumPy reference {_first_difference(got, want)} "
                f"(atol {atol}, rtol {rtol})"
            )
        return None

    def _run_tests(self, task: dict[str, Any], table: dict[str, list] | None) -> tuple[Any, str]:
        tests = (table or {}).get(task["id"], [])
        if not tests:
            return None, "no tests of this kind in this copy of the course"
        lines, ok = [], True
        for test in tests:
            try:
                note = test(self.tf)  # a test may return a note for the report
                lines.append(f"{test.__name__}: passed" + (f" ({note})" if note else ""))
            except Exception as err:
                ok = False
                lines.append(f"{test.__name__}: FAILED\n{_error(err, self.tree)}")
        return ok, "\n".join(lines)

    def properties(self, task: dict[str, Any], samples: dict[str, list]) -> tuple[Any, str]:
        return self._run_tests(task, getattr(self.checks, "PROPERTIES", None))

    def hidden(self, task: dict[str, Any], samples: dict[str, list]) -> tuple[Any, str]:
        return self._run_tests(task, getattr(self.checks, "HIDDEN", None))


def _install_kernels(tf: Any, folder: Path) -> None:
    """Make `folder` (the tree's kernels/) the package `tinyformer.kernels`, as installing the
    tree would (setup.py's package_dir); nothing if the tree has none."""
    init = folder / "__init__.py"
    if not init.is_file() or "tinyformer.kernels" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "tinyformer.kernels", init, submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    tf.kernels = module


def _start(job: dict[str, Any]) -> Grader:
    tree = job["tree"]
    sys.path[:0] = [tree]
    sys.path += [p for p in job["site"] if p not in sys.path]
    import tinyformer as tf

    if not str(Path(tf.__file__).resolve()).startswith(str(Path(tree).resolve())):
        raise ImportError(f"imported tinyformer from {tf.__file__}, not from the tree {tree}")
    if job.get("kernels"):
        _install_kernels(tf, Path(tree) / "kernels")
    from tinyformer.testing import all_specs

    specs = {s.name: s for s in all_specs()}
    checks = _load("_course_checks", job["checks"]) if job.get("checks") else None
    return Grader(job, tf, specs, checks)


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    with open(job["results"], "a", encoding="utf-8") as out:

        def emit(record: dict[str, Any]) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        try:
            grader = _start(job)  # first: it puts NumPy's folder on sys.path
            data = _load("_course_codec", job["codec"]).loads(job["data"])
        except BaseException as err:  # the tree does not import: every check fails with this
            emit({"fatal": _error(err, job["tree"]) + "\n" + traceback.format_exc(limit=-3)})
            return 0
        from tinyformer import registry

        with registry.prefer(registry.REFERENCE):
            for task in job["tasks"]:
                samples = data["tasks"].get(task["id"], {})
                for kind in task["points"]:
                    start = time.perf_counter()
                    try:
                        passed, output = getattr(grader, kind)(task, samples)
                    except Exception as err:
                        passed, output = False, _error(err, job["tree"])
                    emit({
                        "task": task["id"], "check": kind, "passed": passed, "output": output,
                        "seconds": round(time.perf_counter() - start, 3),
                    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
