"""adamw_step: one AdamW update of a parameter, in place (Loshchilov & Hutter, "Decoupled Weight
Decay Regularization").

Not differentiable, so no op: a primitive of the optimizer, with a NumPy reference here and fast
kernels in `kernels/<backend>/adamw.py` under the same registry rules as the ops' primitives.

With gradient g, moments m and v, step t >= 1 (counting from 1):
    p <- p * (1 - lr * weight_decay)          decoupled weight decay, applied to p itself
    m <- beta1 m + (1 - beta1) g              first moment (momentum)
    v <- beta2 v + (1 - beta2) g^2            second moment
    p <- p - lr * m_hat / (sqrt(v_hat) + eps)
         with m_hat = m / (1 - beta1^t) and v_hat = v / (1 - beta2^t)
The bias corrections undo the moments' start at zero. This is PyTorch's AdamW, step for step.

`adamw_step_many` is the same update for a list of parameters, each with its own step count:
the optimizer calls it once per parameter group and dtype, so that the registry chooses once per
group (not once per parameter) and a device kernel updates the whole group in one launch. Its
reference runs `adamw_step` on each parameter in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import backend, registry

__all__ = ["adamw_step", "adamw_step_many"]


@registry.reference("adamw.step")
def adamw_step(
    param: np.ndarray,
    grad: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
) -> None:
    """Update `param`, `m` and `v` in place."""
    xp = backend.get_array_module(param)
    param *= 1 - lr * weight_decay
    m *= beta1
    m += (1 - beta1) * grad
    v *= beta2
    v += (1 - beta2) * grad * grad
    step_size = lr / (1 - beta1**step)
    denom = xp.sqrt(v / (1 - beta2**step)) + eps
    param -= step_size * m / denom


@registry.reference("adamw.step_many")
def adamw_step_many(
    params: Sequence[np.ndarray],
    grads: Sequence[np.ndarray],
    ms: Sequence[np.ndarray],
    vs: Sequence[np.ndarray],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    steps: Sequence[int],
) -> None:
    """`adamw_step` on each parameter in place; `steps` holds each one's own step count."""
    if not len(params) == len(grads) == len(ms) == len(vs) == len(steps):
        raise ValueError("adamw.step_many: params, grads, ms, vs and steps differ in length")
    for param, grad, m, v, step in zip(params, grads, ms, vs, steps):
        adamw_step(
            param, grad, m, v, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
            weight_decay=weight_decay, step=step,
        )  # fmt: skip
