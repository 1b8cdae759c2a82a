"""Numba kernel for the AdamW update: one fused pass over parameter, gradient and both moments,
in place, instead of the reference's ~10 whole-array passes."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS
from tinyformer.ops.adamw import adamw_step as reference
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _step(p, g, m, v, decay, beta1, beta2, step_size, inv_bc2, eps):
    one = p.dtype.type(1)
    for i in prange(p.size):
        gi = g[i]
        mi = beta1 * m[i] + (one - beta1) * gi
        vi = beta2 * v[i] + (one - beta2) * gi * gi
        m[i], v[i] = mi, vi
        p[i] = p[i] * decay - step_size * mi / (np.sqrt(vi * inv_bc2) + eps)


@kernel("adamw.step", backend="numba", dtypes=FLOATS)
def adamw_step(param, grad, m, v, *, lr, beta1, beta2, eps, weight_decay, step) -> None:
    arrays = (param, grad, m, v)
    if not all(a.flags.c_contiguous and a.dtype == param.dtype for a in arrays):
        # In place needs flat views of the caller's memory; odd layouts take the reference.
        return reference(
            param, grad, m, v, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
            weight_decay=weight_decay, step=step,
        )  # fmt: skip
    t = param.dtype.type
    _step(
        *(a.reshape(-1) for a in arrays),
        t(1 - lr * weight_decay), t(beta1), t(beta2), t(lr / (1 - beta1**step)),
        t(1 / (1 - beta2**step)), t(eps),
    )  # fmt: skip
    return None
