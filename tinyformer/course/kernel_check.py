"""`KernelCheck`: what a task's "kernel" check compares (see `tinyformer.course.definition`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["INPUT_KINDS", "KernelCheck"]


@dataclass(frozen=True)
class KernelCheck:
    """The "kernel" check: a student's kernel of `primitive` against the NumPy reference.

    The grader imports `module` from the graded tree (its import registers the kernel with
    `registry.kernel(primitive, backend=...)`), then, for each dtype, shape and layout (C order,
    and a strided view of every other element of the last axis), draws one array per entry of
    `inputs`, all of one shape, and compares what the kernel returns with what the reference
    returns on the same arrays. It also requires that the kernel leave its inputs unchanged.
    If the backend's library (numba) does not import, the check fails and says so. A "cuda"
    kernel gets device arrays: on the fake device, where it runs on the CPU emulator (every
    machine, no CuPy needed), and again on the GPU where CuPy sees one; it must return an array
    on its input's device.

    Attributes:
        primitive: the registry name, e.g. "softmax.forward".
        module: the importable module that registers the student's kernel.
        backend: the kernel's registry backend.
        inputs: what each array argument is, in order: "normal" (standard normal) or
            "softmax" (each row along the last axis the softmax of a standard-normal row, as
            softmax.backward's y is: on arbitrary y the kernel's float32 sum cancels, and a
            right kernel would miss the tolerance on one grade in three).
        shapes: the input shapes.
        dtypes: each shape runs in each of these.
        tol: dtype -> (atol, rtol), as in `np.testing.assert_allclose`.
        seed: for the inputs.
    """

    primitive: str
    module: str
    backend: str = "numba"
    inputs: tuple[str, ...] = ("normal",)
    shapes: tuple[tuple[int, ...], ...] = ((1, 1), (4, 16), (3, 5, 33), (2, 300))
    dtypes: tuple[str, ...] = ("float32", "float64")
    tol: Mapping[str, tuple[float, float]] = field(
        default_factory=lambda: {"float32": (1e-6, 1e-5), "float64": (1e-12, 1e-10)}
    )
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [kind for kind in self.inputs if kind not in INPUT_KINDS]
        if not self.inputs or unknown:
            raise ValueError(
                f"KernelCheck({self.primitive!r}): inputs must be a non-empty tuple of "
                f"{INPUT_KINDS}, got {self.inputs!r}"
            )

    def draw(
        self, rng: np.random.Generator, shape: tuple[int, ...], dtype: str, strided: bool
    ) -> list[np.ndarray]:
        """The arguments of one case. Strided: each array is twice as wide, and the kernel gets
        every other element of its last axis (the rule of "softmax" holds on that view)."""
        wide = (*shape[:-1], 2 * shape[-1]) if strided else shape
        args = []
        for kind in self.inputs:
            a = rng.standard_normal(wide)
            if kind == "softmax":
                view = a[..., ::2] if strided else a
                e = np.exp(view - view.max(axis=-1, keepdims=True))
                view[...] = e / e.sum(axis=-1, keepdims=True)
            args.append(a.astype(dtype))
        return args


INPUT_KINDS = ("normal", "softmax")
