"""Every fast kernel must run on a good share of its spec's draws. A kernel whose rule (its
`accepts`) refuses most samples is checked by the generic suite on only a few of them, and the
planted-bug check, which needs the kernel to run at least once in 40 draws, fails at random.

The draws are hypothesis's, as the suite's are (it favours small values: a rule that needs a
large stride is met less often than under uniform draws), made deterministic here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tinyformer import registry
from tinyformer.testing import all_specs
from tinyformer.testing.checks import check_backend
from tinyformer.testing.hypothesis_draw import HypothesisDraw

DRAWS = 30
SHARE = 1 / 3  # of the draws on which the kernel must run

CASES = [
    pytest.param(spec, primitive, backend, id=f"{primitive}-{backend}")
    for spec in all_specs()
    for primitive in spec.primitives
    for backend in registry.backends(primitive)
    if backend != registry.REFERENCE
]


@pytest.mark.parametrize("spec, primitive, backend", CASES)
def test_the_kernel_runs_on_a_third_of_the_draws_or_more(spec, primitive, backend, monkeypatch):
    impl = registry._table[primitive][backend]
    calls = [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return impl.fn(*args, **kwargs)

    monkeypatch.setitem(registry._table[primitive], backend, dataclasses.replace(impl, fn=counted))
    registry._cache.clear()
    reached = [0]

    @settings(max_examples=DRAWS, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def draw_and_check(data):
        calls[0] = 0
        check_backend(spec, backend, np.float64, HypothesisDraw(data))
        reached[0] += calls[0] > 0

    try:
        draw_and_check()
    finally:
        monkeypatch.undo()
        registry._cache.clear()
    reached = reached[0]
    assert reached >= SHARE * DRAWS, (
        f"{primitive} [{backend}] ran on {reached} of {DRAWS} draws of the {spec.name} spec: "
        "make its sample draw the kernel's case more often"
    )
