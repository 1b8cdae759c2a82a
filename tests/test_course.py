"""Course assignments: markers, release and the autograder, round trip on every assignment.

Release NAME -> grading it scores 0, each task failing on its own stub; the instructor's tree
scores full points; a planted bug loses only its own task's points (A2: a backward bug loses
only its gradcheck, and a wrong forward whose backward stays consistent with it loses the
forward points; A3: a wrong causal mask; A4: a wrong max_pool2d, whose forward max_unpool2d's
sample function calls; A1: a backward that overwrites instead of adding; A5: a wrong backward
kernel, and a CUDA kernel that never sums across its block). A5's Numba kernel checks fail
with a clear message, not a crash, where Numba is missing.

A5 compiles Numba kernels (about a second each): its fresh release compiles two stubs, the
instructor's tree loads its kernels from Numba's cache once warm, and only the planted bug
compiles all four kernels (float32 and float64, forward and backward). Its CUDA kernel
(A5.3) runs on the CPU emulator, which compiles each distinct source once with the host's C++
compiler and keeps the build in tinyformer's cache folder; a release's stub compiles nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import tinyformer
from tinyformer.cli import main
from tinyformer.course import COURSE
from tinyformer.course.definition import KernelCheck, Task
from tinyformer.course.grader.data import data_path
from tinyformer.course.grader.grade import grade
from tinyformer.course.markers import CUDA, MarkerError, find_regions, strip_source, stub_message

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent
A2 = COURSE["A2"]
SOLVED = ["softmax", "log_softmax", "cross_entropy", "layer_norm"]


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, Path]:
    return {}


@pytest.fixture(scope="module")
def release_of(releases, tmp_path_factory):
    """release_of(NAME): NAME's release, made once per module."""

    def make(name: str) -> Path:
        if name not in releases:
            out = tmp_path_factory.mktemp("release") / name
            assert main(["assignment", "release", name, "--out", str(out)]) == 0
            releases[name] = out
        return releases[name]

    return make


@pytest.fixture(scope="module")
def released(release_of) -> Path:
    return release_of("A2")


def _message(region) -> str:
    return f"{region.tag}: stub"


def test_strip_source_stubs_own_regions_and_removes_hidden():
    text = (
        "def f(x):\n"
        '    """doc"""\n'
        "    ### BEGIN SOLUTION A2.1 forward\n"
        "    return x + 1\n"
        "    ### END SOLUTION\n"
        "def g(x):\n"
        "    ### BEGIN SOLUTION A3.2\n"
        "    return x\n"
        "    ### END SOLUTION\n"
        "### BEGIN HIDDEN TESTS\n"
        "SECRET = 1\n"
        "### END HIDDEN TESTS\n"
    )
    new, stubbed = strip_source(text, "A2", _message, where="m.py")
    assert [r.tag for r in stubbed] == ["A2.1"] and stubbed[0].note == "forward"
    assert '    raise NotImplementedError("A2.1: stub")\n' in new
    assert "return x + 1" not in new and "SECRET" not in new
    assert "### BEGIN SOLUTION A3.2\n    return x\n" in new  # another assignment's: kept
    compile(new, "m.py", "exec")


def test_cuda_sources_hold_markers_behind_comments_and_stub_to_a_comment():
    text = (
        "__device__ void row(float* y) {\n"
        "    // ### BEGIN SOLUTION A5.3 row\n"
        "    y[0] = 1;\n"
        "    //### END SOLUTION\n"
        "}\n"
        "// ### BEGIN SOLUTION A3.1\n"
        "// ### END SOLUTION\n"
    )
    new, stubbed = strip_source(text, "A5", _message, where="k.cu", syntax=CUDA)
    assert [(r.tag, r.note) for r in stubbed] == [("A5.3", "row")]
    assert "    // TODO A5.3: stub\n}\n" in new and "y[0] = 1" not in new
    assert "// ### BEGIN SOLUTION A3.1\n" in new  # another assignment's: kept
    assert stub_message(new, "A5.3") == "A5.3: stub" and stub_message(text, "A5.3") is None
    assert find_regions(text.splitlines(), "k.py") == []  # Python's markers start with ###


@pytest.mark.parametrize(
    "text, error",
    [
        ("### BEGIN SOLUTION A2\n### BEGIN SOLUTION A2\n", "do not nest"),
        ("x = 1\n### END SOLUTION\n", "without its BEGIN"),
        ("### BEGIN HIDDEN TESTS\nx = 1\n", "never ended"),
    ],
)
def test_unpaired_markers_are_errors(text, error):
    with pytest.raises(MarkerError, match=error):
        strip_source(text, "A2", _message, where="m.py")


def test_release_layout(released):
    for op in SOLVED:
        text = (released / "tinyformer" / "ops" / f"{op}.py").read_text(encoding="utf-8")
        assert "### BEGIN SOLUTION" not in text and text.count("raise NotImplementedError") == 2
    stub = 'raise NotImplementedError("A2.4: layer_norm backward — see docs/ops/layers.md")'
    assert f"    {stub}\n" in (released / "tinyformer/ops/layer_norm.py").read_text("utf-8")
    checks = (released / "tinyformer/course/assignments/a2/checks.py").read_text(encoding="utf-8")
    assert "PROPERTIES = {" in checks and "HIDDEN = {" not in checks
    assert "softmax_huge_logits" not in checks
    notebook = (released / A2.notebooks[0]).read_text(encoding="utf-8")
    assert "A2: exercise — replace this line with your code" in notebook
    assert "np.diag(y0) - np.outer(y0, y0)" not in notebook
    untouched = "tinyformer/ops/gelu.py"  # not part of A2: identical
    assert (released / untouched).read_bytes() == (INSTRUCTOR / untouched).read_bytes()
    assert not any((released / p).exists() for p in (".git", "out", "site", "docs/course"))
    with np.load(data_path(released, "A2"), allow_pickle=False) as stored:
        assert "meta" in stored.files


def test_release_refuses_a_non_empty_folder(released, capsys):
    assert main(["assignment", "release", "A2", "--out", str(released)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["assignment", "release", "A9", "--out", str(released / "x")]) == 2


@pytest.mark.parametrize("name", list(COURSE))
def test_grading_a_fresh_release_scores_zero_each_on_its_own_stub(name, release_of, tmp_path):
    results = tmp_path / "results.json"
    assert main(["grade", name, str(release_of(name)), "--json", str(results)]) == 0
    report = json.loads(results.read_text(encoding="utf-8"))
    checks = sum(len(t.points) for t in COURSE[name].tasks)
    # no top-level score: Gradescope adds up the tests, and holds hidden ones back
    assert "score" not in report and len(report["tests"]) == checks
    for test in report["tests"]:
        task = test["name"].split()[0]
        assert test["score"] == 0 and test["max_score"] > 0
        assert f"NotImplementedError: {task}: " in test["output"], test["output"]
        assert test["visibility"] == ("after_published" if "hidden" in test["name"] else "visible")


@pytest.mark.parametrize("name", list(COURSE))
def test_released_checks_and_notebooks_hold_no_answers(name, release_of):
    a, tree = COURSE[name], release_of(name)
    checks = (tree / a.checks_file().relative_to(INSTRUCTOR)).read_text(encoding="utf-8")
    assert "PROPERTIES = {" in checks and "HIDDEN = {" not in checks
    for notebook in a.notebooks:
        text = (tree / notebook).read_text(encoding="utf-8")
        assert "### BEGIN SOLUTION" not in text
        assert f"{name}: exercise — replace this line with your code" in text
    others = [nb for other in COURSE.values() if other is not a for nb in other.notebooks]
    assert not any((tree / nb).exists() for nb in others)


@pytest.mark.parametrize("name", list(COURSE))
def test_grading_the_instructors_tree_scores_full_points(name):
    result = grade(name, INSTRUCTOR)
    failed = [(r.name, r.output) for r in result.results if r.status != "passed"]
    assert not failed and result.score == result.max_score == COURSE[name].total


def _solved_copy(released: Path, tmp_path: Path) -> Path:
    """The release with the instructor's solutions put back (markers are comments)."""
    tree = tmp_path / "tree"
    shutil.copytree(released, tree)
    stubs = {".py": 'raise NotImplementedError("A', ".cu": "// TODO A"}
    for path in (tree / "tinyformer").rglob("*"):
        if path.suffix in stubs and stubs[path.suffix] in path.read_text(encoding="utf-8"):
            rel = path.relative_to(tree)
            shutil.copyfile(INSTRUCTOR / rel, tree / rel)
    return tree


def _plant(tree: Path, module: str, old: str, new: str) -> None:
    """Replace `old` (found once) by `new` in tinyformer/`module` of `tree`."""
    path = tree / "tinyformer" / module
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1
    path.write_text(text.replace(old, new), encoding="utf-8")


def _failed(result) -> set[tuple[str, str]]:
    return {(r.task, r.check) for r in result.results if r.status != "passed"}


def test_a_planted_backward_bug_loses_only_its_tasks_backward_points(released, tmp_path):
    # the gradcheck, and the property and hidden tests that compare gradients with the
    # reference's; the forward and every other task keep their points
    tree = _solved_copy(released, tmp_path)
    _plant(
        tree, "ops/layer_norm.py", "    return gx, (gy * xhat)", "    return 1.01 * gx, (gy * xhat)"
    )
    result = grade("A2", tree)
    assert _failed(result) == {("A2.4", "gradcheck"), ("A2.4", "properties"), ("A2.4", "hidden")}
    report = next(r for r in result.results if r.status != "passed").output
    assert "A2.4 layer_norm gradcheck" in report and "inputs: x float64" in report
    assert "yours is 1.01 times the expected value" in report
    assert result.score == A2.total - A2.tasks[3].total + A2.tasks[3].points["forward"]


def test_a_wrong_forward_with_a_consistent_backward_loses_the_backward_points_too(
    released, tmp_path
):
    # loss + 1 has the same gradient (the backward reads lse, not the loss), but a backward
    # counts only where its forward is right
    tree = _solved_copy(released, tmp_path)
    _plant(
        tree,
        "ops/cross_entropy.py",
        "return xp.where(keep, loss,",
        "return xp.where(keep, loss + 1.0,",
    )
    result = grade("A2", tree)
    failed = _failed(result)
    assert {("A2.3", "forward"), ("A2.3", "gradcheck")} <= failed
    assert {task for task, _ in failed} == {"A2.3"}
    report = next(r.output for r in result.results if (r.task, r.check) == ("A2.3", "gradcheck"))
    assert "a backward counts only where its forward is right" in report


def test_a_wrong_causal_mask_loses_only_a3_2(release_of, tmp_path):
    # one diagonal too many: query i sees key i + 1. A3.1 grades no causal sample, and A3.3's
    # module tests use no causal mask.
    tree = _solved_copy(release_of("A3"), tmp_path)
    _plant(tree, "ops/attention.py", "xp.tri(tq, tk, dtype=bool)", "xp.tri(tq, tk, 1, dtype=bool)")
    result = grade("A3", tree)
    assert _failed(result) == {("A3.2", "properties"), ("A3.2", "hidden")}


def test_a_wrong_max_pool_loses_only_a4_3(release_of, tmp_path):
    # argmin pools minima (and picks the -inf padding). max_unpool2d's sample function draws
    # its indices with max_pool2d_forward: A4.4 must grade on the stored inputs to stay whole.
    tree = _solved_copy(release_of("A4"), tmp_path)
    _plant(tree, "ops/max_pool2d.py", "tap = flat.argmax(axis=2)", "tap = flat.argmin(axis=2)")
    result = grade("A4", tree)
    failed = _failed(result)
    assert ("A4.3", "forward") in failed and {task for task, _ in failed} == {"A4.3"}


def test_a_backward_that_overwrites_loses_only_a1_2(release_of, tmp_path):
    # `=` instead of `+=`: a value used twice keeps one of its gradients. A1.1 and A1.3 are
    # tested without the walk, so only A1.2's tests see it.
    tree = _solved_copy(release_of("A1"), tmp_path)
    _plant(tree, "course/assignments/a1/autograd.py", "parent.grad += g", "parent.grad = g")
    result = grade("A1", tree)
    assert _failed(result) == {("A1.2", "properties"), ("A1.2", "hidden")}


def test_a_wrong_backward_kernel_loses_only_a5_2(release_of, tmp_path):
    # The dot product subtracted outside the product: the forward kernel and the tests of A5.1
    # never run the backward kernel.
    tree = _solved_copy(release_of("A5"), tmp_path)
    _plant(
        tree, "course/assignments/a5/kernels.py", "yi[j] * (gyi[j] - dot)", "yi[j] * gyi[j] - dot"
    )
    result = grade("A5", tree)
    failed = _failed(result)
    assert ("A5.2", "kernel") in failed and {task for task, _ in failed} == {"A5.2"}
    report = next(r for r in result.results if r.status != "passed").output
    assert "A5.2 softmax.backward kernel, float32" in report and "differs from the NumPy" in report


def test_a_cuda_kernel_that_never_sums_across_its_block_loses_only_a5_3(release_of, tmp_path):
    # Each thread normalises by the sum of its own columns: right for rows of one column, wrong
    # wherever a row spreads over several threads. Found on the emulator, with no GPU.
    tree = _solved_copy(release_of("A5"), tmp_path)
    _plant(tree, "course/assignments/a5/softmax.cu", "T(1) / block_sum(total)", "T(1) / total")
    result = grade("A5", tree)
    failed = _failed(result)
    assert ("A5.3", "kernel") in failed and {task for task, _ in failed} == {"A5.3"}
    report = next(r for r in result.results if r.status != "passed").output
    assert "A5.3 softmax.forward kernel, float32 (4, 16) C order on the CPU emulator" in report
    assert "differs from the NumPy" in report


def test_a5_release_stubs_the_cuda_kernel_with_a_comment(release_of):
    released = (release_of("A5") / "tinyformer/course/assignments/a5/softmax.cu").read_text("utf-8")
    stub = "    // TODO A5.3: softmax forward CUDA kernel — see docs/cuda-kernels.md\n"
    assert stub in released and "SOLUTION" not in released and "block_sum(total)" not in released
    instructor = (INSTRUCTOR / "tinyformer/course/assignments/a5/softmax.cu").read_text("utf-8")
    assert "// ### BEGIN SOLUTION A5.3" in instructor and "block_sum(total)" in instructor


def test_without_numba_the_kernel_checks_fail_and_say_why(release_of, tmp_path, monkeypatch):
    # The child imports third-party packages from the grader's links only: without the link
    # to Numba it stands for an environment without Numba.
    from tinyformer.course.grader import _tree

    monkeypatch.setattr(_tree, "KERNEL_THIRD_PARTY", ("llvmlite",))
    tree = _solved_copy(release_of("A5"), tmp_path)
    result = grade("A5", tree, tasks=["A5.1", "A5.2"])
    numba_tasks = [r for r in result.results if r.task in ("A5.1", "A5.2")]
    assert len(numba_tasks) == 6 and all(r.status == "FAILED" for r in numba_tasks)
    for r in numba_tasks:
        assert "numba does not import" in r.output and "pip install numba" in r.output, r.output


def test_a_kernel_check_needs_its_kernel():
    with pytest.raises(ValueError, match="Task.kernel"):
        Task("A5.9", "k", (), "docs/kernels.md", {"kernel": 1})
    with pytest.raises(ValueError, match="Task.kernel"):
        Task("A5.9", "k", (), "docs/kernels.md", {"hidden": 1}, kernel=KernelCheck("a.b", "m"))


def test_grade_refuses_bad_input(tmp_path, capsys):
    assert main(["grade", "A9", str(INSTRUCTOR)]) == 2
    assert main(["grade", "A2", str(tmp_path)]) == 2
    assert "not a tinyformer tree" in capsys.readouterr().err
