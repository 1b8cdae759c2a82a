"""Testing ops: the specs every op file declares, and the checks that hold an op to its spec.

    from tinyformer.opspec import OpSpec, unary_sample       # in an op file: declare the spec
    from tinyformer.testing import check_op                  # anywhere: run the whole battery
    check_op(my_spec, examples=20)

- `tinyformer.opspec` (re-exported here): `OpSpec`, `Sample`, the `Draw` protocol,
  `RandomDraw`, and helpers for `sample` functions. NumPy only, below the ops: every op file
  imports it, and none imports this package.
- `tinyformer.testing.catalog`: `all_specs()`, every op's spec (it imports the ops).
- `tinyformer.testing.checks`: the checks of the generic op suite (gradcheck on random memory
  layouts, float32 vs float64, no graph under no_grad, kernels vs references) and `check_op`.
- `tinyformer.testing.hypothesis_draw`: a `Draw` backed by hypothesis (imports hypothesis).
- `tinyformer.testing.plugin`: the pytest plugin, `pytest --tinyformer-ops my_ops.py`.

`import tinyformer.testing` imports neither pytest nor hypothesis. It sits above the ops and the
whole engine (the checks run them), so it imports its catalog and checks at the top.
"""

from __future__ import annotations

from tinyformer.opspec import (
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
from tinyformer.testing.catalog import all_specs
from tinyformer.testing.checks import Check, OpCheckError, check_op, spec_checks

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
