"""DistributedSampler: each rank's share of a dataset's indices, as PyTorch draws them.

The indices (shuffled with `seed + epoch`, the same on every rank) are padded by repeating the
first ones until they divide evenly, and rank r takes every N-th starting at r: the ranks see
disjoint shards of equal size, and together every example (a few twice, where padded).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tinyformer.distributed import process_group as pg

__all__ = ["DistributedSampler"]


class DistributedSampler:
    def __init__(
        self,
        dataset_size: int,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.num_replicas = pg.get_world_size() if num_replicas is None else num_replicas
        self.rank = pg.get_rank() if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(
                f"DistributedSampler: rank must be in [0, {self.num_replicas}), got {self.rank}"
            )
        if dataset_size < 1:
            raise ValueError(f"DistributedSampler: dataset_size must be >= 1, got {dataset_size}")
        self.dataset_size, self.shuffle, self.seed = int(dataset_size), shuffle, seed
        self.drop_last, self.epoch = drop_last, 0
        n = self.dataset_size
        self.num_samples = n // self.num_replicas if drop_last else -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for `epoch` (call it before each epoch, as in PyTorch)."""
        self.epoch = epoch

    def indices(self) -> np.ndarray:
        n = self.dataset_size
        if self.shuffle:
            order = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            order = np.arange(n)
        if self.total_size > n:
            order = np.resize(order, self.total_size)  # repeats the first indices
        return order[: self.total_size][self.rank :: self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples
