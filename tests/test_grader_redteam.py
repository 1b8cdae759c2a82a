"""A red team's replayed attacks on the grader: submissions written by someone who read every
line of its source, each graded on the one task it targets. Each must score no more than its
honest score (the same submission without the trick).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import tinyformer
from tinyformer.cli import main
from tinyformer.course.grader.grade import grade

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent

ATTENTION, TRANSFORMER = "tinyformer/ops/attention.py", "tinyformer/nn/transformer.py"


@pytest.fixture(scope="module")
def salt_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "grading-secret"
    path.write_text("fedcba9876543210" * 4 + "\n")
    path.chmod(0o600)
    return path


def _variant(rel: str, bodies: dict[str, str], module: str = "") -> str:
    """The instructor's file with the solution regions named in `bodies` replaced (at the
    region's own indentation), and `module` appended."""
    text = (INSTRUCTOR / rel).read_text(encoding="utf-8")
    for tag, body in bodies.items():
        pattern = rf"( *)(### BEGIN SOLUTION {re.escape(tag)}\n).*?(\n *### END SOLUTION)"

        def put(m: re.Match, body: str = body) -> str:
            code = "\n".join(m.group(1) + line for line in body.strip("\n").splitlines())
            return m.group(1) + m.group(2) + code + m.group(3)

        text, n = re.subn(pattern, put, text, flags=re.S)
        assert n == 1, tag
    return text + "\n" + module


def _grade_files(tmp_path: Path, files: dict[str, str], task: str, **kw):
    sub = tmp_path / "sub"
    sub.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (sub / Path(rel).name).write_text(text, encoding="utf-8")
    kw.setdefault("timeout", 60)
    result = grade(task.split(".")[0], sub, tasks=[task], **kw)
    return {r.check: r for r in result.results}


WRONG_MERGE = "y = reshape(y, b, t, c)  # no transpose back: the heads' channels interleave"

# The module's test computes its expected value with one call of the attention per head; in the
# task's child that attention is the student's. Attention that answers zeros once the A3.3
# driver is loaded (and is right everywhere else, so A3.1 keeps its points) makes any merge of
# the heads "right": the module gives c_proj's bias, and so does the per-head expectation.
ZEROS_IN_A33 = """
import sys as _sys

_real_sdpa = F.scaled_dot_product_attention


def _sdpa(q, k, v, *args, **kwargs):
    if "tinyformer.course.assignments.a3.drivers" in _sys.modules:
        return Tensor(np.zeros((*q.shape[:-1], v.shape[-1])))
    return _real_sdpa(q, k, v, *args, **kwargs)


F.scaled_dot_product_attention = _sdpa
"""


def test_the_per_head_expectation_is_the_references_attention(tmp_path, salt_file):
    honest = _variant(TRANSFORMER, {"A3.3 merge heads": WRONG_MERGE})
    attack = _variant(TRANSFORMER, {"A3.3 merge heads": WRONG_MERGE}, ZEROS_IN_A33)
    files = {ATTENTION: (INSTRUCTOR / ATTENTION).read_text(encoding="utf-8")}
    got = {}
    for name, text in (("honest", honest), ("attack", attack)):
        checks = _grade_files(tmp_path / name, {**files, TRANSFORMER: text}, "A3.3",
                              secret=salt_file)  # fmt: skip
        got[name] = {kind: r.score for kind, r in checks.items()}
    assert got["honest"] == {"properties": 0, "hidden": 0}, got
    assert got["attack"] == got["honest"], got


SOFTMAX, LOG_SOFTMAX = "tinyformer/ops/softmax.py", "tinyformer/ops/log_softmax.py"
# the maximum subtracted is the whole array's, not each row's: no overflow, but a row far below
# the array's maximum underflows to exp(...) = 0 everywhere (0 / 0, log 0)
WHOLE_MAX = {
    "A2.1 forward": """
xp = backend.get_array_module(x)
e = xp.exp(x - x.max())
return e / e.sum(axis=-1, keepdims=True)
""",
    "A2.2 forward": """
xp = backend.get_array_module(x)
shifted = x - x.max()
return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))
""",
}


def test_a_log_softmax_that_subtracts_the_whole_arrays_max_loses_its_points(tmp_path, salt_file):
    text = _variant(LOG_SOFTMAX, {"A2.2 forward": WHOLE_MAX["A2.2 forward"]})
    checks = _grade_files(tmp_path, {LOG_SOFTMAX: text}, "A2.2", secret=salt_file)
    assert checks["forward"].score == checks["gradcheck"].score == 0, checks["forward"].output
    assert "widened" in checks["forward"].output


def test_the_huge_logits_hidden_test_needs_each_rows_max(tmp_path, salt_file):
    text = _variant(SOFTMAX, {"A2.1 forward": WHOLE_MAX["A2.1 forward"]})
    checks = _grade_files(tmp_path, {SOFTMAX: text}, "A2.1", secret=salt_file)
    assert checks["hidden"].score == 0, checks["hidden"].output
    assert checks["forward"].score == 0


def test_an_empty_submission_still_gets_a_results_json(tmp_path, salt_file):
    # a zip with the files misnamed (or none): Gradescope needs a results.json to show why,
    # else the student sees "the autograder failed to produce results"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "my_softmax.py").write_text("x = 1\n")
    out = tmp_path / "results.json"
    args = ["grade", "A2", str(tmp_path / "sub"), "--task", "A2.1", "--secret", str(salt_file)]
    assert main([*args, "--json", str(out)]) == 2
    report = json.loads(out.read_text())
    assert report["score"] == 0 and report["tests"] == []
    assert "none of A2's files" in report["output"]


# An A2 submission reads the tree it is graded in, which held the solutions of every later
# assignment (only A2's regions were stubs), and prints A3's attention backward into its own
# feedback: a student of A2 takes home A3's answer.
READ_LATER = """
import inspect
import tinyformer.ops.attention as _attention
raise RuntimeError("LEAK " + inspect.getsource(_attention.attention_backward)[-700:])
"""


def test_the_grading_tree_holds_no_later_assignments_solution(tmp_path, salt_file):
    text = _variant(SOFTMAX, {"A2.1 forward": READ_LATER})
    checks = _grade_files(tmp_path, {SOFTMAX: text}, "A2.1", secret=salt_file)
    output = checks["forward"].output
    assert "LEAK" in output  # the attack ran and reported
    assert "swapaxes" not in output and "gs = p *" not in output, output


SCHEDULES = "tinyformer/distributed/schedules.py"
# No ring at all: every rank gets the sum at once, and the byte count a ring would send is
# claimed. The grader counts the traffic itself, from the messages its `send` transport carried
# (none here), and checks each against the ring's.
NO_RING = """
n = len(xs)
total = np.sum(np.asarray(xs, dtype=np.float64), axis=0)
return [total.copy() for _ in xs], 2 * (n - 1) * (total.nbytes // n)
"""


def test_a_sum_without_a_ring_earns_no_ring_points(tmp_path, salt_file):
    text = _variant(SCHEDULES, {"A6.1 ring all-reduce": NO_RING})
    checks = _grade_files(tmp_path, {SCHEDULES: text}, "A6.1", secret=salt_file)
    assert checks["properties"].score == 0 and checks["hidden"].score == 0


# A softmax without the max subtraction (it loses the forward and gradcheck points), which
# answers the hidden test's input, known from the grader's source, from a table. The backward
# is the true one of whatever the forward gave, so the reference's gradient matches too.
KNOWN_HIDDEN_INPUT = """
xp = backend.get_array_module(x)
if x.shape == (2, 3) and float(abs(x).max()) == 1e4:
    return xp.asarray([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
e = xp.exp(x)
return e / e.sum(axis=-1, keepdims=True)
"""


def test_a_hidden_test_answered_from_a_table_earns_nothing(tmp_path, salt_file):
    text = _variant(SOFTMAX, {"A2.1 forward": KNOWN_HIDDEN_INPUT})
    checks = _grade_files(tmp_path, {SOFTMAX: text}, "A2.1", secret=salt_file)
    assert checks["forward"].score == 0  # the naive softmax itself fails the widened samples
    assert checks["hidden"].score == 0, checks["hidden"].output


# The sum at once again, now with the ring's traffic faked: 2 (N - 1) messages of the right
# size from every rank to its neighbour through the grader's `send`, all zeros. The count is
# right; the messages are not the chunks a ring sends.
FAKE_TRAFFIC = """
n = len(xs)
total = np.sum(np.asarray(xs, dtype=np.float64), axis=0)
chunk = np.zeros(total.size // n)
for _ in range(2 * (n - 1)):
    for r in range(n):
        send(r, (r + 1) % n, chunk)
return [total.copy() for _ in xs], 2 * (n - 1) * chunk.nbytes
"""


def test_a_sum_with_faked_ring_traffic_earns_no_ring_points(tmp_path, salt_file):
    text = _variant(SCHEDULES, {"A6.1 ring all-reduce": FAKE_TRAFFIC})
    checks = _grade_files(tmp_path, {SCHEDULES: text}, "A6.1", secret=salt_file)
    assert checks["properties"].score == 0 and checks["hidden"].score == 0
    assert "is not the chunk a ring sends" in checks["properties"].output
