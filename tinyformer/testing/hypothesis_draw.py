"""A `Draw` backed by hypothesis, so that a failing check shrinks to a minimal example.

Importing this module imports hypothesis; `tinyformer.testing` never imports it on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tinyformer.opspec import Draw

__all__ = ["HypothesisDraw", "run_with_hypothesis"]


class HypothesisDraw:
    """A `tinyformer.testing.Draw` whose choices come from hypothesis (so failures shrink); array
    values come from a generator seeded by one hypothesis-drawn integer."""

    def __init__(self, data: st.DataObject) -> None:
        self._data = data
        self.rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))

    def __repr__(self) -> str:  # hypothesis prints the shrunk example's draws below the report
        return "hypothesis"

    def integers(self, low: int, high: int) -> int:
        return self._data.draw(st.integers(low, high))

    def choice(self, options: Sequence[Any]) -> Any:
        return self._data.draw(st.sampled_from(list(options)))

    def shape(self, min_dims=1, max_dims=3, min_side=1, max_side=4) -> tuple[int, ...]:
        strategy = hnp.array_shapes(
            min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side
        )
        return self._data.draw(strategy, label="shape")


def run_with_hypothesis(
    check: Callable[[Draw], None],
    *,
    with_settings: settings | None = None,
    database_key: bytes | None = None,
) -> None:
    """Run `check(draw)` on hypothesis-drawn examples; a failure is shrunk, then re-raised.

    Args:
        check: a function of a `Draw`, such as `Check.run`.
        with_settings: hypothesis settings (default: the loaded profile's).
        database_key: keeps this check's saved failing examples apart from other checks' (they
            all run through the one function below); e.g. the pytest node id.
    """

    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        check(HypothesisDraw(data))

    if with_settings is not None:
        run = with_settings(run)
    if database_key is not None:  # as hypothesis' own pytest plugin does for parametrized tests
        run.hypothesis.inner_test._hypothesis_internal_add_digest = database_key
    run()
