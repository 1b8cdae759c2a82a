"""The student's functions as the parent sees them: calls that run in the task's child.

`StudentFunction("spec:softmax", child)` is called like the op's functional wrapper, with the
parent's (the instructor's) Tensors. It sends their arrays to the child and records one node in
the parent's graph, `Remote`, whose backward asks the child for the student's gradients at the
same inputs. So the parent's own `tinyformer.gradcheck`, `tinyformer.grad` and NumPy compare
what the student's code returns, and the tolerances never leave the parent.

`student_tinyformer(child)` is what a property or hidden test run in the parent gets as `tf`:
the instructor's tinyformer, except that `tf.nn.functional.NAME`, `tf.ops.MODULE.NAME` and
`tf.course.PACKAGE.MODULE.NAME` (`tf.course.assignments.a1.drivers.graph`) are the student's,
run in the child.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer.autograd import Function

__all__ = ["Remote", "StudentError", "StudentFunction", "ask", "layout_of", "student_tinyformer"]


class StudentError(Exception):
    """The student's code raised in the child; the message is the child's report."""


def layout_of(a: np.ndarray) -> str:
    """The name (`tinyformer.testing.checks.LAYOUTS`) of `a`'s memory layout, so that the child
    can rebuild it: the pipe sends arrays contiguous."""
    if a.ndim == 0 or a.flags.c_contiguous:
        return "contiguous"
    if a.flags.f_contiguous:
        return "fortran"
    return "reversed" if any(s < 0 for s in a.strides) else "strided"


def ask(child: Any, message: dict[str, Any], during: str) -> dict[str, Any]:
    """The child's reply to `message`, or StudentError with what went wrong."""
    reply = child.request(message, during)
    if not isinstance(reply, dict):
        raise StudentError(f"the child's reply to {during} is not a message")
    if "error" in reply:
        raise StudentError(str(reply["error"]))
    return reply


def _is_numbers(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind in "biuf"


def _outputs(reply: dict[str, Any]) -> list[np.ndarray]:
    outs = reply.get("outs")
    if not isinstance(outs, list) or not all(_is_numbers(o) for o in outs):
        raise StudentError("the code returned something other than arrays of numbers")
    return outs


class Remote(Function):
    """One call of the student's function, as a node of the parent's graph."""

    @staticmethod
    def forward(ctx, *arrays: Any, call: StudentFunction, template: list, kwargs: dict) -> Any:
        ctx.call, ctx.template, ctx.kwargs = call, template, kwargs
        ctx.arrays = [np.array(a) for a in arrays]  # gradcheck perturbs its inputs in place
        reply = ask(call.child, call.message(ctx.arrays, template, kwargs), call.during)
        outs = _outputs(reply)
        ctx.several = bool(reply.get("several"))
        ctx.shapes = [o.shape for o in outs]
        return tuple(outs) if ctx.several else outs[0]

    @staticmethod
    def backward(ctx, *gys: Any) -> Any:
        wants = list(ctx.needs_input_grad)
        message = ctx.call.message(ctx.arrays, ctx.template, ctx.kwargs, wants)
        message["upstream"] = [np.asarray(g) for g in gys]
        reply = ask(ctx.call.child, message, ctx.call.during + " (backward)")
        grads = reply.get("grads")
        if not isinstance(grads, list) or len(grads) != sum(wants):
            raise StudentError("the backward returned the wrong number of gradients")
        found = iter(grads)
        out = []
        for want, a in zip(wants, ctx.arrays):
            g = next(found) if want else None
            if g is not None and not (_is_numbers(g) and g.shape == a.shape):
                what = f"{g.dtype} {g.shape}" if isinstance(g, np.ndarray) else type(g).__name__
                raise StudentError(f"the backward returned {what} for an input of shape {a.shape}")
            out.append(np.zeros(a.shape) if want and g is None else g)
        return tuple(out) if len(out) > 1 else out[0]


class StudentFunction:
    """The student's `target` ("spec:NAME" or "tinyformer.module.function"), run in `child`."""

    def __init__(self, target: str, child: Any, during: str = "a call") -> None:
        self.target, self.child, self.during = target, child, during

    def message(self, arrays: list, template: list, kwargs: dict, wants: list | None = None):
        args, k = [], 0
        for slot in template:
            if slot is _TENSOR:
                a = arrays[k]
                grad = bool(wants[k]) if wants is not None else False
                args.append({"tensor": np.ascontiguousarray(a), "grad": grad,
                             "layout": layout_of(a)})  # fmt: skip
                k += 1
            elif isinstance(slot, np.ndarray):  # a plain array keeps its layout too
                layout = layout_of(slot)
                args.append({"array": np.ascontiguousarray(slot), "layout": layout})
            else:
                args.append(slot)
        return {"op": "call", "target": self.target, "args": args, "kwargs": kwargs}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = [a for a in args if isinstance(a, tf.Tensor)]
        template = [_TENSOR if isinstance(a, tf.Tensor) else a for a in args]
        kwargs = {k: (v.data if isinstance(v, tf.Tensor) else v) for k, v in kwargs.items()}
        if tensors:
            return Remote.apply(*tensors, call=self, template=template, kwargs=kwargs)
        outs = _outputs(ask(self.child, self.message([], template, kwargs), self.during))
        return outs if len(outs) > 1 else outs[0]


_TENSOR = object()  # a tensor's place among the arguments


class _StudentModule:
    """A dotted name in the student's tinyformer: an attribute goes one name deeper (a module
    of a package, or a module's function: `tf.course.assignments.a1.drivers.graph`), and a call
    runs the function of that name in the child."""

    def __init__(self, child: Any, name: str) -> None:
        self._child, self._name = child, name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _StudentModule(self._child, f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return StudentFunction(self._name, self._child, self._name)(*args, **kwargs)


def student_tinyformer(child: Any, reference: bool = False) -> Any:
    """The `tf` a parent-run test gets: the instructor's tinyformer, with `tf.nn.functional`,
    `tf.ops.MODULE` and `tf.course.PACKAGE.MODULE` replaced by the student's, run in `child`, and
    `tf.reference` the instructor's own tinyformer when `reference` (None in a self-check, where
    this process runs a release: its code is not the instructor's)."""

    class Facade(SimpleNamespace):
        def __getattr__(self, attr: str) -> Any:
            return getattr(tf, attr)

    class Package(SimpleNamespace):
        def __getattr__(self, module: str) -> Any:
            return _StudentModule(child, f"{self.name}.{module}")

    nn = SimpleNamespace(functional=_StudentModule(child, "tinyformer.nn.functional"))
    return Facade(
        nn=nn,
        ops=Package(name="tinyformer.ops"),
        course=Package(name="tinyformer.course"),
        reference=tf if reference else None,
    )
