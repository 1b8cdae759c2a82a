"""A training run's state as a checkpoint: model weights, optimizer moments, schedule position,
iteration, RNG states, configuration and tokenizer; see `tinyformer.checkpoint` for the file."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import random
from tinyformer.checkpoint import load_checkpoint, save_checkpoint
from tinyformer.nn.module import Module
from tinyformer.optim.lr_scheduler import LRScheduler
from tinyformer.optim.optimizer import Optimizer

__all__ = ["load_run", "optimizer_arrays", "restore_run", "save_run"]


def optimizer_arrays(state: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split an optimizer state_dict into arrays (`optim/<index>/<name>`) and JSON data."""
    arrays, scalars = {}, {}
    for index, entry in state["state"].items():
        for name, value in entry.items():
            if isinstance(value, np.ndarray):
                arrays[f"optim/{index}/{name}"] = value
            else:
                scalars.setdefault(str(index), {})[name] = value
    return arrays, {"param_groups": state["param_groups"], "scalars": scalars}


def _optimizer_state(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in arrays.items():
        if key.startswith("optim/"):
            _, index, name = key.split("/", 2)
            state.setdefault(int(index), {})[name] = value
    for index, entry in meta["scalars"].items():
        state.setdefault(int(index), {}).update(entry)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_run(
    path: Any,
    model: Module,
    optimizer: Optimizer,
    scheduler: LRScheduler,
    batch_rng: np.random.Generator,
    meta: dict[str, Any],
) -> None:
    """Write everything needed to continue the run exactly where it stands."""
    arrays = {f"model/{k}": v for k, v in model.state_dict().items()}
    optim_arrays, optim_meta = optimizer_arrays(optimizer.state_dict())
    arrays.update(optim_arrays)
    meta = {
        **meta,
        "optimizer": optim_meta,
        "scheduler": scheduler.state_dict(),
        "rng": {"tinyformer": random.get_rng_state(), "batches": batch_rng.bit_generator.state},
    }
    save_checkpoint(path, arrays, meta)


def load_run(path: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """-> (model state_dict, meta); the optimizer arrays stay in meta["_arrays"] for
    `restore_run`."""
    arrays, meta = load_checkpoint(path)
    model_state = {k[len("model/") :]: v for k, v in arrays.items() if k.startswith("model/")}
    meta["_arrays"] = arrays
    return model_state, meta


def restore_run(
    meta: dict[str, Any],
    optimizer: Optimizer,
    scheduler: LRScheduler,
    batch_rng: np.random.Generator,
) -> None:
    """Put the optimizer, schedule and both RNGs back as they were when the run was saved."""
    optimizer.load_state_dict(_optimizer_state(meta["_arrays"], meta["optimizer"]))
    scheduler.load_state_dict(meta["scheduler"])
    random.set_rng_state(meta["rng"]["tinyformer"])
    batch_rng.bit_generator.state = meta["rng"]["batches"]
