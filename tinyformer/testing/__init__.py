"""Testing ops: the specs every op file declares, and the checks that hold an op to its spec.

    from tinyformer.testing import OpSpec, unary_sample      # in an op file: declare the spec
    from tinyformer.testing import check_op                  # anywhere: run the whole battery
    check_op(my_spec, examples=20)

- `tinyformer.testing.specs`: `OpSpec`, `Sample`, the `Draw` protocol, `RandomDraw`, and helpers
  for `sample` functions. NumPy only: every op file imports it.
- `tinyformer.testing.catalog`: `all_specs()`, every op's spec (it imports the ops).
- `tinyformer.testing.checks`: the checks of the generic op suite (gradcheck on random memory
  layouts, float32 vs float64, no graph under no_grad, kernels vs references) and `check_op`.
- `tinyformer.testing.hypothesis_draw`: a `Draw` backed by hypothesis (imports hypothesis).
- `tinyformer.testing.plugin`: the pytest plugin, `pytest --tinyformer-ops my_ops.py`.

`import tinyformer.testing` imports neither pytest nor hypothesis, and loads the checks only when
one of their names is first used (op files import this package while tinyformer is still being
imported, before the engine the checks need is complete).
"""

from __future__ import annotations

import importlib
from typing import Any

from tinyformer.testing.specs import (
    Draw,
    OpSpec,
    RandomDraw,
    Sample,
    binary_sample,
    broadcast_pair,
    broadcastable,
    distinct,
    floats,
    reduction_sample,
    unary_sample,
)

_FROM_CHECKS = ("Check", "OpCheckError", "check_op", "spec_checks")

__all__ = [
    "Check",
    "Draw",
    "OpCheckError",
    "OpSpec",
    "RandomDraw",
    "Sample",
    "all_specs",
    "binary_sample",
    "broadcast_pair",
    "broadcastable",
    "check_op",
    "distinct",
    "floats",
    "reduction_sample",
    "spec_checks",
    "unary_sample",
]


def __getattr__(name: str) -> Any:
    if name == "all_specs":  # it imports the ops, which import this package
        return importlib.import_module("tinyformer.testing.catalog").all_specs
    if name in _FROM_CHECKS:
        return getattr(importlib.import_module("tinyformer.testing.checks"), name)
    raise AttributeError(f"module 'tinyformer.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
