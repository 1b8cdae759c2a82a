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
from tinyformer.testing.checks import draw_layouts, forward_backward
from tinyformer.testing.hypothesis_draw import HypothesisDraw

REF = registry.REFERENCE

DRAWS = 30
SHARE = 1 / 3  # of the draws on which the kernel must run

CASES = [
    pytest.param(spec, primitive, backend, id=f"{primitive}-{backend}")
    for spec in all_specs()
    for primitive in spec.primitives
    for backend in registry.backends(primitive)
    if backend != registry.REFERENCE and registry._table[primitive][backend].accepts is not None
]


@pytest.mark.parametrize("spec, primitive, backend", CASES)
def test_the_kernel_takes_a_third_of_the_draws_or_more(spec, primitive, backend, monkeypatch):
    """Run the reference on each draw (cheap: nothing compiles) and ask the kernel's rule
    whether it would take the primitive's calls, as check_backend's forced run does."""
    kernel, reference = registry._table[primitive][backend], registry._table[primitive][REF]
    taken = [False]

    def asked(*args, **kwargs):
        taken[0] = taken[0] or kernel.accepts(*args, **kwargs)
        return reference.fn(*args, **kwargs)

    monkeypatch.setitem(registry._table[primitive], REF, dataclasses.replace(reference, fn=asked))
    registry._cache.clear()
    reached = [0]

    @settings(max_examples=DRAWS, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def draw(data):
        taken[0] = False
        hypothesis_draw = HypothesisDraw(data)
        sample = spec.sample(hypothesis_draw)
        layouts = draw_layouts(hypothesis_draw, sample)
        with registry.prefer(REF):
            forward_backward(spec, sample, np.float64, layouts=layouts)
        reached[0] += taken[0]

    try:
        draw()
    finally:
        monkeypatch.undo()
        registry._cache.clear()
    assert reached[0] >= SHARE * DRAWS, (
        f"{primitive} [{backend}] takes {reached[0]} of {DRAWS} draws of the {spec.name} "
        "spec: make its sample draw the kernel's case more often"
    )
