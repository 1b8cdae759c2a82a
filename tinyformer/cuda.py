"""`tinyformer.cuda`, as `torch.cuda`: whether a GPU can be used, and how many there are, so
that PyTorch code choosing its device (`"cuda" if torch.cuda.is_available() else "cpu"`) runs
unchanged. CuPy is imported on the first call, never at import.

`tinyformer.cuda.graphs` is `tinyformer.cuda_graphs` (capture a step, replay it: as
`torch.cuda.graphs`), loaded on first use."""

from __future__ import annotations

import sys

from tinyformer import backend

__all__ = ["device_count", "is_available", "manual_seed", "manual_seed_all"]


def __getattr__(name: str):
    if name == "graphs":  # a module attribute on first use: nothing imported at import
        from tinyformer import cuda_graphs

        return cuda_graphs
    raise AttributeError(f"module 'tinyformer.cuda' has no attribute {name!r}")


def is_available() -> bool:
    """True when CuPy is installed and sees a working NVIDIA GPU."""
    return backend.cuda_available()


def device_count() -> int:
    """The number of GPUs CuPy sees (0 without CuPy or a GPU)."""
    if not backend.cuda_available():
        return 0
    return int(sys.modules["cupy"].cuda.runtime.getDeviceCount())


def manual_seed(seed: int) -> None:
    """Nothing to do: tinyformer draws random numbers on the host, from the generator that
    `tf.manual_seed` seeds, and moves them to the GPU (a seed gives the same numbers on every
    device). Kept so that PyTorch code seeding its GPU runs unchanged."""


def manual_seed_all(seed: int) -> None:
    """Nothing to do, as `manual_seed`."""
