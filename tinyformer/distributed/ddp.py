"""DistributedDataParallel: every rank holds the whole model and a shard of the batch; after
backward, every rank holds the gradient of the whole batch.

Why averaging is right: with a batch of B split into N shards of B/N, the loss of the batch is
the mean of the shards' mean losses, so its gradient is the mean of the shards' gradients. Each
rank computes its shard's gradient; an all-reduce averages them.

How (as PyTorch's DDP does it, in a page):
1. At the start, rank 0's parameters and buffers are broadcast, so every rank starts equal.
2. Parameters are put in buckets of about `bucket_cap_mb`, in reverse order of registration:
   backward produces the last layers' gradients first.
3. `forward` walks the graph of its output once, counting how many gradients each parameter
   will receive (a tied weight receives two).
4. A hook on each parameter counts the gradients as backward accumulates them, and each
   bucket how many it still waits for. When a bucket's last gradient arrives, its gradients
   are copied into one flat buffer and a non-blocking all-reduce starts, while backward goes
   on with the earlier layers (the first bucket is small, 1 MiB, so this starts early).
5. When backward ends, a callback starts the buckets still waiting (parameters this rank did
   not use), waits for every all-reduce, divides each buffer by the number of ranks, and makes
   every `.grad` a view of its bucket's buffer (no copy back). A flag per
   parameter travels in the same buffer, so a parameter no rank used keeps `.grad = None`, as
   it would in one process.

`no_sync()` skips steps 4-5, for gradient accumulation: the gradients of several micro-batches
add up locally and the next synchronised backward averages the sum.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

from tinyformer import backend, engine, grad_mode
from tinyformer.distributed import process_group as pg
from tinyformer.distributed.schedules import assign_buckets
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = ["DistributedDataParallel", "broadcast_module"]


def broadcast_module(module: Module, src: int = 0) -> None:
    """Make every rank's parameters and buffers equal to rank `src`'s."""
    for p in module.parameters():
        pg.broadcast(p.data, src)
    for _, buf in module.named_buffers():
        pg.broadcast(buf.data, src)


FIRST_BUCKET_MB = 1.0  # PyTorch's first bucket: the last layers' all-reduce starts early


class _Bucket:
    def __init__(self, params: list[Parameter]) -> None:
        self.params = params
        ends = list(itertools.accumulate(p.size for p in params))
        self.spans = list(zip([0, *ends[:-1]], ends))
        self.total = ends[-1]
        self.waiting = 0  # gradients still to arrive in this backward
        self.work: pg.Work | None = None
        self.flat: Any = None

    def start(self) -> None:
        """Copy the gradients (zeros where a parameter has none) and one used-flag per parameter
        into one fresh flat buffer, and start its all-reduce, in place."""
        first = self.params[0]
        xp = backend.get_array_module(first.data)
        self.flat = flat = xp.empty(self.total + len(self.params), first.dtype)
        for p, (a, b) in zip(self.params, self.spans):
            if p.grad is None:
                flat[a:b] = 0
            else:
                flat[a:b] = p.grad.reshape(-1)
        flat[self.total :] = xp.asarray([p.grad is not None for p in self.params], first.dtype)
        self.work = pg.all_reduce(flat, pg.ReduceOp.SUM, async_op=True)

    def finish(self, world_size: int) -> None:
        """Wait for the all-reduce; each used parameter's `.grad` becomes its average, a view of
        the flat buffer (a fresh buffer every step: last step's gradients stay as they were)."""
        self.work.wait()
        flat, total = self.flat, self.total
        used = backend.to_host(flat[total:])
        if world_size > 1:
            flat[:total] /= flat.dtype.type(world_size)
        for p, (a, b), flag in zip(self.params, self.spans, used):
            p.grad = None if flag == 0 else flat[a:b].reshape(p.shape)
        self.work = self.flat = None


class DistributedDataParallel(Module):
    """Wrap `module` so that backward averages its gradients over the ranks.

    Args:
        module: the model; every rank builds the same one (rank 0's weights are broadcast).
        bucket_cap_mb: gradients per all-reduce, in MiB (smaller: more overlap, more calls).
        broadcast_buffers: broadcast rank 0's buffers before every forward in training mode.
    """

    def __init__(
        self, module: Module, bucket_cap_mb: float = 25.0, broadcast_buffers: bool = True
    ) -> None:
        super().__init__()
        if not bucket_cap_mb > 0:
            raise ValueError(
                f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb}"
            )
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.world_size = pg.get_world_size()
        broadcast_module(module)
        params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = self._make_buckets(params, bucket_cap_mb * 2**20)
        self._bucket_of = {id(p): b for b in self._buckets for p in b.params}
        self._remaining: dict[int, int] = {}  # gradients each parameter still expects
        self._counted = False  # whether _remaining describes the graph being differentiated
        self._started: list[_Bucket] = []  # in flight, in the order they started
        self._sync = True
        self._pending = False
        for p in params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    @staticmethod
    def _make_buckets(params: list[Parameter], cap: float) -> list[_Bucket]:
        """One flat buffer per bucket needs one dtype and one device: bucket each kind apart.
        As PyTorch's, the first bucket (the last parameters) holds at most FIRST_BUCKET_MB, so
        that an all-reduce starts early in backward, while the earlier layers are computed."""
        buckets = []
        first_cap = min(cap, FIRST_BUCKET_MB * 2**20)
        for key in dict.fromkeys((p.dtype, type(p.data)) for p in params):  # in order, once
            kind = [p for p in params if (p.dtype, type(p.data)) == key]
            sizes = [p.data.nbytes for p in kind]
            first = assign_buckets(sizes, int(first_cap))[:1]
            rest = assign_buckets(sizes[: min(first[0])], int(cap)) if first else []
            for indices in [*first, *rest]:
                buckets.append(_Bucket([kind[i] for i in indices]))
        return buckets

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside, backward only accumulates gradients locally (for gradient accumulation)."""
        previous, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = previous

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers and self.training:
            for _, buf in self.module.named_buffers():
                pg.broadcast(buf.data, 0)
        out = self.module(*args, **kwargs)
        if self._sync and grad_mode.is_grad_enabled():
            self._remaining, self._counted = self._count_uses(out), True
            for bucket in self._buckets:
                bucket.waiting = sum(self._remaining.get(id(p), 0) for p in bucket.params)
        return out

    def _count_uses(self, out: Any) -> dict[int, int]:
        """How many gradients each parameter will receive in a backward from `out`."""
        roots = [t.grad_fn for t in _tensors(out) if t.grad_fn is not None]
        counts: dict[int, int] = {}
        for node in engine._toposort(roots):
            for parent, needed in zip(node.parents, node.needs_input_grad):
                if needed and id(parent) in self._bucket_of:
                    counts[id(parent)] = counts.get(id(parent), 0) + 1
        return counts

    def _on_grad(self, p: Parameter) -> None:
        if not self._sync:
            return
        if not self._pending:
            self._pending = True
            engine.queue_callback(self._finish)
        for b in self._started:  # let MPI move the buckets already started
            b.work.is_completed()
        key = id(p)
        if not self._counted or self._remaining.get(key, 0) == 0:
            return  # a gradient the forward did not count: _finish starts its bucket
        self._remaining[key] -= 1
        bucket = self._bucket_of[key]
        bucket.waiting -= 1
        if bucket.waiting == 0 and bucket.work is None:  # its last gradient: reduce it now
            bucket.start()
            self._started.append(bucket)

    def _finish(self) -> None:
        self._pending = False
        for bucket in self._buckets:
            if bucket.work is None:
                bucket.start()
        for bucket in self._buckets:
            bucket.finish(self.world_size)
        self._remaining, self._counted, self._started = {}, False, []


def _tensors(out: Any) -> list[Tensor]:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _tensors(o)]
    return []
