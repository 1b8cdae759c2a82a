"""Numba kernels for the AdamW update: one fused pass over parameter, gradient and both moments,
in place, instead of the reference's ~10 whole-array passes; `adamw.step_many` runs that pass on
each parameter of a group."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS
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


def _flat(param: np.ndarray, *others: np.ndarray) -> bool:
    # in place needs flat views of the caller's memory, all in the parameter's dtype
    return all(a.flags.c_contiguous and a.dtype == param.dtype for a in (param, *others))


def flat(param, grad, m, v, **hyper) -> bool:
    """the parameter, gradient and moments are C-contiguous, in the parameter's dtype"""
    return _flat(param, grad, m, v)


def all_flat(params, grads, ms, vs, **hyper) -> bool:
    """every parameter, gradient and moment is C-contiguous, in its parameter's dtype"""
    return all(_flat(*arrays) for arrays in zip(params, grads, ms, vs))


def _update(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step) -> None:
    t = param.dtype.type
    _step(
        # np.asarray: plain arrays (Numba reads p.data's subclass through a slower path)
        *(np.asarray(a).reshape(-1) for a in (param, grad, m, v)),
        t(1 - lr * weight_decay), t(beta1), t(beta2), t(lr / (1 - beta1**step)),
        t(1 / (1 - beta2**step)), t(eps),
    )  # fmt: skip


@kernel("adamw.step", backend="numba", dtypes=FLOATS, accepts=flat)
def adamw_step(param, grad, m, v, *, lr, beta1, beta2, eps, weight_decay, step) -> None:
    _update(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)


@kernel("adamw.step_many", backend="numba", dtypes=FLOATS, accepts=all_flat)
def adamw_step_many(
    params: Sequence[np.ndarray], grads: Sequence[np.ndarray], ms: Sequence[np.ndarray],
    vs: Sequence[np.ndarray], *, lr: float, beta1: float, beta2: float, eps: float,
    weight_decay: float, steps: Sequence[int],
) -> None:  # fmt: skip
    if not len(params) == len(grads) == len(ms) == len(vs) == len(steps):
        raise ValueError("adamw.step_many: params, grads, ms, vs and steps differ in length")
    for param, grad, m, v, step in zip(params, grads, ms, vs, steps):
        _update(param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step)
