"""The op checks as a library and a pytest plugin: `check_op` and `pytest --tinyformer-ops`, on
the example ops file the docs show (examples/swiglu_ops.py) and on a copy of it with a planted
wrong backward."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tinyformer import registry
from tinyformer.testing import OpCheckError, check_op

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "swiglu_ops.py"
DOCS = ROOT / "docs" / "testing-your-own-op.md"
FAST = ["--tinyformer-draw", "random", "--tinyformer-examples", "3"]
# swiglu's gradient for b loses its sigmoid factor: a slip only the gradcheck can see
PLANT = ("gy * a * s]", "gy * a]")
CHECKS = [
    "swiglu::gradcheck[float64]",
    "swiglu::gradcheck[reference]",
    "swiglu::float32",
    "swiglu::no_grad",
    "swiglu::backend[numba]",
    "sin::gradcheck[float64]",
    "sin::float32",
    "sin::no_grad",
]


@pytest.fixture(scope="module", autouse=True)
def numba_parallel_compiler_loaded():
    """Compile the example's parallel Numba kernel once in this process, before any in-process
    pytest run. Those runs restore `sys.modules` when they end, so the modules Numba imports on
    its first parallel compile would be dropped and imported again by the next run, which
    registers Numba's types twice ("duplicate registration"): the checks then fail or pass
    depending on which test a worker happened to run first."""
    import numpy as np

    saved = {name: dict(impls) for name, impls in registry._table.items()}
    try:
        _import(EXAMPLE, "swiglu_ops_compiled").swiglu_forward_numba(np.ones((2, 4)))
    finally:
        registry._table.clear()
        registry._table.update(saved)
        registry._cache.clear()


@pytest.fixture(autouse=True)
def registry_restored():
    """The example registers primitives in this process: take them out again afterwards."""
    saved = {name: dict(impls) for name, impls in registry._table.items()}
    yield
    registry._table.clear()
    registry._table.update(saved)
    registry._cache.clear()


def _example(pytester: pytest.Pytester, name: str = "swiglu_ops", planted: bool = False) -> str:
    text = EXAMPLE.read_text()
    if planted:
        assert PLANT[0] in text
        text = text.replace(*PLANT)
    pytester.makepyfile(**{name: text})
    return f"{name}.py"


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_passes_one_test_per_op_and_check(pytester):
    ops = _example(pytester)
    result = pytester.runpytest("--tinyformer-ops", ops, "-v", *FAST)
    result.assert_outcomes(passed=len(CHECKS))
    out = result.stdout.str()
    assert all(f"{ops}::{name} PASSED" in out for name in CHECKS), out


def test_with_hypothesis_the_example_passes(pytester):
    ops = _example(pytester)
    result = pytester.runpytest("--tinyformer-ops", ops, "--tinyformer-examples", "5")
    result.assert_outcomes(passed=len(CHECKS))
    result.stdout.fnmatch_lines(["tinyformer ops: swiglu_ops.py (hypothesis, up to 5 *"])


@pytest.mark.parametrize("draw", ["random", "hypothesis"])
def test_a_wrong_backward_fails_naming_the_op_and_the_element(pytester, draw):
    ops = _example(pytester, planted=True)
    result = pytester.runpytest(
        "--tinyformer-ops", ops, "--tinyformer-draw", draw, "--tinyformer-examples", "10"
    )
    # the kernel comparison runs the forward only, so it stays green; so does sin
    result.assert_outcomes(failed=2, passed=len(CHECKS) - 2)
    out = result.stdout.str()
    assert f"FAILED {ops}::swiglu::gradcheck[float64]" in out
    assert f"FAILED {ops}::swiglu::gradcheck[reference]" in out
    assert "swiglu::gradcheck[float64] failed on the sample drawn by" in out
    assert "output produced by: SwiGLU" in out
    assert re.search(r"inputs: float64 \(\d+(, \d+)*,?\)", out), out
    assert re.search(r"for input 0 \(shape \(\d+(, \d+)*,?\)\)", out), out
    assert re.search(r"worst at input 0\[\d+(, \d+)*\]", out), out


def test_k_selects_ops_and_checks_and_lf_reruns_the_failures(pytester):
    ops = _example(pytester, planted=True)
    result = pytester.runpytest("--tinyformer-ops", ops, "-k", "sin and not float32", *FAST)
    result.assert_outcomes(passed=2, deselected=len(CHECKS) - 2)
    result = pytester.runpytest("--tinyformer-ops", ops, "-k", "gradcheck", "-x", *FAST)
    result.assert_outcomes(failed=1, deselected=len(CHECKS) - 3)  # -x: stops at the first
    result = pytester.runpytest("--tinyformer-ops", ops, "--lf", "-v", *FAST)
    result.assert_outcomes(failed=1, deselected=len(CHECKS) - 1)
    assert f"{ops}::swiglu::gradcheck[float64] FAILED" in result.stdout.str()


def test_a_dotted_module_and_two_files(pytester):
    _example(pytester, "ops_a")
    pytester.makepyfile(
        ops_b="from ops_a import SPECS as ALL\n\nSPECS = [s for s in ALL if s.name == 'sin']\n"
    )
    pytester.syspathinsert()
    result = pytester.runpytest("--tinyformer-ops", "ops_a", "--tinyformer-ops", "ops_b.py", *FAST)
    result.assert_outcomes(passed=len(CHECKS) + 3)


def test_only_the_ops_files_are_collected_unless_paths_are_given(pytester):
    ops = _example(pytester)
    pytester.makepyfile(test_other="def test_other():\n    pass\n")
    pytester.runpytest("--tinyformer-ops", ops, *FAST).assert_outcomes(passed=len(CHECKS))
    result = pytester.runpytest("--tinyformer-ops", ops, "test_other.py", *FAST)
    result.assert_outcomes(passed=len(CHECKS) + 1)


def test_bad_ops_files_are_clear_errors(pytester):
    pytester.makepyfile(nospecs="X = 1\n")
    result = pytester.runpytest("--tinyformer-ops", "nospecs.py")
    result.stdout.fnmatch_lines(["*nospecs.py has no SPECS: a non-empty list of *OpSpec*"])
    result = pytester.runpytest("--tinyformer-ops", "missing.py")
    result.stderr.fnmatch_lines(["*--tinyformer-ops missing.py: no such file*"])
    result = pytester.runpytest("--tinyformer-ops", "no.such.module")
    result.stderr.fnmatch_lines(["*--tinyformer-ops no.such.module: neither a file nor *"])


def test_without_the_option_the_plugin_does_nothing(pytester):
    pytester.makepyfile(
        test_plain="def test_plain(pytestconfig):\n"
        "    assert pytestconfig.pluginmanager.get_plugin('tinyformer-ops') is None\n"
    )
    _example(pytester, "test_ops_file")  # an ops file is an ordinary module without the option
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "tinyformer ops" not in result.stdout.str()


def test_check_op_runs_the_battery_and_reports_a_wrong_backward(tmp_path):
    swiglu, sin = _import(EXAMPLE, "swiglu_ops_for_check_op").SPECS
    assert check_op(swiglu, examples=2) == [name.split("::")[1] for name in CHECKS[:5]]
    assert check_op(sin, examples=2, checks=["no_grad"]) == ["no_grad"]
    with pytest.raises(ValueError, match=r"no check named \['backend'\]"):
        check_op(sin, checks=["backend"])

    planted = tmp_path / "planted_ops.py"
    planted.write_text(EXAMPLE.read_text().replace(*PLANT))
    bad = _import(planted, "planted_ops_for_check_op").SPECS[0]
    with pytest.raises(OpCheckError) as error:
        check_op(bad, examples=3, checks=["gradcheck"])
    message = str(error.value)
    assert message.startswith("swiglu::gradcheck[float64] failed on the sample drawn by Random")
    assert re.search(r"worst at input 0\[\d+(, \d+)*\]", message), message


def test_a_spec_naming_an_unregistered_primitive_is_refused():
    module = _import(EXAMPLE, "swiglu_ops_for_typo")
    typo = dataclasses.replace(module.SPECS[0], primitives=("swiglu.fwd",))
    with pytest.raises(ValueError, match="'swiglu.fwd', which has no NumPy reference"):
        check_op(typo)


def test_the_docs_show_the_example_file_as_it_is():
    assert EXAMPLE.read_text() in DOCS.read_text()


def test_importing_tinyformer_testing_imports_no_test_framework():
    # the ops declare their specs with `tinyformer.opspec`, below them: importing tinyformer
    # loads no part of the testing package, and the testing package no test framework
    code = (
        "import sys, tinyformer, tinyformer.ops\n"
        "print(sorted(m for m in sys.modules if m.startswith('tinyformer.testing')))\n"
        "import tinyformer.testing\n"
        "print(sorted({'pytest', 'hypothesis'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "[]"]
