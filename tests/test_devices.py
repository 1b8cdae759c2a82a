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
    from tinyformer.optim.adamw_step import adamw_step

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


# -- every Tensor method keeps the tensor's device ---------------------------------------------

# Arguments for the methods that need some; arrays among them become tensors on the fake
# device. The receiver is a (2, 3) float32 tensor there, with values in [0.5, 1.5].
MASK = np.array([[True, False, True], [False, False, True]])
METHOD_ARGS = {
    "add_": (np.ones(3),), "sub_": (np.ones(3),), "mul_": (np.ones(3),), "div_": (np.ones(3),),
    "copy_": (np.zeros(3),), "fill_": (2.0,), "masked_fill_": (MASK, 0.0),
    "masked_fill": (MASK, 0.0), "eq": (np.ones(3),), "ne": (1.0,), "lt": (1.0,),
    "le": (np.ones(3),), "gt": (1.0,), "ge": (1.0,), "matmul": (np.ones((3, 2)),),
    "outer": (np.ones(4),), "pow": (2,), "astype": (np.float64,), "to": ("float64",),
    "type": ("float64",), "type_as": (np.ones(1),), "expand": (4, 2, 3),
    "expand_as": (np.ones((4, 2, 3)),), "gather": (1, np.array([[0], [2]])), "cumsum": (1,),
    "chunk": (3, 1), "split": (1,), "topk": (2,), "permute": (1, 0), "reshape": (3, 2),
    "view": (6,), "repeat": (2, 1), "roll": (1,), "unsqueeze": (0,), "flip": (0,),
    "new_zeros": (4,), "new_ones": (2, 2), "backward": (np.ones((2, 3)),), "clip": (0.6, 1.2),
    "clamp": (0.6,), "register_post_accumulate_grad_hook": (lambda t: None,),
    "register_hook": (lambda g: None,),
    "add": (np.ones(3),), "sub": (1.0,), "mul": (np.ones(3),), "div": (2.0,), "divide": (2.0,),
    "scatter": (1, np.array([[0], [2]]), 0.5), "scatter_": (1, np.array([[0], [2]]), 0.5),
    "index_fill": (1, np.array([0, 2]), 0.5), "index_fill_": (1, np.array([0, 2]), 0.5),
    "narrow": (1, 1, 2), "index_select": (1, np.array([2, 0])), "remainder": (0.7,),
    "clamp_": (0.6, 1.2), "clip_": (None, 1.2), "new_tensor": (np.ones(3),),
    "broadcast_to": (4, 2, 3), "dot": (np.ones(3),), "mv": (np.ones(3),),
    "mm": (np.ones((3, 2)),), "masked_select": (MASK,), "movedim": (0, 1), "moveaxis": (0, 1),
    "swapaxes": (0, 1), "swapdims": (0, 1), "unflatten": (1, (3, 1)), "tile": ((2,),),
    "new_full": ((2,), 1.0), "new_empty": (2,), "lerp": (np.ones((2, 3)), 0.3),
    "logical_and": (np.ones(3),), "logical_or": (np.ones(3),), "logical_xor": (np.ones(3),),
}  # fmt: skip
RECEIVERS = {"outer": (3,), "item": (1,), "dot": (3,)}  # shapes other than (2, 3)
NO_TENSOR = {  # return no Tensor
    "dim", "numel", "nelement", "tolist", "item", "retain_grad", "backward",
    "register_post_accumulate_grad_hook", "register_hook", "stride", "element_size",
    "is_contiguous",
}  # fmt: skip
ELSEWHERE = {"cpu": "cpu"}  # methods that move the tensor, and where to
REFUSED = {  # methods that raise on a device tensor, as in PyTorch
    "numpy": "can't convert fake:0 device type tensor to numpy",
    "cuda": "CUDA",
}


def _on_fake(value):
    return tf.tensor(value, dtype=np.float32 if value.dtype.kind == "f" else None).to("fake")


def test_every_tensor_method_keeps_the_tensor_s_device():
    """Every public Tensor method and property, called on a fake-device tensor, gives Tensors
    (and arrays) on that device: creation inside a method must follow the tensor, as an op's
    must. A new method with arguments needs an entry in METHOD_ARGS."""
    names = [n for n in dir(tf.Tensor) if not n.startswith("_")]
    rng = np.random.default_rng(0)
    for name in names:
        shape = RECEIVERS.get(name, (2, 3))
        t = _on_fake(rng.uniform(0.5, 1.5, shape).astype(np.float32)).requires_grad_()
        t = t * 1 if name.endswith("_") and name != "requires_grad_" else t  # writable
        args = [_on_fake(a) if isinstance(a, np.ndarray) else a for a in METHOD_ARGS.get(name, ())]
        if name in REFUSED:
            with pytest.raises((TypeError, RuntimeError), match=REFUSED[name]):
                getattr(t, name)(*args)
            continue
        value = getattr(t, name)
        if callable(value):
            value = value(*args)
        if name == "backward":
            value = t.grad
        want = backend.device(ELSEWHERE.get(name, "fake"))
        results = value if isinstance(value, (tuple, list)) else [value]
        tensors = [v for v in results if isinstance(v, tf.Tensor)]
        arrays = [v for v in results if backend.is_device_array(v) or isinstance(v, np.ndarray)]
        for v in tensors:
            assert v.device == want, f"Tensor.{name} returned a tensor on {v.device}"
        for v in arrays:
            assert backend.device_of(v) == want, f"Tensor.{name} gave an array on the host"
        if not tensors and not arrays:
            assert name in NO_TENSOR or not callable(getattr(tf.Tensor, name)) or value is None, (
                f"Tensor.{name} returned {type(value).__name__}: add it to NO_TENSOR or give "
                "it arguments in METHOD_ARGS"
            )


def test_moving_a_tensor_to_and_from_the_fake_device_copies_as_an_upload_does():
    """As CuPy's upload and download: the device tensor and the host one share no memory."""
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = tf.tensor(host.copy())
    moved = [t.to("fake"), tf.Tensor(host, device="fake"), tf.tensor(host, device="fake")]
    for d in moved:
        d[0] = -1.0
        d.add_(tf.ones(3).to("fake"))
    np.testing.assert_array_equal(t.numpy(), host)  # the host tensor is unchanged
    np.testing.assert_array_equal(host, np.arange(6).reshape(2, 3))
    d = t.to("fake")
    t.zero_()  # and the other way
    back = d.cpu()
    np.testing.assert_array_equal(back.numpy(), host)
    back.fill_(7.0)
    np.testing.assert_array_equal(backend.to_host(d.data), host)
    with pytest.raises(TypeError, match="can't convert fake:0 device type tensor to numpy"):
        d.numpy()
