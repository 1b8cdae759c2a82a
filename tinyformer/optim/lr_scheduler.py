"""Learning-rate schedules. Each is a pure function of the step (easy to plot and test) and a
small scheduler class that writes it into the optimizer's groups, PyTorch style:
`scheduler.step()` after `optimizer.step()`. `SequentialLR` runs schedules one after another;
`ReduceLROnPlateau` (`plateau.py`), which follows a metric rather than the step, is here too,
where PyTorch users look for it."""

from __future__ import annotations

import math
import numbers
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tinyformer.optim.optimizer import Optimizer
from tinyformer.optim.plateau import ReduceLROnPlateau

__all__ = [
    "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR",
    "OneCycleLR", "ReduceLROnPlateau", "SequentialLR", "StepLR", "WarmupCosineLR",
    "warmup_cosine",
]  # fmt: skip


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


def _whole(n: Any, least: int) -> bool:
    return isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= least


def _milestones(name: str, milestones: Iterable[int]) -> list[int]:
    """The milestones as a list, checked: whole numbers >= 0, strictly increasing."""
    steps = list(milestones)
    if not all(_whole(m, 0) for m in steps) or any(a >= b for a, b in zip(steps, steps[1:])):
        raise ValueError(f"{name}: milestones must be increasing whole numbers >= 0, got {steps!r}")
    return [int(m) for m in steps]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones <= step): multiply by gamma at each
    milestone; milestones=[30, 80] gives 0.1x from step 30 and 0.01x from step 80."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1) -> None:
        if not gamma > 0:
            raise ValueError(f"MultiStepLR: gamma must be > 0, got {gamma}")
        self.milestones, self.gamma = _milestones("MultiStepLR", milestones), gamma
        super().__init__(optimizer)

    def lr_at(self, step: int, base_lr: float) -> float:
        return base_lr * self.gamma ** bisect_right(self.milestones, step)


def _per_group(name: str, value: float | Sequence[float], optimizer: Optimizer) -> list[float]:
    groups = len(optimizer.param_groups)
    if not isinstance(value, (list, tuple)):
        return [float(value)] * groups
    if len(value) != groups:
        raise ValueError(f"OneCycleLR: {name} has {len(value)} values for {groups} param groups")
    return [float(v) for v in value]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith and Topin 2017, "Super-Convergence"), as PyTorch's. Over the
    first pct_start of total_steps the lr rises from initial_lr = max_lr / div_factor to max_lr,
    then anneals ("cos" or "linear") to min_lr = initial_lr / final_div_factor at step
    total_steps - 1. With three_phase it first comes back down to initial_lr in as many steps as
    it rose, and only then goes to min_lr. With cycle_momentum, SGD's momentum (Adam's beta1)
    moves the other way, between max_momentum and base_momentum.

    As in PyTorch the groups hold "initial_lr", "max_lr" and "min_lr" (and "max_momentum",
    "base_momentum"), which every step reads, and stepping more than total_steps times is an
    error. total_steps may be given as epochs * steps_per_epoch."""

    # As in WarmupCosineLR, the cycle's shape is state: a resumed run keeps its cycle. The rates
    # and momenta it moves between are in the groups, so they travel with the optimizer's state.
    _shape = ("total_steps", "pct_start", "anneal_strategy", "three_phase")

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
    ) -> None:
        counts = {"total_steps": total_steps, "epochs": epochs, "steps_per_epoch": steps_per_epoch}
        for what, n in counts.items():
            if n is not None and not _whole(n, 1):
                raise ValueError(f"OneCycleLR: {what} must be a whole number >= 1, got {n!r}")
        if total_steps is None and (epochs is None or steps_per_epoch is None):
            raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
        self.total_steps = int(total_steps if total_steps is not None else epochs * steps_per_epoch)
        if not 0 < pct_start < 1:
            raise ValueError(f"OneCycleLR: pct_start must be in (0, 1), got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        if not (div_factor > 0 and final_div_factor > 0):
            raise ValueError(
                "OneCycleLR: div_factor and final_div_factor must be > 0, got "
                f"{div_factor} and {final_div_factor}"
            )
        self.pct_start, self.three_phase = pct_start, three_phase
        self.anneal_strategy = anneal_strategy
        ends = [0.0] + [phase[0] for phase in self._phases()]
        if any(a == b for a, b in zip(ends, ends[1:])):  # PyTorch divides by zero there
            raise ValueError(
                f"OneCycleLR: pct_start={pct_start} leaves a phase of the {self.total_steps}-step "
                "cycle no length; choose another pct_start"
            )
        max_lrs = _per_group("max_lr", max_lr, optimizer)
        if not all(lr > 0 for lr in max_lrs):
            raise ValueError(f"OneCycleLR: max_lr must be > 0, got {max_lr}")
        self.cycle_momentum = cycle_momentum
        self.use_beta1 = "betas" in optimizer.defaults  # Adam's beta1 plays SGD's momentum
        if cycle_momentum and not self.use_beta1 and "momentum" not in optimizer.defaults:
            raise ValueError(
                f"OneCycleLR: {type(optimizer).__name__} has no momentum or betas to cycle; "
                "pass cycle_momentum=False"
            )
        for group, top in zip(optimizer.param_groups, max_lrs):
            group["initial_lr"] = top / div_factor
            group["max_lr"] = top
            group["min_lr"] = group["initial_lr"] / final_div_factor
        if cycle_momentum:
            highs = _per_group("max_momentum", max_momentum, optimizer)
            lows = _per_group("base_momentum", base_momentum, optimizer)
            for group, high, low in zip(optimizer.param_groups, highs, lows):
                group["max_momentum"], group["base_momentum"] = high, low
        super().__init__(optimizer)

    def _phases(self) -> list[tuple[float, str, str, str, str]]:
        """(last step, lr from, lr to, momentum from, momentum to) of each phase; a phase runs
        from the previous one's last step (step 0 for the first)."""
        rise = float(self.pct_start * self.total_steps) - 1
        end = self.total_steps - 1
        if self.three_phase:
            return [
                (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (2 * self.pct_start * self.total_steps - 2, "max_lr", "initial_lr",
                 "base_momentum", "max_momentum"),
                (end, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]  # fmt: skip
        return [
            (rise, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (end, "max_lr", "min_lr", "base_momentum", "max_momentum"),
        ]

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _apply(self) -> None:
        # In place of lr_at(step, base_lr): the rates and momenta come from the groups.
        step = self.last_step
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: stepped {step} times, past total_steps={self.total_steps}; make "
                "total_steps (or epochs * steps_per_epoch) cover every step of the run"
            )
        phases, start, i = self._phases(), 0.0, 0
        while step > phases[i][0] and i < len(phases) - 1:
            start, i = phases[i][0], i + 1
        end, lr_from, lr_to, momentum_from, momentum_to = phases[i]
        pct = (step - start) / (end - start)  # past 1 at step total_steps, as in PyTorch
        for group in self.optimizer.param_groups:
            group["lr"] = self._anneal(group[lr_from], group[lr_to], pct)
            if self.cycle_momentum:
                momentum = self._anneal(group[momentum_from], group[momentum_to], pct)
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), **{k: getattr(self, k) for k in self._shape}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k in self._shape:
            setattr(self, k, state[k])
        super().load_state_dict(state)


class SequentialLR(LRScheduler):
    """schedulers[0] until step milestones[0], then schedulers[1] from its own step 0, and so
    on: at step t the scheduler in charge is at step t - m, m the milestone where it started,
    and works from the base lrs it was made with (PyTorch's restarts it with step(0) there).
    A warm-up, then a cosine: SequentialLR(opt, [LinearLR(opt, 0.01, 1.0, 100),
    CosineAnnealingLR(opt, T_max=900)], milestones=[100])."""

    def __init__(
        self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Iterable[int]
    ) -> None:
        self.schedulers, self.milestones = list(schedulers), _milestones("SequentialLR", milestones)
        for i, s in enumerate(self.schedulers):
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(
                    f"SequentialLR: schedulers[{i}] is a ReduceLROnPlateau, which steps on a "
                    "metric, not on the step count"
                )
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] is a {type(s).__name__}")
            if s.optimizer is not optimizer:
                raise ValueError(
                    f"SequentialLR: schedulers[{i}] ({type(s).__name__}) drives another optimizer"
                )
        if len(self.milestones) != len(self.schedulers) - 1 or not self.schedulers:
            raise ValueError(
                f"SequentialLR: needs one milestone fewer than schedulers, got "
                f"{len(self.schedulers)} schedulers and milestones {self.milestones}"
            )
        super().__init__(optimizer)

    def _apply(self) -> None:
        i = bisect_right(self.milestones, self.last_step)
        active = self.schedulers[i]
        active.last_step = self.last_step - (self.milestones[i - 1] if i else 0)
        active._apply()

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "schedulers": [s.state_dict() for s in self.schedulers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["schedulers"]) != len(self.schedulers):
            raise ValueError(
                f"SequentialLR.load_state_dict: saved {len(state['schedulers'])} schedulers, "
                f"this one has {len(self.schedulers)}"
            )
        for s, saved in zip(self.schedulers, state["schedulers"]):
            s.load_state_dict(saved)
        super().load_state_dict(state)  # last, so that the scheduler in charge writes the lrs
