"""Planted bugs that only a dedicated test can catch, each required to make that test's check
fail (test_mutation.py plants bugs for the generic checks; both count in the summary line).

The generic suite draws a few elements per side, compares float32 to 1e-4 and has no model
properties, so these slips pass it: a CUDA loop that strides by a warp instead of a block, a
block sum without the barrier between writing and reading its warps' partial sums, an online
log-sum-exp that forgets to rescale, a Swin mask that mixes images, MAE position
embeddings added by slot instead of by patch, a recurrent layer that drops h0 past its first
layer, a loosened gradcheck, a float32 erf good to 1e-4.

A bug is planted as a text change: in a `.cu` source (the emulator compiles the changed source
once, cached by its hash) or in a Python module, run as a fresh copy that the check is handed.
Each change must match its source exactly once, so a moved line fails here loudly instead of
planting nothing.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import sys
import types

import numpy as np
import pytest

from tests import mutation_log
from tests import test_cuda_large as cuda_large
from tests import test_erf_gelu_norm_oracle as accuracy
from tests import test_gradcheck_tolerance as tolerance
from tests import test_rnn_oracle as rnn_oracle
from tests import test_swin_mae_props as props
from tinyformer import registry
from tinyformer.kernels.cuda import _runtime
from tinyformer.ops.erf import erfc

Change = tuple[str, str]  # (old text, new text)


def _count(text: str, old: str, where: str) -> None:
    n = text.count(old)
    assert n == 1, f"{where}: the text to change appears {n} times, not once: {old!r}"


# One mutant per kind of slip: each is a compile of its own (seconds, once per cache)
CUDA = [  # op (its .cu file), the kernel check that must fail, the change
    ("softmax", "softmax", (
        "for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] *= inv;",
        "for (int j = threadIdx.x; j < cols; j += 32) yr[j] *= inv;")),
    ("softmax", "softmax", (  # the warps' partial sums read before all are written
        "if (lane == 0) partial[warp] = v;\n    __syncthreads();\n    return warp_sum(",
        "if (lane == 0) partial[warp] = v;\n    return warp_sum(")),
    ("log_softmax", "log_softmax", ("s = s * exp(m - v) + T(1);", "s = s + T(1);")),
    ("cross_entropy", "cross_entropy", (
        "total = block_sum(total);", "total = warp_sum(total);")),
    ("layer_norm", "layer_norm", (
        "for (int p = warp; p < parts; p += warps) {",
        "for (int p = warp; p < parts; p += parts) {")),
    ("embedding", "embedding", (
        "for (long long c = c0 + 1; c <= c1; ++c)", "for (long long c = c0 + 1; c < c1; ++c)")),
    ("attention", "attention", (
        "for (int c = 0; c < COLS; ++c) acc[r][c] *= rescale;", "")),
    ("attention", "attention", ("T vj = vs[j][lane + 32 * c];", "T vj = vs[j][lane];")),
]  # fmt: skip


@pytest.mark.mutation
@pytest.mark.parametrize(
    "op, kernel, change", [pytest.param(*c, id=f"{c[0]}-{i}") for i, c in enumerate(CUDA)]
)
def test_planted_cuda_bug_fails_the_large_kernel_check(op, kernel, change, request, monkeypatch):
    module = _runtime.load(op)
    old, new = change
    _count(module.source, old, f"{op}.cu")
    monkeypatch.setattr(module, "source", module.source.replace(old, new))
    monkeypatch.setattr(module, "_cpu", None)  # compiled again, from the planted source
    monkeypatch.setattr(module, "_gpu", None)
    caught = False
    for dtype in (np.float32, np.float64):
        try:
            cuda_large.check_kernel(kernel, dtype)
        except AssertionError:
            caught = True
    mutation_log.RESULTS[f"{request.node.callspec.id}:dedicated"] = caught
    assert caught, f"{op}.cu with {new!r} for {old!r} passes check_kernel({kernel!r})"


def planted_copy(name: str, changes: list[Change]) -> types.ModuleType:
    """A fresh copy of module `name` with each (old, new) text change made once."""
    module = importlib.import_module(name)
    source = inspect.getsource(module)
    for old, new in changes:
        _count(source, old, name)
        source = source.replace(old, new)
    copy = types.ModuleType(f"{name}__planted")
    copy.__file__ = module.__file__
    sys.modules[copy.__name__] = copy  # dataclasses look their module up while being made
    try:
        exec(compile(source, f"{module.__file__} (planted)", "exec"), copy.__dict__)
    finally:
        del sys.modules[copy.__name__]
    return copy


def _gradcheck(module: types.ModuleType) -> None:
    tolerance.check_tolerance_rule(module.gradcheck)


PYTHON = [  # id, module, changes, the check that must fail (handed the planted copy)
    ("swin-mask-mixes-images", "tinyformer.models.swin", [(
        "reshape(reshape(s, bw // nw, nw, nh, n, n) + mask[:, None], bw, nh, n, n)",
        "reshape(reshape(s, nw, bw // nw, nh, n, n) + mask[:, None, None], bw, nh, n, n)")],
     props.check_batch_of_two),
    ("swin-shift-direction", "tinyformer.models.swin", [
        ("y = roll(y, (-s, -s), (1, 2))", "y = roll(y, (s, s), (1, 2))"),
        ("y = roll(y, (s, s), (1, 2))\n        x = x + y", "y = roll(y, (-s, -s), (1, 2))\n"
         "        x = x + y")],
     props.check_shifted_block),
    ("swin-shifted-block-first", "tinyformer.models.swin", [
        ("shift if j % 2 else 0", "0 if j % 2 else shift")],
     props.check_stage_order),
    ("mae-positions-by-slot", "tinyformer.models.mae", [
        ("        x = x + self.pos_embed[:, 1:]  # positions first: a kept patch keeps its place\n",
         ""),
        ("# (B, K, C): the visible ones\n",
         "# (B, K, C): the visible ones\n        x = x + self.pos_embed[:, 1 : k + 1]\n")],
     props.check_mae_positions),
    ("rnn-h0-ignored-past-layer-0", "tinyformer.nn.rnn", [(
        "state = tuple(zeros if h is None else h[k] for h in hx)",
        "state = tuple(zeros if h is None or layer else h[k] for h in hx)")],
     rnn_oracle.check_recurrent),
    ("rnn-state-runs-on-past-the-end", "tinyformer.nn.rnn", [(
        "new = tuple(where(k, n, s) for n, s in zip(new, state, strict=True))\n", "\n")],
     rnn_oracle.check_recurrent),
    ("lstm-c0-ignored", "tinyformer.nn.rnn", [(
        "(None, None) if hx is None else hx, lengths)",
        "(None, None) if hx is None else (hx[0], None), lengths)")],
     rnn_oracle.check_recurrent),
    ("gradcheck-full-forgets-atol", "tinyformer.gradcheck", [(
        "np.allclose(analytic, numeric, rtol=rtol, atol=atol)",
        "np.allclose(analytic, numeric, rtol=rtol)")],
     _gradcheck),
    ("gradcheck-upstream-swaps-tolerances", "tinyformer.gradcheck", [(
        "np.allclose(a, numeric, rtol=rtol, atol=atol)",
        "np.allclose(a, numeric, rtol=atol, atol=rtol)")],
     _gradcheck),
    ("gradcheck-fast-forgets-rtol", "tinyformer.gradcheck", [(
        "np.allclose(a_proj, numeric, rtol=rtol, atol=atol)",
        "np.allclose(a_proj, numeric, atol=atol)")],
     _gradcheck),
    ("erf-float32-good-to-1e-4", "tinyformer.ops.erf", [
        ("_FLOAT32_TERMS = 12", "_FLOAT32_TERMS = 5")],
     accuracy.check_erf),
    ("norm-inf-ties-not-split", "tinyformer.ops.norm", [
        ("gy * xp.sign(x) * is_max / count)", "gy * xp.sign(x) * is_max)")],
     accuracy.check_norm_ties),
]  # fmt: skip


@pytest.mark.mutation
@pytest.mark.parametrize("name, changes, check", [pytest.param(*p[1:], id=p[0]) for p in PYTHON])
def test_planted_python_bug_fails_its_check(name, changes, check, request):
    try:
        check(planted_copy(name, changes))
        caught = False
    except AssertionError:
        caught = True
    mutation_log.RESULTS[f"{request.node.callspec.id}:dedicated"] = caught
    assert caught, f"{name} with {changes} passes {check.__name__}"


def _gelu_with_rounded_constant(x, approximate):
    """The exact GELU with 1/sqrt(2) written as 0.7071 (a relative error of 1.5e-5)."""
    assert approximate == "none"
    return x * (0.5 * erfc(-x * np.float32(0.7071)))


@pytest.mark.mutation
def test_planted_gelu_reference_bug_fails_the_accuracy_check(monkeypatch):
    table = registry._table["gelu.forward"]
    impl = table[registry.REFERENCE]
    monkeypatch.setitem(
        table, registry.REFERENCE, dataclasses.replace(impl, fn=_gelu_with_rounded_constant)
    )
    registry._cache.clear()
    try:
        accuracy.check_gelu(registry.REFERENCE)
        caught = False
    except AssertionError:
        caught = True
    finally:
        monkeypatch.undo()
        registry._cache.clear()
    mutation_log.RESULTS["gelu-reference-rounded-constant:dedicated"] = caught
    assert caught, "a GELU reference with 1/sqrt(2) = 0.7071 passes check_gelu"


def test_planted_copy_is_a_fresh_module_and_refuses_stale_changes():
    copy = planted_copy("tinyformer.ops.norm", [("count = ", "count = 2 * ")])
    ties, y = np.array([1.0, -1.0]), np.array([1.0])
    np.testing.assert_array_equal(copy.norm_backward(1.0, ties, y, math.inf, (0,)), [0.25, -0.25])
    original = importlib.import_module("tinyformer.ops.norm")
    np.testing.assert_array_equal(original.norm_backward(1.0, ties, y, math.inf, (0,)), [0.5, -0.5])
    with pytest.raises(AssertionError, match="appears 0 times"):
        planted_copy("tinyformer.ops.norm", [("no such text", "")])
    with pytest.raises(AssertionError, match="appears 2 times"):
        planted_copy("tinyformer.ops.norm", [("p == math.inf", "")])
