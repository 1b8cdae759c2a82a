"""Every op's spec, collected from `tinyformer.ops`: what the generic suite, the oracle tests,
the grader and `tinyformer gradcheck` iterate over. It sits above the ops (it imports them),
while `specs.py`, which every op file imports, sits below them."""

from __future__ import annotations

import importlib
import pkgutil

import tinyformer.ops as ops
from tinyformer.testing.specs import OpSpec

__all__ = ["all_specs"]


def all_specs() -> list[OpSpec]:
    """Every `SPECS` entry of every module in `tinyformer.ops`, in file order."""
    specs: list[OpSpec] = []
    for info in sorted(pkgutil.iter_modules(ops.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"tinyformer.ops.{info.name}")
        specs.extend(getattr(module, "SPECS", ()))
    return specs
