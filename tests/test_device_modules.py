"""Modules, optimizers and tensors across devices, on the fake device: moving a model keeps its
parameters (so an optimizer built before still holds them), state_dict shares the module's
memory on its device and loads host data onto it, optimizer state follows its parameter, a
training step gives the host's numbers, and mixing devices in one op is an error that names the
op and both devices."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend, nn, registry
from tinyformer.fake_device import FakeArray
from tinyformer.inplace_array import InPlaceArray
from tinyformer.optim import AdamW, clip_grad_norm_


class Masked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 3)
        self.register_buffer("mask", np.tril(np.ones((5, 5), np.float32)))

    def forward(self, x):
        return self.proj(x) * self.mask[: x.shape[0], :3]


def test_module_to_moves_parameters_and_buffers_in_place():
    model = Masked()
    weight = model.proj.weight
    assert model.to("fake") is model and model.proj.weight is weight
    assert all(p.device == backend.device("fake") for p in model.parameters())
    assert isinstance(model.mask, tf.Tensor) and isinstance(model.mask.data, FakeArray)
    state = model.state_dict()  # detached Tensors sharing the module's memory, on its device
    assert all(v.device == backend.device("fake") and not v.requires_grad for v in state.values())
    assert state["proj.weight"].data is weight.data and state["mask"].data is model.mask.data
    state["proj.bias"] = np.arange(3, dtype=np.float32)  # host data
    model.load_state_dict(state)  # onto the module's device
    assert isinstance(model.proj.bias.data, FakeArray)
    np.testing.assert_array_equal(backend.to_host(model.proj.bias.data), [0, 1, 2])
    model.cpu()
    # back on the host: NumPy arrays (a parameter's with PyTorch's in-place calls, InPlaceArray)
    assert type(model.mask.data) is np.ndarray
    assert type(model.proj.weight.data) is InPlaceArray


def test_a_buffer_reassigned_stays_a_buffer():
    model = Masked()
    model.mask = model.mask[:3, :3]  # a plain attribute before: gone from state_dict
    assert model.state_dict()["mask"].shape == (3, 3)
    model.to("fake")
    assert isinstance(model.mask.data, FakeArray)


def test_a_training_step_on_the_fake_device_gives_the_hosts_numbers():
    def step(device):
        tf.manual_seed(0)
        model = Masked()
        optimizer = AdamW(model.parameters(), lr=0.1)  # built before the move, as people do
        model.to(device)
        x = tf.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)).to(device)
        for _ in range(2):
            loss = (model(x) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            norm = clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
        state = optimizer.state_dict()["state"]
        assert all(type(v) is not FakeArray for s in state.values() for v in s.values())
        return (
            loss.item(),
            float(norm),
            {k: backend.host_copy(v.data) for k, v in model.state_dict().items()},
        )

    with registry.prefer(registry.REFERENCE):  # the fake device runs the references too
        host = step("cpu")
    fake = step("fake")
    assert fake[0] == pytest.approx(host[0], rel=1e-6) and fake[1] == pytest.approx(host[1])
    for key, value in host[2].items():
        np.testing.assert_allclose(fake[2][key], value, rtol=1e-6, atol=1e-7, err_msg=key)


def test_mixing_devices_in_one_op_names_the_op_and_both_devices():
    x, y = tf.randn(2, 3).to("fake"), tf.randn(2, 3)
    with pytest.raises(ValueError, match=r"Add.*got fake:0 and cpu|Add.*cpu and fake:0"):
        x + y
    with pytest.raises(TypeError, match=r"use \.cpu\(\)"):
        x.numpy()
    assert x.cpu().device == backend.device("cpu") and "device='fake:0'" in repr(x)


def test_class_weights_follow_the_rule_of_every_loss():
    """Host data is moved to the input's device; a tensor on another device is an error."""
    import tinyformer.nn.functional as F

    logits = tf.randn(4, 3).to("fake")
    target = np.array([0, 1, 2, 1])
    on_device = F.cross_entropy(logits, target, weight=[1.0, 2.0, 0.5])
    assert on_device.device == backend.device("fake")
    for loss in (F.cross_entropy, F.nll_loss):
        with pytest.raises(tf.OpError, match="weight is on cpu and input on fake:0"):
            loss(logits, target, weight=tf.tensor([1.0, 2.0, 0.5]))
    with pytest.raises(tf.OpError, match="weight is on cpu and input on fake:0"):
        F.binary_cross_entropy_with_logits(logits, tf.zeros(4, 3), weight=tf.ones(3))
