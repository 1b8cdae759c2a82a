"""The training loop on a device reads numbers back only when it logs them: a read waits for
every queued kernel (a sync), so the loss and the gradient norm are read in batches there, and
the gradient clipping decides its scale without reading the norm."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.fake_device import FakeArray
from tinyformer.optim import AdamW, WarmupCosineLR, clip_grad_norm_
from tinyformer.train import TrainGPTConfig
from tinyformer.train.loop import DEVICE_READ_EVERY, NonFiniteLoss, Run, train_loop


def _run(tmp_path, device, iters, nan_at=None):
    tf.manual_seed(0)
    model = nn.Linear(3, 1).to(device)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    x = np.ones((4, 3), np.float32)
    y = tf.zeros(4, 1, device=device)

    def get_batch(rng):
        bad = nan_at is not None and optimizer_steps[0] == nan_at
        return tf.Tensor(x * np.nan if bad else x).to(device), y

    run = Run(
        model, optimizer, WarmupCosineLR(optimizer, 0, iters), np.random.default_rng(0),
        get_batch=get_batch, evaluate=lambda it: {"val": 0.0}, meta=dict,
        config=TrainGPTConfig(iters=iters, eval_interval=iters, out_dir=str(tmp_path),
                              progress=False, grad_clip=1.0),
        command="gpt", title="t", loss=lambda inputs, t: ((model(inputs) - t) ** 2).mean(),
    )  # fmt: skip
    optimizer_steps = [0]
    step = optimizer.step

    def counting_step():
        step()
        optimizer_steps[0] += 1

    optimizer.step = counting_step
    return run, optimizer_steps


def _reads(monkeypatch, optimizer_steps) -> list[int]:
    """The optimizer steps taken when each number was read back from the fake device."""
    seen: list[int] = []
    item = FakeArray.__getattr__

    def spy(self, name):
        if name == "item":
            seen.append(optimizer_steps[0])
        return item(self, name)

    monkeypatch.setattr(FakeArray, "__getattr__", spy)
    return seen


def test_on_a_device_the_loss_is_read_only_every_few_steps(tmp_path, monkeypatch):
    iters = 2 * DEVICE_READ_EVERY
    run, steps = _run(tmp_path, "fake", iters)
    reads = _reads(monkeypatch, steps)
    log = train_loop(run)
    # Two numbers (loss, gradient norm) per step, read in two batches, before the steps that
    # end them: nothing in between.
    assert sorted(set(reads)) == [DEVICE_READ_EVERY - 1, iters - 1]
    assert len(reads) == 2 * iters and len(log["loss"]) == iters == len(log["ms"])
    assert all(np.isfinite(log["loss"]))


def test_on_the_host_every_step_is_checked_before_it_is_taken(tmp_path, monkeypatch):
    run, steps = _run(tmp_path, "cpu", 12, nan_at=7)
    with pytest.raises(NonFiniteLoss, match=r"iteration 8: the loss is nan.*before the optimizer"):
        train_loop(run)
    assert steps[0] == 7 and np.isfinite(run.model.weight.data).all()


def test_on_a_device_a_nan_stops_the_run_when_read_and_names_its_iteration(tmp_path):
    run, steps = _run(tmp_path, "fake", 30, nan_at=3)
    with pytest.raises(NonFiniteLoss, match=r"iteration 4: the loss is nan.*when it was read"):
        train_loop(run)
    assert steps[0] == DEVICE_READ_EVERY - 1  # stopped at the first read after the NaN
    assert len(run.log["loss"]) == 3  # the finite steps before it are logged


def test_clipping_reads_nothing_and_returns_the_norm_as_a_tensor():
    layer = nn.Linear(3, 2).to("fake")
    (layer(tf.ones(4, 3, device="fake")) ** 2).sum().backward()
    norm = clip_grad_norm_(layer.parameters(), 0.5)
    assert isinstance(norm, tf.Tensor) and norm.device == layer.weight.device
    grads = [p.grad.get() for p in layer.parameters()]
    clipped = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    assert float(norm) > 0.5 and clipped == pytest.approx(0.5, rel=1e-4)


def test_a_gpt_training_step_on_a_device_reads_nothing_back(monkeypatch):
    """Forward, loss, backward, clipping and AdamW on the device, with host batches: not one
    number comes back to the host (each would be a sync) until the loop reads the loss."""
    from tinyformer.models.gpt import GPT, GPTConfig

    tf.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=8)).to("fake")
    optimizer = AdamW(model.parameters(), lr=1e-3)
    data = np.random.default_rng(0).integers(0, 11, (2, 9))
    reads = _reads(monkeypatch, [0])  # every .item()
    for name in ("__bool__", "__float__", "__int__", "get", "__len__", "__iter__"):
        original = getattr(FakeArray, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            reads.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(FakeArray, name, spy)
    for _ in range(2):
        _, loss = model(data[:, :-1], data[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    assert reads == []
    assert np.isfinite(loss.item())  # the read that raises any deferred index error


def test_index_checks_on_a_device_wait_for_the_next_read():
    from tinyformer import device_checks
    from tinyformer.autograd import OpError
    from tinyformer.fake_device import to_fake

    device_checks.check(to_fake(np.array([False, False])), lambda: OpError("never raised"))
    device_checks.check(to_fake(np.array([False, True])), lambda: OpError("the first failure"))
    device_checks.check(to_fake(np.array([True])), lambda: OpError("the second failure"))
    assert device_checks.pending() == 3  # queued: nothing was read
    with pytest.raises(OpError, match="the first failure"):
        tf.ones(1, device="fake").item()
    assert device_checks.pending() == 0
    with pytest.raises(OpError, match="on the host"):  # host arrays are checked at once
        device_checks.check(np.array([True]), lambda: OpError("on the host"))
