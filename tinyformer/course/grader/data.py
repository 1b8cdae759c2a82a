"""The instructor's expected values: samples drawn from each task's op specs, and what the
instructor's reference gives on them, computed in the grader's own process.

Each sample is drawn with `RandomDraw(seed)` from the spec's sampler, kept if the task accepts
it (`Task.keep`), until `Task.samples` are found, then `Task.wide_samples` more made with
`Task.widen` (large logits, padding masks, ties). The seeds are 0, 1, 2, ... (and 1_000_000 +
i for widened ones) for the release's public data, `assignments/NAME.grading.npz`, which only
self-checks; a real grade draws them from a secret salt (`secret.seed(salt, NAME, task, spec,
i)`), so no student has seen its inputs. Property and hidden tests get a seed each in
`test_seeds` (`secret.seed(salt, NAME, task, test name)`) for the inputs they draw. Per
sample it keeps:

    seed, args (float inputs as float64), kwargs, layouts (one memory layout per input, as the
    child gets them), out (the reference's outputs), upstream (a random gradient per output)
    and vjp (the reference's gradient of <outputs, upstream> for each float input)

all from the running tinyformer with every primitive forced to its NumPy reference, in float64:
the release's data holds the reference's answers on public inputs so that a release, which has
no reference, can self-check.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.course.definition import Assignment, Task
from tinyformer.course.grader import _codec, secret

__all__ = [
    "HANDOUTS",
    "MAX_TRIES",
    "compute",
    "data_path",
    "is_float",
    "load",
    "reference_call",
    "save",
]

HANDOUTS = "assignments"  # a release's folder of the student handouts (the notebooks)
MAX_TRIES = 1000  # seeds tried per spec before a too-strict `keep` is reported
WIDE_SEEDS = 1_000_000  # public seeds of widened samples start here


def data_path(tree: str | os.PathLike, name: str) -> Path:
    """Where a release keeps assignment `name`'s grading data: beside the student handouts."""
    return Path(tree) / HANDOUTS / f"{name}.grading.npz"


def is_float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def reference_call(spec: Any, args: list, kwargs: dict, upstream: list | None = None):
    """The reference's outputs of `spec.fn` on `args` (float64, every primitive forced to its
    NumPy reference) and, given `upstream`, the gradients of <outputs, upstream> for each
    float input (zeros where the graph does not reach it)."""
    import tinyformer as tf
    from tinyformer import registry

    with registry.prefer(registry.REFERENCE):
        inputs = [
            tf.Tensor(np.array(a, np.float64), requires_grad=upstream is not None)
            if is_float(a)
            else (tf.Tensor(a) if isinstance(a, np.ndarray) else a)
            for a in args
        ]
        if upstream is None:
            with tf.no_grad():
                y = spec.fn(*inputs, **kwargs)
        else:
            y = spec.fn(*inputs, **kwargs)
        ys = list(y) if isinstance(y, tuple | list) else [y]
        outs = [np.asarray(o.data if isinstance(o, tf.Tensor) else o) for o in ys]
        if upstream is None:
            return outs, []
        leaves = [t for t, a in zip(inputs, args) if is_float(a)]
        live = [
            (o, g) for o, g in zip(ys, upstream) if isinstance(o, tf.Tensor) and o.requires_grad
        ]
        found: list[Any] = [None] * len(leaves)
        if live and leaves:
            found = tf.grad([o for o, _ in live], leaves, [g for _, g in live])
    grads = [np.zeros(t.shape) if g is None else np.asarray(g, np.float64) for t, g in
             zip(leaves, found)]  # fmt: skip
    return outs, grads


def _upstream(rng: np.random.Generator, outs: list[np.ndarray]) -> list[np.ndarray]:
    """A standard-normal gradient per float output; zeros (unused) for index outputs."""
    return [rng.standard_normal(o.shape) if o.dtype.kind == "f" else np.zeros(o.shape, o.dtype)
            for o in outs]  # fmt: skip


def _one(spec: Any, sample: Any, seed: int, wide: bool) -> dict[str, Any]:
    from tinyformer.testing import RandomDraw
    from tinyformer.testing.checks import draw_layouts

    draw = RandomDraw(seed)  # the layouts and upstream of `check_backward` for this seed
    layouts = draw_layouts(draw, sample)
    rng = np.random.default_rng(draw.integers(0, 2**16))
    args = [a.astype(np.float64) if is_float(a) else a for a in sample.args]
    outs, _ = reference_call(spec, args, sample.kwargs)
    upstream = _upstream(rng, outs)
    _, vjp = reference_call(spec, args, sample.kwargs, upstream)
    return {
        "seed": seed, "args": args, "kwargs": sample.kwargs, "layouts": layouts, "out": outs,
        "upstream": upstream, "vjp": vjp, "wide": wide,
    }  # fmt: skip


def _seed(salt: bytes | None, a: Assignment, task: Task, spec: str, i: int, wide: bool) -> int:
    if salt is None:
        return WIDE_SEEDS + i if wide else i
    return secret.seed(salt, a.name, task.id, spec, "wide" if wide else "plain", i)


def _samples(a: Assignment, task: Task, spec: Any, salt: bytes | None) -> list[dict[str, Any]]:
    from tinyformer.testing import RandomDraw

    found: list[dict[str, Any]] = []
    for wide, wanted in ((False, task.samples), (True, task.wide_samples * bool(task.widen))):
        kept = 0
        for i in range(MAX_TRIES):
            if kept == wanted:
                break
            seed = _seed(salt, a, task, spec.name, i, wide)
            draw = RandomDraw(seed)
            sample = spec.sample(draw)
            if wide:
                sample = task.widen(sample, draw)
            if task.keep is not None and not task.keep(sample):
                continue
            found.append(_one(spec, sample, seed, wide))
            kept += 1
        if kept < wanted:
            raise ValueError(f"{task.id}: fewer than {wanted} of {MAX_TRIES} samples kept")
    return found


def compute(
    assignment: Assignment, progress: bool = False, salt: bytes | None = None
) -> dict[str, Any]:
    """The expected values of `assignment`, from the running tinyformer's reference: on the
    public seeds (a release's self-check data), or on seeds from the secret `salt`."""
    from tqdm import tqdm

    from tinyformer.testing import all_specs

    specs = {s.name: s for s in all_specs()}
    tasks: dict[str, Any] = {}
    kernel_seeds: dict[str, int] = {}
    test_seeds: dict[str, dict[str, int]] = {}
    for task in tqdm(assignment.tasks, desc="grading data", unit="task", disable=not progress):
        missing = [name for name in task.specs if name not in specs]
        if missing:
            raise ValueError(f"{task.id}: no op spec named {', '.join(map(repr, missing))}")
        tasks[task.id] = {
            name: _samples(assignment, task, specs[name], salt) for name in task.specs
        }
        if task.kernel is not None:
            kernel_seeds[task.id] = (
                task.kernel.seed if salt is None else secret.seed(salt, assignment.name, task.id)
            )
        if salt is not None:  # else the tests draw their public inputs (`_verdicts.inputs_rng`)
            test_seeds[task.id] = {
                name: secret.seed(salt, assignment.name, task.id, name)
                for name in _test_names(assignment, task)
            }
    return {
        "format": _codec.FORMAT, "assignment": assignment.name, "secret": salt is not None,
        "tasks": tasks, "kernel_seeds": kernel_seeds, "test_seeds": test_seeds,
    }  # fmt: skip


def _test_names(a: Assignment, task: Task) -> list[str]:
    """The names of `task`'s property and hidden tests (each draws its inputs from its seed)."""
    checks = a.checks_module()
    if checks is None:
        return []
    tables = (getattr(checks, t, None) or {} for t in ("PROPERTIES", "HIDDEN"))
    return [test.__name__ for table in tables for test in table.get(task.id, [])]


def save(path: str | os.PathLike, meta: dict[str, Any]) -> None:
    from tinyformer.fileio import atomic_write

    payload = _codec.dumps(meta)
    atomic_write(path, lambda f: f.write(payload), mode="wb")


def load(path: str | os.PathLike) -> dict[str, Any]:
    return _codec.loads(str(Path(path)))
