"""The grader judges against the instructor's reference, never against what a submission says.

Submissions that earned points on an earlier grader without the skill (a constant function, a
forward with no backward, a finite-difference lie, a replay of the release's data, a softmax
without its max subtraction, a constant layer norm on a vacuous hidden test) are graded on the
one task they target, and must score no more than an honest stub. The comparisons themselves
(tolerances, NaN, repeated backward passes, malformed replies, feedback) are tested on one
sample with a fake child, which answers as a submission would.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tinyformer
from tinyformer.course.definition import A2
from tinyformer.course.grader import _compare, _gradcheck, secret
from tinyformer.course.grader import data as grading_data
from tinyformer.course.grader import grade as grade_module
from tinyformer.course.grader.grade import grade
from tinyformer.testing import all_specs

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent
SOFTMAX, LAYER_NORM = "tinyformer/ops/softmax.py", "tinyformer/ops/layer_norm.py"
SPECS = {s.name: s for s in all_specs()}


@pytest.fixture(scope="module")
def salt_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "grading-secret"
    path.write_text("0123456789abcdef" * 4 + "\n")
    path.chmod(0o600)
    return path


def _variant(rel: str, bodies: dict[str, str], module: str = "") -> str:
    """The instructor's file with the solution regions named in `bodies` replaced."""
    text = (INSTRUCTOR / rel).read_text(encoding="utf-8")
    for tag, body in bodies.items():
        code = "\n".join("    " + line for line in body.strip("\n").splitlines())
        pattern = rf"(### BEGIN SOLUTION {re.escape(tag)}\n).*?(\n    ### END SOLUTION)"
        text, n = re.subn(pattern, lambda m, c=code: m.group(1) + c + m.group(2), text, flags=re.S)
        assert n == 1, tag
    return text + "\n" + module


def _grade(tmp_path: Path, rel: str, text: str, task: str, **kw):
    sub = tmp_path / "sub"
    sub.mkdir(parents=True, exist_ok=True)
    (sub / Path(rel).name).write_text(text, encoding="utf-8")
    kw.setdefault("timeout", 60)
    result = grade(task.split(".")[0], sub, tasks=[task], **kw)
    return {r.check: r for r in result.results}


def _points(checks: dict) -> dict[str, int]:
    return {kind: r.score for kind, r in checks.items()}


@pytest.fixture(scope="module")
def stub_points(tmp_path_factory, salt_file) -> dict[str, int]:
    """What the release's stub of A2.1 scores: the most a submission without the skill may."""
    stub = 'raise NotImplementedError("A2.1: stub")'
    text = _variant(SOFTMAX, {"A2.1 forward": stub, "A2.1 backward": stub})
    return _points(_grade(tmp_path_factory.mktemp("stub"), SOFTMAX, text, "A2.1",
                          secret=salt_file))  # fmt: skip


CORRECT_FORWARD = """
xp = backend.get_array_module(x)
e = xp.exp(x - x.max(axis=-1, keepdims=True))
return e / e.sum(axis=-1, keepdims=True)
"""
CORRECT_BACKWARD = "return y * (gy - (gy * y).sum(axis=-1, keepdims=True))"


def test_a_constant_function_scores_no_more_than_the_stub(tmp_path, salt_file, stub_points):
    bodies = {"A2.1 forward": "return x * 0.0", "A2.1 backward": "return gy * 0.0"}
    got = _points(_grade(tmp_path, SOFTMAX, _variant(SOFTMAX, bodies), "A2.1", secret=salt_file))
    assert got["forward"] == got["gradcheck"] == 0
    assert sum(got.values()) <= sum(stub_points.values())


def test_a_finite_difference_lie_earns_no_backward_points(tmp_path, salt_file, stub_points):
    # a zero backward, and a child that answers any finite-difference request with constants:
    # the grader no longer asks the child for finite differences, and compares the backward
    # with the reference's
    lie = """
import __main__ as _m
def _unperturbed(request, specs):  # every step answered with the forward at the sample itself
    import numpy as np
    import tinyformer as tf
    args, _ = _m._arguments(request["args"])
    with tf.no_grad():
        y = _m._resolve(request["target"], specs)(*args, **request["kwargs"])
    return {"outs": [np.asarray(y.data, np.float64).ravel() for _ in request["values"]]}
_m._batch = _unperturbed
"""
    text = _variant(SOFTMAX, {"A2.1 backward": "return gy * 0.0"}, module=lie)
    checks = _grade(tmp_path, SOFTMAX, text, "A2.1", secret=salt_file)
    assert checks["forward"].score == 2
    assert checks["gradcheck"].score == stub_points["gradcheck"] == 0
    assert "disagrees with the reference" in checks["gradcheck"].output
    assert "Looks like: yours is all zeros" in checks["gradcheck"].output


def test_a_correct_forward_without_a_backward_earns_only_the_forward(tmp_path, salt_file):
    stub = 'raise NotImplementedError("A2.1: backward stub")'
    checks = _grade(tmp_path, SOFTMAX, _variant(SOFTMAX, {"A2.1 backward": stub}), "A2.1",
                    secret=salt_file)  # fmt: skip
    assert checks["forward"].score == 2 and checks["gradcheck"].score == 0
    assert "backward stub" in checks["gradcheck"].output


def test_a_backward_consistent_with_a_wrong_forward_gets_nothing(tmp_path, salt_file):
    # twice softmax, with the gradient of twice softmax: finite differences of its own forward
    # agree with it, the reference does not
    bodies = {
        "A2.1 forward": CORRECT_FORWARD.replace("return e /", "return 2 * e /"),
        "A2.1 backward": "y = y / 2\nreturn 2 * y * (gy - (gy * y).sum(axis=-1, keepdims=True))",
    }
    checks = _grade(tmp_path, SOFTMAX, _variant(SOFTMAX, bodies), "A2.1", secret=salt_file)
    assert checks["forward"].score == checks["gradcheck"].score == 0
    assert "a backward counts only where its forward is right" in checks["gradcheck"].output
    assert "yours is 2 times the expected value" in checks["forward"].output


def test_a_softmax_without_the_max_subtraction_loses_forward_points(tmp_path, salt_file):
    naive = (
        "xp = backend.get_array_module(x)\ne = xp.exp(x)\nreturn e / e.sum(axis=-1, keepdims=True)"
    )
    checks = _grade(tmp_path, SOFTMAX, _variant(SOFTMAX, {"A2.1 forward": naive}), "A2.1",
                    secret=salt_file)  # fmt: skip
    assert checks["forward"].score == 0 and checks["gradcheck"].score == 0
    assert "widened" in checks["forward"].output and "NaN" in checks["forward"].output


def test_attention_without_the_max_subtraction_loses_forward_points(tmp_path, salt_file):
    rel = "tinyformer/ops/attention.py"
    naive = """
xp = backend.get_array_module(s)
e = xp.exp(s)
total = e.sum(axis=-1, keepdims=True)
empty = total == 0
total = xp.where(empty, 1, total)
lse = xp.where(empty, s.dtype.type(np.inf), xp.log(total))
return e / total, lse[..., 0]
"""
    text = _variant(rel, {"A3.1 softmax and log-sum-exp": naive})
    checks = _grade(tmp_path, rel, text, "A3.1", secret=salt_file)
    assert checks["forward"].score == 0 and "widened" in checks["forward"].output


def _lookup_table(meta: dict) -> str:
    """A softmax.py that answers the release's public samples from a table and nothing else."""
    forward, backward = {}, {}
    for s in meta["tasks"]["A2.1"]["softmax"]:
        axis = s["kwargs"]["axis"]
        x, y = (np.ascontiguousarray(np.moveaxis(a, axis, -1)) for a in (s["args"][0], s["out"][0]))
        gy, gx = (
            np.ascontiguousarray(np.moveaxis(a, axis, -1)) for a in (s["upstream"][0], s["vjp"][0])
        )
        forward[x.tobytes().hex()] = (y.ravel().tolist(), list(y.shape))
        backward[gy.tobytes().hex()] = (gx.ravel().tolist(), list(gx.shape))
    lookup = """
import numpy as _np
def _look(table, key, like):
    found = table.get(_np.ascontiguousarray(key, _np.float64).tobytes().hex())
    return _np.zeros_like(like) if found is None else _np.array(found[0]).reshape(found[1])
"""
    bodies = {
        "A2.1 forward": f"return _look({forward!r}, x, x)",
        "A2.1 backward": f"return _look({backward!r}, gy, gy)",
    }
    return _variant(SOFTMAX, bodies, module=lookup)


def test_replaying_the_release_data_scores_at_most_a_stub(tmp_path, salt_file, stub_points):
    public = grading_data.compute(A2)  # what a release ships
    text = _lookup_table(public)
    path = tmp_path / "A2.grading.npz"
    grading_data.save(path, public)
    replayed = _points(_grade(tmp_path / "a", SOFTMAX, text, "A2.1", data=path))
    assert replayed["forward"] == 2 and replayed["gradcheck"] == 3  # the table works there
    graded = _points(_grade(tmp_path / "b", SOFTMAX, text, "A2.1", secret=salt_file))
    assert graded["forward"] == graded["gradcheck"] == 0
    assert sum(graded.values()) <= sum(stub_points.values())


def test_a_constant_layer_norm_fails_the_large_offset_hidden_test(tmp_path, salt_file):
    bodies = {
        "A2.4 forward": "z = x[:, 0] * 0.0\nreturn x * 0.0, z, z + 1.0",
        "A2.4 backward": "return x * 0.0, x[0] * 0.0, x[0] * 0.0",
    }
    checks = _grade(tmp_path, LAYER_NORM, _variant(LAYER_NORM, bodies), "A2.4", secret=salt_file)
    assert all(r.score == 0 for r in checks.values()), {k: r.score for k, r in checks.items()}
    assert "layer_norm_large_offset: FAILED" in checks["hidden"].output


def test_a_check_that_cannot_run_gives_no_points(tmp_path, salt_file, monkeypatch):
    def broken(*args):
        raise RuntimeError("no such thing")

    monkeypatch.setitem(grade_module.CHECKS, "forward", broken)
    checks = _grade(tmp_path, SOFTMAX, (INSTRUCTOR / SOFTMAX).read_text(), "A2.1",
                    secret=salt_file)  # fmt: skip
    assert checks["forward"].score == 0 and checks["forward"].status == "FAILED"
    assert "could not run (RuntimeError: no such thing)" in checks["forward"].output
    assert checks["gradcheck"].score == 3  # the other checks still ran


# -- one sample, a fake child --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample() -> dict:
    meta = grading_data.compute(A2, salt=b"fake child salt 0123")
    return next(s for s in meta["tasks"]["A2.1"]["softmax"] if s["args"][0].size > 3)


class FakeChild:
    """Answers "call" as `answer(args, upstream)` says: (outs, grads) or a whole reply."""

    def __init__(self, answer) -> None:
        self.answer, self.calls = answer, 0

    def request(self, message: dict, during: str) -> dict:
        self.calls += 1
        args = [a["tensor"] if isinstance(a, dict) else a for a in message["args"]]
        reply = self.answer(args, message.get("upstream"), self.calls)
        return reply if isinstance(reply, dict) else {"outs": reply[0], "grads": reply[1]}


def _reference(sample: dict):
    return list(sample["out"]), list(sample["vjp"])


def _backward(sample: dict, answer) -> str | None:
    spec = SPECS["softmax"]
    return _gradcheck.backward_case(FakeChild(answer), "spec:softmax", spec, sample, ["x"])


def test_the_backward_tolerance_is_relative_to_the_reference(sample):
    spec = SPECS["softmax"]
    outs, (want,) = _reference(sample)
    want = want + np.sign(want) * 1e-3 + (want == 0) * 1e-3  # no value near 0
    sample = {**sample, "vjp": [want]}
    # |got - want| = 1.0005 rtol |want|: within rtol |got|, not within rtol |want|
    over = want * (1 + 1.0005 * spec.rtol) + np.sign(want) * spec.atol
    assert _backward(sample, lambda a, u, n: (outs, [over])) is not None
    under = want * (1 + 0.9 * spec.rtol)
    assert _backward(sample, lambda a, u, n: (outs, [under])) is None
    shifted = want + 0.9 * spec.atol  # atol adds to rtol |want|
    assert _backward(sample, lambda a, u, n: (outs, [shifted])) is None


def test_the_forward_tolerance(sample):
    (y,), vjp = _reference(sample)
    rtol = _gradcheck.FORWARD_TOL["rtol"]
    assert _gradcheck.forward_case(FakeChild(lambda a, u, n: ([y * (1 + 0.5 * rtol)], [])),
                                   "spec:softmax", sample) is None  # fmt: skip
    why = _gradcheck.forward_case(FakeChild(lambda a, u, n: ([y * (1 + 3 * rtol)], [])),
                                  "spec:softmax", sample)  # fmt: skip
    assert why is not None and "differs from the reference" in why


def test_nan_is_never_close_except_where_the_reference_is_nan(sample):
    (y,), _ = _reference(sample)
    nan = np.full_like(y, np.nan)
    why = _gradcheck.forward_case(FakeChild(lambda a, u, n: ([nan], [])), "spec:softmax", sample)
    assert why is not None and "NaN where the expected values are finite" in why
    hole = y.copy()
    hole.flat[0] = np.nan
    at_nan = {**sample, "out": [hole]}
    assert _gradcheck.forward_case(FakeChild(lambda a, u, n: ([hole], [])), "spec:softmax",
                                   at_nan) is None  # fmt: skip
    assert _compare.bad(np.array([np.inf, 1.0]), np.array([np.inf, np.inf]), 1e-8, 1e-6).tolist() \
        == [False, True]  # fmt: skip


def test_a_backward_that_differs_between_two_runs_fails(sample):
    outs, (want,) = _reference(sample)
    why = _backward(sample, lambda a, u, n: (outs, [want + 1e-9 * n]))
    assert why is not None and "two backward passes gave different gradients" in why


@pytest.mark.parametrize("reply", [
    {"outs": [np.array(["1.0"])], "grads": []},
    {"outs": [np.zeros(2, dtype=[("a", "f8")])], "grads": []},
    {"outs": "zeros", "grads": []},
    {"outs": [np.zeros((1, 1, 1, 1, 1))], "grads": []},
    {"error": "ValueError: the student's own"},
])  # fmt: skip
def test_a_malformed_reply_fails_the_sample_with_a_message(sample, reply):
    why = _gradcheck.forward_case(FakeChild(lambda a, u, n: reply), "spec:softmax", sample)
    assert why is not None and why.strip()
    assert _backward(sample, lambda a, u, n: reply) is not None


def test_malformed_gradients_fail_with_a_message(sample):
    outs, (want,) = _reference(sample)
    for grads in ([want.astype(str)], [want.T.copy() if want.ndim > 1 else want[:1]], [], "x"):
        why = _backward(sample, lambda a, u, n, g=grads: (outs, g))
        assert why is not None and why.strip()


def test_feedback_names_a_transpose_a_factor_and_zeros():
    want = np.arange(1.0, 7.0).reshape(2, 3)
    assert "last two axes swapped" in _compare.diagnose(want.T.copy(), want)
    square = np.arange(1.0, 10.0).reshape(3, 3)
    assert "last two axes swapped" in _compare.diagnose(square.T.copy(), square)
    assert "0.5 times the expected value" in _compare.diagnose(want * 0.5, want)
    assert "factor of 3" in _compare.diagnose(want * 3, want)
    assert "opposite sign" in _compare.diagnose(-want, want)
    assert "all zeros" in _compare.diagnose(want * 0, want)
    assert _compare.diagnose(want + 1, want) == ""
    with pytest.raises(Exception, match="last two axes swapped"):
        _compare.numeric(np.zeros((2, 4, 3)), "output 0", (2, 3, 4))


def test_array_kwargs_are_summarised():
    text = _compare.describe(["x"], [np.zeros((2, 3))], {"mask": np.arange(100.0)})
    assert "mask=float64 (100,) [0, 1, 2, 3, ...]" in text, text
    assert "inputs: x float64 (2, 3)" in text


# -- samples --------------------------------------------------------------------------------------


def test_secret_samples_differ_from_the_release_and_between_salts():
    def inputs(meta):
        return [s["args"][0].tobytes() for s in meta["tasks"]["A2.1"]["softmax"]]

    task = A2.tasks[:1]
    a = A2.__class__(A2.name, A2.title, task)
    public, one, other = (grading_data.compute(a, salt=s) for s in (None, b"x" * 20, b"y" * 20))
    assert [s["seed"] for s in public["tasks"]["A2.1"]["softmax"]][:4] == [0, 1, 2, 3]
    assert not set(inputs(one)) & set(inputs(public)) and inputs(one) != inputs(other)
    assert inputs(one) == inputs(grading_data.compute(a, salt=b"x" * 20))
    wide = [s for s in one["tasks"]["A2.1"]["softmax"] if s["wide"]]
    assert len(wide) == A2.tasks[0].wide_samples
    assert all(np.abs(s["args"][0]).max() >= 700 for s in wide)  # past exp's range


def test_the_grading_secret_is_made_once_and_private(tmp_path, monkeypatch):
    path = tmp_path / secret.FILENAME
    monkeypatch.setattr(secret, "default_path", lambda: path)
    first = secret.read_secret()
    assert path.stat().st_mode & 0o777 == 0o600 and len(first) == 64
    assert secret.read_secret() == first == secret.read_secret(path)
    (tmp_path / "short").write_text("abc")
    with pytest.raises(ValueError, match="need 16"):
        secret.read_secret(tmp_path / "short")


def test_a_release_self_check_says_so(tmp_path, monkeypatch):
    path = tmp_path / "A2.grading.npz"
    grading_data.save(path, grading_data.compute(A2.__class__(A2.name, A2.title, A2.tasks[:1])))
    monkeypatch.setattr(grade_module, "has_solutions", lambda a: False)
    monkeypatch.setattr(grade_module, "_release_data", lambda name: path)
    source, meta = grade_module.load_data(A2, None)
    assert source.startswith("SELF-CHECK") and "not the grade" in source
    assert meta["secret"] is False
    with pytest.raises(ValueError, match="--secret"):
        grade_module.load_data(A2, None, tmp_path / "any")


def test_the_last_seed_allowed_may_complete_the_samples(monkeypatch):
    import dataclasses

    task = dataclasses.replace(A2.tasks[0], samples=2, wide_samples=1)
    monkeypatch.setattr(grading_data, "MAX_TRIES", 2)
    meta = grading_data.compute(dataclasses.replace(A2, tasks=(task,)))
    assert [s["seed"] for s in meta["tasks"]["A2.1"]["softmax"]] == [0, 1, 1_000_000]
    with pytest.raises(ValueError, match="fewer than 3"):
        grading_data.compute(dataclasses.replace(A2, tasks=(dataclasses.replace(task, samples=3),)))
