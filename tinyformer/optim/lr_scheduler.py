"""Learning-rate schedules. Each is a pure function of the step (easy to plot and test) and a
small scheduler class that writes it into the optimizer's groups, PyTorch style:
`scheduler.step()` after `optimizer.step()`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tinyformer.optim.optimizer import Optimizer

__all__ = [
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "StepLR",
    "WarmupCosineLR",
    "warmup_cosine",
]


def warmup_cosine(step: int, base_lr: float, warmup: int, total: int, min_lr: float) -> float:
    """Linear warm-up from lr/warmup to lr over `warmup` steps, then cosine decay to `min_lr` at
    step `total`, then flat (nanoGPT's schedule). Steps count from 0."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (base_lr - min_lr)


class LRScheduler:
    """Sets every group's lr to `lr_at(step, base_lr)`; the optimizer starts at step 0's lr."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.base_lrs = [g.setdefault("initial_lr", g["lr"]) for g in optimizer.param_groups]
        self.last_step = 0
        self._apply()

    def lr_at(self, step: int, base_lr: float) -> float:
        raise NotImplementedError

    def _apply(self) -> None:
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = self.lr_at(self.last_step, base)

    def step(self) -> None:
        self.last_step += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        return {"last_step": self.last_step, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_step = int(state["last_step"])
        self.base_lrs = [float(x) for x in state["base_lrs"]]
        self._apply()


class WarmupCosineLR(LRScheduler):
    """`warmup_cosine` with the min lr given as a fraction of each group's base lr."""

    def __init__(
        self, optimizer: Optimizer, warmup: int, total: int, min_lr_ratio: float = 0.1
    ) -> None:
        if warmup < 0 or total < warmup:
            raise ValueError(f"WarmupCosineLR: need 0 <= warmup <= total, got {warmup}, {total}")
        self.warmup, self.total, self.min_lr_ratio = warmup, total, min_lr_ratio
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return warmup_cosine(step, base_lr, self.warmup, self.total, base_lr * self.min_lr_ratio)

    # The schedule's shape is state, as in PyTorch (whose schedulers save all their attributes):
    # a run resumed for more steps keeps its schedule and goes on at the final lr, rather than
    # jumping back up a cosine stretched to the new end.
    def state_dict(self) -> dict[str, Any]:
        shape = {"warmup": self.warmup, "total": self.total, "min_lr_ratio": self.min_lr_ratio}
        return {**super().state_dict(), **shape}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.warmup = int(state.get("warmup", self.warmup))  # absent from older checkpoints
        self.total = int(state.get("total", self.total))
        self.min_lr_ratio = float(state.get("min_lr_ratio", self.min_lr_ratio))
        super().load_state_dict(state)


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (step // step_size)."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * self.gamma ** (step // self.step_size)


class CosineAnnealingLR(LRScheduler):
    """PyTorch's cosine schedule without restarts, in its closed form:
    lr = eta_min + (base_lr - eta_min) (1 + cos(pi step / T_max)) / 2. It reaches eta_min at
    step T_max and, as PyTorch's, climbs back along the cosine after it (set T_max to the
    number of steps you train)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803
        if isinstance(T_max, bool) or not isinstance(T_max, int) or T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be a whole number >= 1, got {T_max!r}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        cosine = 0.5 * (1.0 + math.cos(math.pi * step / self.T_max))
        return self.eta_min + (base_lr - self.eta_min) * cosine


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(step): any schedule as a function of the step, e.g. a linear
    warm-up, `LambdaLR(opt, lambda step: min(1.0, (step + 1) / 100))`. One function for every
    group, or a list of one per group. As in PyTorch, state_dict does not save the functions."""

    def __init__(
        self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | Sequence[Callable]
    ) -> None:
        groups = len(optimizer.param_groups)
        if callable(lr_lambda):
            self.lr_lambdas = [lr_lambda] * groups
        else:
            self.lr_lambdas = list(lr_lambda)
            if len(self.lr_lambdas) != groups:
                raise ValueError(
                    f"LambdaLR: got {len(self.lr_lambdas)} functions for {groups} param groups"
                )
        super().__init__(optimizer)

    def _apply(self) -> None:
        # In place of lr_at(step, base_lr): each group has its own function, so the rate
        # depends on the group's index too.
        for i, (group, base) in enumerate(zip(self.optimizer.param_groups, self.base_lrs)):
            group["lr"] = base * self.lr_lambdas[i](self.last_step)


class LinearLR(LRScheduler):
    """The factor goes linearly from `start_factor` to `end_factor` over `total_iters` steps,
    then stays: lr = base_lr * (start + (end - start) * min(step, total_iters) / total_iters).
    With end_factor 1 it is a linear warm-up (PyTorch's defaults: 1/3 to 1 over 5 steps)."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
    ) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(
                "LinearLR: needs 0 < start_factor <= 1 and 0 <= end_factor <= 1, got "
                f"{start_factor} and {end_factor}"
            )
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters < 1:
            raise ValueError(
                f"LinearLR: total_iters must be a whole number >= 1, got {total_iters!r}"
            )
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        done = min(step, self.total_iters) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** step: multiply by gamma every step."""

    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        if not gamma > 0:
            raise ValueError(f"ExponentialLR: gamma must be > 0, got {gamma}")
        self.gamma = gamma
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * self.gamma**step
