"""The course: assignments, their tasks, and how each task is graded.

A task is graded by the op specs it names (`tinyformer.testing.OpSpec`), on samples drawn from
their samplers with `RandomDraw(seed)`: in the instructor's tree from seeds derived from a secret
salt (`tinyformer.course.grader.secret`), in a release's self-check from public seeds 0, 1, 2, ...
(`tinyformer.course.grader.data`). `Task.widen` adds samples where a skill hides (large logits,
padding masks, ties). Its checks, each worth the points given in `Task.points`:

- `forward`: the student's forward equals the instructor's reference on each sample (float64);
- `gradcheck`: the student's backward, given the sample and a random upstream gradient (in
  random memory layouts), equals the reference's vector-Jacobian product; a sample counts only
  where the forward is right on it;
- `properties`: the task's functions in the assignment's checks module (`PROPERTIES`);
- `hidden`: the same for `HIDDEN`, which sits in a hidden-test region of that module, so a
  release does not ship it;
- `kernel`: the student's kernel of one primitive (`Task.kernel`, a `KernelCheck`) equals the
  primitive's NumPy reference on seeded inputs of several shapes, layouts and dtypes.

A task may name no op spec (A1's engine, A3's mask): its tests alone grade it.

Adding an assignment is one more `Assignment` in `COURSE`, marker comments around its solution
regions (tagged with its task ids), and optionally a notebook and a folder
`tinyformer/course/assignments/<name lower>/` for its checks module and its own code.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from tinyformer.course.assignments.a2 import samples as a2_samples
from tinyformer.course.assignments.a3 import samples as a3_samples
from tinyformer.course.assignments.a4 import samples as a4_samples
from tinyformer.course.kernel_check import KernelCheck
from tinyformer.testing.specs import Draw, Sample

__all__ = [
    "CHECK_KINDS", "COURSE", "Assignment", "KernelCheck", "Task", "assignment", "due", "task",
]  # fmt: skip

CHECK_KINDS = ("forward", "gradcheck", "properties", "hidden", "kernel")


@dataclass(frozen=True)
class Task:
    """One graded task of an assignment.

    Attributes:
        id: "A2.3": the assignment's name, a dot, the task's number.
        title: what the stub says the student is to write, e.g. "layer_norm".
        specs: the names of the op specs that grade it.
        docs: the page the stub's message points to.
        points: check kind -> points (kinds from CHECK_KINDS; a missing kind is not run).
        samples: seeded samples per spec for the forward and gradcheck checks.
        keep: which drawn samples may grade this task (e.g. only those that reach the task's
            own code); None keeps all.
        kernel: what the "kernel" check compares; required by, and only with, that check.
        forward_keep: which of the task's samples the forward and backward checks grade (e.g.
            not those that also run another task's code); None grades all.
        widen: turns a drawn sample into one where the skill hides (large logits, padding
            masks, ties); `wide_samples` such samples per spec join the graded ones.
    """

    id: str
    title: str
    specs: tuple[str, ...]
    docs: str
    points: Mapping[str, int]
    samples: int = 4
    keep: Callable[[Sample], bool] | None = None
    kernel: KernelCheck | None = None
    forward_keep: Callable[[Sample], bool] | None = None
    widen: Callable[[Sample, Draw], Sample] | None = None
    wide_samples: int = 3

    def __post_init__(self) -> None:
        unknown = set(self.points) - set(CHECK_KINDS)
        if unknown:
            raise ValueError(f"{self.id}: unknown check kinds {sorted(unknown)}")
        if ("kernel" in self.points) != (self.kernel is not None):
            raise ValueError(f'{self.id}: the "kernel" check and Task.kernel go together')

    @property
    def total(self) -> int:
        return sum(self.points.values())


@dataclass(frozen=True)
class Assignment:
    """An assignment: its tasks, the student's notebooks and the instructor's notes.

    Attributes:
        name: "A2".
        title: one line.
        tasks: in the order they are graded.
        notebooks: jupytext sources (paths from the repository root) released with it.
        readme: the instructor's page about it.
        checks: the name of the module with its PROPERTIES and HIDDEN tests, or None: by
            convention `tinyformer.course.assignments.<name lower>.checks`, beside the
            assignment's other files in `tinyformer/course/assignments/<name lower>/`.
            `checks_module()` imports it, `checks_file()` finds its file.
        primitives: the registry primitives whose code it asks for: the library's kernels of
            any of them are an answer too, and stay out of releases until it is due.
        files: the files a student edits (paths from the repository root): the files that hold
            its solution regions (`solution_files` finds them in a tree). The grader copies
            only these from a submission, over a pristine copy of the release.
    """

    name: str
    title: str
    tasks: tuple[Task, ...]
    notebooks: tuple[str, ...] = ()
    readme: str = ""
    checks: str | None = None
    primitives: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    lecture: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.checks is not None and not self.checks.startswith(CHECKS_PACKAGE):
            raise ValueError(
                f"{self.name}: checks must name a module in {CHECKS_PACKAGE}, got {self.checks!r}"
            )

    @property
    def total(self) -> int:
        return sum(t.total for t in self.tasks)

    def checks_module(self) -> ModuleType | None:
        """The checks module, imported from the running tinyformer (the grader's own copy,
        never a graded tree's), or None."""
        return importlib.import_module(self.checks) if self.checks else None

    def checks_file(self) -> Path | None:
        """The file of the checks module in the running tinyformer, found without importing
        it, or None."""
        if not self.checks:
            return None
        spec = importlib.util.find_spec(self.checks)
        if spec is None or spec.origin is None:
            raise ValueError(f"{self.name}: no module named {self.checks!r}")
        return Path(spec.origin).resolve()


# Every assignment's checks module lives in this package (`assignments/<name lower>/checks.py`).
CHECKS_PACKAGE = "tinyformer.course.assignments."


def _primitives(*ops: str) -> tuple[str, ...]:
    return tuple(f"{op}.{step}" for op in ops for step in ("forward", "backward"))


def _ops(*names: str) -> tuple[str, ...]:
    return tuple(f"tinyformer/ops/{name}.py" for name in names)


_AUTOGRAD = "docs/architecture.md"

A1 = Assignment(
    name="A1",
    title="autograd: a scalar Value, the topological sort, the gradient of broadcasting",
    lecture="autograd",
    notebooks=("assignments/A1_autograd.py",),
    readme="docs/course/A1.md",
    checks="tinyformer.course.assignments.a1.checks",
    files=("tinyformer/course/assignments/a1/autograd.py",),
    tasks=(
        # No op spec: the code is a small engine in tinyformer/course/assignments/a1/autograd.py
        # (the library's own engine must stay whole, since everything runs on it).
        Task("A1.1", "Value", (), _AUTOGRAD, {"properties": 2, "hidden": 1}),
        Task("A1.2", "backward", (), _AUTOGRAD, {"properties": 2, "hidden": 1}),
        Task("A1.3", "unbroadcast", (), _AUTOGRAD, {"properties": 2, "hidden": 1}),
    ),
)  # fmt: skip

_LOSSES = "docs/ops/softmax-losses.md"

A2 = Assignment(
    name="A2",
    title="softmax, log-softmax + cross-entropy, layer norm",
    lecture="normalisation and losses",
    notebooks=("assignments/A2_softmax_layernorm.py",),
    readme="docs/course/A2.md",
    checks="tinyformer.course.assignments.a2.checks",
    primitives=_primitives("softmax", "log_softmax", "cross_entropy", "layer_norm"),
    files=_ops("softmax", "log_softmax", "cross_entropy", "layer_norm"),
    tasks=(
        Task(
            "A2.1", "softmax", ("softmax",), _LOSSES,
            {"forward": 2, "gradcheck": 3, "properties": 1, "hidden": 1},
            widen=a2_samples.large_logits,
        ),
        Task(
            "A2.2", "log_softmax", ("log_softmax",), _LOSSES,
            {"forward": 2, "gradcheck": 3, "properties": 1, "hidden": 1},
            widen=a2_samples.large_logits,
        ),
        Task(
            "A2.3", "cross_entropy", ("cross_entropy",), _LOSSES,
            {"forward": 2, "gradcheck": 3, "properties": 1, "hidden": 1},
            keep=a2_samples.unweighted, widen=a2_samples.large_logits,
        ),
        Task(
            "A2.4", "layer_norm", ("layer_norm",), "docs/ops/layers.md",
            {"forward": 2, "gradcheck": 3, "properties": 1, "hidden": 1},
            widen=a2_samples.large_offset,
        ),
    ),
)  # fmt: skip


_ATTENTION = "docs/ops/attention.md"
_CONV = "docs/ops/conv.md"

A3 = Assignment(
    name="A3",
    title="attention: scaled dot-product, the causal mask, multi-head",
    lecture="attention",
    notebooks=("assignments/A3_attention.py",),
    readme="docs/course/A3.md",
    checks="tinyformer.course.assignments.a3.checks",
    primitives=_primitives("attention"),
    files=("tinyformer/ops/attention.py", "tinyformer/nn/transformer.py"),
    tasks=(
        # The backward is the core skill: most of A3's points. Causal samples are drawn but
        # not graded here (a wrong mask is A3.2's code, and a backward counts only where the
        # forward is right); padding masks and huge scores are (`a3_samples.padding_mask`).
        Task(
            "A3.1", "scaled_dot_product_attention", ("scaled_dot_product_attention",),
            _ATTENTION, {"forward": 2, "gradcheck": 6, "properties": 1, "hidden": 1}, samples=8,
            forward_keep=a3_samples.not_causal, widen=a3_samples.padding_mask,
        ),
        # No op spec grades the mask or the heads: every sample through them also runs A3.1's
        # code. Their tests compare two routes through the same attention code instead.
        Task("A3.2", "causal mask", (), _ATTENTION, {"properties": 2, "hidden": 1}),
        Task("A3.3", "multi-head attention", (), _ATTENTION, {"properties": 2, "hidden": 1}),
    ),
)  # fmt: skip

A4 = Assignment(
    name="A4",
    title="vision: conv2d, conv_transpose2d, max pooling and unpooling",
    lecture="vision",
    notebooks=("assignments/A4_vision.py",),
    readme="docs/course/A4.md",
    checks="tinyformer.course.assignments.a4.checks",
    primitives=_primitives("conv2d", "conv_transpose2d", "max_pool2d", "max_unpool2d"),
    files=_ops("conv2d", "conv_transpose2d", "max_pool2d", "max_unpool2d"),
    tasks=(
        Task(
            "A4.1", "conv2d", ("conv2d",), _CONV,
            {"forward": 2, "gradcheck": 3, "properties": 1, "hidden": 1}, samples=3,
        ),
        Task(
            "A4.2", "conv_transpose2d", ("conv_transpose2d",), _CONV,
            {"forward": 2, "gradcheck": 3, "properties": 1, "hidden": 1}, samples=3,
        ),
        Task(
            "A4.3", "max_pool2d", ("max_pool2d",), _CONV,
            {"forward": 2, "gradcheck": 2, "properties": 1, "hidden": 1}, widen=a4_samples.ties,
        ),
        Task(
            "A4.4", "max_unpool2d", ("max_unpool2d",), _CONV,
            {"forward": 1, "gradcheck": 2, "properties": 1, "hidden": 1},
        ),
    ),
)  # fmt: skip

_KERNELS = "docs/kernels.md"
_A5_MODULE = "tinyformer.course.assignments.a5.kernels"
# Rows of 1 column, of lengths that are not multiples of 32, and longer than the 256-thread
# block; small, because the emulator runs the CUDA threads one at a time.
_A5_CUDA_SHAPES = ((1, 1), (4, 16), (3, 5, 33), (2, 300), (2, 700))

A5 = Assignment(
    name="A5",
    title="kernels: a fused softmax in Numba and in CUDA, equal to the reference and benchmarked",
    lecture="kernels",
    notebooks=("assignments/A5_kernels.py",),
    readme="docs/course/A5.md",
    checks="tinyformer.course.assignments.a5.checks",
    primitives=_primitives("softmax"),
    files=(
        "tinyformer/course/assignments/a5/kernels.py",
        "tinyformer/course/assignments/a5/softmax.cu",
    ),
    tasks=(
        Task(
            "A5.1", "softmax forward kernel", (), _KERNELS,
            {"kernel": 3, "properties": 1, "hidden": 1},
            kernel=KernelCheck("softmax.forward", _A5_MODULE),
        ),
        Task(
            "A5.2", "softmax backward kernel", (), _KERNELS,
            {"kernel": 2, "properties": 1, "hidden": 1},
            kernel=KernelCheck("softmax.backward", _A5_MODULE, inputs=("normal", "softmax")),
        ),
        Task(
            "A5.3", "softmax forward CUDA kernel", (), "docs/cuda-kernels.md",
            {"kernel": 3, "properties": 1, "hidden": 1},
            kernel=KernelCheck(
                "softmax.forward", "tinyformer.course.assignments.a5.cuda", backend="cuda",
                shapes=_A5_CUDA_SHAPES,
            ),
        ),
    ),
)  # fmt: skip

_DISTRIBUTED = "docs/distributed.md"

A6 = Assignment(
    name="A6",
    title="distributed: a ring all-reduce, DDP's gradient buckets, GPipe's pipeline schedule",
    lecture="distributed",
    notebooks=("assignments/A6_distributed.py",),
    readme="docs/course/A6.md",
    checks="tinyformer.course.assignments.a6.checks",
    files=("tinyformer/distributed/schedules.py",),
    tasks=(
        Task("A6.1", "ring all-reduce", (), _DISTRIBUTED, {"properties": 3, "hidden": 1}),
        Task("A6.2", "gradient buckets", (), _DISTRIBUTED, {"properties": 2, "hidden": 1}),
        Task("A6.3", "GPipe schedule", (), _DISTRIBUTED, {"properties": 3, "hidden": 1}),
    ),
)  # fmt: skip

COURSE: dict[str, Assignment] = {a.name: a for a in (A1, A2, A3, A4, A5, A6)}


def assignment(name: str) -> Assignment:
    """The assignment called `name`; a ValueError lists the known ones."""
    try:
        return COURSE[name]
    except KeyError:
        raise ValueError(
            f"no assignment named {name!r}; the course has: {', '.join(COURSE)}"
        ) from None


def task(tag: str) -> Task | None:
    """The task with id `tag` ("A2.3"), or None if the tag names no task."""
    found = COURSE.get(tag.split(".")[0])
    return next((t for t in found.tasks if t.id == tag), None) if found else None


def due(name: str) -> tuple[str, ...]:
    """The assignments already due when `name` is released: those before it in `COURSE`."""
    names = list(COURSE)
    return tuple(names[: names.index(assignment(name).name)])
