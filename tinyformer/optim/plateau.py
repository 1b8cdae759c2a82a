"""`ReduceLROnPlateau`: cut the learning rate when a metric stops improving, as PyTorch's.

Unlike the schedules in `lr_scheduler.py` the rate is not a function of the step but of the
metrics seen so far, so the scheduler keeps the current rates (and its counters) as state and
`step(metric)` takes the metric, typically the validation loss once per epoch.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, SupportsFloat

from tinyformer.optim.optimizer import Optimizer

__all__ = ["ReduceLROnPlateau"]


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= least


class ReduceLROnPlateau:
    """After more than `patience` steps in a row without improvement, multiply every group's lr
    by `factor` (not below `min_lr`; a cut smaller than `eps` is skipped), then ignore
    `cooldown` steps. In mode "min" a metric improves on the best so far when it is below
    best * (1 - threshold) (threshold_mode "rel") or best - threshold ("abs"); mode "max", for
    metrics that should rise such as accuracy, mirrors it."""

    # What state_dict saves besides the rates: settings and counters, as PyTorch's does.
    _saved = (
        "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "eps", "min_lr",
        "last_step", "best", "num_bad_epochs", "cooldown_counter",
    )  # fmt: skip

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        name = "ReduceLROnPlateau"
        if mode not in ("min", "max"):
            raise ValueError(f"{name}: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"{name}: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}"
            )
        if not 0 <= factor < 1:
            raise ValueError(f"{name}: factor must be in [0, 1), got {factor}")
        for what, value in (("patience", patience), ("cooldown", cooldown)):
            if not _whole(value, 0):
                raise ValueError(f"{name}: {what} must be a whole number >= 0, got {value!r}")
        if not (threshold >= 0 and eps >= 0):  # NaN fails too
            raise ValueError(f"{name}: threshold and eps must be >= 0, got {threshold}, {eps}")
        self.optimizer = optimizer
        self.mode, self.threshold_mode, self.threshold = mode, threshold_mode, threshold
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        # A list stays per group; a number applies to every group, also ones added later.
        per_group = isinstance(min_lr, (list, tuple))
        self.min_lr = [float(x) for x in min_lr] if per_group else float(min_lr)
        if min(self._min_lrs()) < 0:
            raise ValueError(f"{name}: min_lr must be >= 0, got {min_lr}")
        self.last_step = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0  # PyTorch's names: steps since the last improvement
        self.cooldown_counter = 0

    def _min_lrs(self) -> list[float]:
        groups = len(self.optimizer.param_groups)
        if not isinstance(self.min_lr, list):
            return [self.min_lr] * groups
        if len(self.min_lr) != groups:
            raise ValueError(
                f"ReduceLROnPlateau: min_lr has {len(self.min_lr)} values for {groups} param groups"
            )
        return self.min_lr

    def _is_better(self, value: float) -> bool:
        # As PyTorch's: the relative test scales `best`, so it reads oddly for negative metrics.
        if self.mode == "min":
            if self.threshold_mode == "rel":
                return value < self.best * (1.0 - self.threshold)
            return value < self.best - self.threshold
        if self.threshold_mode == "rel":
            return value > self.best * (1.0 + self.threshold)
        return value > self.best + self.threshold

    def step(self, metrics: SupportsFloat) -> None:
        """Record this step's metric (a number or a 0-d tensor); NaN counts as no improvement."""
        value = float(metrics)
        self.last_step += 1
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:  # steps right after a cut do not count against patience
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self._min_lrs()):
                old = float(group["lr"])
                new = max(old * self.factor, floor)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    # The rates are state here (no closed form gives them back), so loading writes them into
    # the groups: a resumed run goes on at the rates it had reached.
    def state_dict(self) -> dict[str, Any]:
        state = {k: getattr(self, k) for k in self._saved}
        if isinstance(self.min_lr, list):
            state["min_lr"] = list(self.min_lr)  # the caller's copy, not the scheduler's list
        return {**state, "lrs": self.get_last_lr()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        lrs = state["lrs"]
        if len(lrs) != len(self.optimizer.param_groups):
            raise ValueError(
                f"ReduceLROnPlateau.load_state_dict: saved {len(lrs)} lrs, the optimizer has "
                f"{len(self.optimizer.param_groups)} param groups"
            )
        for key in self._saved:
            value = state[key]
            setattr(self, key, list(value) if isinstance(value, list) else value)
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = float(lr)
