"""AdamW over many tensors at once ("adamw.step_many"): on the host it is "adamw.step"'s update
on each tensor (the Numba kernel, where installed), chosen once for the group; on a device one
CUDA launch per dtype updates them all, checked here on the fake device's CPU emulator against
the reference; its pointer tables are built once and reused; and the optimizers call it once
per parameter group and dtype."""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict

import numpy as np
import pytest

from tinyformer import nn, registry
from tinyformer.fake_device import to_fake
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda import adamw as cuda_adamw
from tinyformer.optim import Adam, AdamW

HYPER = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1}
TOLERANCES = [(np.float32, 1e-6), (np.float64, 1e-13)]  # as tests/test_adamw.py
# A dozen shapes: one element, around a warp, around a block's chunk (2048), several chunks,
# an empty tensor, and matrices.
SHAPES = [
    (1,),
    (31,),
    (33,),
    (1000,),
    (0,),
    (3, 7),
    (257,),
    (2049,),
    (4099,),
    (2, 2, 5),
    (64,),
    (5, 1),
]


def _state(rng, dtype, shapes=SHAPES):
    params = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return (
        params,
        [np.zeros_like(p) for p in params],
        [rng.random(p.shape).astype(dtype) for p in params],
    )


@pytest.fixture
def count_launches(monkeypatch):
    """How many kernels each `.cu` file has launched since the fixture began."""
    launches: Counter[str] = Counter()
    launch = _runtime.Module.launch

    def counted(self, name, grid, block, args):
        launches[self.op] += 1
        return launch(self, name, grid, block, args)

    monkeypatch.setattr(_runtime.Module, "launch", counted)
    return launches


@pytest.fixture
def spy_primitive(monkeypatch):
    """spy(name) -> a Counter of the backends that ran primitive `name` from then on."""

    def spy(name):
        calls: Counter[str] = Counter()
        for backend, impl in list(registry._table[name].items()):

            def counted(*args, _impl=impl, **kwargs):
                calls[_impl.backend] += 1
                return _impl.fn(*args, **kwargs)

            monkeypatch.setitem(
                registry._table[name], backend, dataclasses.replace(impl, fn=counted)
            )
        registry._cache.clear()
        return calls

    yield spy
    monkeypatch.undo()
    registry._cache.clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_many_is_one_step_per_tensor_on_the_host_with_one_registry_choice(dtype, spy_primitive):
    rng = np.random.default_rng(0)
    params, ms, vs = _state(rng, dtype)
    twins = [[a.copy() for a in group] for group in (params, ms, vs)]
    steps = [1 + i % 4 for i in range(len(params))]
    grads = [rng.standard_normal(p.shape).astype(dtype) for p in params]
    for p, g, m, v, step in zip(twins[0], grads, *twins[1:], steps):
        registry.call("adamw.step", p, g, m, v, step=step, **HYPER)
    one, many = spy_primitive("adamw.step"), spy_primitive("adamw.step_many")
    registry.call("adamw.step_many", params, grads, ms, vs, steps=steps, **HYPER)
    for ours, theirs in zip(params + ms + vs, [a for group in twins for a in group]):
        np.testing.assert_array_equal(ours, theirs)  # the same update on the same numbers
    # the group is one choice of the registry: no second dispatch per parameter
    expected = registry.choose("adamw.step_many", params, grads, ms, vs, steps=steps, **HYPER)
    assert many == {expected.backend: 1} and one == {}
    if "numba" in registry.backends("adamw.step"):
        assert expected.backend == "numba"


def _fake_and_host_steps(dtype, rounds, count_launches):
    """`rounds` steps of the emulated CUDA kernel and of the reference, from the same start;
    each tensor has its own step count. Returns (fake arrays, host arrays) of p, m, v."""
    rng = np.random.default_rng(1)
    host = _state(rng, dtype)
    fake = [[to_fake(a) for a in group] for group in host]
    for r in range(rounds):
        steps = [r + 1 + i % 3 for i in range(len(SHAPES))]
        grads = [rng.standard_normal(p.shape).astype(dtype) for p in host[0]]
        with registry.prefer(registry.REFERENCE):
            registry.call("adamw.step_many", *host[:1], grads, *host[1:], steps=steps, **HYPER)
        with registry.prefer("cuda"):
            assert registry.choose("adamw.step_many", fake[0]).backend == "cuda"
            before = count_launches["adamw"]
            fake_grads = [to_fake(g) for g in grads]
            registry.call("adamw.step_many", fake[0], fake_grads, *fake[1:], steps=steps, **HYPER)
            assert count_launches["adamw"] == before + 1  # every tensor in one launch
    return [a for group in fake for a in group], [a for group in host for a in group]


@pytest.mark.parametrize("dtype, tol", TOLERANCES)
def test_cuda_kernel_matches_the_reference_on_the_fake_device(dtype, tol, count_launches):
    fake, host = _fake_and_host_steps(dtype, 3, count_launches)
    assert not np.allclose(host[3], _state(np.random.default_rng(1), dtype)[0][3])  # it moved
    for i, (ours, ref) in enumerate(zip(fake, host)):
        np.testing.assert_allclose(ours.get(), ref, rtol=tol, atol=tol, err_msg=f"array {i}")


def test_mixed_dtypes_launch_once_each_and_odd_layouts_take_the_reference(count_launches):
    rng = np.random.default_rng(2)
    shapes = [(4, 6), (33,), (6, 4), (7,)]
    dtypes = [np.float32, np.float64, np.float32, np.float64]
    params = [rng.standard_normal(s).astype(d) for s, d in zip(shapes, dtypes)]
    params[2] = np.ascontiguousarray(params[2].T).T  # a (6, 4) column-major parameter
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]
    grads = [rng.standard_normal(p.shape).astype(p.dtype) for p in params]
    grads[0] = grads[0].T.copy().T  # a column-major gradient: copied to the kernel's layout
    fake = [[to_fake(a) for a in group] for group in (params, grads, ms, vs)]
    fake[0][2] = to_fake(np.ascontiguousarray(params[2].T)).T  # to_fake makes C-order copies
    fake[1][0] = to_fake(grads[0].T.copy()).T
    steps = [1, 2, 3, 4]
    with registry.prefer("cuda"):
        registry.call("adamw.step_many", *fake, steps=steps, **HYPER)
    assert count_launches["adamw"] == 2  # float32 and float64; the column-major one aside
    with registry.prefer(registry.REFERENCE):
        registry.call("adamw.step_many", params, grads, ms, vs, steps=steps, **HYPER)
    for ours, ref, dtype in zip(fake[0] + fake[2] + fake[3], params + ms + vs, dtypes * 3):
        tol = dict(TOLERANCES)[dtype]
        np.testing.assert_allclose(ours.get(), ref, rtol=tol, atol=tol)


def test_pointer_tables_are_built_once_for_the_same_tensors(monkeypatch, count_launches):
    monkeypatch.setattr(cuda_adamw, "_TABLES", OrderedDict())
    rng = np.random.default_rng(3)
    params, ms, vs = ([to_fake(a) for a in group] for group in _state(rng, np.float32))
    tables = []
    with registry.prefer("cuda"):
        for step in (1, 2):
            grads = [to_fake(rng.standard_normal(p.shape).astype(np.float32)) for p in params]
            registry.call("adamw.step_many", params, grads, ms, vs, steps=[step] * 12, **HYPER)
            tables.append(list(cuda_adamw._TABLES.values()))
        assert len(tables[0]) == 1 and tables[1][0] is tables[0][0]  # new gradients, same tables
        p, g, m, v = (to_fake(np.ones(5, np.float32)) for _ in range(4))
        registry.call("adamw.step_many", [p], [g], [m], [v], steps=[1], **HYPER)
    assert len(cuda_adamw._TABLES) == 2  # other tensors: a table of their own
    assert count_launches["adamw"] == 3


def test_optimizers_call_step_many_once_per_group_and_dtype(spy_primitive):
    rng = np.random.default_rng(4)
    mixed = [nn.Parameter(rng.standard_normal(s).astype(d)) for s, d in
             [((3, 4), np.float32), ((4,), np.float64), ((2,), np.float32)]]  # fmt: skip
    alone = [nn.Parameter(rng.standard_normal(5))]
    optimizer = AdamW([{"params": mixed}, {"params": alone, "weight_decay": 0.0}], lr=0.1)
    for p in mixed + alone:
        p.grad = rng.standard_normal(p.shape).astype(p.dtype)
    calls = spy_primitive("adamw.step_many")
    optimizer.step()
    assert sum(calls.values()) == 3  # (float32, float64) in the first group, float64 in the second
    assert all(p.data.dtype == d for p, d in zip(mixed, [np.float32, np.float64, np.float32]))


@pytest.mark.parametrize(
    "make", [lambda ps: AdamW(ps, lr=0.05), lambda ps: Adam(ps, lr=0.05, weight_decay=0.1)]
)
def test_optimizer_on_the_fake_device_with_cuda_matches_the_host(make, count_launches):
    def train(device):
        rng = np.random.default_rng(5)
        model = nn.Linear(37, 3)  # a weight of 111 and a bias of 3
        model.weight.data = rng.standard_normal((3, 37)).astype(np.float32)
        model.bias.data = rng.standard_normal(3).astype(np.float32)
        model.to(device)
        optimizer = make(list(model.parameters()))
        for _ in range(3):
            for p in model.parameters():
                grad = rng.standard_normal(p.shape).astype(np.float32)
                p.grad = grad if device == "cpu" else to_fake(grad)
            optimizer.step()
        return [p.data if device == "cpu" else p.data.get() for p in model.parameters()]

    with registry.prefer(registry.REFERENCE):
        host = train("cpu")
    with registry.prefer("cuda"):
        fake = train("fake")
    assert count_launches["adamw"] == 3  # one per step, for both parameters
    for ours, ref in zip(fake, host):
        np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-6)
