"""`tinyformer.nn.parallel.DistributedDataParallel`, where PyTorch users look for it; the code
is in `tinyformer.distributed.ddp`, loaded on first use: nn sits below the distributed wing,
which builds on nn, so this alias must not import it when nn is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinyformer.distributed.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]


def __getattr__(name: str) -> Any:
    if name == "DistributedDataParallel":
        from tinyformer.distributed.ddp import DistributedDataParallel

        return DistributedDataParallel
    raise AttributeError(f"module 'tinyformer.nn.parallel' has no attribute {name!r}")
