"""Every op on the fake device: forward and backward run there, never touching NumPy on device
data, and give the values of the NumPy run. The fake refuses what CuPy refuses (and more), so a
reference that mixes host and device arrays fails here, in CI, without a GPU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend, registry
from tinyformer.testing import RandomDraw, all_specs
from tinyformer.testing.checks import tensors

SPECS = [pytest.param(spec, id=spec.name) for spec in all_specs()]
SEEDS = range(4)


def _run(spec, sample, device):
    """Output and input gradients (for a fixed upstream gradient), as host float64 arrays."""
    inputs = [t.to(device) if isinstance(t, tf.Tensor) else t for t in tensors(sample, np.float64)]
    kwargs = {
        k: tf.Tensor(v).to(device).data if isinstance(v, np.ndarray) else v
        for k, v in sample.kwargs.items()
    }
    y = spec.fn(*inputs, **kwargs)
    assert y.device == backend.device(device), f"{spec.name}: output on {y.device}"
    leaves = [t for t in inputs if isinstance(t, tf.Tensor) and t.requires_grad]
    gy = np.random.default_rng(0).standard_normal(y.shape).astype(y.dtype)
    grads = tf.grad(y, leaves, tf.Tensor(gy).to(device)) if y.requires_grad else []
    for g in grads:
        assert g is None or backend.device_of(g) == backend.device(device)
    return backend.to_host(y.data), [None if g is None else backend.to_host(g) for g in grads]


@pytest.mark.parametrize("spec", SPECS)
def test_every_op_runs_on_the_fake_device_as_on_the_host(spec):
    for seed in SEEDS:
        sample = spec.sample(RandomDraw(seed))
        with registry.prefer(registry.REFERENCE):
            y_host, g_host = _run(spec, sample, "cpu")
        y_fake, g_fake = _run(spec, sample, "fake")
        np.testing.assert_allclose(y_fake, y_host, rtol=1e-12, atol=1e-12, err_msg=spec.name)
        for a, b in zip(g_fake, g_host):
            if b is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=spec.name)


def test_adamw_reference_updates_fake_device_arrays_as_host_ones():
    """adamw.step has no op spec (it is no Function): its reference, called on fake-device
    arrays for a few steps, updates them in place to NumPy's values."""
    from tinyformer.ops.adamw import adamw_step

    rng = np.random.default_rng(0)
    param, grad, m = (rng.standard_normal((3, 4)) for _ in range(3))
    host = [param, grad, m, rng.random((3, 4))]  # the second moment v is >= 0
    fake = [backend.to_device(a, "fake") for a in host]
    start = param.copy()
    for step in (1, 2, 3):
        hyper = dict(lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.01, step=step)
        adamw_step(*host, **hyper)
        adamw_step(*fake, **hyper)
    assert all(backend.is_device_array(a) for a in fake)
    assert not np.allclose(host[0], start)  # the steps moved the parameter
    for a, b in zip(fake, host):
        np.testing.assert_allclose(backend.to_host(a), b, rtol=1e-12, atol=1e-12)


@pytest.fixture
def fresh_registry_cache():
    registry._cache.clear()
    yield
    registry._cache.clear()  # monkeypatch puts the table back first, then this runs


def _spec(name):
    return next(s for s in all_specs() if s.name == name)


def test_a_host_call_planted_in_a_reference_fails_the_fake_device_check(
    monkeypatch, fresh_registry_cache
):
    """The planted-bug check of this suite: `np.exp` in softmax's reference is right on the
    host, and a host/device mix on a GPU; the fake-device check must fail on it."""
    impl = registry._table["softmax.forward"][registry.REFERENCE]

    def host_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))  # np.exp, not xp.exp: the planted slip
        return e / e.sum(axis=-1, keepdims=True)

    planted = dataclasses.replace(impl, fn=host_softmax)
    monkeypatch.setitem(registry._table["softmax.forward"], registry.REFERENCE, planted)
    with pytest.raises(TypeError, match="numpy.exp was called on a fake-device array"):
        test_every_op_runs_on_the_fake_device_as_on_the_host(_spec("softmax"))


def test_np_asarray_planted_in_a_backward_fails_the_fake_device_check(monkeypatch):
    from tinyformer.ops.exp import Exp

    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return np.asarray(gy) * y  # a host copy of a device array: CuPy refuses it too

    monkeypatch.setattr(Exp, "backward", staticmethod(backward))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        test_every_op_runs_on_the_fake_device_as_on_the_host(_spec("exp"))
