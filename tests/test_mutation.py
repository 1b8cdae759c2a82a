"""The suite must catch wrong gradients and drifting kernels.

Backwards: plant a bug in each op's backward, one returned gradient at a time, and require the
generic gradient check (tinyformer.testing.checks.check_backward, the body of
test_ops_generic.test_backward_matches_finite_differences) to fail.

Kernels: make each registered kernel drift from its reference (one returned array off by a
relative 1e-3 in one element) and require the generic kernel comparison
(tinyformer.testing.checks.check_backend) to fail.

Bugs planted, for every Function of every spec and every input that receives a gradient:
- "scale": the gradient times 1.01 (a wrong constant, like a forgotten 1/n or a scale typo);
- "one_element": one element of the gradient off by 1% of the gradient's size plus 1e-3 (an
  indexing slip, a dropped term that matters in one place).
A mutant that never changes any gradient on the drawn inputs (e.g. the gradient slot of a mask)
is not a bug and is not counted. The closing line of the test run reports the kill rate.

Named mutants: realistic slips that once survived the generic suite, each caught only because
the spec draws the inputs that expose it (broadcast batch dims, negative axes, padding_idx).
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests import mutation_log, test_adamw
from tinyformer import registry
from tinyformer.ops._util import unbroadcast
from tinyformer.ops.attention import ScaledDotProductAttention
from tinyformer.ops.einsum import Einsum
from tinyformer.ops.embedding import embedding_backward
from tinyformer.ops.permute import Permute
from tinyformer.testing import RandomDraw, all_specs
from tinyformer.testing.checks import check_backend, check_backward, check_reference_backward
from tinyformer.testing.hypothesis_draw import HypothesisDraw

CASES = [
    pytest.param(spec, function, id=f"{spec.name}-{function.__name__}")
    for spec in all_specs()
    for function in spec.functions
]


def _on_drawn_cases(body, examples: int) -> None:
    """Run `body(draw)` on `examples` hypothesis-drawn cases (generated only, never shrunk).
    The same cases every run (derandomize): a planted bug caught once is caught every time, and
    the kill rate does not move with the draws (random draws missed the rare einsum case with a
    broadcast summed letter about once in 40 runs)."""

    @settings(
        max_examples=examples,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data):
        body(HypothesisDraw(data))

    run()


def _caught(check) -> bool:
    """Whether the generic check `check(draw)` fails on one of 40 hypothesis-drawn cases."""
    try:
        _on_drawn_cases(check, 40)
    except (AssertionError, RuntimeError):  # RuntimeError: the engine refused a gradient
        return True
    return False


def _plant(function, index: int, kind: str, changed: list):
    original = function.backward

    def backward(ctx, *gys):
        grads = original(ctx, *gys)
        grads = list(grads) if isinstance(grads, tuple) else [grads]
        g = grads[index] if index < len(grads) else None
        if g is None or g.size == 0:
            return tuple(grads) if len(grads) > 1 else grads[0]
        if kind == "scale":
            bad = g * g.dtype.type(1.01)
        else:
            bad = np.array(g, copy=True)
            bad.flat[0] += 0.01 * np.abs(g).max() + 1e-3
        changed[0] = changed[0] or bool(np.any(bad != g))
        grads[index] = bad
        return tuple(grads) if len(grads) > 1 else grads[0]

    return staticmethod(backward)


class _BackwardRan(BaseException):
    """Raised by the probe once the backward it watches has run: the check need not go on."""


_GIVEN: dict[tuple[str, str], Counter[int]] = {}


def _gradients_given(spec, function, monkeypatch) -> Counter[int]:
    """In how many of 100 drawn cases `function.backward` returns each gradient as a non-empty
    array. Each probe stops the check as soon as the backward has run, so it costs a forward
    and a backward, not a finite-difference check. The cases are seeded NumPy draws, not
    hypothesis's: the same counts every run, at a fraction of the cost of hypothesis's engine."""
    key = (spec.name, function.__name__)
    if key not in _GIVEN:
        given: Counter[int] = Counter()
        original = function.backward

        def probe(ctx, *gys):
            grads = original(ctx, *gys)
            grads = grads if isinstance(grads, tuple) else (grads,)
            given.update(i for i, g in enumerate(grads) if g is not None and g.size)
            raise _BackwardRan

        monkeypatch.setattr(function, "backward", staticmethod(probe))
        try:
            for seed in range(100):
                try:
                    check_backward(spec, RandomDraw(seed))
                except _BackwardRan:
                    pass
        finally:
            monkeypatch.undo()
        _GIVEN[key] = given
    return _GIVEN[key]


def _gradient_slots(spec, function, monkeypatch) -> frozenset[int]:
    """The gradients a planted bug can change: those the backward returns on some drawn case.
    A slot that never holds a gradient (an index, a mask, an input the function lacks) would
    otherwise cost 40 whole checks per kind of bug before being found unchanged."""
    return frozenset(_gradients_given(spec, function, monkeypatch))


@pytest.mark.parametrize("spec, function", CASES)
def test_every_gradient_comes_in_a_fair_share_of_the_samples(spec, function, monkeypatch):
    """A gradient that few of a spec's samples give goes unchecked in many runs of the suite,
    which draws 25 cases with hypothesis, less evenly than these seeded draws: einsum's third
    operand, in one equation of fourteen, was missed in about two runs in five."""
    given = _gradients_given(spec, function, monkeypatch)
    assert given, _never_ran(spec, function)
    rare = {slot: n for slot, n in sorted(given.items()) if n < 20}
    assert not rare, f"{spec.name}: gradients given in fewer than 20 of 100 samples: {rare}"


@pytest.mark.mutation
@pytest.mark.parametrize("kind", ["scale", "one_element"])
@pytest.mark.parametrize("spec, function", CASES)
def test_planted_bug_is_caught(spec, function, kind, monkeypatch):
    # The slots are found by running the check: a check that runs no backward finds none,
    # plants nothing and would pass. Every Function of every spec returns a gradient that a
    # planted bug changes on the drawn cases, so planting nothing is a failure.
    slots = sorted(_gradient_slots(spec, function, monkeypatch))
    assert slots, _never_ran(spec, function)
    survivors, planted = [], []
    for index in slots:
        changed = [False]
        monkeypatch.setattr(function, "backward", _plant(function, index, kind, changed))

        caught = _caught(lambda draw: check_backward(spec, draw))
        monkeypatch.undo()
        if not changed[0]:
            continue  # this input never gets a gradient: nothing was planted
        planted.append(index)
        mutation_log.RESULTS[f"{spec.name}:{function.__name__}:grad{index}:{kind}"] = caught
        if not caught:
            survivors.append(index)
    assert planted, (
        f"{spec.name}: no {kind} bug was planted in {function.__name__}: the check ran its "
        f"backward, but never on a gradient the bug changes (slots {slots})"
    )
    assert not survivors, f"planted {kind} bugs in gradients {survivors} were not caught"


def _never_ran(spec, function) -> str:
    return (
        f"{spec.name}: check_backward never ran {function.__name__}.backward on 100 drawn "
        f"cases: nothing can be planted in it (is the check doing nothing?)"
    )


einsum_module = sys.modules[Einsum.__module__]  # tinyformer.ops.einsum is also the function
_EINSUM_BACKWARD = Einsum.backward


def _attention_backward(*, unbroadcast_k: bool = True, unbroadcast_v: bool = True):
    """ScaledDotProductAttention.backward, maybe without summing gk or gv over broadcast dims."""

    def backward(ctx, gy):
        q, k, v, mask, y, lse = ctx.saved_tensors
        gq, gk, gv = registry.call(
            "attention.backward", gy, q, k, v, y, lse, mask, ctx.causal, ctx.scale
        )
        gk = unbroadcast(gk, k.shape) if unbroadcast_k else gk
        gv = unbroadcast(gv, v.shape) if unbroadcast_v else gv
        return unbroadcast(gq, q.shape), gk, gv, None

    return backward


def _einsum_backward_not_unbroadcast(ctx, gy):
    """Einsum.backward, with each gradient left at the letters' full lengths: an operand whose
    summed letter broadcast (length 1) gets a gradient of the wrong shape."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(einsum_module, "unbroadcast", lambda g, shape: g)
        return _EINSUM_BACKWARD(ctx, gy)


def _permute_backward_of_raw_axes(ctx, gy):
    return np.transpose(gy, np.argsort(ctx.axes))  # argsort((0, -1, 1)) != argsort((0, 2, 1))


def _embedding_backward_ignoring_padding(gy, indices, num_embeddings, padding_idx):
    return embedding_backward(gy, indices, num_embeddings, None)


def _backward(function, backward):
    return lambda monkeypatch: monkeypatch.setattr(function, "backward", staticmethod(backward))


def _reference(primitive: str, fn):
    """Replace the reference of `primitive`, as the kernels are replaced below."""

    def plant(monkeypatch):
        impl = registry._table[primitive][registry.REFERENCE]
        table = registry._table[primitive]
        monkeypatch.setitem(table, registry.REFERENCE, dataclasses.replace(impl, fn=fn))
        registry._cache.clear()

    return plant


NAMED = [  # name, the spec whose generic check must catch it, that check, how to plant it
    pytest.param(
        "scaled_dot_product_attention", check_backward,
        _backward(ScaledDotProductAttention, _attention_backward(unbroadcast_k=False)),
        id="attention-gk-not-unbroadcast",
    ),
    pytest.param(
        "scaled_dot_product_attention", check_backward,
        _backward(ScaledDotProductAttention, _attention_backward(unbroadcast_v=False)),
        id="attention-gv-not-unbroadcast",
    ),
    pytest.param(
        "einsum", check_backward, _backward(Einsum, _einsum_backward_not_unbroadcast),
        id="einsum-summed-letter-not-unbroadcast",
    ),
    pytest.param(
        "permute", check_backward, _backward(Permute, _permute_backward_of_raw_axes),
        id="permute-argsort-of-raw-axes",
    ),
    pytest.param(
        "embedding", check_reference_backward,
        _reference("embedding.backward", _embedding_backward_ignoring_padding),
        id="embedding-reference-ignores-padding_idx",
    ),
]  # fmt: skip


@pytest.mark.mutation
@pytest.mark.parametrize("spec_name, check, plant", NAMED)
def test_named_mutant_is_caught(spec_name, check, plant, request, monkeypatch):
    (spec,) = [s for s in all_specs() if s.name == spec_name]
    plant(monkeypatch)
    try:
        caught = _caught(lambda draw: check(spec, draw))
    finally:
        monkeypatch.undo()
        registry._cache.clear()
    name = request.node.callspec.id
    mutation_log.RESULTS[f"{spec_name}:{name}"] = caught
    assert caught, f"the planted bug {name} was not caught"


KERNEL_CASES = [
    pytest.param(spec, primitive, backend, id=f"{primitive}-{backend}")
    for spec in all_specs()
    for primitive in spec.primitives
    for backend in registry.backends(primitive)
    if backend != registry.REFERENCE
]


def _drift(fn, changed: list):
    """fn, with element 0 of its first float output off by a relative 1e-3 (plus 1e-3)."""

    def drifted(*args, **kwargs):
        out = fn(*args, **kwargs)
        first = out[0] if isinstance(out, tuple) else out
        if first.size and first.dtype.kind == "f":
            first = first.copy()  # on its own device, as the kernel made it
            flat = first.reshape(-1)
            flat[0] += 1e-3 * (abs(flat[0]) + 1)
            changed[0] = True
            out = (first, *out[1:]) if isinstance(out, tuple) else first
        return out

    return drifted


@pytest.mark.mutation
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spec, primitive, backend", KERNEL_CASES)
def test_drifting_kernel_is_caught(spec, primitive, backend, dtype, monkeypatch):
    impl = registry._table[primitive][backend]
    changed = [False]
    monkeypatch.setitem(
        registry._table[primitive], backend, dataclasses.replace(impl, fn=_drift(impl.fn, changed))
    )
    registry._cache.clear()

    try:
        caught = _caught(lambda draw: check_backend(spec, backend, dtype, draw))
    finally:
        monkeypatch.undo()
        registry._cache.clear()
    assert changed[0], f"{primitive} [{backend}] never ran"
    mutation_log.RESULTS[f"{primitive}:{backend}:{np.dtype(dtype).name}:drift"] = caught
    assert caught, f"a drifting {backend} kernel for {primitive} was not caught"


@pytest.mark.mutation
@pytest.mark.parametrize("backend", test_adamw.KERNELS)
@pytest.mark.parametrize("dtype, tol", test_adamw.TOLERANCES)
def test_drifting_adamw_kernel_is_caught(backend, dtype, tol, monkeypatch):
    impl = registry._table["adamw.step"][backend]

    def drifted(param, *args, **kwargs):
        impl.fn(param, *args, **kwargs)
        flat = param.reshape(-1)  # a view: the update is in place
        flat[0] += 1e-3 * (abs(flat[0]) + 1)

    monkeypatch.setitem(
        registry._table["adamw.step"], backend, dataclasses.replace(impl, fn=drifted)
    )
    registry._cache.clear()
    try:
        with pytest.raises(AssertionError):
            test_adamw.check_kernel(backend, dtype, tol)
        caught = True
    finally:
        monkeypatch.undo()
        registry._cache.clear()
    mutation_log.RESULTS[f"adamw.step:{backend}:{np.dtype(dtype).name}:drift"] = caught
