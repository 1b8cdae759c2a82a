"""Sliding-window plumbing shared by the convolution and pooling ops (no math of its own).

`windows(x_pad, ...)` views a padded image batch (N, C, Hp, Wp) as (N, C, kh, kw, Ho, Wo): entry
[n, c, i, j, y, x] is the pixel under kernel tap (i, j) when the window's corner is at output
position (y, x), i.e. x_pad[n, c, y*sh + i*dh, x*sw + j*dw]. It is a strided view (no copy), so
"im2col" is a reshape of it. `scatter_windows` is the adjoint, "col2im": it adds every window
entry back onto the pixel it came from, one kernel tap at a time (kh*kw strided additions).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import backend
from tinyformer.autograd import OpError


def pair(op: str, name: str, value: int | Sequence[int], minimum: int = 0) -> tuple[int, int]:
    """An int or a pair of ints as (h, w), checked against `minimum`."""
    out = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(out) != 2 or not all(isinstance(v, (int, np.integer)) for v in out):
        raise OpError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    if min(out) < minimum:
        raise OpError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return int(out[0]), int(out[1])


def pad2d(x: np.ndarray, ph: int, pw: int, value: float = 0.0) -> np.ndarray:
    if ph == 0 and pw == 0:
        return x
    xp = backend.get_array_module(x)
    return xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def windows(x_pad, kh, kw, ho, wo, sh, sw, dh, dw) -> np.ndarray:
    """(N, C, Hp, Wp) -> strided view (N, C, kh, kw, Ho, Wo), read-only on the host."""
    n, c = x_pad.shape[:2]
    s_n, s_c, s_h, s_w = x_pad.strides
    shape = (n, c, kh, kw, ho, wo)
    strides = (s_n, s_c, dh * s_h, dw * s_w, sh * s_h, sw * s_w)
    if isinstance(x_pad, np.ndarray):  # read-only: a write through the view would corrupt x
        return np.lib.stride_tricks.as_strided(x_pad, shape, strides, writeable=False)
    # CuPy's as_strided has no `writeable` (its views are always writable): only read this one.
    xp = backend.get_array_module(x_pad)
    return xp.lib.stride_tricks.as_strided(x_pad, shape, strides)


def scatter_windows(cols, hp, wp, sh, sw, dh, dw) -> np.ndarray:
    """Adjoint of `windows`: cols (N, C, kh, kw, Ho, Wo) summed onto a zero (N, C, Hp, Wp)."""
    xp = backend.get_array_module(cols)
    n, c, kh, kw, ho, wo = cols.shape
    out = xp.zeros((n, c, hp, wp), cols.dtype)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
            columns = slice(j * dw, j * dw + sw * (wo - 1) + 1, sw)
            out[:, :, rows, columns] += cols[:, :, i, j]
    return out


def check_image(op: str, x: np.ndarray) -> None:
    if x.ndim != 4:
        raise OpError(f"{op}: input must be (N, C, H, W), got shape {x.shape}")
