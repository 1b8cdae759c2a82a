"""Every op's spec, collected from `tinyformer.ops`: what the generic suite, the oracle tests,
the grader and `tinyformer gradcheck` iterate over. It sits above the ops (it imports them),
while `tinyformer.opspec`, which every op file imports, sits below them.

The op files are the ones `tinyformer/ops/__init__.py` imports its public wrappers from (adding
an op is writing its file and importing its wrapper there), so this reads them off the wrappers:
no directory scan, no import by name.
"""

from __future__ import annotations

import sys

import tinyformer.ops as ops
from tinyformer.opspec import OpSpec

__all__ = ["all_specs"]


def all_specs() -> list[OpSpec]:
    """Every `SPECS` entry of every op file in `tinyformer.ops`, in file-name order."""
    files = sorted({getattr(ops, name).__module__ for name in ops.__all__})
    specs: list[OpSpec] = []
    for file in files:
        specs.extend(getattr(sys.modules[file], "SPECS", ()))
    return specs
