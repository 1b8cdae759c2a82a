"""adamw_step: one AdamW update of a parameter, in place (Loshchilov & Hutter, "Decoupled Weight
Decay Regularization").

Not differentiable, so no Function: it is the primitive the optimizer calls for every parameter,
kept here so that its math, reference and fast kernel follow the same rules as the ops.

With gradient g, moments m and v, step t >= 1 (counting from 1):
    p <- p * (1 - lr * weight_decay)          decoupled weight decay, applied to p itself
    m <- beta1 m + (1 - beta1) g              first moment (momentum)
    v <- beta2 v + (1 - beta2) g^2            second moment
    p <- p - lr * m_hat / (sqrt(v_hat) + eps)
         with m_hat = m / (1 - beta1^t) and v_hat = v / (1 - beta2^t)
The bias corrections undo the moments' start at zero. This is PyTorch's AdamW, step for step.
"""

from __future__ import annotations

import numpy as np

from tinyformer import backend, registry


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
