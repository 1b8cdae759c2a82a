"""No release ships an answer, in any form: every release (every assignment) against every answer.

An answer is the body of a solution region of the instructor's tree (assignment tasks,
library regions, tutorial and notebook exercises alike), and every function of a library kernel
that implements a primitive an assignment asks for (`Assignment.primitives`) while that
assignment is not yet due. The exceptions are the ones the policy makes: a library region
(the library's own copy of an answer, which the rest of the library runs on) and the kernels of
an assignment ship once it is due.

Bodies are compared normalised, line by line: comments dropped (`#` and `//` comments, and
Python docstrings' lines are kept as code), blank lines dropped, each line's whitespace runs
collapsed to one space and its ends stripped, so re-indenting or re-commenting a copy does not
hide it. An answer is found in a release if its lines appear as consecutive lines of any
released file (code, notebooks, docs, kernels: every file that reads as UTF-8). Bodies of one
line under `MIN_CHARS` characters (`pass`, `return x`, `y = a @ b`) are ignored: they occur
in correct code everywhere and give away nothing.

Releases are made in-process, once for the module; the search indexes each release's lines
in a dict, so checking a few hundred answers against a release takes milliseconds.

Answers in other forms (tests/answers.py): the derivations the graded tasks ask for (the
comments of their solution regions, and the docstring prose they used to ship in), the graded
code under other variable names in a tutorial, the answers to the tutorials' questions, and
the grader's secret salt (`grading-secret`), which no release may carry.

This module quotes answers (PROSE, the planted copies), so releases leave it out, as they leave
out tests/test_course.py.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

import tinyformer
from tinyformer.course import COURSE
from tinyformer.course.definition import due
from tinyformer.course.markers import find_regions, strip_answers, syntax_of
from tinyformer.course.release import SECRET, _after_title, release, tree_files

from .answers import code_pairs, formulas, graded_code, squeeze

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent
MIN_CHARS = 40
_PY_COMMENT = re.compile(r"(^|\s)#(?!#).*$")  # a comment; `###` markers are dropped too
_C_COMMENT = re.compile(r"(^|\s)//.*$")
_REGISTERS = re.compile(r"""\bkernel\(\s*["']([\w.]+)["']""")


def normalise(text: str, c_comments: bool = False) -> list[str]:
    """The lines of `text` that carry code, each stripped and with one space between words."""
    out = []
    for line in text.splitlines():
        line = _PY_COMMENT.sub("", line)
        if c_comments:
            line = _C_COMMENT.sub("", line)
        line = " ".join(line.split())
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _trivial(lines: list[str]) -> bool:
    return not lines or (len(lines) == 1 and len(lines[0]) < MIN_CHARS)


def _region_answers() -> list[tuple[str, str | None, bool, list[str]]]:
    """(where, owning assignment or None, library region?, normalised body) of every solution
    region in the instructor's tree (not in tests/, whose markers are sample strings)."""
    owners = {nb: a.name for a in COURSE.values() for nb in a.notebooks}
    answers = []
    for rel in tree_files(INSTRUCTOR):
        syntax = syntax_of(rel)
        if syntax is None or rel.suffix == ".ipynb" or rel.parts[0] == "tests":
            continue
        lines = (INSTRUCTOR / rel).read_text(encoding="utf-8").splitlines()
        for r in find_regions(lines, rel.as_posix(), syntax):
            if r.kind != "SOLUTION":
                continue
            body = normalise("\n".join(lines[r.begin + 1 : r.end]), rel.suffix in (".cu", ".cuh"))
            owner = r.assignment or owners.get(rel.as_posix())
            shipped_when_due = r.library or rel.suffix == ".md"  # a page's derivation
            if not _trivial(body):
                answers.append((f"{rel}:{r.begin + 1}", owner, shipped_when_due, body))
    return answers


def _kernel_answers() -> list[tuple[str, set[str], list[str]]]:
    """(where, the assignments whose primitives the file registers, normalised body) of every
    function in the library's kernel files that register an assignment's primitive."""
    asked = defaultdict(set)
    for a in COURSE.values():
        for primitive in a.primitives:
            asked[primitive].add(a.name)
    answers = []
    for path in sorted((INSTRUCTOR / "kernels").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        names = set().union(*(asked[p] for p in _REGISTERS.findall(text) if p in asked))
        if not names:
            continue
        sources = [path.with_suffix(".cu")] if path.with_suffix(".cu").exists() else []
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef):
                body = normalise(ast.get_source_segment(text, node) or "")
                if not _trivial(body):
                    answers.append((f"{path.relative_to(INSTRUCTOR)}:{node.lineno}", names, body))
        for cu in sources:  # a CUDA source: each block between blank lines
            for block in re.split(r"\n[ \t]*\n", cu.read_text(encoding="utf-8")):
                body = normalise(block, c_comments=True)
                if len(body) >= 3:
                    answers.append((str(cu.relative_to(INSTRUCTOR)), names, body))
    return answers


class Index:
    """Every normalised line of a release, and where it is."""

    def __init__(self, root: Path):
        self.files: dict[str, list[str]] = {}
        self.at: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue  # a binary file (the grading data, figures)
            rel = str(path.relative_to(root))
            lines = normalise(text, c_comments=path.suffix in (".cu", ".cuh"))
            self.files[rel] = lines
            for i, line in enumerate(lines):
                self.at[line].append((rel, i))

    def find(self, body: list[str]) -> str | None:
        """Where `body` appears as consecutive lines, or None."""
        for rel, i in self.at.get(body[0], ()):
            if self.files[rel][i : i + len(body)] == body:
                return f"{rel}:{i + 1} (normalised line)"
        return None


REGIONS = _region_answers()
KERNELS = _kernel_answers()


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("releases")
    return {name: release(name, root / name).out for name in COURSE}


@pytest.fixture(scope="module")
def releases(trees) -> dict[str, Index]:
    return {name: Index(tree) for name, tree in trees.items()}


def test_the_instructors_tree_has_answers_to_look_for():
    # The search below must have something to find: every assignment's tasks and the
    # tutorials' exercises, and the library's kernels of A2's and A5's softmax.
    owners = {owner for _, owner, _, _ in REGIONS}
    assert set(COURSE) <= owners and None in owners
    assert any(where.startswith("tutorials/") for where, *_ in REGIONS)
    assert any("kernels/numba/softmax.py" in where for where, *_ in KERNELS)
    assert any(where.endswith("attention.cu") for where, *_ in KERNELS)


def test_the_search_finds_an_answer_copied_into_a_release(tmp_path):
    # A student's tree where the answer of A2.4 was pasted back, re-indented and re-commented.
    where, _, _, body = next(a for a in REGIONS if a[0].startswith("tinyformer/ops/layer_norm"))
    (tmp_path / "copy.py").write_text(
        "def f():\n" + "\n".join(f"        {line}  # mine" for line in body) + "\n"
    )
    assert Index(tmp_path).find(body) == "copy.py:2 (normalised line)", where


@pytest.mark.parametrize("name", list(COURSE))
def test_a_release_ships_no_answer(name, releases):
    index, earlier = releases[name], set(due(name))
    found = [
        f"{where} ({owner or 'tutorial'}) is in {at}"
        for where, owner, library, body in REGIONS
        if not (library and owner in earlier) and (at := index.find(body))
    ]
    found += [
        f"kernel {where} ({', '.join(sorted(names))}) is in {at}"
        for where, names, body in KERNELS
        if not names <= earlier and (at := index.find(body))
    ]
    assert not found, f"{name}'s release ships {len(found)} answers:\n" + "\n".join(found)


def test_library_regions_are_stubs_until_their_assignment_is_due(trees):
    # The engine's graph walk is A1.2's answer: A1's release cannot backpropagate through
    # tinyformer's own Tensor, A2's can (and does not need the student's A1 to).
    stub = "A1.2: backward (the library's own copy, released once A1 is due)"
    assert stub in (trees["A1"] / "tinyformer/engine.py").read_text("utf-8")
    for name in ("A2", "A5"):
        text = (trees[name] / "tinyformer/engine.py").read_text("utf-8")
        assert "(the library's own copy" not in text and "stack.append((node, True))" in text


def test_kernels_of_an_assignment_stay_out_until_it_is_due(trees):
    def has(name: str, kernel: str) -> bool:
        return (trees[name] / "kernels" / kernel).is_file()

    assert not has("A3", "numba/attention.py") and not has("A3", "cuda/attention.cu")
    assert not has("A3", "numba/_attention_short.py")  # a helper only attention imports
    # A3 is due in A4's release, but its regions are stubs there too (the student syncs their
    # own code), so its kernels stay out as well
    assert not has("A4", "numba/attention.py") and not has("A6", "cuda/attention.cu")
    assert not has("A4", "numba/conv2d.py") and not has("A5", "numba/conv2d.py")
    assert not any(has(n, "numba/softmax.py") or has(n, "cuda/softmax.cu") for n in COURSE)
    assert all(has(n, "numba/gelu.py") and has(n, "numba/_rows.py") for n in COURSE)


def test_every_tutorial_exercise_is_a_stub_between_your_code_markers(trees):
    text = (trees["A2"] / "tutorials/04_attention_step_by_step.py").read_text("utf-8")
    assert "### BEGIN YOUR CODE A3.1 attention backward, in the tutorial\n" in text
    assert 'raise NotImplementedError("A3.1: scaled_dot_product_attention' in text
    assert "### BEGIN SOLUTION" not in text


def test_carry_solutions_keeps_only_the_assignments_already_due(tmp_path):
    tree = release("A3", tmp_path / "A3", carry_solutions=True).out
    softmax = (tree / "tinyformer/ops/softmax.py").read_text("utf-8")
    assert softmax == (INSTRUCTOR / "tinyformer/ops/softmax.py").read_text("utf-8")
    attention = (tree / "tinyformer/ops/attention.py").read_text("utf-8")
    assert "### BEGIN SOLUTION" not in attention and "A3.1: scaled_dot" in attention
    assert "A4.1: conv2d" in (tree / "tinyformer/ops/conv2d.py").read_text("utf-8")
    # the kernels of the carried assignment (A2) ship with its solutions; A3's do not
    assert (tree / "kernels/numba/layer_norm.py").is_file()
    assert not (tree / "kernels/numba/attention.py").is_file()


# Derivations as the graded ops' docstrings (and the tutorials' prose) wrote them before they
# moved into the solution regions: none may come back, in these words or with other spacing.
PROSE = {
    "A2.1": (
        "gx_i = y_i * (gy_i - sum_j gy_j y_j)",
        "dy_i/dx_j = y_i (delta_ij - y_j)",
        "gx = y * (gy - sum(gy * y))",
        "gx = y * (g - sum(g y))",
        r"g_x = y \odot (g_y - \sum_j g_{y,j} y_j)",
    ),
    "A2.2": ("gx_i = gy_i - exp(y_i) * sum_j gy_j",),
    "A2.3": (
        "glogits = g_row * (p - (1 - eps) * onehot(target) - eps / C)",
        "p - (1 - ε) onehot - ε/C",
        "p - smoothed one-hot",
    ),
    "A2.4": (
        "gx = rstd * (g - mean(g) - xhat * mean(g * xhat))",
        "gw = sum over rows of gy * xhat",
        "layer_norm's gx has one more term, - mean(g)",
    ),
    "A3.1": ("gs = p * (gp - D)", "gq = gs k * scale", "gk = gs^T q * scale"),
    "A4.1": ("gcols = W^T gy", "gW = sum over n and positions of gy cols^T"),
    "A4.2": ("gW = sum over n and pixels of x gcols^T",),
    "A4.3": ("gx[n, c, indices[n, c, y_, x_]] += gy[n, c, y_, x_]",),
    "A4.4": ("gx[n, c, h, w] = gy[n, c].flat[indices[n, c, h, w]]",),
}


FORMULAS = formulas(INSTRUCTOR, PROSE)
GRADED_CODE = graded_code(INSTRUCTOR)
GRADED_OPS = ("softmax", "log_softmax", "cross_entropy", "layer_norm", "attention", "conv2d")
GRADED_OPS += ("conv_transpose2d", "max_pool2d", "max_unpool2d")


@pytest.fixture(scope="module")
def texts(trees) -> dict[str, dict[str, str]]:
    """Every UTF-8 file of every release, by path, with all whitespace removed."""
    out = {}
    for name, tree in trees.items():
        out[name] = {}
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            try:
                out[name][str(path.relative_to(tree))] = squeeze(path.read_text("utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
    return out


def _not_yet_due(name: str):
    """(owner, library region?) -> whether a release of `name` must not show the answer: its
    assignment is not yet due (a tutorial's exercise, owner None, never is)."""
    earlier = set(due(name))
    return lambda owner, library: owner not in earlier


def test_the_derivations_sit_in_the_solution_regions_of_the_instructors_tree():
    # Each graded op's backward is derived next to its code, where a release stubs it.
    derived = {a.where.split(":")[0] for a in FORMULAS if not a.where.startswith("PROSE")}
    assert {f"tinyformer/ops/{op}.py" for op in GRADED_OPS} <= derived, sorted(derived)
    softmax = (INSTRUCTOR / "tinyformer/ops/softmax.py").read_text("utf-8")
    docstring = softmax.split('"""')[1]
    assert "gx_i" not in docstring and "gx_i = y_i * (gy_i - sum_j gy_j y_j)" in softmax


@pytest.mark.parametrize("name", list(COURSE))
def test_a_release_ships_no_graded_formula(name, texts):
    # The derivations of the tasks not yet due, in a docstring, a notebook, a page or a
    # tutorial's prose, whatever their spacing.
    asked = _not_yet_due(name)
    found = [
        f"{a.where} ({a.owner or 'tutorial'}) {a.text!r} is in {rel}"
        for a in FORMULAS
        if asked(a.owner, a.library)
        for rel, text in texts[name].items()
        if a.text in text
    ]
    assert not found, f"{name}'s release ships {len(found)} derivations:\n" + "\n".join(found)


def test_the_formula_search_finds_a_derivation_put_back_in_a_docstring(tmp_path):
    source = (INSTRUCTOR / "tinyformer/ops/softmax.py").read_text("utf-8")
    leaked = source.replace(
        "Saved     y:", "Backward  gx_i = y_i * (gy_i -\n   sum_j gy_j y_j)\nSaved y:"
    )
    assert any(a.text in squeeze(leaked.split('"""')[1]) for a in FORMULAS if a.owner == "A2")


@pytest.mark.parametrize("name", list(COURSE))
def test_tutorials_in_a_release_show_no_graded_code(name, trees):
    # A graded forward or backward in a tutorial, under the tutorial's own names (tutorial 04
    # wrote A2.1's forward as `def softmax(s)`), is a stub until its assignment is due.
    asked = _not_yet_due(name)
    answers = {a.text: a.where for a in GRADED_CODE if asked(a.owner, a.library)}
    found = [
        f"{answers[pair]} is in {path.relative_to(trees[name])}: {pair!r}"
        for folder in ("tutorials", "assignments")
        for path in sorted((trees[name] / folder).glob("*.py"))
        for pair in code_pairs(path.read_text("utf-8")) & answers.keys()
    ]
    assert not found, "\n".join(found)


def test_the_code_search_finds_a_graded_forward_under_other_names():
    planted = """
def softmax(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""
    hits = code_pairs(planted) & {a.text for a in GRADED_CODE}
    assert any("softmax.py" in a.where for a in GRADED_CODE if a.text in hits)
    one_line = "grad = out * (up - (up * out).sum(axis=-1, keepdims=True))  # softmax's backward"
    hits = code_pairs(one_line) & {a.text for a in GRADED_CODE}
    assert any("ops/softmax.py" in a.where for a in GRADED_CODE if a.text in hits)


def test_no_release_answers_the_tutorials_questions(texts):
    assert "<!-- ANSWER" in (INSTRUCTOR / "tutorials/04_attention_step_by_step.py").read_text()
    found = [
        f"{n}: {rel}"
        for n, files in texts.items()
        for rel, t in files.items()
        if rel.startswith(("tutorials/", "assignments/")) or rel.endswith(".md")
        if "<!--ANSWER" in t
    ]
    assert not found, found


def test_answers_come_out_and_the_rest_stays():
    text = "# Question?\n# <!-- ANSWER: two\n# lines -->\n#\n# a <!-- ANSWER: inline --> b\nx = 1\n"
    assert strip_answers(text) == "# Question?\n#\n# a  b\nx = 1\n"


def test_no_release_carries_the_grading_secret(trees, texts, tmp_path):
    for tree in trees.values():
        assert not [p for p in tree.rglob(f"{SECRET}*")], tree
    secret = INSTRUCTOR / SECRET
    if secret.is_file():  # the instructor's salt: not even its value
        value = squeeze(secret.read_text("utf-8", errors="replace"))
        assert value and not [r for f in texts.values() for r, t in f.items() if value in t]
    # and outside a git checkout, wherever it lies (with the instructor's other files)
    for rel in (SECRET, f"tinyformer/course/{SECRET}", "docs/instructors.md", "a.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("salt 1234\n")
    assert tree_files(tmp_path) == [Path("a.py")]


def test_stub_messages_say_each_title_once(trees):
    text = (trees["A6"] / "tinyformer/distributed/schedules.py").read_text("utf-8")
    assert "A6.1: ring all-reduce — see docs/distributed.md" in text
    assert "A6.3: GPipe schedule — see" in text and "A6.2: gradient buckets — see" in text
    tutorial = (trees["A6"] / "tutorials/22_data_parallel.py").read_text("utf-8")
    assert "A6.1: ring all-reduce, in the tutorial — see" in tutorial
    tasks = [t for a in COURSE.values() for t in a.tasks]
    for name, tree in trees.items():
        for path in (tree / "tinyformer").rglob("*.py"):
            source = path.read_text("utf-8")
            twice = [t.id for t in tasks if f"{t.id}: {t.title} {t.title}" in source]
            assert not twice, f"{name} {path}: {twice}"


@pytest.mark.parametrize(
    "title, note, message",
    [
        ("ring all-reduce", "ring all-reduce", "ring all-reduce"),
        ("ring all-reduce", "ring all-reduce, in the tutorial", "ring all-reduce, in the tutorial"),
        ("gradient buckets", "buckets", "gradient buckets"),
        (
            "layer_norm",
            "layer_norm backward, in the tutorial",
            "layer_norm backward, in the tutorial",
        ),
        ("softmax", "forward", "softmax forward"),
        ("backward", "backwards pass", "backward backwards pass"),
        ("softmax forward kernel", "", "softmax forward kernel"),
    ],
)
def test_a_stubs_note_does_not_repeat_the_title(title, note, message):
    assert title + _after_title(title, note) == message


def test_a_pages_derivation_ships_once_its_assignment_is_due(trees):
    derivation = "$$g_{x_j} = \\sum_i g_i\\, y_i (\\delta_{ij} - y_j)"
    instructor = (INSTRUCTOR / "docs/ops/softmax-losses.md").read_text("utf-8")
    assert derivation in instructor
    for name, shown in (("A1", False), ("A2", False), ("A3", True), ("A6", True)):
        page = (trees[name] / "docs/ops/softmax-losses.md").read_text("utf-8")
        assert (derivation in page) == shown, name
        stub = "> **A2.1** (softmax backward): working this out is part of assignment A2."
        assert (stub in page) != shown, name
        assert ("g_w[o, c, i, j]" in (trees[name] / "docs/ops/conv.md").read_text()) == (
            name in ("A5", "A6")
        )
