"""The grader's walls, attacked: each hostile submission replays one way a probe got out.

Companion of tests/test_grader_security.py (same helpers): files read as the student (links,
FIFOs, oversized files; the copy runs as the grading user), a sealed room per grade (no
files left for a later grade, no reading another grade's tree, no phase in any name), the
data path on the grader's command line, malformed and oversized replies, signals to and from
the grader, escape codes, and root without --user. The submission knows the grader's source.

The walls inside one machine user come from Landlock (Linux 5.13+; signals need ABI 6): the
tests that need it say so and are skipped on a kernel without it, where `--user` is the wall.
"""

from __future__ import annotations

import io
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tests.test_grader_security import _grade, _hostile, _points, _solution
from tinyformer.cli import main
from tinyformer.course.definition import A2
from tinyformer.course.grader import _landlock, _room, _tree, _wire
from tinyformer.course.grader import data as grading_data
from tinyformer.course.grader._text import clean

LANDLOCK = _landlock.abi()
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="the kernel has no Landlock")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (CI runs as root)")


@pytest.fixture(scope="module")
def a2_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "A2.grading.npz"
    grading_data.save(path, grading_data.compute(A2))
    return path


def _sub(tmp_path: Path, files: dict[str, str]) -> Path:
    sub = tmp_path / "sub"
    for name, text in files.items():
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_text(text, encoding="utf-8")
    return sub


def _cli(args: list[str], timeout: float = 240, **kw) -> subprocess.Popen:
    """`tinyformer ARGS` in a process of its own (its command line is what a child sees)."""
    command = [sys.executable, "-c", "import sys; from tinyformer.cli import main; "
               "sys.exit(main(sys.argv[1:]))", *args]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kw)  # fmt: skip


# -- files are read as the student ------------------------------------------------------------


def test_a_link_anywhere_on_the_path_refuses_the_submission(tmp_path, a2_data, capsys):
    # submission/tinyformer -> the instructor's package: softmax.py under it is the answer
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "tinyformer").symlink_to(Path(_tree.package_source()))
    args = ["grade", "A2", str(sub), "--data", str(a2_data), "--task", "A2.1"]
    results = tmp_path / "results.json"
    assert main([*args, "--json", str(results)]) == 2
    err = capsys.readouterr().err
    assert "tinyformer/ops/softmax.py: 'tinyformer' is a symbolic link" in err
    report = json.loads(results.read_text(encoding="utf-8"))  # what Gradescope shows
    assert report["score"] == 0 and "symbolic link" in report["output"]
    # the last component, and a link to a folder one level down
    for link, target in (("softmax.py", "tinyformer/ops/softmax.py"), ("ops", "tinyformer/ops")):
        other = tmp_path / link
        other.mkdir()
        place = other / ("softmax.py" if link == "softmax.py" else "tinyformer")
        if link == "ops":
            place.mkdir()
            place = place / "ops"
        place.symlink_to(_tree.package_source().parent / target)
        with pytest.raises(_tree.SubmissionError, match="is a symbolic link"):
            _tree.read_submission(other, A2.files)


def test_fifos_and_oversized_files_are_refused(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    os.mkfifo(sub / "softmax.py")  # opening it for reading would block a naive grader
    with pytest.raises(_tree.SubmissionError, match="softmax.py: is not a regular file"):
        _tree.read_submission(sub, A2.files)
    (sub / "softmax.py").unlink()
    (sub / "softmax.py").write_bytes(b"#" * (_tree.MAX_FILE_BYTES + 1))
    with pytest.raises(_tree.SubmissionError, match="over the limit"):
        _tree.read_submission(sub, A2.files)
    (sub / "softmax.py").write_text("x = 1\n")
    assert _tree.read_submission(sub, A2.files) == {"tinyformer/ops/softmax.py": b"x = 1\n"}


@needs_root
def test_the_submission_is_read_as_the_grading_user():
    # A file only root can read is refused when grading as `nobody`: the copy never runs as
    # root. (Outside pytest's 0700 temporary folders, so that nobody can reach it.)
    sub = Path(tempfile.mkdtemp(prefix="tinyformer-test-"))
    try:
        sub.chmod(0o755)
        (sub / "softmax.py").write_text("x = 1\n")
        (sub / "softmax.py").chmod(0o600)
        with pytest.raises(_tree.SubmissionError, match="cannot be read by the grading user"):
            _tree.read_submission(sub, A2.files, user="nobody")
        (sub / "softmax.py").chmod(0o644)
        found = _tree.read_submission(sub, A2.files, user="nobody")
        assert found == {"tinyformer/ops/softmax.py": b"x = 1\n"}
    finally:
        shutil.rmtree(sub)


# -- root and --user --------------------------------------------------------------------------


@needs_root
def test_root_without_user_is_refused(tmp_path, a2_data, monkeypatch, capsys):
    monkeypatch.delenv(_room.AS_ROOT, raising=False)
    sub = _sub(tmp_path, {"softmax.py": _solution()})
    assert main(["grade", "A2", str(sub), "--data", str(a2_data), "--task", "A2.1"]) == 2
    assert "give --user NAME" in capsys.readouterr().err


@needs_root
def test_secrets_within_the_users_reach_are_refused(monkeypatch, a2_data):
    public = Path(tempfile.mkdtemp(prefix="tinyformer-test-"))
    try:
        public.chmod(0o755)
        secret = public / "grading-secret"
        secret.write_text("0" * 64)
        secret.chmod(0o644)
        (public / "sub").mkdir()
        (public / "sub" / "softmax.py").write_text(_solution())
        with pytest.raises(ValueError, match=f"the grading secret {secret} is readable by nobody"):
            _room.refuse_readable("nobody", {"the grading secret": secret})
        secret.chmod(0o600)
        package = public / "tinyformer"
        package.mkdir()
        monkeypatch.setattr(_room, "instructor_folders", lambda: [package])
        with pytest.raises(ValueError, match=f"instructor's tinyformer folder {package} is read"):
            from tinyformer.course.grader.grade import grade

            grade("A2", public / "sub", secret=secret, tasks=["A2.1"], user="nobody")
        package.chmod(0o700)
        _room.refuse_readable("nobody", {"the grading secret": secret, "the package": package,
                                         "the data": a2_data})  # fmt: skip
    except ValueError as err:
        assert "cannot reach Python" in str(err), err  # this machine's Python is root's
    finally:
        shutil.rmtree(public)


# -- each grade is a sealed room --------------------------------------------------------------


@needs_landlock
def test_a_grade_leaves_no_files_for_a_later_grade(tmp_path, a2_data):
    # A correct submission leaves its source in a world-writable folder; a later stub runs it.
    leak = tmp_path / "leak"
    drop = f"""
import os as _os, shutil as _sh
try:
    _os.makedirs({str(leak)!r}, exist_ok=True)
    _os.chmod({str(leak)!r}, 0o777)
    _sh.copyfile(__file__, {str(leak / "softmax.py")!r})
except OSError:
    pass
"""
    first = _grade(tmp_path / "a", {"softmax.py": _solution() + drop}, a2_data)
    assert _points(first) == A2.tasks[0].total
    assert f"(Landlock ABI {LANDLOCK}: own folder only" in first.containment  # said in the report
    assert not (leak / "softmax.py").exists()
    pick_up = f"""
space = {{}}
exec(open({str(leak / "softmax.py")!r}).read(), space)
return space["softmax_forward"](x)
"""
    second = _grade(tmp_path / "b", {"softmax.py": _hostile(pick_up)}, a2_data)
    assert _points(second) == 0


@needs_landlock
def test_a_grade_cannot_read_another_grades_tree(tmp_path, a2_data):
    # Another grade's room, as the grader makes it (a folder in the temporary folder holding
    # tree/tinyformer/...), with a correct softmax; the stub searches the machine for it.
    other = Path(tempfile.mkdtemp(prefix="tinyformer-grade-"))
    try:
        (other / "tree" / "tinyformer" / "ops").mkdir(parents=True)
        (other / "tree" / "tinyformer" / "ops" / "softmax.py").write_text(_solution())
        search = """
import glob, os, tempfile
for path in glob.glob(os.path.join(tempfile.gettempdir(), "..", "*", "**", "softmax.py"),
                      recursive=True) + glob.glob("/tmp/*/tree/tinyformer/ops/softmax.py"):
    try:
        text = open(path).read()
    except OSError:
        continue
    if "e.sum(" in text:
        space = {}
        exec(text, space)
        return space["softmax_forward"](x)
raise NotImplementedError("no other grade found")
"""
        result = _grade(tmp_path, {"softmax.py": _hostile(search)}, a2_data)
        assert _points(result) == 0
        assert "no other grade found" in result.results[0].output
    finally:
        shutil.rmtree(other)


def test_no_folder_name_tells_the_phase(tmp_path, a2_data):
    # The visible checks and the hidden tests run in children alike: the stub reports every
    # name it is given (slashes swapped, so that the grader's path filter keeps them).
    spy = """
import os, sys
names = [os.getcwd(), *sys.argv, *os.environ.values(), *os.listdir(".")]
raise NotImplementedError("names: " + " ".join(names).replace("/", "|"))
"""
    result = _grade(tmp_path, {"softmax.py": _hostile(spy)}, a2_data)
    outputs = {r.check: r.output for r in result.results}
    assert "names: " in outputs["forward"] and "names: " in outputs["hidden"]
    for check, output in outputs.items():
        names = output.split("names: ", 1)[-1].split("\n")[0]
        assert not re.search(r"hidden|visible|A2\.1|phase", names), (check, names)


# -- the grader's command line, its signals, its replies --------------------------------------


@needs_landlock
def test_the_data_path_on_the_graders_command_line_is_no_use(tmp_path, a2_data):
    # The stub reads the --data path from /proc/<ppid>/cmdline and replays the file.
    replay = """
import os
import numpy as np
from tinyformer.course.grader import data as _d
argv = open(f"/proc/{os.getppid()}/cmdline").read().split("\\0")
meta = _d.load(argv[argv.index("--data") + 1])
for samples in meta["tasks"]["A2.1"].values():
    for s in samples:
        a = s["args"][0]
        if a.shape == x.shape and np.allclose(a, x):
            return s["out"][0].astype(x.dtype)
raise NotImplementedError("not in the data")
"""
    sub = _sub(tmp_path, {"softmax.py": _hostile(replay)})
    results = tmp_path / "results.json"
    args = ["grade", "A2", str(sub), "--data", str(a2_data), "--task", "A2.1"]
    grader = _cli([*args, "--json", str(results), "--timeout", "30"])
    out, err = grader.communicate(timeout=240)
    assert grader.returncode == 0, err
    report = json.loads(results.read_text(encoding="utf-8"))
    forward = next(t for t in report["tests"] if t["name"].endswith("forward"))
    assert forward["score"] == 0 and "PermissionError" in forward["output"], forward["output"]


def _children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if entry.isdigit() and int(stat[stat.rfind(")") + 2 :].split()[1]) == pid:
            found.add(int(entry))
    return found


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] == "T"


def test_sigterm_to_the_grader_ends_the_grade_cleanly(tmp_path, a2_data):
    # The stub stops itself inside its forward, so that the signal lands while a check waits
    # on it (where a check's `except Exception` must not swallow the interrupt).
    stop = "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)"
    sub = _sub(tmp_path, {"softmax.py": _hostile(stop)})
    results = tmp_path / "results.json"
    args = ["grade", "A2", str(sub), "--data", str(a2_data), "--task", "A2.1", "--timeout", "60"]
    grader = _cli([*args, "--json", str(results)])
    deadline, children = time.monotonic() + 120, set()
    while time.monotonic() < deadline:  # until the task's child is in its forward
        children = _children_of(grader.pid)
        if any(_stopped(pid) for pid in children):
            break
        time.sleep(0.1)
    assert any(_stopped(pid) for pid in children), "the child never reached its forward"
    grader.send_signal(signal.SIGTERM)
    out, err = grader.communicate(timeout=60)
    assert grader.returncode == 130 and "Traceback" not in err, err
    assert "grading interrupted by SIGTERM; nothing written" in err
    assert not results.exists()
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.skipif(LANDLOCK < 6, reason="signal scoping needs Landlock ABI 6 (Linux 6.12)")
def test_the_child_cannot_signal_the_grader(tmp_path, a2_data):
    kill = """
import os as _os, signal as _s
for _n in (_s.SIGINT, _s.SIGTERM, _s.SIGSTOP, _s.SIGKILL):
    try:
        _os.kill(_os.getppid(), _n)
    except OSError:
        pass
"""
    sub = _sub(tmp_path, {"softmax.py": _hostile(module=kill)})
    results = tmp_path / "results.json"
    args = ["grade", "A2", str(sub), "--data", str(a2_data), "--task", "A2.1"]
    grader = _cli([*args, "--json", str(results), "--timeout", "30"])
    out, err = grader.communicate(timeout=240)
    assert grader.returncode == 0, err
    report = json.loads(results.read_text(encoding="utf-8"))
    assert sum(t["score"] for t in report["tests"]) == 0 and len(report["tests"]) == 4


def test_the_whole_grade_has_a_time_limit(tmp_path, a2_data):
    # A hang in the first task may use the whole grade's limit, no more: the tasks after it
    # are not run, and say why.
    files = {
        "softmax.py": _hostile("import time\nwhile True:\n    time.sleep(1)"),
        "layer_norm.py": _solution("tinyformer/ops/layer_norm.py"),
    }
    began = time.monotonic()
    result = _grade(tmp_path, files, a2_data, tasks=("A2.1", "A2.4"), total_timeout=6)
    assert time.monotonic() - began < 30
    forward = {r.task: r.output for r in result.results if r.check == "forward"}
    assert forward["A2.1"].startswith("A2.1: the grade ran past its overall time limit during")
    assert forward["A2.4"] == "A2.4: not run: the grade ran past its overall time limit"
    assert result.score == 0
    with pytest.raises(ValueError, match="--total-timeout"):
        _grade(tmp_path, files, a2_data, total_timeout=float("inf"))


REPLY = """
import __main__ as _m, numpy as _np
_own, _call = "spec:" + __name__.rpartition(".")[2], getattr(_m, "_call", None)
if _call is not None:
    _m._call = lambda request, specs: ({REPLY} if request.get("target") == _own
                                       else _call(request, specs))
"""


def test_non_numeric_replies_cost_their_task_only(tmp_path, a2_data):
    strings = '{"outs": [_np.array(["1.0"] * 8)], "several": False, "grads": []}'
    structured = '{"outs": [_np.zeros(8, "f8,f8")], "several": False, "grads": []}'
    log_softmax = _solution("tinyformer/ops/log_softmax.py")
    files = {
        "softmax.py": _hostile(module=REPLY.replace("{REPLY}", strings)),
        "log_softmax.py": log_softmax + REPLY.replace("{REPLY}", structured),
        "layer_norm.py": _solution("tinyformer/ops/layer_norm.py"),
    }
    result = _grade(tmp_path, files, a2_data, tasks=("A2.1", "A2.2", "A2.4"))
    assert _points(result, "A2.1") == 0 and _points(result, "A2.4") == A2.tasks[3].total
    forward = {r.task: r for r in result.results if r.check == "forward"}
    for task in ("A2.1", "A2.2"):  # (A2.2's other checks call log_softmax by another name)
        assert forward[task].score == 0
        assert "(the grader takes numbers only)" in forward[task].output


def test_a_reply_flood_is_refused_with_bounded_memory(tmp_path, a2_data):
    # 68 MB of JSON (the old grader's peak memory grew by 260 MiB to 1.6 GB), then 20 MB:
    # under the frame cap, over the header's, refused before it is read.
    floods = {
        "softmax.py": '{"outs": ["x" * 68_000_000], "several": False, "grads": []}',
        "log_softmax.py": '{"outs": ["y" * 20_000_000], "several": False, "grads": []}',
    }
    files = {
        "softmax.py": _hostile(module=REPLY.replace("{REPLY}", floods["softmax.py"])),
        "log_softmax.py": _solution("tinyformer/ops/log_softmax.py")
        + REPLY.replace("{REPLY}", floods["log_softmax.py"]),
    }
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = _grade(tmp_path, files, a2_data, tasks=("A2.1", "A2.2"))
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB, high-water mark
    assert grew < 100 * 1024, f"the grader's peak memory grew by {grew // 1024} MiB"
    forward = {r.task: r for r in result.results if r.check == "forward"}
    assert forward["A2.1"].score == forward["A2.2"].score == 0
    assert "68000084 bytes is over the limit of" in forward["A2.1"].output
    assert (
        "header of 20000" in forward["A2.2"].output
        and "over the limit of" in forward["A2.2"].output
    )


def test_the_wire_checks_arrays_before_allocating():
    def frame(array_bytes: bytes) -> bytes:
        header = json.dumps({"d": {"outs": {"l": [{"a": 0}]}}}).encode()
        body = struct.pack("<I", len(header)) + header
        return body + struct.pack("<Q", len(array_bytes)) + array_bytes

    buffer = io.BytesIO()
    np.save(buffer, np.zeros(2))
    good = buffer.getvalue()
    assert _wire.decode(frame(good))["outs"][0].shape == (2,)
    # the same 16 bytes of data, under a header that claims 2**40 of them
    lie = good.replace(b"(2,)", b"(1099511627776,)").replace(b" " * 12 + b"\n", b"\n", 1)
    with pytest.raises(_wire.WireError, match="malformed message"):
        _wire.decode(frame(lie))
    for bad in (np.array(["a"]), np.zeros(1, "f8,i4"), np.zeros(1, complex)):
        with pytest.raises(_wire.WireError, match="numbers only"):
            _wire.decode(_wire.encode({"outs": [bad]})[12:])
    read, write = os.pipe()
    os.write(write, _wire.MAGIC + struct.pack("<Q", _wire.MAX_BYTES + 1))
    with pytest.raises(_wire.WireError, match="over the limit"):
        _wire.read_message(read, time.monotonic() + 5)
    os.close(read)
    os.close(write)


# -- what reaches the TA's terminal -----------------------------------------------------------


def test_escape_codes_never_reach_the_terminal_or_results(tmp_path, a2_data):
    fake = "\x1b[2J\x1b[H\x1b]0;owned\x07A2.1  forward  2/2  passed\r\x1b[31m\x9b1m\u202e"
    forward = f"print({fake!r})\nraise ValueError({fake!r})"
    result = _grade(tmp_path, {"softmax.py": _hostile(forward)}, a2_data)
    shown = result.table() + json.dumps(result.gradescope(), ensure_ascii=False)
    assert "A2.1  forward  2/2  passed" in shown  # the text stays, the codes go
    for code in ("\x1b", "\r", "\x07", "\x9b", "\u202e"):
        assert code not in shown
    assert clean("a\x1b[1mb\tc\nd\x00", 100) == "ab\tc\nd"


def test_out_errors_name_the_flag(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")
    for command in (["assignment", "autograder", "A2"], ["assignment", "release", "A2"]):
        assert main([*command, "--out", str(blocked / "inside" / "x")]) == 2
        err = capsys.readouterr().err
        assert f"--out {blocked / 'inside' / 'x'}" in err and ".tmp" not in err, err
