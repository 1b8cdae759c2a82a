"""`tinyformer train seq2seq`: an encoder-decoder Transformer learns to translate dates.

Teacher forcing (the decoder reads the true previous characters), label-smoothed
cross-entropy, AdamW with warm-up and cosine decay. Every evaluation decodes the held-out
dates greedily (no teacher forcing: the model reads its own output) and reports exact-match
accuracy. At the end: greedy and beam-search accuracy, a few translations, and
alignment.png, the cross-attention of each output character over the source characters.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer.data.dates import DateTask
from tinyformer.fileio import save_json
from tinyformer.models.seq2seq import Seq2SeqConfig, Transformer
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.loop import Run, start_run
from tinyformer.train.memory import check_batch_fits, transformer_floor
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.seq2seq.config import TrainSeq2SeqConfig
from tinyformer.train.state import checkpoint_errors, config_from_checkpoint, load_run

__all__ = ["TrainSeq2SeqConfig", "date_run", "exact_match", "load_seq2seq", "train_seq2seq"]


DEFAULT_ITERS = 2000


def exact_match(
    model: Any, task: DateTask, beam: int = 1, batch: int = 250
) -> tuple[float, list[str]]:
    """Fraction of test dates translated exactly right, and the model's outputs (any model with
    `beam_search(src, max_len, beam)`: the Transformer, or the RNN with beam=1)."""
    src, _, _, _, targets = task.test_set()
    outputs = []
    for i in range(0, len(src), batch):
        ids = model.beam_search(src[i : i + batch], DateTask.MAX_TARGET - 1, beam=beam)
        outputs += [DateTask.TARGET.decode(row) for row in ids]
    return float(np.mean([o == t for o, t in zip(outputs, targets, strict=True)])), outputs


def date_run(model: Any, mconf: Any, cfg: Any, task: DateTask, command: str, title: str) -> Run:
    """The shared loop's Run for a date translator called as model(src, tgt_in, tgt_out,
    label_smoothing) -> (logits, loss): AdamW with warmup and cosine decay; each evaluation
    gives the teacher-forced held-out loss and the greedy exact match."""
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.98))
    scheduler = WarmupCosineLR(optimizer, min(cfg.warmup, cfg.iters), cfg.iters, 0.05)
    src, tgt_in, tgt_out, _, _ = task.test_set()

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        _, loss = model(src, tgt_in, tgt_out)  # teacher-forced, no smoothing: comparable
        accuracy, _ = exact_match(model, task)
        model.train()
        return {"val": float(loss.item()), "exact_match": accuracy}

    def get_batch(rng: np.random.Generator) -> tuple:
        src, tgt_in, tgt_out = task.batch(cfg.batch_size, rng)
        return (src, tgt_in), tgt_out

    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed),
        get_batch=get_batch, evaluate=evaluate,
        meta=lambda: {"model_config": dataclasses.asdict(mconf)}, config=cfg,
        command=command, title=title,
        loss=lambda inputs, targets: model(inputs[0], inputs[1], targets, cfg.label_smoothing)[1],
        extra={"task": task},
    )  # fmt: skip


def train_seq2seq(cfg: TrainSeq2SeqConfig) -> dict[str, Any]:
    """Train (or resume) the date translator; returns the log (with final accuracies)."""
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        run, log = start_run(cfg, _build, default_iters=DEFAULT_ITERS)
        return _report(run, log)


def _build(cfg: TrainSeq2SeqConfig, state: dict | None, saved: dict | None) -> Run:
    task = DateTask(seed=cfg.seed, test_dates=cfg.test_dates)
    if saved:
        mconf = config_from_checkpoint(saved["_path"], Seq2SeqConfig, saved["model_config"], state)
    else:
        mconf = cfg.model_config()
    # the decoder alone, on the ten characters of an ISO date
    floor = transformer_floor(10, mconf.n_decoder_layers, mconf.d_model, mconf.d_ff)
    sizes = (
        f"--n-decoder-layers {mconf.n_decoder_layers} --d-model {mconf.d_model} --d-ff {mconf.d_ff}"
    )
    check_batch_fits(cfg.batch_size, floor, "this decoder on 10 tokens", cfg.device, sizes=sizes)
    model = Transformer(mconf).to(cfg.device)
    return date_run(model, mconf, cfg, task, "seq2seq", "encoder-decoder: dates -> ISO 8601")


def _report(run: Run, log: dict[str, Any]) -> dict[str, Any]:
    """After a finished run: exact match, greedy and by beam search, and the alignment plot."""
    cfg, model, task = run.config, run.model, run.extra["task"]
    if len(log["loss"]) < cfg.iters:
        return log
    model.eval()
    greedy, outputs = exact_match(model, task)
    beam, _ = exact_match(model, task, beam=cfg.beam)
    log["final"] = {"greedy_exact_match": greedy, "beam_exact_match": beam, "beam": cfg.beam}
    _, _, _, sources, targets = task.test_set()
    print(f"held-out exact match ({len(targets)} dates never seen in training): "
          f"greedy {greedy:.2%}, beam search (width {cfg.beam}) {beam:.2%}")  # fmt: skip
    for s, o, t in list(zip(sources, outputs, targets, strict=True))[:6]:
        print(f"  {s!r:34} -> {o}  {'ok' if o == t else 'expected ' + t}")
    from tinyformer.train.seq2seq.plots import plot_alignment

    path = Path(cfg.out_dir) / "alignment.png"
    plot_alignment(model, task, path)
    save_json(Path(cfg.out_dir) / "results.json", log["final"])
    print(f"cross-attention alignment: {path}")
    return log


def load_seq2seq(path: Any) -> Transformer:
    """A trained date translator from a run folder or checkpoint file."""
    state, meta = load_run(path)
    with checkpoint_errors(meta["_path"]):
        model = Transformer(
            config_from_checkpoint(meta["_path"], Seq2SeqConfig, meta["model_config"], state)
        )
        model.load_state_dict(state)
    return model.eval()
