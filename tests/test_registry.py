"""The kernel registry: references run by default, kernels are picked per backend and dtype,
prefer() and the environment variable steer the choice, and explain() says why."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer.nn.functional as F
from tinyformer import registry
from tinyformer.tensor import Tensor


@pytest.fixture
def fake_kernel(monkeypatch):
    """A 'numba' kernel for softmax.forward, float32 only, replacing the real one for the test."""
    monkeypatch.setitem(
        registry._table, "softmax.forward", dict(registry._table["softmax.forward"])
    )
    calls = []

    def softmax_forward(x):
        calls.append(x.dtype)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    registry.kernel("softmax.forward", backend="numba", dtypes=("float32",))(softmax_forward)
    yield calls
    monkeypatch.undo()  # the real kernels are back
    registry._cache.clear()


def test_every_op_primitive_has_a_reference():
    for name in registry.primitives():
        assert registry.REFERENCE in registry.backends(name)


def test_kernel_is_chosen_for_its_dtype_only(fake_kernel):
    F.softmax(Tensor(np.ones((2, 3), np.float32)))
    F.softmax(Tensor(np.ones((2, 3), np.float64)))
    assert fake_kernel == [np.float32]


def test_prefer_numpy_forces_the_reference(fake_kernel):
    with registry.prefer("numpy"):
        F.softmax(Tensor(np.ones((2, 3), np.float32)))
        assert "runs numpy" in registry.explain("softmax.forward")
    assert fake_kernel == []
    # outside the block the kernel runs again
    F.softmax(Tensor(np.ones((2, 3), np.float32)))
    assert fake_kernel == [np.float32]


def test_explain_says_what_runs_and_why(fake_kernel):
    text = registry.explain("softmax.forward", np.float32)
    assert "runs numba" in text and "numba is preferred" in text
    text = registry.explain("softmax.forward", np.float64)
    assert "runs numpy" in text and "does not support float64" in text
    with registry.prefer("numpy"):
        assert "prefer() block" in registry.explain("softmax.forward")


def test_environment_variable_is_read_at_first_dispatch(monkeypatch, fake_kernel):
    monkeypatch.setattr(registry, "_state", {"kernels_loaded": False, "env": None})
    monkeypatch.setenv(registry.ENV_VAR, "numpy")
    F.softmax(Tensor(np.ones((2, 3), np.float32)))
    assert fake_kernel == []
    assert f"environment variable {registry.ENV_VAR}" in registry.explain("softmax.forward")
    registry._cache.clear()
    # A name that is no backend is an error at that first dispatch (it was ignored, silently)
    monkeypatch.setattr(registry, "_state", {"kernels_loaded": False, "env": None})
    monkeypatch.setenv(registry.ENV_VAR, "nunba")
    message = f"environment variable {registry.ENV_VAR}: unknown backend 'nunba'; choose from"
    for _ in range(2):  # and stays one: nothing was half-loaded
        with pytest.raises(ValueError, match=message):
            F.softmax(Tensor(np.ones((2, 3), np.float32)))
    registry._cache.clear()


def test_unknown_backend_and_primitive_are_clear_errors():
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        with registry.prefer("tpu"):
            pass
    with pytest.raises(KeyError, match="no primitive named 'nope.forward'"):
        registry.call("nope.forward", np.ones(1))


def test_a_size_rule_holds_in_prefer_blocks_and_yields_only_to_force(monkeypatch):
    table = dict(registry._table["log_softmax.forward"])
    monkeypatch.setitem(registry._table, "log_softmax.forward", table)
    calls = []

    def big(x):
        """x has at least 100 elements"""
        return x.size >= 100

    def log_softmax_forward(x):
        calls.append(x.size)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    registry.kernel("log_softmax.forward", backend="numba", dtypes=("float64",), when=big)(
        log_softmax_forward
    )
    try:
        registry.call("log_softmax.forward", np.ones((2, 3)))
        registry.call("log_softmax.forward", np.ones((20, 10)))
        assert calls == [200]
        with registry.prefer("numba"):
            registry.call("log_softmax.forward", np.ones((2, 3)))
        assert calls == [200]  # a plain prefer() block keeps the rule
        with registry.prefer("numba", force=True):
            registry.call("log_softmax.forward", np.ones((2, 3)))
            assert "where x has" not in registry.explain("log_softmax.forward", np.float64)
        assert calls == [200, 6]
        assert "for calls where x has at least 100 elements" in registry.explain(
            "log_softmax.forward", np.float64
        )
    finally:
        monkeypatch.undo()
        registry._cache.clear()


def test_a_kernel_never_sees_a_call_it_does_not_accept_even_forced(monkeypatch):
    table = dict(registry._table["log_softmax.forward"])
    monkeypatch.setitem(registry._table, "log_softmax.forward", table)
    calls = []

    def rows_of_three(x):
        """rows have 3 entries"""
        return x.shape[-1] == 3

    def log_softmax_forward(x):
        calls.append(x.shape)
        return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))

    registry.kernel(
        "log_softmax.forward", backend="numba", dtypes=("float64",), accepts=rows_of_three
    )(log_softmax_forward)
    try:
        with registry.prefer("numba", force=True):
            y = registry.call("log_softmax.forward", np.ones((2, 4)))  # the reference's
            registry.call("log_softmax.forward", np.ones((2, 3)))
        assert calls == [(2, 3)]
        np.testing.assert_allclose(y, np.full((2, 4), -np.log(4)))
        assert "rows have 3 entries" in registry.explain("log_softmax.forward", np.float64)
    finally:
        monkeypatch.undo()
        registry._cache.clear()


def test_registry_tests_leave_the_real_kernels_in_place():
    for name in ("softmax.forward", "log_softmax.forward"):
        impl = registry._table[name].get("numba")
        assert impl is None or impl.fn.__module__.startswith("tinyformer.kernels")


def test_explain_says_what_runs_on_a_device(capsys):
    from tinyformer import backend, cli

    text = registry.explain("softmax.forward", "float32", "fake")
    assert "[float32 on fake]: runs numpy" in text and "fake device runs the references" in text
    assert cli.main(["explain", "softmax.forward", "--device", "fake"]) == 0
    assert "on fake]: runs numpy" in capsys.readouterr().out
    if not backend.cuda_available():
        assert cli.main(["explain", "softmax", "--device", "cuda"]) == 2
        assert "'cuda' is not available" in capsys.readouterr().err


def _names_called() -> set[str]:
    """Every primitive name the package passes as a literal to registry.call / choose."""
    import ast
    from pathlib import Path

    import tinyformer

    names = set()
    for path in Path(tinyformer.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "choose")
                and getattr(node.func.value, "id", None) == "registry"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(node.args[0].value)
    return names


def test_every_primitive_the_package_calls_has_a_reference_without_any_kernels():
    """Primitives are registered by the op files, whatever kernels import: with Numba hidden,
    every name the package dispatches still resolves (to its reference)."""
    import json
    import subprocess
    import sys

    names = sorted(_names_called())
    assert len(names) > 20 and "adamw.step_many" in names  # the scan finds the calls
    script = (
        "import sys, json; sys.modules['numba'] = None\n"
        "import tinyformer\nfrom tinyformer import registry\n"
        f"names = {names!r}\n"
        "print(json.dumps({n: registry.backends(n) for n in names if n in registry.primitives()}))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    assert sorted(found) == names, f"not registered without kernels: {set(names) - set(found)}"
    # CUDA kernel files need no library to import (they compile on first launch), so they load
    # here too; Numba's must not, and the reference must be there for every name.
    assert all(b[0] == registry.REFERENCE and "numba" not in b for b in found.values())
