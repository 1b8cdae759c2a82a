"""Every public op is reachable where PyTorch users look for it. An op file declares its public
wrappers in `__all__`; `tinyformer.ops` exports exactly those, and each is exported again as
`tf.<name>` or `F.<name>` (the same object), or is a Tensor method only, as in PyTorch."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import ops

# Op files with no public wrapper, and why.
INTERNAL: dict[str, str] = {}
# Modules of ops/ that hold no op, and why.
NOT_OPS = {"shared": "what references and kernels compute alike: imported by both"}
# Ops reached only as Tensor methods, as in PyTorch.
METHOD_ONLY = {"getitem": "__getitem__", "astype": "astype"}
# Ops that tf exports in PyTorch's form (tinyformer/torch_functions.py): `tf.max(x, 1)` is
# torch.max's (values, indices); with NumPy's axis= it is the op itself.
TORCH_FORM = {"max", "min"}

MODULES = [
    m.name for m in pkgutil.iter_modules(ops.__path__)
    if not m.name.startswith("_") and m.name not in NOT_OPS
]  # fmt: skip


def _declared(name: str) -> list[str]:
    return list(getattr(importlib.import_module(f"tinyformer.ops.{name}"), "__all__", []))


@pytest.mark.parametrize("name", MODULES)
def test_every_op_file_declares_its_public_wrappers(name):
    declared = _declared(name)
    if name in INTERNAL:
        assert not declared, f"ops/{name}.py declares {declared}: take it out of INTERNAL"
        return
    assert declared, f"ops/{name}.py has no __all__ naming its public wrappers"
    module = importlib.import_module(f"tinyformer.ops.{name}")
    for op in declared:
        assert callable(getattr(module, op, None)), f"ops/{name}.py declares {op!r}, undefined"


def test_tinyformer_ops_exports_exactly_what_the_op_files_declare():
    declared = {op: name for name in MODULES for op in _declared(name)}
    assert sorted(ops.__all__) == sorted(declared), "ops/__init__.py and the op files disagree"
    for op, name in declared.items():
        module = importlib.import_module(f"tinyformer.ops.{name}")
        assert getattr(ops, op) is getattr(module, op), f"ops.{op} is not ops/{name}.py's"


@pytest.mark.parametrize("op", sorted(ops.__all__))
def test_every_op_is_exported_where_pytorch_users_look(op):
    fn = getattr(ops, op)
    if op in METHOD_ONLY:
        assert hasattr(tf.Tensor, METHOD_ONLY[op])
        return
    if op in TORCH_FORM:
        x = tf.tensor(np.arange(6.0).reshape(2, 3))
        assert op in tf.__all__ and getattr(tf, op).__module__ == "tinyformer.torch_functions"
        assert np.array_equal(getattr(tf, op)(x, axis=1).data, fn(x, axis=1).data)
        return
    places = [
        place for place, module in (("tf", tf), ("F", F))
        if op in module.__all__ and getattr(module, op) is fn
    ]  # fmt: skip
    assert places, f"ops.{op} is neither tf.{op} nor F.{op} (import it and list it in __all__)"
