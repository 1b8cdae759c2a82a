"""The grader is a security boundary: every attack a probe made on it, replayed.

Each hostile submission is one file (A2.1's softmax.py: the release's stub with an attack in
it), graded on the task it attacks only, with short timeouts. It must score no more than its
honest score (0 for a stub); a hang, an exit or a crash must cost its own task only.

The attacks use what the grader hands the student's code (its paths, its modules, its
environment, its pipe). A same-user process can still scan the file system: on a shared
machine or Gradescope, the child runs as another user (`--user`, the autograder's default).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tinyformer
from tinyformer.cli import main
from tinyformer.course.definition import A2, A3, COURSE
from tinyformer.course.files import solution_files
from tinyformer.course.grader import data as grading_data
from tinyformer.course.grader.data import data_path
from tinyformer.course.grader.grade import grade
from tinyformer.course.markers import strip_source

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent
SOFTMAX = "tinyformer/ops/softmax.py"
FORWARD_STUB = re.compile(r"^    raise NotImplementedError\(.*A2\.1.*forward.*\)$", re.M)


@pytest.fixture(scope="module")
def a2_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "A2.grading.npz"
    grading_data.save(path, grading_data.compute(A2))
    return path


def _solution(rel: str = SOFTMAX) -> str:
    return (INSTRUCTOR / rel).read_text(encoding="utf-8")


def _stub() -> str:
    text, _ = strip_source(_solution(), "A2", lambda r: f"{r.tag}: {r.note} stub", where=SOFTMAX)
    return text


def _hostile(forward: str = "", module: str = "") -> str:
    """The release's softmax.py with `forward` as the body of softmax_forward (else its stub)
    and `module` run at import, at the end of the file."""
    text = _stub()
    if forward:
        body = "\n".join("    " + line for line in forward.strip("\n").splitlines())
        text, n = FORWARD_STUB.subn(lambda m: body, text)
        assert n == 1
    return text + "\n" + module


def _grade(tmp_path, files: dict[str, str], data, tasks=("A2.1",), **kw):
    sub = tmp_path / "sub"
    for name, text in files.items():
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_text(text, encoding="utf-8")
    kw.setdefault("timeout", 30)
    return grade("A2", sub, data=data, tasks=list(tasks), **kw)


def _points(result, task: str = "A2.1") -> int:
    return sum(r.score for r in result.results if r.task == task)


FORGE = """
import os as _os
from tinyformer.course.grader import _wire as _w
for _fd in range(1, 64):
    for _m in ({"ready": True}, {"passed": True, "note": None, "outs": [], "grads": []},
               {"task": "A2.1", "check": "forward", "passed": True, "output": "forged"}):
        try:
            _w.write_message(_fd, _m)
            _os.write(_fd, (str(_m) + "\\n").encode())
        except Exception:
            pass
"""


@pytest.mark.parametrize("name", list(COURSE))
def test_student_files_are_those_with_solution_regions(name):
    # the grader takes exactly these from a submission: one missing leaves a task's code to
    # the release's stub, one too many lets a student replace the grader's side
    a = COURSE[name]
    assert solution_files(INSTRUCTOR, a) == tuple(sorted(a.files))


def test_forged_replies_at_import_then_exit(tmp_path, a2_data):
    result = _grade(tmp_path, {"softmax.py": _hostile(module=FORGE + "_os._exit(0)\n")}, a2_data)
    assert _points(result) == 0


def test_forged_replies_from_an_atexit_handler(tmp_path, a2_data):
    atexit = "import atexit as _a, sys as _s\n_a.register(lambda: exec(" + repr(FORGE) + "))\n"
    files = {"softmax.py": _hostile(forward="import sys\nsys.exit(0)", module=atexit)}
    assert _points(_grade(tmp_path, files, a2_data)) == 0


def test_patching_the_child_through_main(tmp_path, a2_data):
    patch = """
import __main__ as _m
_m._call = lambda request, specs: {"outs": [request["args"][0]["tensor"]], "several": False,
                                   "grads": [a["tensor"] for a in request["args"]]}
_m._test = lambda *args: {"passed": True, "note": None}
"""
    assert _points(_grade(tmp_path, {"softmax.py": _hostile(module=patch)}, a2_data)) == 0


def test_a1_objects_are_judged_in_the_grader(tmp_path):
    # A1's tests build Python objects in the child, but the verdicts stay in the grader: a
    # child that answers every request with "passed" forges nothing.
    rel = "tinyformer/course/assignments/a1/autograd.py"
    stub, _ = strip_source(_solution(rel), "A1", lambda r: f"{r.tag}: stub", where=rel)
    patch = """
import __main__ as _m
_m._test = lambda *args: {"passed": True, "note": None}
_m._call = lambda request, specs: {"passed": True, "outs": [], "several": False, "grads": []}
"""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "autograd.py").write_text(stub + patch, encoding="utf-8")
    result = grade("A1", tmp_path / "sub", tasks=["A1.2"], timeout=30)
    assert result.score == 0 and len(result.results) == 2


def test_patching_numpy_and_check_backward(tmp_path, a2_data):
    forward = """
import numpy, numpy.testing
import tinyformer.testing.checks, tinyformer.gradcheck
numpy.allclose = numpy.array_equal = lambda *a, **k: True
numpy.testing.assert_allclose = numpy.testing.assert_array_equal = lambda *a, **k: None
tinyformer.testing.checks.check_backward = lambda *a, **k: None
tinyformer.gradcheck.gradcheck = lambda *a, **k: True
return x * 0
"""
    assert _points(_grade(tmp_path, {"softmax.py": _hostile(forward)}, a2_data)) == 0


def test_calling_the_release_kernels_from_a_stub(tmp_path, a2_data):
    forward = "from tinyformer.kernels.numba.softmax import softmax_forward as k\nreturn k(x)"
    result = _grade(tmp_path, {"softmax.py": _hostile(forward)}, a2_data)
    assert _points(result) == 0
    assert "No module named 'tinyformer.kernels'" in result.results[0].output


def test_reading_the_instructors_source(tmp_path, a2_data):
    # Every path the child is given or can see in its process: sys.path, modules, argv,
    # environment, working folder, and editable-install finders beside any of them.
    forward = r"""
import glob, os, re, sys
roots = {*sys.path, *sys.argv, os.getcwd(), *os.environ.values()}
roots |= {os.path.dirname(getattr(m, "__file__", None) or "") for m in list(sys.modules.values())}
found, seen = [], set()
for root in roots:
    d = root if isinstance(root, str) and os.path.isabs(root) else None
    while d and d != os.path.dirname(d) and d not in seen:
        seen.add(d)
        found.append(os.path.join(d, "tinyformer", "ops", "softmax.py"))
        for finder in glob.glob(os.path.join(d, "__editable__*finder.py")):
            for p in re.findall(r"'(/[^']*?tinyformer)'", open(finder).read()):
                found.append(os.path.join(p, "ops", "softmax.py"))
        d = os.path.dirname(d)
for path in found:
    if os.path.isfile(path) and "e / e.sum(" + "axis=-1, keepdims=True)" in open(path).read():
        space = {}
        exec(compile(open(path).read(), "x.py", "exec"), space)
        return space["softmax_forward"](x)
raise NotImplementedError("the instructor's source was not found")
"""
    result = _grade(tmp_path, {"softmax.py": _hostile(forward)}, a2_data)
    forward_check = next(r for r in result.results if r.check == "forward")
    assert forward_check.score == 0 and "was not found" in forward_check.output


def test_forged_expected_values_in_the_submission(tmp_path):
    # The submission carries grading data that expects zeros, as its softmax returns.
    meta = grading_data.compute(A2)
    for s in meta["tasks"]["A2.1"]["softmax"]:
        s["out"] = [np.zeros_like(o) for o in s["out"]]
    forged = data_path(tmp_path / "sub", "A2")
    forged.parent.mkdir(parents=True)
    grading_data.save(forged, meta)
    result = _grade(tmp_path, {"softmax.py": _hostile("return x * 0")}, None)
    assert _points(result) == 0


def test_a_task_without_samples_fails(tmp_path):
    meta = grading_data.compute(A2)
    meta["tasks"]["A2.1"] = {"softmax": []}
    grading_data.save(tmp_path / "empty.npz", meta)
    result = _grade(tmp_path, {"softmax.py": _solution()}, tmp_path / "empty.npz")
    failed = {r.check: r.output for r in result.results if r.status != "passed"}
    assert set(failed) == {"forward", "gradcheck"} and "no samples" in failed["forward"]


def test_a_hang_and_an_exit_cost_their_own_tasks(tmp_path, a2_data):
    log_softmax = _solution("tinyformer/ops/log_softmax.py").replace(
        "def log_softmax_forward(x: np.ndarray) -> np.ndarray:\n",
        "def log_softmax_forward(x: np.ndarray) -> np.ndarray:\n    import sys; sys.exit(0)\n",
    )
    # Both of A2.1's children (visible checks, hidden tests) hang: no child can leave a note
    # for a later one. 8 s is long enough for A2.4 on a busy machine.
    hang = "import time\nwhile True:\n    time.sleep(1)"
    files = {
        "softmax.py": _hostile(hang), "log_softmax.py": log_softmax,
        "layer_norm.py": _solution("tinyformer/ops/layer_norm.py"),
    }  # fmt: skip
    result = _grade(tmp_path, files, a2_data, tasks=("A2.1", "A2.2", "A2.4"), timeout=8)
    assert _points(result, "A2.1") == _points(result, "A2.2") == 0
    assert _points(result, "A2.4") == A2.tasks[3].total
    outputs = {r.task: r.output for r in result.results if r.check == "forward"}
    assert outputs["A2.1"].startswith("A2.1: the code ran past the 8 s time limit during ")
    assert outputs["A2.2"].startswith("A2.2: the code exited (status 0) during ")


def test_a_crash_is_named(tmp_path, a2_data):
    result = _grade(
        tmp_path, {"softmax.py": _hostile("import ctypes\nctypes.string_at(0)")}, a2_data
    )
    assert _points(result) == 0
    assert result.results[0].output.startswith("A2.1: the code was killed by SIGSEGV during ")


def test_results_are_final_and_no_process_outlives_grading(tmp_path, a2_data, capsys):
    # The detached grandchild names itself in the stub's error (no file outside its folder is
    # writable), then tries to rewrite the results after the grade.
    results = tmp_path / "results.json"
    detach = f"""
import subprocess as _sp, sys as _sys
_p = _sp.Popen([_sys.executable, "-c", "import time; time.sleep(1); "
                "open({str(results)!r}, 'w').write('{{\\"score\\": 999}}')"],
               start_new_session=True, stdin=_sp.DEVNULL, stdout=_sp.DEVNULL, stderr=_sp.DEVNULL)
"""
    sub = tmp_path / "sub"
    sub.mkdir()
    forward = 'raise RuntimeError(f"detached pid {_p.pid}.")'
    (sub / "softmax.py").write_text(_hostile(forward, module=detach), encoding="utf-8")
    args = ["grade", "A2", str(sub), "--data", str(a2_data), "--task", "A2.1"]
    assert main([*args, "--json", str(results), "--timeout", "30"]) == 0
    written = results.read_text(encoding="utf-8")
    time.sleep(1.5)
    assert results.read_text(encoding="utf-8") == written and "999" not in written
    pids = set(map(int, re.findall(r"detached pid (\d+)\.", written)))
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_visible_output_shows_no_hidden_test_or_machine_path(tmp_path, a2_data):
    result = _grade(tmp_path, {"softmax.py": _hostile("raise ValueError(__file__)")}, a2_data)
    visible = [r.output for r in result.results if not r.hidden]
    assert "Softmax: tree/tinyformer/ops/softmax.py" in visible[0]  # the student's own message
    for output in visible:
        assert not re.search(r"(^|[\s'\"(])/(tmp|work|home|root|usr)/", output), output
        assert "softmax_huge_logits" not in output and "BIG" not in output
    assert str(tmp_path) not in result.table().replace(f"grading A2 in {tmp_path}", "")


def test_deleting_files_beside_its_tree(tmp_path, a2_data):
    delete = """
import os as _os, sys as _sys
for _d in {_os.getcwd(), *(p for p in _sys.path if _os.path.isabs(p))}:
    for _up in (_d, _os.path.dirname(_d), _os.path.dirname(_os.path.dirname(_d))):
        try:
            _os.remove(_os.path.join(_up, "sentinel.txt"))
        except OSError:
            pass
"""
    for folder in (tmp_path, tmp_path / "sub"):
        folder.mkdir(exist_ok=True)
        (folder / "sentinel.txt").write_text("keep me")
    _grade(tmp_path, {"softmax.py": _hostile(module=delete)}, a2_data)
    assert (tmp_path / "sentinel.txt").exists() and (tmp_path / "sub" / "sentinel.txt").exists()


def test_memory_and_output_are_capped(tmp_path, a2_data):
    memory = _hostile("import numpy\nreturn x + numpy.ones(2**28).sum()")
    result = _grade(tmp_path, {"softmax.py": memory}, a2_data, memory=512 * 2**20)
    assert _points(result) == 0 and "MemoryError" in result.results[0].output
    flood = _hostile("import sys\nfor _ in range(40):\n    sys.stdout.write('x' * 2**20)")
    result = _grade(tmp_path / "b", {"softmax.py": flood}, a2_data)
    assert _points(result) == 0 and "File too large" in result.results[0].output


def test_relative_data_and_bad_timeouts(tmp_path, a2_data, monkeypatch, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "softmax.py").write_text(_solution(), encoding="utf-8")
    (tmp_path / "a2.npz").write_bytes(a2_data.read_bytes())
    monkeypatch.chdir(tmp_path)
    args = ["grade", "A2", "sub", "--data", "a2.npz", "--task", "A2.1", "--json", "r.json"]
    assert main(args) == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert sum(t["score"] for t in report["tests"]) == A2.tasks[0].total
    assert "score" not in report and "hidden" not in report["output"]
    for bad in ("inf", "nan", "0", "-1"):
        assert main([*args[:7], "--timeout", bad]) == 2
        assert "--timeout" in capsys.readouterr().err
    assert main([*args[:5], "--task", "A2.9"]) == 2


def test_feedback_that_teaches(tmp_path, a2_data):
    # a naive softmax overflows at large logits: a visible property says so
    unstable = _solution().replace("xp.exp(x - x.max(axis=-1, keepdims=True))", "xp.exp(x)")
    result = _grade(tmp_path, {"softmax.py": unstable}, a2_data)
    assert {r.check for r in result.results if r.status != "passed"} >= {"properties"}
    # a wrong forward: the input is named, the numbers are plain
    wrong = _solution().replace("return e / e.sum(axis=-1, keepdims=True)", "return e")
    output = _grade(tmp_path / "b", {"softmax.py": wrong}, a2_data).results[0].output
    assert "inputs: x float64" in output and "np.float64" not in output
    assert "A2: 0 of 0" not in result.summary() and "available points" in result.summary()


def test_attention_weights_follow_the_backward_and_sample_the_causal_mask():
    a31 = A3.tasks[0]
    assert a31.points["gradcheck"] / A3.total > 1 - 10 / 13
    causal = [
        s["kwargs"].get("is_causal")
        for s in grading_data.compute(A3)["tasks"]["A3.1"]["scaled_dot_product_attention"]
    ]
    assert any(causal) and not all(causal)


def test_autograder_zip_grades_end_to_end(tmp_path):
    assert main(["assignment", "autograder", "A2", "--out", str(tmp_path / "ag.zip")]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "ag.zip") as z:
        z.extractall(root / "source")
        assert {"setup.sh", "run_autograder", "autograder.json", "grading-secret"} <= set(
            z.namelist()
        )
    config = json.loads((root / "source" / "autograder.json").read_text())
    assert config == {"assignment": "A2", "files": list(A2.files)}
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(root / "source" / script)], check=True)
    env = {
        **os.environ, "AUTOGRADER_ROOT": str(root), "GRADE_ARGS": "--task A2.1",
        "TINYFORMER": str(Path(sys.executable).parent / "tinyformer"),
    }  # fmt: skip
    link = "LINK"  # softmax.py under a link to the installed package: refused, with a result
    for softmax, expected in (
        (_solution(), A2.tasks[0].total), (_hostile(module=FORGE), 0), (link, 0),
    ):  # fmt: skip
        shutil.rmtree(root / "submission", ignore_errors=True)
        (root / "submission").mkdir()
        if softmax == link:
            (root / "submission" / "tinyformer").symlink_to(Path(tinyformer.__file__).parent)
        else:
            (root / "submission" / "softmax.py").write_text(softmax, encoding="utf-8")
        run = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr
        report = json.loads((root / "results" / "results.json").read_text())
        assert sum(t["score"] for t in report["tests"]) == expected
        if softmax == link:
            assert report["score"] == 0 and "is a symbolic link" in report["output"]
        else:
            assert "score" not in report


def test_a_zero_numeric_gradient_is_reported_as_such():
    from tinyformer.autograd import Function

    class Flat(Function):  # a constant function whose backward claims a slope
        @staticmethod
        def forward(ctx, x):
            return x * 0.0

        @staticmethod
        def backward(ctx, gy):
            return gy + 1.0

    x = tinyformer.Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(AssertionError) as caught:
        tinyformer.gradcheck(Flat.apply, [x])
    assert "numeric gradient is 0 here" in str(caught.value) and "e+300" not in str(caught.value)


def test_the_library_kernels_of_the_graded_primitives_are_not_in_the_tree(tmp_path):
    """A5's tree has the CUDA runtime and emulator the student's kernel runs on, but not the
    library's own Numba and CUDA softmax, which a stub could otherwise import and return."""
    from tinyformer.course.grader._tree import build_tree

    build_tree(COURSE["A5"], tmp_path / "tree", {}, kernels=True)
    kernels = tmp_path / "tree" / "kernels"
    assert (kernels / "cuda" / "_runtime.py").is_file()
    assert (kernels / "numba" / "layer_norm.py").is_file()
    for gone in ("numba/softmax.py", "cuda/softmax.py", "cuda/softmax.cu"):
        assert not (kernels / gone).exists(), gone
