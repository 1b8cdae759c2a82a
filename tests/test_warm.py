"""`python -m tinyformer.testing.warm` compiles the kernels in two processes. That is safe only
while they compile disjoint sets of cached Numba functions; these tests check that it sees
which functions a process compiled (helpers too) and stops on an overlap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tinyformer.testing import all_specs
from tinyformer.testing import warm as warm_module
from tinyformer.testing.checks import kernel_backends

SHARED = """
from numba import njit

@njit(cache=True)
def helper(x):
    return 2 * x

@njit(cache=True)
def one(x):
    return helper(x) + 1

@njit(cache=True)
def two(x):
    return helper(x) - 1
"""


def _compiled_by(tmp_path, call: str) -> set[str]:
    """Run `call` in a fresh process on tmp_path's module; what it compiled."""
    code = f"import json, shared; from tinyformer.testing.warm import compiled_functions\n{call}\n"
    code += "print(json.dumps(sorted(compiled_functions())))"
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("NUMBA_CACHE_DIR", None)  # the cache sits beside the module, in tmp_path
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return {name.rsplit(":", 1)[-1] for name in json.loads(run.stdout.splitlines()[-1])}


def test_two_processes_compiling_one_helper_are_an_overlap(tmp_path):
    (tmp_path / "shared.py").write_text(textwrap.dedent(SHARED))
    first = _compiled_by(tmp_path, "shared.one(1.0)")
    second = _compiled_by(tmp_path, "shared.two(1)")  # another signature of the helper
    assert first == {"one", "helper"} and second == {"two", "helper"}
    message = warm_module.overlap_message(first, second)
    assert message is not None and "helper" in message and "PART_TWO" in message
    assert warm_module.overlap_message({"one"}, {"two"}) is None
    # once cached, a process loads them and writes nothing: no overlap to fear
    assert _compiled_by(tmp_path, "shared.one(1.0); shared.two(1)") == set()


def test_the_second_part_names_ops_with_numba_kernels():
    with_kernels = {spec.name for spec in all_specs() if "numba" in kernel_backends(spec)}
    assert set(warm_module.PART_TWO) <= with_kernels
    assert with_kernels - set(warm_module.PART_TWO), "part 1 would have nothing to compile"


def test_each_other_path_reaches_the_branch_it_warms(monkeypatch):
    # The ops' samples seldom reach these branches, so warm calls them directly; a changed size
    # rule would leave the branch to the tests to compile, side by side, again.
    pytest.importorskip("numba")
    from tinyformer.kernels.numba import adamw, attention, conv2d, conv_transpose2d

    branches = {
        "scaled_dot_product_attention": (attention, ["_softmax_tile", "_softmax_grad_tile"]),
        "conv2d": (conv2d, ["images_forward", "images_backward"]),
        "conv_transpose2d": (conv_transpose2d, ["_forward_tiles", "_backward_tiles"]),
        "adamw": (adamw, ["_update"]),
    }
    assert set(branches) == set(warm_module.OTHER_PATHS)
    names = {spec.name for spec in all_specs()}
    assert set(warm_module.OTHER_PATHS) - names == {"adamw"}  # the rest are ops, split by name
    reached = []
    for op, (module, functions) in branches.items():
        for name in functions:
            real = getattr(module, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                reached.append(_name)
                return _real(*args, **kwargs)

            monkeypatch.setattr(module, name, counted)
        warm_module.OTHER_PATHS[op](np.random.default_rng(0), np.float64)
        assert set(functions) <= set(reached), f"{op}: reached only {reached}"
