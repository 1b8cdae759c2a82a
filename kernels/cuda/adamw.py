"""CUDA kernel for AdamW over many tensors in one launch (plan in adamw.cu).

A step costs one small host->device copy (each gradient's address and each tensor's scalars)
and one launch per dtype. The tables of parameter and moment addresses and of work items are
built once and cached, keyed by those addresses: an optimizer's tensors keep their memory
from step to step. A tensor the kernel cannot update in place (a non-contiguous parameter or
moment, a dtype it has no entry point for) takes the reference, alone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, SUFFIX
from tinyformer.optim.adamw_step import adamw_step as reference
from tinyformer.registry import kernel

THREADS = 256
CHUNK = THREADS * 8  # elements per block: 8 per thread
# Pointer tables kept on the device: (array type, dtype, addresses, sizes) -> (tensors, work).
# A training run needs one per group and dtype; the bound only stops a leak when parameters
# keep being reallocated (or when many single tensors go through "adamw.step").
_TABLES: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
MOST_TABLES = 256


def _fits(p: Any, g: Any, m: Any, v: Any) -> bool:
    """Whether the kernel can update p, m and v in place (g is made contiguous if need be)."""
    same = all(a.size == p.size for a in (g, m, v))
    in_place = all(a.flags.c_contiguous and a.dtype == p.dtype for a in (p, m, v))
    return same and in_place and p.dtype.name in SUFFIX


def _tables(xp: Any, params: Sequence[Any], ms: Sequence[Any], vs: Sequence[Any]) -> tuple:
    """The device tables of addresses and sizes, and of (tensor, chunk start) work items."""
    sizes = [p.size for p in params]
    addresses = [_runtime.address(a) for group in (params, ms, vs) for a in group]
    key = (type(params[0]), params[0].dtype.name, tuple(addresses), tuple(sizes))
    found = _TABLES.get(key)
    if found is not None:
        _TABLES.move_to_end(key)
        return found
    chunks = np.array([-(-s // CHUNK) for s in sizes], np.int64)
    tensor_of = np.repeat(np.arange(len(sizes)), chunks)  # the tensor of each work item
    first_item = np.cumsum(chunks) - chunks  # each tensor's first work item
    start = (np.arange(tensor_of.size) - first_item[tensor_of]) * CHUNK
    tensors = xp.asarray(np.array(addresses + sizes, np.uint64))
    work = xp.asarray(np.concatenate([tensor_of, start]).astype(np.uint64))
    _TABLES[key] = found = (tensors, work)
    if len(_TABLES) > MOST_TABLES:
        _TABLES.popitem(last=False)
    return found


def _launch(
    params: list, grads: list, ms: list, vs: list, *, lr: float, beta1: float, beta2: float,
    eps: float, weight_decay: float, steps: list[int],
) -> None:  # fmt: skip
    """One launch over tensors that all fit the kernel and share a dtype."""
    xp, n = get_array_module(params[0]), len(params)
    tensors, work = _tables(xp, params, ms, vs)
    items = work.size // 2
    if items == 0:  # every tensor is empty
        return
    # Gradients of another layout or dtype are copied; the list keeps them alive until the
    # launch is queued (after that, CuPy's stream order keeps their memory from reuse).
    grads = [xp.ascontiguousarray(g, dtype=p.dtype) for p, g in zip(params, grads)]
    per_step = np.empty(4 * n, np.uint64)
    per_step[:n] = [_runtime.address(g) for g in grads]
    per_step[n:].view(np.float64)[:] = (
        [lr / (1 - beta1**t) for t in steps] + [1 - lr * weight_decay] * n
        + [1 / (1 - beta2**t) for t in steps]
    )  # fmt: skip
    table = xp.asarray(per_step)  # the one copy of the step; a host->device copy, not a sync
    _runtime.load("adamw").launch(
        f"adamw_step_many_{SUFFIX[params[0].dtype.name]}", items, THREADS,
        (tensors, work, table[:n], table[n:].view(xp.float64), n, CHUNK, beta1, beta2, eps),
    )  # fmt: skip


@kernel("adamw.step_many", backend="cuda", dtypes=FLOATS)
def adamw_step_many(
    params: Sequence[Any], grads: Sequence[Any], ms: Sequence[Any], vs: Sequence[Any], *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, steps: Sequence[int],
) -> None:  # fmt: skip
    if not len(params) == len(grads) == len(ms) == len(vs) == len(steps):
        raise ValueError("adamw.step_many: params, grads, ms, vs and steps differ in length")
    hyper = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)
    by_dtype: dict[str, list[int]] = {}
    for i, arrays in enumerate(zip(params, grads, ms, vs)):
        if _fits(*arrays):
            by_dtype.setdefault(arrays[0].dtype.name, []).append(i)
        else:
            reference(*arrays, **hyper, step=steps[i])
    for chosen in by_dtype.values():
        lists = [[seq[i] for i in chosen] for seq in (params, grads, ms, vs, steps)]
        _launch(*lists[:4], **hyper, steps=lists[4])


@kernel("adamw.step", backend="cuda", dtypes=FLOATS)
def adamw_step(
    param: Any, grad: Any, m: Any, v: Any, *, lr: float, beta1: float, beta2: float, eps: float,
    weight_decay: float, step: int,
) -> None:  # fmt: skip
    adamw_step_many(
        [param], [grad], [m], [v], lr=lr, beta1=beta1, beta2=beta2, eps=eps,
        weight_decay=weight_decay, steps=[step],
    )  # fmt: skip
