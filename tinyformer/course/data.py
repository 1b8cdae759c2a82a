"""The instructor's forward values: computed from the running (instructor's) tinyformer, at
release time, for a fixed set of seeded samples per task, and stored without pickle.

Samples are drawn from each spec with `RandomDraw(seed)` for seed = 0, 1, 2, ..., keeping those
the task accepts (`Task.keep`), until `Task.samples` are found; the grader's gradcheck replays
the same seeds. Values are computed in float64 with every primitive forced to its NumPy
reference, as the grader runs the student's code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.course import _codec
from tinyformer.course.definition import Assignment, Task

__all__ = ["MAX_TRIES", "compute", "load", "save"]

MAX_TRIES = 1000  # seeds tried per spec before a too-strict `keep` is reported


def _samples(task: Task, spec: Any) -> list[dict[str, Any]]:
    import tinyformer as tf
    from tinyformer import registry
    from tinyformer.testing import RandomDraw

    found = []
    for seed in range(MAX_TRIES):
        sample = spec.sample(RandomDraw(seed))
        if task.keep is not None and not task.keep(sample):
            continue
        args = [a.astype(np.float64) if _is_float(a) else a for a in sample.args]
        inputs = [tf.Tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        with registry.prefer(registry.REFERENCE), tf.no_grad():
            y = spec.fn(*inputs, **sample.kwargs)
        outs = [np.asarray(t.data) for t in (y if isinstance(y, tuple | list) else [y])]
        found.append({"seed": seed, "args": args, "kwargs": sample.kwargs, "out": outs})
        if len(found) == task.samples:
            return found
    raise ValueError(f"{task.id}: fewer than {task.samples} of {MAX_TRIES} samples kept")


def _is_float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def compute(assignment: Assignment, progress: bool = False) -> dict[str, Any]:
    """The grading data of `assignment`, from the running tinyformer's code."""
    from tqdm import tqdm

    from tinyformer.testing import all_specs

    specs = {s.name: s for s in all_specs()}
    tasks: dict[str, Any] = {}
    for task in tqdm(assignment.tasks, desc="grading data", unit="task", disable=not progress):
        missing = [name for name in task.specs if name not in specs]
        if missing:
            raise ValueError(f"{task.id}: no op spec named {', '.join(map(repr, missing))}")
        tasks[task.id] = {name: _samples(task, specs[name]) for name in task.specs}
    return {"format": _codec.FORMAT, "assignment": assignment.name, "tasks": tasks}


def save(path: str | os.PathLike, meta: dict[str, Any]) -> None:
    from tinyformer.fileio import atomic_write

    payload = _codec.dumps(meta)
    atomic_write(path, lambda f: f.write(payload), mode="wb")


def load(path: str | os.PathLike) -> dict[str, Any]:
    return _codec.loads(str(Path(path)))
