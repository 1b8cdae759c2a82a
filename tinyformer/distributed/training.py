"""Data parallel training for every `tinyformer train ...` command, under `mpiexec -n N`.

Every rank draws the same global batch from the same generator and trains on its own N-th of
it (the batch size must divide by N), with DistributedDataParallel averaging the gradients. So
N ranks take exactly the steps one process would with the whole batch, and the checkpoint
(written by rank 0 alone: the model, the optimizer and a generator that every rank shares)
resumes with any number of ranks. Only rank 0 prints, plots and writes.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from typing import Any

from tinyformer.distributed import process_group as pg
from tinyformer.distributed.ddp import DistributedDataParallel
from tinyformer.tensor import Tensor

__all__ = ["DataParallel", "as_rank", "data_parallel", "init_from_launcher", "is_rank_zero"]


def init_from_launcher() -> None:
    """Join the process group when an MPI launcher started several ranks of this command:
    each rank gets an equal share of the cores for its threads, and only rank 0 prints."""
    if pg.is_initialized() or not pg.launched_by_mpi():
        return
    pg.init_process_group("mpi")
    world = pg.get_world_size()
    if world == 1:
        return
    from tinyformer.train import loop, rundir  # (the commands' machinery: only when launched)

    loop.RANKS.append(as_rank)  # every run the commands start is this rank's part of it
    rundir.RANKS = _ProcessGroupRanks()  # rank 0 claims each run's folder, the others wait
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # BLAS: the ranks already fill the cores
    try:
        import numba

        numba.set_num_threads(
            max(1, min(numba.config.NUMBA_NUM_THREADS, (os.cpu_count() or 1) // world))
        )
    except ImportError:
        pass
    if pg.get_rank() != 0:
        from tinyformer.fileio import enable_writes

        enable_writes(False)  # rank 0 writes the checkpoint, logs, plots and results
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the life of the process)


def is_rank_zero() -> bool:
    return not pg.is_initialized() or pg.get_rank() == 0


class _ProcessGroupRanks:
    """The process group, as `train.rundir` sees it (its `Ranks`)."""

    def is_rank_zero(self) -> bool:
        return is_rank_zero()

    def barrier(self) -> None:
        pg.barrier()


def _shard(batch: Any, rank: int, world: int) -> Any:
    if isinstance(batch, (tuple, list)):
        return type(batch)(_shard(b, rank, world) for b in batch)
    if isinstance(batch, dict):
        return {k: _shard(v, rank, world) for k, v in batch.items()}
    if isinstance(batch, Tensor) or hasattr(batch, "shape"):
        n = batch.shape[0]
        if n % world:
            raise ValueError(
                f"data parallel training: the batch of {n} does not divide over {world} ranks; "
                f"choose a --batch-size that is a multiple of {world}"
            )
        return batch[rank * (n // world) : (rank + 1) * (n // world)]
    return batch


class DataParallel:
    """What the training loop does differently on several ranks."""

    def __init__(self, model: Any) -> None:
        self.rank, self.world = pg.get_rank(), pg.get_world_size()
        self.ddp = DistributedDataParallel(model)

    def loss(self, run: Any, inputs: Any, targets: Any) -> Any:
        """This rank's shard of the batch through the model: its mean loss."""
        x, y = _shard(inputs, self.rank, self.world), _shard(targets, self.rank, self.world)
        return self.ddp(x, y)[1] if run.loss is None else run.loss(x, y)

    def mean(self, loss: Any) -> Any:
        """The whole batch's loss (the mean over ranks of equal shards), for the log."""
        value = loss.data.copy()
        pg.all_reduce(value, pg.ReduceOp.AVG)
        return Tensor(value)


def as_rank(run: Any) -> None:
    """Make the `tinyformer.train.loop.Run` `run` this rank's part of a data parallel run: its
    shard of every batch through DistributedDataParallel, the loss in the log averaged over the
    ranks, and rank 0 alone saving and showing progress."""
    parallel = DataParallel(run.model)
    own = copy.copy(run)  # the command's own loss (None: the model's), before it is replaced
    run.loss = functools.partial(parallel.loss, own)
    run.log_loss = parallel.mean
    run.writer = parallel.rank == 0


def data_parallel(model: Any) -> DataParallel | None:
    """A DataParallel when several ranks train, else None (one process, nothing changes)."""
    if not pg.is_initialized() or pg.get_world_size() == 1:
        return None
    return DataParallel(model)
