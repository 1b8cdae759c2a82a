"""SGD with momentum, Nesterov momentum and (L2) weight decay, step for step as PyTorch's.

g <- grad + weight_decay * p
b <- g on the first step, then momentum * b + (1 - dampening) * g
g <- g + momentum * b (Nesterov) or b (heavy ball)
p <- p - lr * g
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tinyformer import versions
from tinyformer.optim.optimizer import Optimizer

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ) -> None:
        if not all(0 <= v < math.inf for v in (lr, momentum, dampening, weight_decay)):
            raise ValueError(
                f"SGD: lr, momentum, dampening and weight_decay must be finite and >= 0, got "
                f"{lr}, {momentum}, {dampening}, "
                f"{weight_decay}"
            )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening = 0")
        defaults = dict(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
            nesterov=nesterov,
        )  # fmt: skip
        super().__init__(params, defaults)

    def step(self) -> None:
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad + wd * p.data if wd else p.grad
                if mu:
                    state = self.state.setdefault(id(p), {})
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = g.copy()
                    else:
                        buf = state["momentum_buffer"]
                        buf *= mu
                        buf += (1 - group["dampening"]) * g
                    buf = state["momentum_buffer"]
                    g = g + mu * buf if group["nesterov"] else buf
                p.data -= (lr * g).astype(p.dtype, copy=False)
                versions.bump(p.data, "SGD.step()")  # a graph that saved p cannot backward now
