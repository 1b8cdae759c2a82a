"""`tinyformer.nn.parallel.DistributedDataParallel`, where PyTorch users look for it; the code
is in `tinyformer.distributed.ddp`."""

from tinyformer.distributed.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
