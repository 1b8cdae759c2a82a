"""Cases for tests/test_distributed.py, each run on every rank: `mpiexec -n 2 python
tests/distributed_cases.py CASE...`. A case raises (and so exits non-zero) on any mismatch; rank 0
prints "CASE ok" at the end."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np

import tinyformer as tf
import tinyformer.distributed as dist
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.optim import AdamW, weight_decay_groups

TINY = GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8)


def collectives() -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    for device in ("cpu", "fake"):
        x = tf.tensor(np.arange(4.0) + 10 * rank, device=device)
        dist.all_reduce(x)
        np.testing.assert_array_equal(
            x.cpu().numpy(), sum(np.arange(4.0) + 10 * r for r in range(world))
        )
        assert x.device.type == device
        y = tf.tensor([float(rank)], device=device)
        dist.all_reduce(y, dist.ReduceOp.AVG)
        assert y.item() == (world - 1) / 2
        z = tf.tensor([float(rank)], device=device)
        dist.all_reduce(z, dist.ReduceOp.MAX)
        assert z.item() == world - 1
        b = tf.tensor([float(rank + 5)] * 3, device=device)
        dist.broadcast(b, src=world - 1)
        np.testing.assert_array_equal(b.cpu().numpy(), [world + 4.0] * 3)
        outs = [tf.zeros(2, device=device) for _ in range(world)]
        dist.all_gather(outs, tf.tensor([rank, -rank], dtype="float32", device=device))
        for r, o in enumerate(outs):
            np.testing.assert_array_equal(o.cpu().numpy(), [r, -r])
        ins = [tf.tensor([float(rank * 100 + r)] * 2, device=device) for r in range(world)]
        out = tf.zeros(2, dtype="float64", device=device)
        dist.reduce_scatter(out, ins)
        np.testing.assert_array_equal(
            out.cpu().numpy(), [sum(q * 100 + rank for q in range(world))] * 2
        )
        work = dist.all_reduce(tf.ones(3, device=device), async_op=True)
        work.wait()
        dist.barrier()


def _batches(steps: int, batch: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (rng.integers(0, TINY.vocab_size, (batch, 8)), rng.integers(0, TINY.vocab_size, (batch, 8)))
        for _ in range(steps)
    ]


def _model(seed: int) -> GPT:
    tf.manual_seed(seed)
    return GPT(TINY).to(dtype="float64")


def _optimizer(model: GPT) -> AdamW:
    return AdamW(weight_decay_groups(model, 0.1), lr=1e-2)


def _single_process(batches: list, accumulate: int = 1) -> GPT:
    """The reference: one process, the whole batch (rank 0's initial weights)."""
    model = _model(0)
    opt = _optimizer(model)
    for x, y in batches:
        opt.zero_grad()
        model(x, y)[1].backward()
        opt.step()
    return model


def _shard(a: np.ndarray) -> np.ndarray:
    rank, world = dist.get_rank(), dist.get_world_size()
    n = len(a) // world
    return a[rank * n : (rank + 1) * n]


def _assert_same(model: GPT, reference: GPT, what: str) -> None:
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        np.testing.assert_allclose(
            p.cpu().numpy(), q.cpu().numpy(), rtol=1e-10, atol=1e-13, err_msg=f"{what}: {name}"
        )


def ddp() -> None:
    batches = _batches(3, 4)
    reference = _single_process(batches)
    # different seeds per rank: the broadcast from rank 0 must make them equal
    model = dist.DistributedDataParallel(_model(dist.get_rank()), bucket_cap_mb=0.001)
    assert len(model._buckets) > 3
    opt = _optimizer(model.module)
    for x, y in batches:
        opt.zero_grad()
        model(_shard(x), _shard(y))[1].backward()
        opt.step()
    _assert_same(model.module, reference, "DDP vs one process")


def ddp_overlap() -> None:
    """Each bucket's all-reduce starts in backward, when its last gradient arrives: the first
    bucket (the last parameters) long before backward ends, and every bucket before the end
    of backward's callback. Last step's gradients are not overwritten by this step's."""
    from tinyformer.distributed import ddp as ddp_module

    model = dist.DistributedDataParallel(_model(0), bucket_cap_mb=0.001)
    params = list(model.module.parameters())
    arrived, starts = [0], []
    for p in params:  # registered after DDP's hook: counts the gradients already accumulated
        p.register_post_accumulate_grad_hook(lambda p: arrived.__setitem__(0, arrived[0] + 1))
    start = ddp_module._Bucket.start

    def recording_start(bucket) -> None:
        starts.append((model._buckets.index(bucket), arrived[0], model._pending))
        start(bucket)

    ddp_module._Bucket.start = recording_start
    try:
        kept = None
        for x, y in _batches(2, 4):
            arrived[0], starts[:] = 0, []
            model(_shard(x), _shard(y))[1].backward()
            total = arrived[0]
            # a layer's weight arrives before its bias, one bucket each here
            assert starts[0][0] in (0, 1) and starts[0][1] < total // 4, (starts, total)
            assert all(during for *_, during in starts), starts
            assert sorted(b for b, *_ in starts) == list(range(len(model._buckets)))
            if kept is None:
                kept = [(p.grad, p.grad.copy()) for p in params]
            else:
                for grad, copy in kept:
                    np.testing.assert_array_equal(grad, copy)
            for p in params:
                p.grad = None
    finally:
        ddp_module._Bucket.start = start


def ddp_no_sync() -> None:
    """Two micro-batches per rank, the first under no_sync: the sum of the micro-batches'
    half-weighted gradients, averaged over ranks, equals the whole batch's gradient."""
    batches = _batches(2, 8)
    reference = _single_process(batches)
    model = dist.DistributedDataParallel(_model(0), bucket_cap_mb=0.001)
    opt = _optimizer(model.module)
    for x, y in batches:
        opt.zero_grad()
        xs, ys = np.split(_shard(x), 2), np.split(_shard(y), 2)
        with model.no_sync():
            (model(xs[0], ys[0])[1] * 0.5).backward()
        (model(xs[1], ys[1])[1] * 0.5).backward()
        opt.step()
    _assert_same(model.module, reference, "DDP with no_sync vs one process")


def ddp_unused() -> None:
    """A head used only by rank 0 gets the average (rank 1 adds zeros); a head no rank uses
    keeps grad None, as it would in one process."""
    tf.manual_seed(0)
    body, used, unused = tf.nn.Linear(3, 3), tf.nn.Linear(3, 1), tf.nn.Linear(3, 1)
    net = tf.nn.ModuleList([body, used, unused])

    class Net(tf.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x: tf.Tensor, use: bool) -> tf.Tensor:
            h = self.net[0](x)
            return (self.net[1](h).sum() if use else h.sum() * 0) + h.sum()

    model = dist.DistributedDataParallel(Net())
    x = tf.ones(2, 3)
    model(x, dist.get_rank() == 0).backward()
    assert unused.weight.grad is None
    local = tf.ones(2, 3)
    h = body(local)
    expected = tf.autograd.grad(used(h).sum(), [used.weight])[0] / dist.get_world_size()
    np.testing.assert_allclose(used.weight.grad, expected)


def zero() -> None:
    batches = _batches(3, 4)
    ddp_model = dist.DistributedDataParallel(_model(0))
    ddp_opt = _optimizer(ddp_model.module)
    plain = _model(0)
    zero_opt = dist.ZeroRedundancyOptimizer(weight_decay_groups(plain, 0.1), AdamW, lr=1e-2)
    for x, y in batches:
        for m, o in ((ddp_model, ddp_opt), (plain, zero_opt)):
            o.zero_grad()
            m(_shard(x), _shard(y))[1].backward()
            o.step()
    _assert_same(plain, ddp_model.module, "ZeRO-1 vs DDP")
    full = sum(2 * p.data.nbytes for p in plain.parameters())
    assert zero_opt.state_bytes() <= full / dist.get_world_size() + 2 * 8 * 4, (
        zero_opt.state_bytes()
    )


def _full_gradients(x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    gpt = _model(0)
    loss = gpt(x, y)[1]
    loss.backward()
    return loss.item(), {n: p.grad for n, p in gpt.named_parameters()}


def tensor_parallel() -> None:
    from tinyformer.distributed.tensor_parallel import TensorParallelGPT, _gpt_name, shard_of

    ((x, y),) = _batches(1, 4)
    full_loss, full = _full_gradients(x, y)
    model = TensorParallelGPT.from_gpt(_model(0))
    loss = model(x, y)[1]
    loss.backward()
    np.testing.assert_allclose(loss.item(), full_loss, rtol=1e-12)
    for name, p in model.named_parameters():
        want = shard_of(name, full[_gpt_name(name)])
        np.testing.assert_allclose(p.grad, want, rtol=1e-9, atol=1e-13, err_msg=name)
    # f and g as autograd Functions: gradcheck through a parallel MLP, x the same on all ranks
    block = model.h[0]
    for p in model.parameters():
        p.requires_grad_(False)
    x64 = tf.tensor(np.random.default_rng(1).standard_normal((2, 3, 8)), requires_grad=True)
    assert tf.gradcheck(lambda a: block.c_proj(block.gelu(block.c_fc(a))), [x64])


def pipeline() -> None:
    from tinyformer.distributed.pipeline import Stage

    ((x, y),) = _batches(1, 4)
    full_loss, full = _full_gradients(x, y)
    stage = Stage.from_gpt(_model(0))
    loss = stage.step(x, y, micro_batches=2)
    if stage.last:
        np.testing.assert_allclose(loss, full_loss, rtol=1e-12)
    for name, p in stage.named_parameters():
        want = full["wte.weight" if name == "lm_head.weight" else name]
        np.testing.assert_allclose(p.grad, want, rtol=1e-9, atol=1e-13, err_msg=name)
    assert [(phase, i) for phase, i, *_ in stage.timeline] == [
        ("forward", 0),
        ("forward", 1),
        ("backward", 1),
        ("backward", 0),
    ]


def ddp_no_sync_local() -> None:
    """Inside no_sync, backward runs no collective: each rank keeps its own shard's gradient
    (an extra all-reduce there is invisible to ddp_no_sync, averaging being linear)."""
    from tinyformer.distributed import process_group as pg

    ((x, y),) = _batches(1, 4)
    model = dist.DistributedDataParallel(_model(0), bucket_cap_mb=0.001)
    local = _model(0)
    local(_shard(x), _shard(y))[1].backward()
    calls = []
    all_reduce = pg.all_reduce

    def counting(*args, **kwargs):
        calls.append(args)
        return all_reduce(*args, **kwargs)

    pg.all_reduce = counting
    try:
        with model.no_sync():
            model(_shard(x), _shard(y))[1].backward()
    finally:
        pg.all_reduce = all_reduce
    assert calls == [], f"{len(calls)} all-reduces inside no_sync"
    for (name, p), (_, q) in zip(model.module.named_parameters(), local.named_parameters()):
        np.testing.assert_array_equal(p.grad, q.grad, err_msg=f"no_sync: {name}")


def ddp_one_parameter() -> None:
    """A model of one parameter (the last, and only, one with a hook) is averaged: rank r's
    loss sum((r + 1) w) has the gradient r + 1, and every rank ends with their mean."""

    class Scale(tf.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.nn.Parameter(np.ones(3))

        def forward(self, x: tf.Tensor) -> tf.Tensor:
            return (self.w * x).sum()

    model = dist.DistributedDataParallel(Scale())
    rank, world = dist.get_rank(), dist.get_world_size()
    model(tf.tensor(np.full(3, rank + 1.0))).backward()
    np.testing.assert_array_equal(model.module.w.grad, np.full(3, (world + 1) / 2))


def zero_uneven() -> None:
    """ZeRO-1 on 7 elements (no multiple of the ranks): every element is updated as one
    process's AdamW updates it on the averaged gradient, and the step bumps the parameters'
    version counters, so a graph that saved them refuses to backward."""
    from tinyformer import versions

    rng = np.random.default_rng(3)
    start = [rng.standard_normal((5,)), rng.standard_normal((2,))]
    local = [rng.standard_normal(a.shape) for a in start for _ in range(dist.get_world_size())]
    params = [tf.nn.Parameter(a.copy()) for a in start]
    reference = [tf.nn.Parameter(a.copy()) for a in start]
    opt = dist.ZeroRedundancyOptimizer(params, AdamW, lr=0.1, weight_decay=0.1)
    ref_opt = AdamW(reference, lr=0.1, weight_decay=0.1)
    world, rank = dist.get_world_size(), dist.get_rank()
    for step in range(2):
        for i, p in enumerate(params):  # rank r's gradient, and their mean for the reference
            grads = local[i * world : (i + 1) * world]
            p.grad = grads[rank] * (step + 1)
            reference[i].grad = np.mean(grads, axis=0) * (step + 1)
        opt.step()
        ref_opt.step()
        for p, q in zip(params, reference):
            np.testing.assert_allclose(p.data, q.data, rtol=1e-12, atol=1e-15)
    before = [versions.version(p.data) for p in params]
    saved = (params[0] * params[0]).sum()  # mul saves w
    opt.step()
    assert all(versions.version(p.data) > v for p, v in zip(params, before))
    try:
        saved.backward()
    except RuntimeError as err:
        assert "version" in str(err), err
    else:
        raise AssertionError("backward through weights ZeRO's step changed did not refuse")


def row_parallel_bias() -> None:
    """RowParallelLinear adds its bias once, after the partial sums: x W^T + b, as one
    process's Linear (a bias of zeros, as models start, would hide it added N times)."""
    from tinyformer.distributed.tensor_parallel import RowParallelLinear

    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    layer = RowParallelLinear(4, 5).to(dtype="float64")
    rank, world = dist.get_rank(), dist.get_world_size()
    layer.weight.data[...] = np.split(w, world, axis=1)[rank]
    layer.bias.data[...] = b
    y = layer(tf.tensor(np.split(x, world, axis=1)[rank]))
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, rtol=1e-12)


def timeout() -> None:
    if dist.get_rank() == 0:
        dist.all_reduce(tf.ones(3))  # rank 1 never joins


def killed() -> None:
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(tf.ones(3))


CASES = {
    f.__name__: f
    for f in (
        collectives,
        ddp,
        ddp_overlap,
        ddp_no_sync,
        ddp_unused,
        ddp_no_sync_local,
        ddp_one_parameter,
        zero,
        zero_uneven,
        row_parallel_bias,
        tensor_parallel,
        pipeline,
        timeout,
        killed,
    )
}

if __name__ == "__main__":
    dist.init_process_group("mpi")
    for name in sys.argv[1:]:
        CASES[name]()
        if name not in ("timeout", "killed"):
            dist.barrier()
        if dist.get_rank() == 0:
            print(f"{name} ok", flush=True)
