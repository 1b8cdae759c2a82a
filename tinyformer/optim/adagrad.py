"""Adagrad (Duchi, Hazan & Singer, 2011), step for step as `torch.optim.Adagrad`:

t <- t + 1                                              (step, per parameter)
g <- grad + weight_decay * p
s <- s + g^2                                            (sum, from initial_accumulator_value)
p <- p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

Every weight's rate only falls, the faster the larger its gradients have been: good for sparse
features, too quick a decay for long training runs (the reason for RMSprop and Adam).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tinyformer import backend, versions
from tinyformer.optim.optimizer import Optimizer

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ) -> None:
        values = (lr, lr_decay, weight_decay, initial_accumulator_value, eps)
        if not all(0 <= v < math.inf for v in values):  # NaN fails it too
            raise ValueError(
                f"Adagrad: lr, lr_decay, weight_decay, initial_accumulator_value and eps must be "
                f"finite and >= 0, got {lr}, {lr_decay}, {weight_decay}, "
                f"{initial_accumulator_value}, {eps}"
            )
        defaults = dict(
            lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value, eps=eps,
        )  # fmt: skip
        super().__init__(params, defaults)

    def add_param_group(self, group: dict[str, Any]) -> None:
        super().add_param_group(group)
        # As PyTorch does, the state is made here, not at the first step: state_dict() holds
        # every parameter from the start.
        added = self.param_groups[-1]
        for p in added["params"]:
            self._init_state(p, added["initial_accumulator_value"])

    def _init_state(self, p: Any, initial: float) -> dict[str, Any]:
        xp = backend.get_array_module(p.data)
        state = self.state[id(p)] = {"step": 0, "sum": xp.full_like(p.data, initial)}
        return state

    def step(self) -> None:
        for group in self.param_groups:
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:  # its step count stays, so its lr decay waits too
                    continue
                xp = backend.get_array_module(p.data)
                state = self.state.get(id(p)) or self._init_state(
                    p, group["initial_accumulator_value"]
                )  # missing after loading a state_dict that had none for p
                where = backend.device_of(p.data)
                if backend.device_of(state["sum"]) != where:  # the module moved: follow it
                    state["sum"] = backend.to_device(state["sum"], where)
                state["step"] += 1
                # never written in place: p.grad stays as backward left it
                grad = p.grad.astype(p.dtype, copy=False)
                if wd:
                    grad = grad + wd * p.data
                clr = lr / (1 + (state["step"] - 1) * group["lr_decay"])
                state_sum = state["sum"]
                state_sum += grad * grad
                p.data -= clr * (grad / (xp.sqrt(state_sum) + eps))
                versions.bump(p.data, "Adagrad.step()")  # a graph that saved p cannot backward now
