"""Language-model batches: a token array split into train and validation parts, and random
windows drawn from either with a seeded generator (whose state a checkpoint can save)."""

from __future__ import annotations

import numpy as np

__all__ = ["LMData"]


class LMData:
    """Tokens split at `1 - val_fraction` into train / val; batches of random windows.

    A batch is x (B, T) and y (B, T) with y[b, t] = x[b, t + 1]: the model predicts each next
    token from the ones before it.
    """

    def __init__(self, tokens: np.ndarray, block_size: int, val_fraction: float = 0.1) -> None:
        tokens = np.asarray(tokens, dtype=np.int64)
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"LMData: val_fraction must be in (0, 1), got {val_fraction}")
        cut = int(len(tokens) * (1 - val_fraction))
        self.train, self.val = tokens[:cut], tokens[cut:]
        self.block_size = block_size
        for name, part in (("train", self.train), ("val", self.val)):
            if len(part) < block_size + 1:
                raise ValueError(
                    f"LMData: the {name} split has {len(part)} tokens, fewer than block_size + 1 "
                    f"= {block_size + 1}; use a longer text or a smaller block size"
                )

    def get_batch(
        self, split: str, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Random windows from `split` ("train" or "val") -> x, y of shape (batch_size, T)."""
        if split not in ("train", "val"):
            raise ValueError(f"LMData.get_batch: split must be 'train' or 'val', got {split!r}")
        data, t = (self.train if split == "train" else self.val), self.block_size
        starts = rng.integers(0, len(data) - t, size=batch_size)
        windows = starts[:, None] + np.arange(t + 1)  # (B, T + 1) positions
        chunk = data[windows]
        return chunk[:, :-1], chunk[:, 1:]
