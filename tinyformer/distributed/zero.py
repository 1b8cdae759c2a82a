"""ZeRO stage 1 (Rajbhandari et al., 2020): shard the optimizer's state over the ranks.

AdamW keeps two moments per parameter element: with N ranks each holding everything, the
moments cost 2x the model's bytes on every rank. ZeRO-1 gives each rank one N-th of them:

1. the parameters (per group and dtype) are laid end to end in one flat vector, padded to a
   multiple of N, and rank r owns the r-th contiguous slice of it;
2. after backward, a reduce-scatter sums the local gradients and hands each rank the averaged
   gradient of its own slice only;
3. each rank runs the wrapped optimizer (AdamW) on its slice: state exists for that slice alone;
4. an all-gather puts the updated slices together, and every rank copies them back into its
   parameters.

Gradients arrive unaveraged: use it on the plain model (after `broadcast_module(model)`), not
inside DistributedDataParallel, which would have averaged them already.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinyformer import backend, versions
from tinyformer.distributed import process_group as pg
from tinyformer.nn.module import Parameter

__all__ = ["ZeroRedundancyOptimizer"]


class _Shard:
    """One group's parameters of one dtype as a flat vector, and this rank's slice of it."""

    def __init__(self, params: list[Parameter], rank: int, world: int) -> None:
        self.params = params
        total = sum(p.size for p in params)
        self.per_rank = -(-total // world)  # ceil: pad so every rank owns an equal slice
        xp = backend.get_array_module(params[0].data)
        self.flat = xp.zeros(self.per_rank * world, params[0].dtype)
        self._gather()
        lo = rank * self.per_rank
        # The optimizer updates this Parameter in place: it is a view of the flat vector.
        self.param = Parameter(self.flat[lo : lo + self.per_rank])

    def _gather(self) -> None:
        offset = 0
        for p in self.params:
            self.flat[offset : offset + p.size] = p.data.reshape(-1)
            offset += p.size

    def reduce_scatter_grads(self, world: int) -> None:
        xp = backend.get_array_module(self.flat)
        grads = xp.zeros_like(self.flat)
        offset = 0
        for p in self.params:
            if p.grad is not None:
                grads[offset : offset + p.size] = p.grad.reshape(-1)
            offset += p.size
        mine = xp.zeros(self.per_rank, self.flat.dtype)
        pg.reduce_scatter(mine, list(grads.reshape(world, self.per_rank)), pg.ReduceOp.AVG)
        self.param.grad = mine

    def all_gather_params(self, world: int) -> None:
        parts = list(self.flat.reshape(world, self.per_rank))
        pg.all_gather(parts, self.param.data.copy())
        offset = 0
        for p in self.params:
            p.data[...] = self.flat[offset : offset + p.size].reshape(p.shape)
            versions.bump(p.data, "ZeroRedundancyOptimizer.step()")
            offset += p.size

    def state_bytes(self, optimizer: Any) -> int:
        state = optimizer.state.get(id(self.param), {})
        return sum(v.nbytes for v in state.values() if hasattr(v, "nbytes"))


class ZeroRedundancyOptimizer:
    """Wrap an optimizer class so that each rank keeps the state of 1/N of the parameters.

    Args:
        params: parameters, or parameter groups (dicts with "params" and hyperparameters).
        optimizer_class: e.g. `tinyformer.optim.AdamW`.
        **defaults: the optimizer's hyperparameters (lr, weight_decay, ...).
    """

    def __init__(self, params: Iterable[Any], optimizer_class: type, **defaults: Any) -> None:
        self.rank, self.world_size = pg.get_rank(), pg.get_world_size()
        groups = list(params)
        if not groups:
            raise ValueError("ZeroRedundancyOptimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self._shards: list[_Shard] = []
        inner_groups = []
        for group in groups:
            by_dtype: dict[Any, list[Parameter]] = {}
            for p in group["params"]:
                by_dtype.setdefault((p.dtype, type(p.data)), []).append(p)
            for ps in by_dtype.values():
                shard = _Shard(ps, self.rank, self.world_size)
                self._shards.append(shard)
                inner_groups.append({**group, "params": [shard.param]})
        self.optimizer = optimizer_class(inner_groups, **defaults)
        self.param_groups = self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        for shard in self._shards:
            for p in shard.params:
                p.grad = None
        self.optimizer.zero_grad(set_to_none)

    def step(self) -> None:
        for shard in self._shards:
            shard.reduce_scatter_grads(self.world_size)
        self.optimizer.step()
        for shard in self._shards:
            shard.all_gather_params(self.world_size)

    def state_bytes(self) -> int:
        """Bytes of optimizer state on this rank (about 1/N of the unsharded optimizer's)."""
        return sum(shard.state_bytes(self.optimizer) for shard in self._shards)
