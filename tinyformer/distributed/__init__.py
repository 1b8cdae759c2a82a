"""Training over several processes, with PyTorch's names: `init_process_group`, collectives,
`DistributedDataParallel`, ZeRO-1, and a `DistributedSampler`. MPI (mpi4py) moves host arrays;
NCCL (through CuPy) moves GPU arrays. Start the ranks with `mpiexec -n 2 python script.py` or
`tinyformer launch -n 2 -- train gpt`."""

from tinyformer.distributed.ddp import DistributedDataParallel, broadcast_module
from tinyformer.distributed.process_group import (
    DistributedError,
    ReduceOp,
    Work,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    launched_by_mpi,
    recv,
    reduce_scatter,
    send,
)
from tinyformer.distributed.sampler import DistributedSampler
from tinyformer.distributed.zero import ZeroRedundancyOptimizer

__all__ = [
    "DistributedDataParallel", "DistributedError", "DistributedSampler", "ReduceOp", "Work",
    "ZeroRedundancyOptimizer", "all_gather", "all_reduce", "barrier", "broadcast",
    "broadcast_module", "destroy_process_group", "get_backend", "get_rank", "get_world_size",
    "init_process_group", "is_initialized", "launched_by_mpi", "recv", "reduce_scatter", "send",
]  # fmt: skip
