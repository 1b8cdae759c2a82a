"""A training run's state as a checkpoint: model weights, optimizer moments, schedule position,
iteration, RNG states, configuration and tokenizer; see `tinyformer.checkpoint` for the file.

A checkpoint is data from outside: reading one checks its metadata before anything uses it, and
what building a model from it raises on a damaged or foreign file becomes a `CheckpointError`
that names the file (`checkpoint_errors`, `config_from_checkpoint`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Any

import numpy as np

from tinyformer import backend, random
from tinyformer.checkpoint import (
    CheckpointError,
    checkpoint_path,
    load_checkpoint,
    non_finite,
    save_checkpoint,
)
from tinyformer.nn.module import Module, StateDictError
from tinyformer.optim.lr_scheduler import LRScheduler
from tinyformer.optim.optimizer import Optimizer

__all__ = [
    "checkpoint_errors", "config_from_checkpoint", "extra_state", "load_run", "optimizer_arrays",
    "restore_run", "save_run",
]  # fmt: skip

# What a run checkpoint's metadata holds (train_loop writes them all), and each one's JSON type
RUN_KEYS = {
    "model_config": dict, "train_config": dict, "iteration": int, "log": dict,
    "optimizer": dict, "scheduler": dict, "rng": dict,
}  # fmt: skip


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
    extra: dict[str, Module] | None = None,
) -> None:
    """Write everything needed to continue the run exactly where it stands. `extra`: modules
    trained beside `model` whose weights go under their own prefix (`<prefix>/<name>`), so
    that `model/` stays a model that `sample` and `eval` can read (PPO's value head)."""
    # state_dict shares the model's memory: copy to the host now, before training changes it
    arrays = {}
    for prefix, module in {"model": model, **(extra or {})}.items():
        arrays |= {
            f"{prefix}/{k}": backend.host_copy(v.data) for k, v in module.state_dict().items()
        }
    optim_arrays, optim_meta = optimizer_arrays(optimizer.state_dict())
    arrays.update(optim_arrays)
    meta = {
        **meta,
        "optimizer": optim_meta,
        "scheduler": scheduler.state_dict(),
        "rng": {"tinyformer": random.get_rng_state(), "batches": batch_rng.bit_generator.state},
    }
    save_checkpoint(path, arrays, meta)


def load_run(path: Any, resume: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """-> (model state_dict, meta), the metadata checked: a CheckpointError names the file and
    the entry that is malformed or, with `resume`, missing (reading the weights needs less than
    continuing the run). The optimizer arrays stay in meta["_arrays"] and the file's path in
    meta["_path"], for `restore_run`."""
    arrays, meta = load_checkpoint(path)
    path = checkpoint_path(path)
    _check_run_meta(path, meta, RUN_KEYS if resume else ())
    model_state = {k[len("model/") :]: v for k, v in arrays.items() if k.startswith("model/")}
    bad = non_finite(model_state)
    if bad:
        raise CheckpointError(f"{path}: {bad}; a model with them computes only NaN")
    meta["_arrays"], meta["_path"] = arrays, path
    return model_state, meta


def extra_state(meta: dict[str, Any], prefix: str) -> dict[str, np.ndarray]:
    """The state_dict `save_run` kept under `prefix` (one of its `extra` modules), from the
    meta of `load_run`, its weights checked as the model's are."""
    start = prefix + "/"
    arrays = {k: v for k, v in meta["_arrays"].items() if k.startswith(start)}
    bad = non_finite(arrays)
    if bad:
        raise CheckpointError(f"{meta['_path']}: {bad}; a model with them computes only NaN")
    return {k[len(start) :]: v for k, v in arrays.items()}


def restore_run(
    meta: dict[str, Any],
    optimizer: Optimizer,
    scheduler: LRScheduler,
    batch_rng: np.random.Generator,
) -> None:
    """Put the optimizer, schedule and both RNGs back as they were when the run was saved."""
    path = meta.get("_path", "the checkpoint")
    _check_run_meta(path, meta, ("optimizer", "scheduler", "rng"))
    rng = meta["rng"]
    with checkpoint_errors(path):
        # both RNG states are tried on fresh generators first: a bad one leaves none changed
        type(random.generator().bit_generator)().state = rng["tinyformer"]
        type(batch_rng.bit_generator)().state = rng["batches"]
        optimizer.load_state_dict(_optimizer_state(meta["_arrays"], meta["optimizer"]))
        scheduler.load_state_dict(meta["scheduler"])
    random.set_rng_state(rng["tinyformer"])
    batch_rng.bit_generator.state = rng["batches"]


@contextlib.contextmanager
def checkpoint_errors(path: Any) -> Iterator[None]:
    """Wrap building a model (and tokenizer) from a checkpoint's configuration and loading its
    weights: what a damaged or foreign checkpoint makes those raise leaves as a CheckpointError
    naming the file, the original as its cause. Errors of other types (AttributeError, ...)
    are bugs and pass through untouched."""
    try:
        yield
    except CheckpointError:
        raise
    except MemoryError:
        raise CheckpointError(
            f"{path}: the model its configuration describes does not fit in memory "
            "(a damaged size?)"
        ) from None
    except (StateDictError, ValueError, TypeError, KeyError, IndexError, OverflowError) as err:
        plain = isinstance(err, (StateDictError, ValueError))  # their messages say what is wrong
        what = str(err) if plain else f"{type(err).__name__}: {err}"
        raise CheckpointError(f"{path}: cannot be loaded: {what}") from err


def config_from_checkpoint(path: Any, cls: type, data: Any, state: dict[str, np.ndarray]) -> Any:
    """`cls(**data)` for a model configuration (a dataclass) read from the checkpoint at `path`,
    whose model weights are `state`; first checked for settings `cls` lacks or needs, values of
    the wrong type, and (where `cls` counts its parameters) a model larger than the weights
    held. A damaged size would otherwise allocate the model it describes before any weight is
    compared: a MemoryError at best, the machine's OOM killer at worst."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: model_config is not a JSON object")
    unknown = sorted(set(data) - set(fields))
    needed = [
        name
        for name, f in fields.items()
        if name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if unknown or needed:
        what = f"unknown setting {unknown[0]!r}" if unknown else f"no {needed[0]!r}"
        raise CheckpointError(f"{path}: model_config has {what} (for {cls.__name__})")
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        if not _fits(value, hints.get(name, Any)):
            raise CheckpointError(
                f"{path}: model_config {name!r} is {value!r}, not {_type_name(hints[name])}"
            )
    with checkpoint_errors(path):
        config = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    if hasattr(config, "num_parameters"):
        # the state holds every parameter, shared ones under each of their names, and buffers
        wanted, held = config.num_parameters(), sum(int(np.size(v)) for v in state.values())
        if wanted > held:
            raise CheckpointError(
                f"{path}: model_config describes {wanted:,} parameters but the checkpoint holds "
                f"{held:,} weights; the configuration or the file is damaged"
            )
    return config


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a dataclass field's type (lists stand for tuples)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is tuple:
        return isinstance(value, (list, tuple)) and all(_fits(v, args[0]) for v in value)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_run_meta(path: Any, meta: dict[str, Any], required: Any) -> None:
    """CheckpointError naming the file and the first metadata entry a run could not use: a
    `required` key that is missing, or any of RUN_KEYS that is malformed."""

    def bad(where: str, what: str) -> CheckpointError:
        return CheckpointError(f"{path}: its metadata's {where} {what}")

    for key in required:
        if key not in meta:
            raise bad(repr(key), "is missing (not a training run's checkpoint, or a damaged one)")
    for key, kind in RUN_KEYS.items():
        if key in meta and (not isinstance(meta[key], kind) or isinstance(meta[key], bool)):
            raise bad(repr(key), f"is {type(meta[key]).__name__}, not {kind.__name__}")
    if "tokenizer" in meta and not isinstance(meta["tokenizer"], dict):
        raise bad("'tokenizer'", "is not an object")
    if "log" in meta:
        _check_log(meta["log"], meta.get("iteration"), bad)
    if "optimizer" in meta:
        _check_optimizer(meta["optimizer"], bad)
    scheduler = meta.get("scheduler")
    if scheduler is not None and (
        not {"last_step", "base_lrs"} <= set(scheduler)
        or not all(map(_setting, scheduler.values()))
    ):
        raise bad("'scheduler'", "lacks last_step or base_lrs, or holds more than numbers")
    for name in ("tinyformer", "batches") if "rng" in meta else ():
        if not isinstance(meta["rng"].get(name), dict):
            raise bad(f"rng[{name!r}]", "is not a generator state")


def _check_log(log: dict[str, Any], iteration: Any, bad: Any) -> None:
    for name in ("loss", "lr", "ms"):
        if not isinstance(log.get(name), list) or not all(map(_number, log[name])):
            raise bad(f"log[{name!r}]", "is not a list of numbers")
    if not isinstance(log.get("evals"), list) or not all(isinstance(e, dict) for e in log["evals"]):
        raise bad("log['evals']", "is not a list of objects")
    if iteration is not None and (len(log["loss"]) != iteration or iteration < 0):
        raise bad("'iteration'", f"is {iteration}, but its log holds {len(log['loss'])} steps")


def _check_optimizer(optimizer: dict[str, Any], bad: Any) -> None:
    groups, scalars = optimizer.get("param_groups"), optimizer.get("scalars")
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise bad("optimizer['param_groups']", "is not a list of objects")
    for i, group in enumerate(groups):
        params = group.get("params")
        if not isinstance(params, list) or not all(_index(p) for p in params):
            raise bad(f"optimizer['param_groups'][{i}]['params']", "is not a list of indices")
        for name, value in group.items():
            if name != "params" and not _setting(value):
                raise bad(f"optimizer['param_groups'][{i}][{name!r}]", f"is {value!r}")
    if not isinstance(scalars, dict) or not all(
        index.isdigit() and isinstance(entry, dict) and all(map(_setting, entry.values()))
        for index, entry in scalars.items()
    ):
        raise bad("optimizer['scalars']", "is not an object of numbers by parameter index")


def _index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _setting(value: Any) -> bool:
    """A number, flag or null, or a list of numbers (AdamW's betas, a scheduler's base_lrs)."""
    if isinstance(value, list):
        return all(map(_number, value))
    return value is None or isinstance(value, bool) or _number(value)
