"""RMSprop (Hinton's lecture 6e), with PyTorch's centered, momentum and L2 weight decay options,
step for step as `torch.optim.RMSprop`:

g <- grad + weight_decay * p
v <- alpha * v + (1 - alpha) * g^2                      (square_avg, from 0)
m <- alpha * m + (1 - alpha) * g                        (grad_avg, from 0; centered only)
a <- sqrt(v - m^2) + eps if centered else sqrt(v) + eps
b <- momentum * b + g / a                               (momentum_buffer, from 0; momentum > 0)
p <- p - lr * b if momentum > 0 else p - lr * g / a

eps is added outside the square root, as in PyTorch (Keras and TensorFlow add it inside).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tinyformer import backend, versions
from tinyformer.optim.optimizer import Optimizer

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ) -> None:
        if not all(0 <= v < math.inf for v in (lr, eps, weight_decay, momentum)):  # NaN fails
            raise ValueError(
                f"RMSprop: lr, eps, weight_decay and momentum must be finite and >= 0, got "
                f"{lr}, {eps}, {weight_decay}, {momentum}"
            )
        if not 0 <= alpha <= 1:  # above 1, (1 - alpha) g^2 is negative and v can go below 0
            raise ValueError(f"RMSprop: alpha must be in [0, 1], got {alpha}")
        defaults = dict(
            lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
            centered=bool(centered),
        )  # fmt: skip
        super().__init__(params, defaults)

    def step(self) -> None:
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            wd, mu = group["weight_decay"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:  # as in PyTorch: no state, no step count
                    continue
                xp = backend.get_array_module(p.data)
                state = self._state(p, xp, mu > 0, group["centered"])
                state["step"] += 1
                # never written in place: p.grad stays as backward left it
                grad = p.grad.astype(p.dtype, copy=False)
                if wd:
                    grad = grad + wd * p.data
                square_avg = state["square_avg"]
                square_avg *= alpha
                square_avg += (1 - alpha) * grad * grad
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg += (1 - alpha) * (grad - grad_avg)  # lerp towards g
                    avg = xp.sqrt(square_avg - grad_avg * grad_avg) + eps
                else:
                    avg = xp.sqrt(square_avg) + eps
                if mu > 0:
                    buf = state["momentum_buffer"]
                    buf *= mu
                    buf += grad / avg
                    p.data -= lr * buf
                else:
                    p.data -= lr * (grad / avg)
                versions.bump(p.data, "RMSprop.step()")  # a graph that saved p cannot backward now

    def _state(self, p: Any, xp: Any, momentum: bool, centered: bool) -> dict[str, Any]:
        """p's state, made on its first step and kept on p's device (a module moved after the
        optimizer was built takes its state along at the next step)."""
        state = self.state.setdefault(id(p), {})
        if not state:
            state.update(step=0, square_avg=xp.zeros_like(p.data))
        # made when first needed, so that turning momentum or centering on in a group works
        if momentum and "momentum_buffer" not in state:
            state["momentum_buffer"] = xp.zeros_like(p.data)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = xp.zeros_like(p.data)
        where = backend.device_of(p.data)
        for key in ("square_avg", "momentum_buffer", "grad_avg"):
            if key in state and backend.device_of(state[key]) != where:
                state[key] = backend.to_device(state[key], where)
        return state
