"""Process settings: applied in the running process at the first op, never at import, and never
over a user's own choice (tinyformer/runtime.py)."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinyformer import cli, cores, runtime

# What the child prints: BLAS thread counts and GOMP_SPINCOUNT before importing tinyformer,
# after importing it, and after its first op, and whether the environment changed otherwise.
PROBE = """
import json, os, sys
import scipy.linalg.cython_blas  # SciPy's BLAS too: linear's kernel calls it through Numba
from threadpoolctl import threadpool_info

def state():
    blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    return {"blas": blas, "spin": os.environ.get("GOMP_SPINCOUNT")}

report = {"before": state()}
env = dict(os.environ)
import tinyformer as tf
from tinyformer import runtime
report["imported"] = {**state(), "applied": runtime.settings()}
tf.nn.functional.softmax(tf.ones(3), -1).sum().item()  # a dispatched op
report["first_op"] = state()
changed = {k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)}
report["env_changes"] = sorted(changed)
print(json.dumps(report))
"""

MINE = (*runtime.BLAS_THREAD_VARS, "GOMP_SPINCOUNT", runtime.THREADS_VAR, *runtime.MALLOC_VARS)


def _probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in MINE}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_settings_are_applied_at_the_first_op_not_at_import():
    report = _probe()
    # Importing changes nothing: BLAS keeps its threads, libgomp's variable is unset.
    assert report["imported"]["blas"] == report["before"]["blas"]
    assert report["imported"]["spin"] is None
    assert not any(k.startswith("applied") for k in report["imported"]["applied"])
    # The first op puts every BLAS library on one thread and sets the spin: long where the
    # kernels share the cores (Linux), short elsewhere.
    assert report["first_op"]["blas"] and set(report["first_op"]["blas"]) == {1}
    shared = cores.measure() is not None
    assert report["first_op"]["spin"] == (runtime.SPIN_SHARED if shared else runtime.SPIN)
    assert report["env_changes"] == ["GOMP_SPINCOUNT"]


def test_a_users_own_settings_are_kept():
    report = _probe(OPENBLAS_NUM_THREADS="2", GOMP_SPINCOUNT="500")
    assert report["first_op"]["blas"] == report["before"]["blas"]
    assert report["first_op"]["spin"] == "500"
    assert report["env_changes"] == []
    keep = _probe(**{runtime.THREADS_VAR: "keep"})
    assert keep["first_op"]["blas"] == keep["before"]["blas"]
    # BLAS keeps its threads; the OpenMP workers spin briefly, the kernels use every thread.
    assert keep["first_op"]["spin"] == runtime.SPIN
    every = _probe(**{runtime.THREADS_VAR: "all"})
    assert every["first_op"]["blas"] and set(every["first_op"]["blas"]) == {1}
    assert every["first_op"]["spin"] == runtime.SPIN


def test_an_unknown_threads_value_is_refused_at_every_op(monkeypatch):
    from tinyformer import registry

    monkeypatch.setattr(runtime, "_applied", {})
    monkeypatch.setitem(registry._state, "kernels_loaded", False)
    monkeypatch.setenv(runtime.THREADS_VAR, "kepp")
    for _ in range(2):  # not only the first time
        with pytest.raises(ValueError, match="TINYFORMER_THREADS: unknown value 'kepp'"):
            registry.primitives()


def test_the_registry_never_writes_the_environment():
    tree = ast.parse(Path(sys.modules["tinyformer.registry"].__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("putenv", "unsetenv"):
            raise AssertionError(f"registry.py line {node.lineno}: os.{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr == "environ":
            parent = next(p for p in ast.walk(tree) for c in ast.iter_child_nodes(p) if c is node)
            # Reading (os.environ.get) is fine; a subscript store or any other method is not.
            ok = isinstance(parent, ast.Attribute) and parent.attr == "get"
            assert ok, f"registry.py line {node.lineno} touches os.environ beyond .get"


def test_doctor_prints_a_line_per_check(capsys):
    assert cli.main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(("OK  ", "WARN")) for line in lines)
    text = "\n".join(lines)
    for what in ("Python", "tinyformer", "BLAS:", "numba", "OpenMP workers", "jupytext"):
        assert what in text, f"no line about {what}: {text}"


def test_doctor_warns_of_a_bad_variable_and_still_exits_0(capsys, monkeypatch):
    from tinyformer import registry

    monkeypatch.setattr(runtime, "_applied", {})
    monkeypatch.setitem(registry._state, "kernels_loaded", False)
    monkeypatch.setenv(runtime.THREADS_VAR, "kepp")
    assert cli.main(["doctor"]) == 0
    assert "WARN  environment variable TINYFORMER_THREADS" in capsys.readouterr().out


def test_explain_says_what_the_process_runs_with(capsys):
    assert cli.main(["explain", "linear.forward"]) == 0
    out = capsys.readouterr().out
    assert "process settings" in out and "blas:" in out
