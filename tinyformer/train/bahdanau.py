"""`tinyformer train bahdanau`: an RNN encoder-decoder with additive attention (RNNsearch,
Bahdanau et al., 2015) learns the date translation of `tinyformer train seq2seq`.

The same task, held-out dates and exact-match metric as `tinyformer train seq2seq`, so the two
compare directly. Teacher forcing, label-smoothed cross-entropy, AdamW with warm-up and cosine
decay. Every evaluation decodes the held-out dates greedily and reports exact match. At the
end: a few translations, and alignment.png, the attention weights a_ij of each output
character over the source characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.data.dates import DateTask
from tinyformer.fileio import save_json
from tinyformer.models.bahdanau import BahdanauConfig, RNNSearch
from tinyformer.train.args import (
    COUNT,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    Range,
    RunFlags,
    check_ranges,
    flag,
)
from tinyformer.train.loop import Run, start_run
from tinyformer.train.memory import check_batch_fits, sequence_floor
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.seq2seq import date_run, exact_match
from tinyformer.train.seq2seq.plots import heldout_sources, plot_alignment_grid
from tinyformer.train.state import checkpoint_errors, config_from_checkpoint, load_run

__all__ = [
    "TrainBahdanauConfig", "exact_match", "load_bahdanau", "plot_alignment", "train_bahdanau",
]  # fmt: skip


@dataclass
class TrainBahdanauConfig(RunFlags):
    emb: int = flag(32, "character embedding width")
    hidden: int = flag(64, "encoder GRU width per direction (annotations are twice this)")
    dec_hidden: int = flag(64, "decoder GRU width")
    attn: int = flag(64, "hidden width of the additive attention score")
    label_smoothing: float = flag(0.1, "label smoothing of the cross-entropy", valid=FRACTION)
    iters: int | None = flag(
        None, "training steps: 600, or on --resume the saved run's", valid=COUNT
    )
    batch_size: int = flag(64, "sentence pairs per batch", valid=COUNT)
    lr: float = flag(3e-3, "peak learning rate", valid=POSITIVE)
    warmup: int = flag(100, "linear warm-up steps", valid=NONNEGATIVE)
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    grad_clip: float = flag(
        1.0, "clip the global gradient norm to this (0: off)", valid=NONNEGATIVE
    )
    test_dates: int = flag(
        1000, "held-out dates (never seen in training, in any format)",
        valid=Range(1, DateTask.DATES - 1),
    )  # fmt: skip
    eval_interval: int = flag(100, "evaluate and checkpoint every this many steps", valid=COUNT)
    seed: int = flag(1337, "seed for initialisation and data", valid=NONNEGATIVE)
    out_dir: str = flag("out/bahdanau", "folder for ckpt.npz, log.json, loss.png, alignment.png")

    def __post_init__(self) -> None:
        check_ranges(self)

    def model_config(self) -> BahdanauConfig:
        return BahdanauConfig(
            len(DateTask.SOURCE), len(DateTask.TARGET), emb=self.emb, hidden=self.hidden,
            dec_hidden=self.dec_hidden, attn=self.attn,
        )  # fmt: skip


DEFAULT_ITERS = 600


def train_bahdanau(cfg: TrainBahdanauConfig) -> dict[str, Any]:
    """Train (or resume) the RNNsearch date translator; returns the log (with final accuracy)."""
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        run, log = start_run(cfg, _build, default_iters=DEFAULT_ITERS)
        return _report(run, log)


def _build(cfg: TrainBahdanauConfig, state: dict | None, saved: dict | None) -> Run:
    task = DateTask(seed=cfg.seed, test_dates=cfg.test_dates)
    if saved:
        mconf = config_from_checkpoint(saved["_path"], BahdanauConfig, saved["model_config"], state)
    else:
        mconf = cfg.model_config()
    # the decoder alone, on the ten characters of an ISO date: an embedding and a state each
    floor = sequence_floor(10, mconf.emb + mconf.dec_hidden)
    sizes = f"--emb {mconf.emb} --dec-hidden {mconf.dec_hidden}"
    check_batch_fits(cfg.batch_size, floor, "this decoder on 10 tokens", cfg.device, sizes=sizes)
    model = RNNSearch(mconf).to(cfg.device)
    return date_run(
        model, mconf, cfg, task, "bahdanau", "RNN + additive attention: dates -> ISO 8601"
    )


def _report(run: Run, log: dict[str, Any]) -> dict[str, Any]:
    """After a finished run: greedy exact match, the step time and the alignment plot."""
    cfg, model, task = run.config, run.model, run.extra["task"]
    if len(log["loss"]) < cfg.iters:
        return log
    model.eval()
    greedy, outputs = exact_match(model, task)
    steady = log["ms"][len(log["ms"]) // 10 :] or log["ms"]
    n_params = sum(p.size for p in model.parameters())
    log["final"] = {"greedy_exact_match": greedy, "ms_per_step": float(np.median(steady)),
                    "parameters": int(n_params)}  # fmt: skip
    _, _, _, sources, targets = task.test_set()
    print(f"held-out exact match ({len(targets)} dates never seen in training): greedy "
          f"{greedy:.2%}; {n_params:,} parameters")  # fmt: skip
    for s, o, t in list(zip(sources, outputs, targets, strict=True))[:6]:
        print(f"  {s!r:34} -> {o}  {'ok' if o == t else 'expected ' + t}")
    path = Path(cfg.out_dir) / "alignment.png"
    plot_alignment(model, task, path)
    save_json(Path(cfg.out_dir) / "results.json", log["final"])
    print(f"attention alignment: {path}")
    return log


def plot_alignment(model: RNNSearch, task: DateTask, path: Path) -> None:
    """The additive-attention weights a_ij for a held-out date in each of seq2seq's plot
    formats, decoded greedily by the model."""
    src, sources = heldout_sources(task)
    out, weights = model.greedy(src, DateTask.MAX_TARGET - 1)  # (B, T), (B, T, S)
    title = "additive attention a_ij (RNNsearch, greedy decoding)"
    plot_alignment_grid(weights, sources, out, title, path)


def load_bahdanau(path: Any) -> RNNSearch:
    """A trained RNNsearch date translator from a run folder or checkpoint file."""
    state, meta = load_run(path)
    with checkpoint_errors(meta["_path"]):
        model = RNNSearch(
            config_from_checkpoint(meta["_path"], BahdanauConfig, meta["model_config"], state)
        )
        model.load_state_dict(state)
    return model.eval()
