"""`Optimizer`: parameter groups and per-parameter state, as in PyTorch.

`param_groups` is a list of dicts, each with its `params` and its hyperparameters (a group can
set its own `weight_decay`, say 0 for biases and LayerNorm). `state_dict()` returns plain data:
parameters are named by their position across groups, and each one's state is a dict of
arrays and numbers, so a checkpoint can store it without pickling.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.nn.module import Parameter

__all__ = ["Optimizer"]


class Optimizer:
    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}  # id(param) -> its state
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict[str, Any]) -> None:
        params = list(group["params"])
        for p in params:
            if not isinstance(p, Parameter) and not getattr(p, "requires_grad", False):
                raise TypeError(
                    f"{type(self).__name__} can only optimize tensors that require grad, "
                    f"got {type(p).__name__}"
                )
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError(f"{type(self).__name__}: a parameter appears in two groups")
        if len({id(p) for p in params}) < len(params):  # each step would update it twice
            raise ValueError(f"{type(self).__name__}: a parameter appears twice in one group")
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: unknown hyperparameters {sorted(unknown)} in a group "
                f"(known: {sorted(self.defaults)})"
            )
        self.param_groups.append({**self.defaults, **group, "params": params})

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    p.grad[...] = 0

    def step(self) -> None:
        raise NotImplementedError

    def _params(self) -> list[Any]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {name: array or number}}, "param_groups": [hyperparameters with
        "params" as indices]} - host copies, safe to keep while training goes on."""
        index = {id(p): i for i, p in enumerate(self._params())}
        state = {
            index[pid]: {k: backend.host_copy(v) for k, v in s.items()}
            for pid, s in self.state.items()
            if pid in index
        }
        groups = [
            {
                **{k: v for k, v in g.items() if k != "params"},
                "params": [index[id(p)] for p in g["params"]],
            }
            for g in self.param_groups
        ]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and state saved by `state_dict()` for the same parameters."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(g["params"]) != len(mine["params"]) for g, mine in zip(groups, self.param_groups)
        ):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the saved groups hold "
                f"{[len(g['params']) for g in groups]} parameters, this optimizer's hold "
                f"{[len(g['params']) for g in self.param_groups]}"
            )
        params = self._params()
        new_state = {}
        for i, saved in state_dict["state"].items():
            p = params[int(i)]
            entry = {}
            for k, v in saved.items():
                v = backend.to_host(v) if backend.is_device_array(v) else v
                if isinstance(v, np.ndarray) and v.shape != p.shape:
                    raise ValueError(
                        f"{type(self).__name__}.load_state_dict: state {k!r} of parameter {i} "
                        f"has shape {v.shape}, the parameter has {p.shape}"
                    )
                if isinstance(v, np.ndarray):  # on the parameter's device
                    v = backend.to_device(v.astype(p.dtype), backend.device_of(p.data))
                entry[k] = v
            new_state[id(p)] = entry
        for mine, g in zip(self.param_groups, groups):
            mine.update({k: v for k, v in g.items() if k != "params"})
        self.state = new_state
