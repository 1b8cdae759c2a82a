"""What an op's reference and its fast kernels must compute identically, in one public place.

A kernel file imports from here, never an op file's private names: dropout's counter-based hash
(the same mask for a seed on every backend), the output size of a sliding window, and the
window sizes that average pooling divides by.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["GOLDEN", "out_size", "pool_divisors", "splitmix64_unit"]

# splitmix64's constants: the counter step (2^64 / golden ratio) and the two mixing multipliers
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def splitmix64_unit(z: np.ndarray | np.uint64) -> np.ndarray | float:
    """splitmix64's mixing of the counters z (uint64: an array in the reference, one value in a
    kernel, which compiles this same function), the top 53 bits as floats in [0, 1).

    Unsigned 64-bit arithmetic wraps around, which is what the hash relies on.
    """
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)) * (1.0 / (1 << 53))


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """floor((size + 2 padding - dilation (kernel - 1) - 1) / stride) + 1, as in PyTorch."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _inside(size: int, kernel: int, stride: int, padding: int, xp: ModuleType) -> Any:
    """(out,) how many of each window's taps along one axis fall inside the image."""
    starts = xp.arange(out_size(size, kernel, stride, padding, 1)) * stride - padding
    return xp.minimum(starts + kernel, size) - xp.maximum(starts, 0)


def pool_divisors(
    h: int,
    w: int,
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    include_pad: bool,
    dtype: Any,
    xp: ModuleType = np,
) -> Any:
    """(Ho, Wo) the window sizes average pooling divides by, made by the array module `xp`:
    kh kw everywhere with `include_pad`, else the taps inside the image (a window's count is
    the product of its row and column counts)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    if include_pad:
        ho, wo = out_size(h, kh, sh, ph, 1), out_size(w, kw, sw, pw, 1)
        return xp.full((ho, wo), kh * kw, dtype)
    rows, cols = _inside(h, kh, sh, ph, xp), _inside(w, kw, sw, pw, xp)
    return (rows[:, None] * cols[None, :]).astype(dtype)
