"""The training loop every `tinyformer train ...` command shares, and the skeleton around it.

A command holds its folder (`claim_out_dir`) and calls `start_run(cfg, build)`: under --resume
the saved run and its settings come back, the iterations get their default, tinyformer's
generator is seeded, `build` makes the command's own part (data, model, optimizer, schedule,
evaluation: a `Run`), the saved state goes back into it, and `train_loop` trains.

One step: draw a batch from the run's generator, forward, backward, clip the gradient norm,
optimizer step, schedule step. Every `eval_interval` steps (and at the end) the run's
`evaluate` is called, a checkpoint is written together with `log.json` and `loss.png`, and
then the numbers are printed (saving first: a closed stdout must not cost the checkpoint).
Ctrl-C or SIGTERM finishes the current step, saves, and stops with `RunStopped`; resuming from
the checkpoint continues exactly where the run stood (optimizer moments, schedule and both RNG
states are saved). A loss or gradient norm that stops being finite ends the run before the
optimizer step, keeping the last checkpoint, which was taken from finite weights.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.fileio import save_json
from tinyformer.nn.module import Module
from tinyformer.optim import clip_grad_norm_
from tinyformer.optim.lr_scheduler import LRScheduler
from tinyformer.optim.optimizer import Optimizer
from tinyformer.random import manual_seed
from tinyformer.runtime import RUNTIME_ENV, settings
from tinyformer.train.report import peak_rss_mib, plot_losses
from tinyformer.train.state import checkpoint_errors, load_run, restore_run, save_run

__all__ = [
    "NonFiniteLoss", "Phase", "Run", "RunStopped", "StopFlag", "new_log", "resume_from",
    "resume_into", "saved_settings", "start_run", "train_loop",
]  # fmt: skip


class RunStopped(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM after saving its checkpoint. A KeyboardInterrupt, so
    that code catching Exception does not carry on as if training had finished; the command
    line exits with 128 + the signal's number (130 for Ctrl-C), as a shell reports signals."""

    def __init__(self, signum: int, iteration: int, log: dict[str, Any]) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name} at iteration {iteration}")
        self.signum, self.iteration, self.log = signum, iteration, log


class NonFiniteLoss(RuntimeError):
    """The loss or the gradient norm became NaN or infinite; the run stopped before stepping."""


def resume_from(cfg: Any, out_dir: str) -> tuple[Any, dict | None, dict | None]:
    """With `cfg.resume`: the saved run's configuration (keeping this command's `progress` and
    `out_dir`, wherever the run was first saved, and, when given, `iters`: a run extended past
    its schedule's end goes on at the final learning rate), its model state and its checkpoint
    meta. Without: (cfg, None, None). The command has claimed the folder (`claim_out_dir`),
    which checked that it can be written."""
    if not cfg.resume:
        return cfg, None, None
    path = Path(out_dir) / "ckpt.npz"
    state, saved = load_run(path, resume=True)
    # A copied or moved run continues where it is now, not where it was first saved.
    keep = {"progress": cfg.progress, "resume": True, "out_dir": cfg.out_dir}
    if hasattr(cfg, "device"):  # a run saved on a GPU may go on on the CPU, and back
        keep["device"] = cfg.device
    if cfg.iters is not None:
        keep["iters"] = cfg.iters
    resumed = saved_settings(cfg, saved["train_config"], path, keep)  # refuses other commands'
    saved["scheduler"].setdefault("total", saved["train_config"]["iters"])  # older: not saved
    if cfg.iters is not None:
        done, end = saved["iteration"], saved["scheduler"]["total"]
        if cfg.iters <= done:
            print(f"note: the run in {out_dir} has already reached iteration {done} "
                  f"(asked for {cfg.iters}): nothing to train there")  # fmt: skip
        elif cfg.iters > end:
            print(f"note: the saved run's learning-rate schedule ends at iteration {end}; "
                  f"iterations {max(end, done)}-{cfg.iters} go on at its final learning "
                  f"rate (a new schedule needs a new run)")  # fmt: skip
    return resumed, state, saved


def saved_settings(cfg: Any, written: dict[str, Any], path: Any, keep: dict[str, Any]) -> Any:
    """A configuration of `cfg`'s type from the settings a run saved in the checkpoint at
    `path` (`written`), but with the values in `keep`; flags given now that those settings
    override are listed in a note. Settings `cfg` does not have mean that another command
    wrote the run: a ValueError says so."""
    fields = dataclasses.fields(cfg)
    # Settings this command does not have: another command wrote the run. (Settings it has
    # that the run lacks are flags added since: they take their defaults.)
    unknown = set(written) - {f.name for f in fields}
    model = getattr(cfg, "model", None)  # vision: which model the command asked for
    if unknown or written.get("model", model) != model:
        what = f"a {written['model']} run" if "model" in written else "a run of another command"
        raise ValueError(f"{path} holds {what}: resume it with the command that wrote it")
    settings = {f.name: f.default for f in fields} | written
    # Flags changed from their defaults that the saved settings override: say so, since a
    # resumed run keeps its model, data and schedule.
    ignored = [
        f"--{f.name.replace('_', '-')} {getattr(cfg, f.name)} "
        f"(saved: {'the default' if settings[f.name] is None else settings[f.name]})"
        for f in fields
        if f.name not in (*keep, "overwrite", "model")
        and getattr(cfg, f.name) not in (f.default, settings[f.name])
    ]
    if ignored:
        print(f"note: --resume continues the saved run with its own settings; ignored: "
              f"{', '.join(ignored)}")  # fmt: skip
    if "overwrite" in settings:  # how the run was started, which a resumed run is not
        settings["overwrite"] = False
    with checkpoint_errors(path):
        return type(cfg)(**{**settings, **keep})


def resume_into(run: Run, state: dict | None, saved: dict | None) -> None:
    """Put a resumed run's weights, optimizer, schedule, RNGs and log back in place."""
    if saved is None:
        return
    with checkpoint_errors(saved["_path"]):
        run.model.load_state_dict(state)
    restore_run(saved, run.optimizer, run.scheduler, run.batch_rng)
    run.log = saved["log"]


def new_log() -> dict[str, Any]:
    return {"loss": [], "lr": [], "ms": [], "evals": []}


@dataclass
class Run:
    """What the loop needs from a command: the pieces, and three callbacks."""

    model: Module
    optimizer: Optimizer
    scheduler: LRScheduler
    batch_rng: np.random.Generator
    get_batch: Callable[[np.random.Generator], tuple[Any, Any]]  # -> (inputs, targets)
    evaluate: Callable[[int], dict[str, float]]  # iteration -> {"train": loss, "val": loss, ...}
    meta: Callable[[], dict[str, Any]]  # configuration etc. for the checkpoint
    config: Any  # the command's config dataclass (iters, eval_interval, grad_clip, out_dir, ...)
    command: str  # e.g. "gpt": for the resume hint
    title: str  # for the loss plot
    log: dict[str, Any] = dataclasses.field(default_factory=new_log)
    # (inputs, targets) -> loss, for models not called as model(inputs, targets) -> (_, loss)
    loss: Callable[[Any, Any], Any] | None = None
    resume_hint: str | None = None  # the command that continues this run, if not the default
    loss_label: str = "cross-entropy (nats/token)"  # the loss plot's axis
    # the command's own objects that it uses after training (a tokenizer, its data)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Set on several ranks (see RANKS): whether this process saves and shows progress, and
    # this rank's loss -> the whole batch's, for the log.
    writer: bool = True
    log_loss: Callable[[Any], Any] | None = None


# What makes a Run one rank's part of a data parallel run (its shard of each batch, averaged
# gradients, rank 0 alone writing): `tinyformer.distributed.training` puts it here when a
# launcher started several ranks, and `start_run` applies it before the loop, which therefore
# never knows about ranks. Empty in one process.
RANKS: list[Callable[[Run], None]] = []


@dataclass
class Phase:
    """What the loop reads from a configuration, for one of a command's several runs (BERT's
    pretraining and its fine-tunings, RLHF's stages): a `Run.config` of its own."""

    iters: int
    eval_interval: int
    out_dir: str
    progress: bool = True
    grad_clip: float = 1.0
    resume: bool = False


class StopFlag:
    """First Ctrl-C (or SIGTERM, as `kill` and schedulers send): finish the current step, save,
    stop. Second Ctrl-C: stop at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.signum = signum
        with contextlib.suppress(OSError):  # a closed stdout must not turn this into an abort
            print(f"\n{signal.Signals(signum).name}: stopping after this step to save a "
                  f"checkpoint (Ctrl-C again to abort now)")  # fmt: skip

    def __enter__(self) -> StopFlag:
        for signum in self.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: no handler, signals behave as usual
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def _format(numbers: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in numbers.items())


# On a GPU, reading a number back waits for every queued kernel; the loss and the gradient
# norm are read in batches of this many steps there. On the host a read costs nothing.
DEVICE_READ_EVERY = 10
# Drawing loss.png takes about half a second: while a run goes on it is redrawn at a checkpoint
# only this long after the last drawing, and always when the run ends or stops.
PLOT_EVERY_S = 30.0


def _check_finite(what: str, value: float, it: int, now: int, lr: float, saved: Path, log: dict):
    if math.isfinite(value):
        return
    last = log["evals"][-1]["iter"] if log["evals"] else 0
    when = (
        "before the optimizer step"
        if it == now
        else f"at iteration {now + 1}, when it was read (on a GPU the loss is read every "
        f"{DEVICE_READ_EVERY} steps)"
    )
    raise NonFiniteLoss(
        f"iteration {it + 1}: the {what} is {value} (learning rate {lr:.3g}); the run stopped "
        f"{when}. {saved} holds the last checkpoint, from iteration {last}. "
        f"Try a lower --lr or --grad-clip, in a new run (or with --overwrite)"
    )


class _Saver:
    """Writes a run's checkpoint and log.json (rank 0 alone), and loss.png: at the end, and
    while the run goes on at a checkpoint only PLOT_EVERY_S after the last drawing."""

    def __init__(self, run: Run) -> None:
        self.run, self.out = run, Path(run.config.out_dir)
        self.path = self.out / "ckpt.npz"
        self.last_plot = time.perf_counter()  # a run shorter than PLOT_EVERY_S draws it once

    def __call__(self, it: int, final: bool = False) -> None:
        run, cfg, log = self.run, self.run.config, self.run.log
        if not run.writer:
            return
        meta = {**run.meta(), "train_config": dataclasses.asdict(cfg), "iteration": it, "log": log}
        save_run(self.path, run.model, run.optimizer, run.scheduler, run.batch_rng, meta)
        log["peak_rss_mib"] = peak_rss_mib()
        runtime = {name: os.environ.get(name) for name in RUNTIME_ENV}
        config = dataclasses.asdict(cfg)
        # runtime_env: what the restart set; process: what the run ran with (threads, malloc)
        process = settings()
        save_json(
            self.out / "log.json",
            {"config": config, "runtime_env": runtime, "process": process, **log},
        )
        if final or time.perf_counter() - self.last_plot >= PLOT_EVERY_S:
            plot_losses(log, self.out / "loss.png", run.title, run.loss_label)
            self.last_plot = time.perf_counter()


def _evaluate(run: Run, it: int, save: _Saver, bar: Any, final: bool = False) -> None:
    """Evaluate at iteration `it`, log the numbers, save, then print them."""
    log = run.log
    if log["evals"] and log["evals"][-1]["iter"] == it:
        return  # resumed right after this evaluation
    numbers = run.evaluate(it)
    log["evals"].append({"iter": it, **numbers})
    save(it, final)
    bar.write(f"iter {it:5d}: {_format(numbers)}")


def _read(pending: list[tuple[Any, Any, float]], log: dict, it: int, saved: Path) -> None:
    """Read the steps' losses and gradient norms not read yet (`pending`: (loss, norm, lr))
    into the log, checking that each is finite."""
    first = len(log["loss"])
    for i, (loss, norm, lr) in enumerate(pending):
        value = float(loss.item())
        _check_finite("loss", value, first + i, it, lr, saved, log)
        if norm is not None:
            _check_finite("gradient norm", float(norm.item()), first + i, it, lr, saved, log)
        log["loss"].append(value)
        log["lr"].append(lr)
    pending.clear()


def _loss(run: Run, inputs: Any, targets: Any) -> Any:
    """The batch's loss: `run.loss`, or the model called as model(inputs, targets) -> (_, loss)."""
    return run.model(inputs, targets)[1] if run.loss is None else run.loss(inputs, targets)


def train_loop(run: Run, on_step: Callable[[int], bool] | None = None) -> dict[str, Any]:
    """Train until `config.iters`; returns the log. `on_step(it)` runs after every step;
    returning True stops the run as Ctrl-C would, but returns the log instead of raising
    `RunStopped`. A non-finite loss or gradient norm raises `NonFiniteLoss`."""
    from tqdm import tqdm

    cfg, log = run.config, run.log
    save = _Saver(run)
    it = len(log["loss"])
    # Steps whose loss and gradient norm are not read yet: (loss, norm, lr), read by `_read`.
    pending: list[tuple[Any, Any, float]] = []
    bar = tqdm(
        total=cfg.iters,
        initial=it,
        disable=not (cfg.progress and run.writer),
        unit="it",
        dynamic_ncols=True,
    )
    with StopFlag() as stop:
        while it < cfg.iters:
            if it % cfg.eval_interval == 0:
                _evaluate(run, it, save, bar)
            start = time.perf_counter()
            inputs, targets = run.get_batch(run.batch_rng)
            loss = _loss(run, inputs, targets)
            lr = run.optimizer.param_groups[0]["lr"]
            run.optimizer.zero_grad()
            loss.backward()
            norm = (
                clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
                if cfg.grad_clip > 0
                else None
            )
            pending.append((loss if run.log_loss is None else run.log_loss(loss), norm, lr))
            on_device = backend.is_device_array(loss.data)
            if not on_device or len(pending) >= DEVICE_READ_EVERY:
                # before the step: a non-finite loss stops the run with finite weights
                _read(pending, log, it, save.path)
            run.optimizer.step()
            run.scheduler.step()
            it += 1
            log["ms"].append((time.perf_counter() - start) * 1e3)
            bar.update()
            if not pending:
                bar.set_postfix(loss=f"{log['loss'][-1]:.3f}", lr=f"{lr:.2e}",
                                ms=f"{log['ms'][-1]:.0f}")  # fmt: skip
            if (on_step is not None and on_step(it)) or stop.requested:
                _read(pending, log, it, save.path)
                save(it, final=True)
                bar.close()
                print(f"stopped at iteration {it}; checkpoint in {save.path}. Continue with:")
                print("  " + (run.resume_hint or f"tinyformer train {run.command} --resume "
                                                  f"--out-dir {save.out}"))  # fmt: skip
                if stop.signum is not None:
                    raise RunStopped(stop.signum, it, log)
                return log
            if it % cfg.eval_interval == 0 or it == cfg.iters:
                _read(pending, log, it, save.path)  # the log is complete before a checkpoint
        _evaluate(run, it, save, bar, final=True)
    bar.close()
    steady = log["ms"][len(log["ms"]) // 10 :] or log["ms"]
    print(
        f"done: {it} iterations, {np.median(steady):.1f} ms/iter (median), peak memory "
        f"{peak_rss_mib():.0f} MiB; {save.out / 'loss.png'}, {save.out / 'log.json'}, "
        f"{save.path}"
    )
    return log


# (the configuration, the saved model state or None, the checkpoint's meta or None) -> the Run
Build = Callable[[Any, dict | None, dict | None], Run]


def start_run(
    cfg: Any,
    build: Build,
    on_step: Callable[[int], bool] | None = None,
    *,
    out_dir: str | None = None,
    default_iters: int | None = None,
    seed: int | None = None,
    saved: tuple[dict, dict] | None = None,
) -> tuple[Run, dict[str, Any]]:
    """Everything a training command does around what is its own (`build`): under --resume
    take the run saved in `out_dir` (default `cfg.out_dir`) and its settings, give `iters` its
    default, seed tinyformer's generator (`seed`, default `cfg.seed`), build the Run with
    `build(cfg, state, meta)` (both None for a new run), put the saved weights, optimizer,
    schedule, generators and log back in place, and train. The caller holds the folder
    (`claim_out_dir`); `saved`, a checkpoint's (state, meta) the caller has read already,
    replaces the resume step. Returns the Run (its `config` is the configuration it ran with)
    and its log."""
    if saved is None:
        cfg, state, meta = resume_from(cfg, cfg.out_dir if out_dir is None else out_dir)
    else:
        state, meta = saved
    if default_iters is not None and cfg.iters is None:
        cfg = dataclasses.replace(cfg, iters=default_iters)
    manual_seed(cfg.seed if seed is None else seed)
    run = build(cfg, state, meta)
    resume_into(run, state, meta)
    for as_rank in RANKS:  # several ranks: this one's part of the data parallel run
        as_rank(run)
    return run, train_loop(run, on_step)
