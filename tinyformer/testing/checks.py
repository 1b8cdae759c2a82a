"""The checks every op spec is held to: the generic op suite's battery, as a library.

For one `OpSpec`, `spec_checks(spec)` lists the checks and `check_op(spec)` runs them all:

- `gradcheck[float64]`: backward vs central finite differences, float64, a random upstream
  gradient, every float input in a random memory layout (contiguous, Fortran order, strided,
  negative strides);
- `gradcheck[reference]` (ops whose primitives have kernels): the same with every primitive
  forced to its NumPy reference, whose branches the kernels would otherwise hide;
- `float32`: float32 inputs give float32 outputs and gradients, close to the float64 ones;
- `no_grad`: nothing is recorded under `no_grad`;
- `backend[<name>]` (one per registered non-reference backend of the spec's primitives): forward
  and backward with that backend's kernels equal the references, in float32 and float64.

Each check is a function of a `Draw`: `RandomDraw(seed)` here, a hypothesis-backed draw in the
test suite and the pytest plugin (so failures shrink). A failed check raises `OpCheckError`
naming the op, the check and the sample (input shapes, layouts, keyword arguments), followed by
the underlying report (for a gradcheck: the input, the worst element's index, both values).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend, registry
from tinyformer.opspec import Draw, OpSpec, RandomDraw, Sample

__all__ = [
    "LAYOUTS",
    "Check",
    "OpCheckError",
    "backend_device",
    "check_backend",
    "check_backward",
    "check_float32",
    "check_no_grad",
    "check_op",
    "check_reference_backward",
    "draw_layouts",
    "forward_backward",
    "has_kernels",
    "kernel_backends",
    "relayout",
    "spec_checks",
    "tensors",
]

LAYOUTS = ("contiguous", "fortran", "strided", "reversed")


class OpCheckError(AssertionError):
    """An op failed one of its checks. The message names the op, the check and the sample,
    then gives the underlying report (e.g. gradcheck's)."""


# -- building inputs ----------------------------------------------------------------------------


def relayout(a: np.ndarray, layout: str) -> np.ndarray:
    """The same values in another memory layout (non-contiguous for all but the first)."""
    if a.ndim == 0 or layout == "contiguous":
        return a
    if layout == "fortran":
        return np.asfortranarray(a)
    if layout == "strided":  # every other element of a twice-as-wide buffer
        buffer = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
        buffer[..., ::2] = a
        return buffer[..., ::2]
    return a[::-1].copy()[::-1]  # "reversed": negative strides


def tensors(sample: Sample, dtype: Any, layouts: Sequence[str] | None = None) -> list[Any]:
    """The sample's arrays as Tensors: float arrays cast to `dtype`, laid out as asked, and
    requiring grad; integer and boolean arrays (indices, targets, masks) as plain Tensors."""
    out = []
    for i, a in enumerate(sample.args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            layout = layouts[i % len(layouts)] if layouts else "contiguous"
            out.append(tf.Tensor(relayout(a.astype(dtype), layout), requires_grad=True))
        elif isinstance(a, np.ndarray):
            out.append(tf.Tensor(a))
        else:
            out.append(a)
    return out


def draw_layouts(draw: Draw, sample: Sample) -> list[str]:
    """One memory layout per positional input."""
    return [draw.choice(LAYOUTS) for _ in sample.args]


def forward_backward(
    spec: OpSpec,
    sample: Sample,
    dtype: Any,
    seed: int = 0,
    layouts: Sequence[str] | None = None,
    device: Any = None,
) -> tuple[Any, list[Any], list[Any]]:
    """The output, the input gradients (for a fixed random upstream gradient) and the leaves,
    computed on `device` (the host by default) and returned as host arrays."""
    inputs = tensors(sample, dtype, layouts)
    kwargs = dict(sample.kwargs)
    if device is not None:
        inputs = [t.to(device) if isinstance(t, tf.Tensor) else t for t in inputs]
        kwargs = {
            k: tf.Tensor(v).to(device).data if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()
        }
    y = spec.fn(*inputs, **kwargs)
    gy = tf.Tensor(np.random.default_rng(seed).standard_normal(y.shape).astype(y.dtype))
    leaves = [t for t in inputs if isinstance(t, tf.Tensor) and t.requires_grad]
    grads = tf.grad(y, leaves, gy.to(y.device)) if y.requires_grad else [None] * len(leaves)
    if device is not None:
        y = tf.Tensor(backend.to_host(y.data))
        grads = [None if g is None else backend.to_host(g) for g in grads]
    return y, grads, leaves


def backend_device(backend_name: str) -> str | None:
    """Where `backend_name`'s kernels run: None (the host) for numba; for cuda the GPU when
    there is one, else the fake device, whose arrays the CPU emulator runs CUDA kernels on."""
    if backend_name != "cuda":
        return None
    return "cuda" if backend.cuda_available() else "fake"


# -- failure reports ----------------------------------------------------------------------------


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(sample: Sample, dtype: Any, layouts: Sequence[str] | None) -> str:
    args = []
    for i, a in enumerate(sample.args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            layout = layouts[i % len(layouts)] if layouts else "contiguous"
            args.append(f"{np.dtype(dtype).name} {a.shape} {layout}")
        else:
            args.append(_short(a))
    kwargs = ", ".join(f"{k}={_short(v)}" for k, v in sample.kwargs.items()) or "none"
    return f"  inputs: {'; '.join(args) or 'none'}\n  kwargs: {kwargs}"


@contextlib.contextmanager
def _reported(
    spec: OpSpec, check: str, draw: Draw, sample: Sample, dtype: Any, layouts=None
) -> Iterator[None]:
    """Turn a failed assertion into an OpCheckError that says which op, check and sample."""
    try:
        yield
    except OpCheckError:
        raise
    except AssertionError as error:  # GradcheckError too
        header = f"{spec.name}::{check} failed on the sample drawn by {draw!r}:"
        raise OpCheckError(f"{header}\n{_describe(sample, dtype, layouts)}\n{error}") from error
    except Exception as error:  # the op raised: keep the error, add where it happened
        if hasattr(error, "add_note"):  # Python 3.11+
            error.add_note(f"while checking {spec.name}::{check}:")
            error.add_note(_describe(sample, dtype, layouts))
        raise


# -- the checks ---------------------------------------------------------------------------------


def _gradcheck(spec: OpSpec, draw: Draw, check: str) -> None:
    sample = spec.sample(draw)
    layouts = draw_layouts(draw, sample)
    inputs = tensors(sample, np.float64, layouts)
    if not any(isinstance(t, tf.Tensor) and t.requires_grad for t in inputs):
        return  # e.g. embedding of an empty index: nothing differentiable drawn
    with _reported(spec, check, draw, sample, np.float64, layouts):
        tf.gradcheck(
            lambda *xs: spec.fn(*xs, **sample.kwargs),
            inputs,
            upstream="random",
            atol=spec.atol,
            rtol=spec.rtol,
            seed=draw.integers(0, 2**16),
        )


def check_backward(spec: OpSpec, draw: Draw) -> None:
    """float64 gradcheck with a random upstream gradient, on any memory layout."""
    _gradcheck(spec, draw, "gradcheck[float64]")


def check_reference_backward(spec: OpSpec, draw: Draw) -> None:
    """check_backward with every primitive forced to its NumPy reference: where a kernel is
    registered, the registry's own choice may never run the reference's branches."""
    with registry.prefer(registry.REFERENCE):
        _gradcheck(spec, draw, "gradcheck[reference]")


def check_float32(spec: OpSpec, draw: Draw) -> None:
    """float32 inputs give float32 outputs and gradients, close to the float64 ones."""
    sample = spec.sample(draw)
    with _reported(spec, "float32", draw, sample, np.float32):
        y32, g32, leaves32 = forward_backward(spec, sample, np.float32)
        y64, g64, _ = forward_backward(spec, sample, np.float64)
        atol, rtol = spec.float32_tol
        assert y32.dtype == np.float32, f"{spec.name} returned {y32.dtype} for float32 inputs"
        np.testing.assert_allclose(y32.data, y64.data, atol=atol, rtol=rtol)
        for leaf, a, b in zip(leaves32, g32, g64):
            if a is not None:
                assert a.dtype == np.float32 and a.shape == leaf.shape
                np.testing.assert_allclose(a, b, atol=atol * 10, rtol=rtol * 10)


def check_no_grad(spec: OpSpec, draw: Draw) -> None:
    """No graph is recorded under no_grad."""
    sample = spec.sample(draw)
    with _reported(spec, "no_grad", draw, sample, np.float64):
        with tf.no_grad():
            y = spec.fn(*tensors(sample, np.float64), **sample.kwargs)
        assert y.grad_fn is None and not y.requires_grad, "a graph was recorded under no_grad"


def check_backend(spec: OpSpec, backend: str, dtype: Any, draw: Draw) -> None:
    """The op's forward and backward with `backend`'s kernels equal the NumPy reference's."""
    sample = spec.sample(draw)
    layouts = draw_layouts(draw, sample)  # the kernel gets the same strided inputs as the reference
    check = f"backend[{backend}] in {np.dtype(dtype).name}"
    with _reported(spec, check, draw, sample, dtype, layouts):
        with registry.prefer(registry.REFERENCE):
            y_ref, g_ref, _ = forward_backward(spec, sample, dtype, layouts=layouts)
        with registry.prefer(backend, force=True):  # every size, whatever the kernel's rule
            device = backend_device(backend)
            y, g, _ = forward_backward(spec, sample, dtype, layouts=layouts, device=device)
        atol, rtol = spec.float32_tol if dtype == np.float32 else (1e-10, 1e-9)
        np.testing.assert_allclose(y.data, y_ref.data, atol=atol, rtol=rtol, err_msg="output")
        for i, (a, b) in enumerate(zip(g, g_ref)):
            if b is not None:
                np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, err_msg=f"gradient {i}")


# -- the battery --------------------------------------------------------------------------------


def kernel_backends(spec: OpSpec) -> list[str]:
    """The non-reference backends registered for any of the spec's primitives, sorted."""
    found = {b for p in spec.primitives for b in registry.backends(p)}
    return sorted(found - {registry.REFERENCE})


def has_kernels(spec: OpSpec) -> bool:
    return bool(kernel_backends(spec))


@dataclass(frozen=True)
class Check:
    """One check of one op: `run(draw)` draws a sample from `draw` and checks it.

    Attributes:
        name: e.g. "gradcheck[float64]", "float32", "no_grad", "backend[numba]".
        run: raises OpCheckError (or the op's own error) on failure.
    """

    name: str
    run: Callable[[Draw], None]

    @property
    def kind(self) -> str:
        """The name without its bracket: "gradcheck", "float32", "no_grad", "backend"."""
        return self.name.split("[")[0]


def _check_primitives(spec: OpSpec) -> None:
    # A typo in `primitives` would silently drop the kernel comparisons: say so instead.
    for primitive in spec.primitives:
        if registry.REFERENCE not in registry.backends(primitive):
            raise ValueError(
                f"{spec.name}: its spec lists primitive {primitive!r}, which has no NumPy "
                f"reference; register one with @registry.reference({primitive!r}) before "
                "the kernels are compared with it"
            )


def _backend_check(spec: OpSpec, backend: str) -> Callable[[Draw], None]:
    def run(draw: Draw) -> None:
        for dtype in (np.float32, np.float64):
            check_backend(spec, backend, dtype, draw)

    return run


def spec_checks(spec: OpSpec) -> list[Check]:
    """Every check that applies to `spec`, in the order `check_op` runs them."""
    _check_primitives(spec)
    backends = kernel_backends(spec)
    checks = [Check("gradcheck[float64]", lambda draw: check_backward(spec, draw))]
    if backends:
        checks.append(
            Check("gradcheck[reference]", lambda draw: check_reference_backward(spec, draw))
        )
    checks.append(Check("float32", lambda draw: check_float32(spec, draw)))
    checks.append(Check("no_grad", lambda draw: check_no_grad(spec, draw)))
    checks += [Check(f"backend[{b}]", _backend_check(spec, b)) for b in backends]
    return checks


def select_checks(checks: Sequence[Check], wanted: Sequence[str] | None) -> list[Check]:
    """The checks named in `wanted`, by full name ("backend[numba]") or kind ("backend")."""
    if wanted is None:
        return list(checks)
    if isinstance(wanted, str):
        wanted = [wanted]
    known = {c.name for c in checks} | {c.kind for c in checks}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(f"no check named {unknown}; this op has: {sorted(known)}")
    return [c for c in checks if c.name in wanted or c.kind in wanted]


def check_op(
    spec: OpSpec,
    *,
    examples: int = 10,
    seed: int = 0,
    checks: Sequence[str] | None = None,
) -> list[str]:
    """Run the battery on one op, on `examples` samples drawn by `RandomDraw(seed)`,
    `RandomDraw(seed + 1)`, ...

    Args:
        spec: the op's spec.
        examples: samples per check.
        seed: the first draw's seed; a failure names its draw, so it can be rerun alone.
        checks: names ("gradcheck[float64]", "backend[numba]") or kinds ("gradcheck",
            "float32", "no_grad", "backend") to run; None runs every check that applies.

    Returns:
        The names of the checks that ran (all passed).

    Raises:
        OpCheckError: on the first failure, naming the op, the check and the sample, with the
            underlying report (for a gradcheck: the input and the worst element's index).
        ValueError: `examples` < 1, an unknown check name, or a primitive with no reference.
    """
    if examples < 1:
        raise ValueError(f"check_op: examples must be at least 1, got {examples}")
    battery = select_checks(spec_checks(spec), checks)
    for check in battery:
        for i in range(examples):
            check.run(RandomDraw(seed + i))
    return [check.name for check in battery]
