"""Adam and AdamW. Both run the `adamw.step_many` primitive once per parameter group and dtype
(`tinyformer/optim/adamw_step.py`: the math and the NumPy reference; on the host a fused Numba
kernel updates each parameter in one pass, on a GPU one CUDA launch updates the whole group):
AdamW with its decoupled weight decay, Adam with weight decay added to the gradient (L2) and the
primitive's own decay set to 0."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tinyformer import backend, registry, versions
from tinyformer.optim.adamw_step import adamw_step_many  # noqa: F401  (registers the references)
from tinyformer.optim.optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    decoupled = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        name = type(self).__name__
        if not all(0 <= v < math.inf for v in (lr, eps, weight_decay)):  # NaN fails it too
            raise ValueError(
                f"{name}: lr, eps, weight_decay must be finite and >= 0, got {lr}, {eps}, "
                f"{weight_decay}"
            )
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{name}: betas must be two numbers in [0, 1), got {betas}")
        super().__init__(
            params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        )

    def step(self) -> None:
        name = f"{type(self).__name__}.step()"
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            wd = group["weight_decay"]
            # One "adamw.step_many" call per array type and dtype: the registry chooses once, and
            # a device kernel updates the whole batch in one launch.
            batches: dict[tuple, tuple[list, ...]] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad, state = self._prepare(p, wd)
                batch = batches.setdefault((type(p.data), p.data.dtype), ([], [], [], [], []))
                row = (p, grad, state["exp_avg"], state["exp_avg_sq"], state["step"])
                for column, value in zip(batch, row):
                    column.append(value)
            for params, grads, ms, vs, steps in batches.values():
                registry.call(
                    "adamw.step_many", [p.data for p in params], grads, ms, vs,
                    lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=wd if self.decoupled else 0.0, steps=steps,
                )  # fmt: skip
                for p in params:
                    # an in-place write: a graph that saved p before this step cannot backward
                    versions.bump(p.data, name)

    def _prepare(self, p: Any, wd: float) -> tuple[Any, dict[str, Any]]:
        """p's state (made on its first step, moved along with p), its step count advanced, and
        the gradient the update uses (contiguous, in p's dtype, with Adam's L2 term)."""
        xp = backend.get_array_module(p.data)
        state = self.state.setdefault(id(p), {})
        if not state:
            state.update(step=0, exp_avg=xp.zeros_like(p.data), exp_avg_sq=xp.zeros_like(p.data))
        elif type(state["exp_avg"]) is not type(p.data):  # the module moved: follow it
            for key in ("exp_avg", "exp_avg_sq"):
                state[key] = backend.to_device(state[key], backend.device_of(p.data))
        state["step"] += 1
        grad = xp.ascontiguousarray(p.grad, dtype=p.dtype)
        if wd and not self.decoupled:
            grad = grad + p.dtype.type(wd) * p.data
        return grad, state


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p <- p (1 - lr wd) before the Adam
    step, instead of adding wd p to the gradient. PyTorch's default weight_decay is 0.01."""

    decoupled = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)
