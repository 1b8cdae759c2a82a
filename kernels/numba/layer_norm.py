"""Numba kernels for layer_norm over rows of (rows, D).

The backward's weight and bias gradients are sums over all rows; each thread sums its own block
of rows into its own slot of a (threads, D) buffer, and the slots are added at the end, so no two
threads ever write the same memory and the result does not depend on scheduling.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, pool_size
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, w, b, eps, y, mu, rstd):
    n, d = x.shape
    inv_d = x.dtype.type(1) / x.dtype.type(d)  # not `/ d`: an int makes it float64
    for i in prange(n):
        xi, yi = x[i], y[i]  # 1-D views: 2-D indexing in the inner loops blocks vectorisation
        m = xi.sum() * inv_d
        sq = x.dtype.type(0)
        for j in range(d):
            c = xi[j] - m
            sq += c * c
        r = x.dtype.type(1) / np.sqrt(sq * inv_d + eps)
        for j in range(d):
            yi[j] = (xi[j] - m) * r * w[j] + b[j]
        mu[i] = m
        rstd[i] = r


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, x, w, mu, rstd, gx, gw_parts, gb_parts):
    n, d = x.shape
    chunks = gw_parts.shape[0]
    inv_d = x.dtype.type(1) / x.dtype.type(d)  # not `/ d`: an int makes it float64
    for c in prange(chunks):
        gw_c, gb_c = gw_parts[c], gb_parts[c]
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            xi, gyi, gxi = x[i], gy[i], gx[i]  # 1-D views, for vectorisation
            m, r = mu[i], rstd[i]
            mean_g = x.dtype.type(0)
            mean_gxhat = x.dtype.type(0)
            for j in range(d):
                xhat = (xi[j] - m) * r
                g = gyi[j] * w[j]
                mean_g += g
                mean_gxhat += g * xhat
                gw_c[j] += gyi[j] * xhat
                gb_c[j] += gyi[j]
            mean_g *= inv_d
            mean_gxhat *= inv_d
            for j in range(d):
                xhat = (xi[j] - m) * r
                gxi[j] = r * (gyi[j] * w[j] - mean_g - xhat * mean_gxhat)


@kernel("layer_norm.forward", backend="numba", dtypes=FLOATS)
def layer_norm_forward(x, w, b, eps):
    x = np.ascontiguousarray(x)
    n, d = x.shape
    w = np.ones(d, x.dtype) if w is None else np.ascontiguousarray(w, x.dtype)
    b = np.zeros(d, x.dtype) if b is None else np.ascontiguousarray(b, x.dtype)
    y, mu, rstd = np.empty_like(x), np.empty(n, x.dtype), np.empty(n, x.dtype)
    _forward(x, w, b, x.dtype.type(eps), y, mu, rstd)
    return y, mu, rstd


@kernel("layer_norm.backward", backend="numba", dtypes=FLOATS)
def layer_norm_backward(gy, x, w, mu, rstd):
    x = np.ascontiguousarray(x)
    d = x.shape[1]
    w = np.ones(d, x.dtype) if w is None else np.ascontiguousarray(w, x.dtype)
    chunks = pool_size()
    gx = np.empty_like(x)
    gw_parts, gb_parts = np.zeros((chunks, d), x.dtype), np.zeros((chunks, d), x.dtype)
    _backward(np.ascontiguousarray(gy), x, w, mu, rstd, gx, gw_parts, gb_parts)
    return gx, gw_parts.sum(axis=0), gb_parts.sum(axis=0)
