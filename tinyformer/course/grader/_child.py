"""A graded task's child process: runs the student's code on the inputs it is sent.

    python -I -S _child.py TREE DEPS REPLY_FD KERNELS

The parent (`tinyformer.course.grader.grade`) starts one per task in a temporary copy of the release
(TREE) with the student's files laid over it, and sends requests on stdin; replies go to the
pipe REPLY_FD. The child is never told where the instructor's tree, the grading data or the
results are: it gets arrays and names, and returns arrays. Everything it says is the student's
word: the parent compares every array with the instructor's values itself, so a child that
lies, patches NumPy or exits early only loses its own points.

Requests ({"op": ...}):
- "call": run `target` ("spec:NAME" for an op spec's function, or "module.path.function") on
  the arguments, with every primitive forced to its NumPy reference; tensor arguments come as
  {"tensor": array, "grad": bool, "layout": str}, plain arrays as {"array", "layout"}. With
  "upstream", also return the gradients of the outputs against the tensors that want one.
- "kernel": a primitive's registered kernel on the given arrays (see KernelCheck).
- "test": one test of the assignment's checks module, run here with this tree's tinyformer
  (tests of Python objects, not arrays); "source" brings the module's text for hidden tests.
- "bye": exit.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any


def _error(err: BaseException, tree: str) -> str:
    """The error, its notes, and where in the tree it rose (a path relative to the tree)."""
    lines = [f"{type(err).__name__}: {err}"[:2000], *getattr(err, "__notes__", ())]
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename.startswith(tree)]
    if frames:
        f = frames[-1]
        lines.append(f"  at {Path(f.filename).relative_to(tree)}:{f.lineno} in {f.name}")
    return "\n".join(lines)


def _resolve(target: str, specs: dict[str, Any]) -> Any:
    import importlib

    if target.startswith("spec:"):
        name = target[5:]
        if name not in specs:
            raise LookupError(f"the graded tree has no op spec named {name!r}")
        return specs[name].fn
    module, _, attr = target.rpartition(".")
    if not module.startswith("tinyformer."):
        raise LookupError(f"cannot call {target!r}")
    return getattr(importlib.import_module(module), attr)


def _call(request: dict[str, Any], specs: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    import tinyformer as tf

    fn = _resolve(request["target"], specs)
    args, leaves = _arguments(request["args"])
    upstream = request.get("upstream")
    if upstream is None:
        with tf.no_grad():
            y = fn(*args, **request["kwargs"])
    else:
        y = fn(*args, **request["kwargs"])
    several = isinstance(y, tuple | list)
    ys = list(y) if several else [y]
    outs = [np.asarray(o.data if isinstance(o, tf.Tensor) else o) for o in ys]
    grads: list[Any] = []
    if upstream is not None:
        live = [
            (o, g) for o, g in zip(ys, upstream) if isinstance(o, tf.Tensor) and o.requires_grad
        ]
        grads = [None] * len(leaves)
        if live and leaves:
            found = tf.grad([o for o, _ in live], leaves, [g for _, g in live])
            grads = [None if g is None else np.asarray(g) for g in found]
    return {"outs": outs, "several": several, "grads": grads}


def _arguments(slots: list) -> tuple[list, list]:
    """The call's arguments (tensors rebuilt in their layouts), and the tensors that want a
    gradient."""
    import tinyformer as tf
    from tinyformer.testing.checks import relayout

    args, leaves = [], []
    for a in slots:
        if isinstance(a, dict) and "tensor" in a:
            grad = a["grad"]
            t = tf.Tensor(relayout(a["tensor"], a["layout"]), requires_grad=grad)
            leaves += [t] if grad else []
            a = t
        elif isinstance(a, dict) and "array" in a:
            a = relayout(a["array"], a["layout"])
        args.append(a)
    return args, leaves


def _kernel(request: dict[str, Any], tree: str) -> dict[str, Any]:
    import importlib

    from tinyformer import registry
    from tinyformer.backend import device_of, host_copy, to_device, to_host

    library = registry.BACKEND_LIBRARIES.get(request["backend"], request["backend"])
    if request["backend"] != "cuda":  # a CUDA kernel needs no CuPy: the emulator runs it
        try:
            importlib.import_module(library)
        except ImportError as err:
            raise ImportError(
                f"the {request['backend']} kernel cannot run: {library} does not import in the "
                f"grading environment ({err}). Install it (`pip install {library}`) and grade "
                "again."
            ) from None
    registry.primitives()  # the library's own kernel files first, so the student's wins
    importlib.import_module(request["module"])
    device = request["device"]
    args = []
    for a in request["args"]:
        a = a if device is None else to_device(a, device)
        args.append(a[..., ::2] if request["layout"] == "strided" else a)
    with registry.prefer(request["backend"]):
        impl = registry.choose(request["primitive"], *args)
    ran = {"backend": impl.backend, "module": impl.fn.__module__, "name": impl.fn.__name__}
    if impl.backend != request["backend"] or impl.fn.__module__ != request["module"]:
        return {"ran": ran, "out": None, "after": []}
    out = impl.fn(*args)
    device_out = device_of(out).type
    return {
        "ran": ran, "out": to_host(out), "after": [host_copy(a) for a in args],
        "device": device_out,
    }  # fmt: skip


def _test(request: dict[str, Any], tree: str, cache: dict[str, Any]) -> dict[str, Any]:
    import importlib.util

    import tinyformer as tf

    key = "hidden" if request.get("source") else "visible"
    if key not in cache:
        name = f"_course_checks_{key}"
        if request.get("source"):
            module = type(sys)(name)
            exec(compile(request["source"], f"<{request['checks']}>", "exec"), module.__dict__)
        else:
            found = importlib.util.find_spec(request["checks"])  # the tree's: sys.path[0]
            if found is None or found.origin is None:
                raise LookupError(f"the graded tree has no module {request['checks']!r}")
            spec = importlib.util.spec_from_file_location(name, found.origin)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        cache[key] = module
    test = getattr(cache[key], request["name"])
    note = test(tf)
    return {"passed": True, "note": None if note is None else str(note)[:500]}


class _Specs(dict):
    """The tree's op specs by name, collected on first use (a hidden-test child needs none)."""

    def __init__(self, collect: Any) -> None:
        super().__init__()
        self.collect = collect

    def __missing__(self, name: str) -> Any:
        if not len(self):
            self.update({s.name: s for s in self.collect()})
        return dict.get(self, name)  # no __missing__ again: None for an unknown name

    def __contains__(self, name: object) -> bool:
        return self[name] is not None


def _install_kernels(folder: Path) -> None:
    """Make `folder` (the tree's kernels/) the package `tinyformer.kernels`, as installing the
    tree would (setup.py's package_dir)."""
    import importlib.util

    import tinyformer as tf

    init = folder / "__init__.py"
    if not init.is_file():
        return
    spec = importlib.util.spec_from_file_location(
        "tinyformer.kernels", init, submodule_search_locations=[str(folder)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    tf.kernels = module


def _serve(tree: str, reply_fd: int, kernels: bool) -> None:
    from tinyformer.course.grader import _wire

    try:
        import tinyformer  # noqa: F401  (the student's files are imported here)

        if kernels:
            _install_kernels(Path(tree) / "kernels")
        from tinyformer import registry
        from tinyformer.testing import all_specs

        specs = _Specs(all_specs)
    except BaseException as err:
        _wire.write_message(reply_fd, {"fatal": _error(err, tree)})
        return
    _wire.write_message(reply_fd, {"ready": True})
    cache: dict[str, Any] = {}
    with registry.prefer(registry.REFERENCE):
        while True:
            request = _wire.read_message(0)
            op = request.get("op")
            if op == "bye":
                return
            try:
                if op == "call":
                    reply = _call(request, specs)
                elif op == "kernel":
                    reply = _kernel(request, tree)
                else:
                    reply = _test(request, tree, cache)
            except Exception as err:
                reply = {"error": _error(err, tree)}
            _wire.write_message(reply_fd, reply)


def main(argv: list[str]) -> int:
    tree, deps, reply_fd, kernels = argv[1], argv[2], int(argv[3]), argv[4] == "1"
    sys.path[:] = [tree, deps, *(p for p in sys.path[1:] if "site-packages" not in p)]
    _serve(tree, reply_fd, kernels)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
