"""`tinyformer train xlm`: cross-lingual pretraining, measured by zero-shot transfer.

Two made-up languages write the numbers 0-999 with no letter in common and the same grammar
(`tinyformer.data.numerals`); one byte-level BPE vocabulary is trained on both. Pretraining
sentences are random numbers, so one language alone says nothing about which word of the
other is which. One command:

1. Pretrain with MLM + TLM: half of each batch is masked monolingual sentences (either
   language), half is translation pairs masked in the first sentence, a fifth of those
   blanks holding the translation's word (code-switched) instead of [MASK].
                                                                 -> out/xlm/pretrain-tlm/
2. Pretrain with MLM only: the same steps, all monolingual.      -> out/xlm/pretrain-mlm/
3. Fine-tune each of the two encoders, and a random one, several times, on a relation
   between two numbers (less / same / greater), in language A only.
                                                  -> out/xlm/finetune-{tlm,mlm,scratch}-k/

Each evaluation of a pretraining runs the alignment probe (`translation_retrieval`). Each
fine-tuned classifier is tested on the same held-out pairs written in A (the language it was
trained in) and in B (zero-shot: it never saw a labelled example in B). The closing table and
out/xlm/compare.png put the three side by side.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data.numerals import MAX_NUMBER
from tinyformer.data.tlm import pack_monolingual
from tinyformer.models.xlm import XLM, XLMConfig, XLMForMaskedLM, XLMForSequenceClassification
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.tensor import Tensor
from tinyformer.train.loop import Phase, Run, start_run
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import config_from_checkpoint
from tinyformer.train.xlm.config import TrainXLMConfig
from tinyformer.train.xlm.data import (
    NumeralData,
    monolingual_rows,
    pair_batch,
    prepare,
    pretrain_batch,
    translation_rows,
)

__all__ = [
    "TrainXLMConfig", "finetune", "number_vectors", "pretrain", "train_xlm",
    "translation_retrieval",
]  # fmt: skip

LANG_A, LANG_B = 0, 1


@tf.no_grad()
def number_vectors(encoder: XLM, data: NumeralData, lang: int) -> np.ndarray:
    """Every number 0-999 written alone in `lang`, through the encoder: the mean of its words'
    last-layer vectors -> (1000, C), row n for the number n."""
    numbers = range(MAX_NUMBER + 1)
    ids, positions, langs, mask = pack_monolingual(
        [data.encode(n, lang) for n in numbers], [lang] * len(numbers), **data.special()
    )  # fmt: skip
    hidden = backend.to_host(encoder(ids, langs, positions, mask).data)  # (N, T, C)
    words = ((mask == 1) & (ids != data.cls_id) & (ids != data.sep_id))[..., None]
    return (hidden * words).sum(1) / words.sum(1)  # (N, C)


def translation_retrieval(encoder: XLM, data: NumeralData) -> float:
    """The alignment probe: `number_vectors` in A and in B, each language's centred on their
    mean (which the language embedding shifts); -> the share of numbers whose nearest B
    vector (cosine) is their own translation. Chance is 1 in 1000."""
    a, b = (number_vectors(encoder, data, lang) for lang in (LANG_A, LANG_B))
    a, b = a - a.mean(0), b - b.mean(0)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return float(((a @ b.T).argmax(1) == np.arange(len(a))).mean())


def _optimizer(model: Any, cfg: TrainXLMConfig, lr: float, iters: int, warmup: int) -> tuple:
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=lr, betas=(0.9, 0.999))
    return optimizer, WarmupCosineLR(optimizer, min(warmup, iters), iters, 0.1)


def pretrain(cfg: TrainXLMConfig, data: NumeralData, tlm: bool) -> tuple[XLMForMaskedLM, dict]:
    """MLM + TLM pretraining (`tlm`), or MLM only; returns the model and the run's log."""
    name = "pretrain-tlm" if tlm else "pretrain-mlm"
    out = Path(cfg.out_dir) / name
    # The second pretraining is resumed only if it had started (an interrupted first one
    # leaves it no checkpoint); resuming the first needs its checkpoint, as in the other
    # commands: without one, --resume names the missing file instead of starting anew.
    started = tlm or (out / "ckpt.npz").exists()
    phase = Phase(cfg.pretrain_iters, cfg.eval_interval, str(out), cfg.progress,
                  resume=cfg.resume and started)  # fmt: skip

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        return _pretraining_run(cfg, data, tlm, phase, state, saved)

    run, log = start_run(phase, build, seed=cfg.seed)  # both start from the same weights
    return run.model, log


def _pretraining_run(
    cfg: TrainXLMConfig, data: NumeralData, tlm: bool, phase: Phase, state: dict | None,
    saved: dict | None,
) -> Run:  # fmt: skip
    if saved:
        mconf = config_from_checkpoint(saved["_path"], XLMConfig, saved["model_config"], state)
    else:
        mconf = cfg.model_config(data.vocab_size)
    model = XLMForMaskedLM(mconf).to(cfg.device)
    optimizer, scheduler = _optimizer(model, cfg, cfg.lr, phase.iters, cfg.warmup)

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        out = {}
        for kind, rows in (("mlm", monolingual_rows), ("tlm", translation_rows)):
            rng = np.random.default_rng([cfg.seed, 1])  # the same masked rows at every check
            inputs, positions, langs, mask, labels = rows(data, cfg, 256, rng)
            logits, loss = model(inputs, langs, labels, positions, mask)
            target = labels[labels != -100]
            hits = int((backend.to_host(logits.data.argmax(1)) == target).sum())
            out[kind], out[f"{kind}_acc"] = loss.item(), hits / len(target)
        out["retrieval"] = translation_retrieval(model.xlm, data)
        model.train()
        return out

    return Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 2]),
        get_batch=lambda rng: pretrain_batch(data, cfg, tlm, rng), evaluate=evaluate,
        config=phase, command="xlm", title=("MLM + TLM" if tlm else "MLM-only") + " pretraining",
        loss=lambda inputs, labels: model(inputs[0], inputs[2], labels, inputs[1], inputs[3])[1],
        meta=lambda: {"model_config": dataclasses.asdict(mconf),
                      "tokenizer": data.tokenizer.to_dict(), "xlm_config": dataclasses.asdict(cfg)},
        resume_hint=f"tinyformer train xlm --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def finetune(
    cfg: TrainXLMConfig, data: NumeralData, init: dict[str, Any] | None, name: str, run: int = 1
) -> dict[str, Any]:
    """Fine-tune a classifier on the relation task in language A, from an encoder state dict
    (the "xlm.*" entries of a pretrained model's state_dict) or from random weights (None);
    `run` (1, 2, ...) picks the classifier's initialisation and the order of the examples.
    Returns the log; its evals hold test accuracy in A (`acc_a`) and zero-shot in B (`acc_b`)."""
    iters = cfg.finetune_iters
    every = max(1, min(cfg.eval_interval, iters // 5))  # at least five evaluations
    phase = Phase(iters, every, str(Path(cfg.out_dir) / name), cfg.progress)

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        return _finetuning_run(cfg, data, init, name, run, phase)

    # run k starts the same way from every encoder
    return start_run(phase, build, seed=cfg.seed + run)[1]


def _finetuning_run(
    cfg: TrainXLMConfig, data: NumeralData, init: dict[str, Any] | None, name: str, run: int,
    phase: Phase,
) -> Run:  # fmt: skip
    model = XLMForSequenceClassification(cfg.model_config(data.vocab_size), 3, cfg.pooling)
    if init is not None:
        own = model.state_dict()
        model.load_state_dict({**own, **{k: v for k, v in init.items() if k in own}})
    if cfg.freeze_embeddings:  # B's tokens keep the places pretraining gave them, next to A's
        for table in (model.xlm.tok_emb, model.xlm.pos_emb, model.xlm.lang_emb):
            table.weight.requires_grad_(False)
    model.to(cfg.device)
    iters = phase.iters
    optimizer, scheduler = _optimizer(model, cfg, cfg.finetune_lr, iters, max(1, iters // 10))
    pairs, labels = data.test
    tests = {lang: pair_batch(data, pairs, lang) for lang in (LANG_A, LANG_B)}
    # unlabelled pairs in each language: where the language's features sit, for centring
    plain = {lang: pair_batch(data, data.unlabelled, lang) for lang in (LANG_A, LANG_B)}

    def features(batch: tuple) -> Tensor:
        ids, positions, langs, mask = batch
        return model.features(ids, langs, positions, mask)  # (B, C)

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        out = {}
        for lang, batch in tests.items():
            x = features(batch)
            if cfg.centre:
                x = x - features(plain[lang]).mean(0, keepdims=True)
            logits, loss = model.classify(x, labels)
            hits = int((backend.to_host(logits.data.argmax(1)) == labels).sum())
            out[f"test_{'ab'[lang]}"], out[f"acc_{'ab'[lang]}"] = loss.item(), hits / len(labels)
        model.train()
        return out

    def loss(inputs: tuple, labels: np.ndarray) -> Tensor:
        x = features(inputs)
        if cfg.centre:  # all in A: the batch's mean stands for A's
            x = x - x.mean(0, keepdims=True)
        return model.classify(x, labels)[1]

    def get_batch(rng: np.random.Generator) -> tuple:
        picks = rng.integers(0, len(data.train[1]), cfg.batch_size)
        return pair_batch(data, data.train[0][picks], LANG_A), data.train[1][picks]

    return Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 3, run]), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="xlm", title=f"fine-tuning in A ({name})",
        loss=loss,
        meta=lambda: {"model_config": dataclasses.asdict(model.config),
                      "tokenizer": data.tokenizer.to_dict()},
        resume_hint=f"tinyformer train xlm --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def train_xlm(cfg: TrainXLMConfig) -> dict[str, Any]:
    """All the runs; returns their logs by name: "pretrain-tlm" and "pretrain-mlm" a log
    each, "tlm", "mlm" and "scratch" a list of logs, one per fine-tuning seed."""
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_xlm(cfg)


def _train_xlm(cfg: TrainXLMConfig) -> dict[str, Any]:
    data = prepare(cfg)
    print(f"numbers 0-{MAX_NUMBER} in two languages, shared BPE vocabulary of "
          f"{data.tokenizer.vocab_size} (+4 special); task: {len(data.train[1])} labelled "
          f"pairs in A, {len(data.test[1])} test pairs in A and B")  # fmt: skip
    logs: dict[str, Any] = {}
    encoders = {}
    for step, tlm in ((1, True), (2, False)):
        name = "tlm" if tlm else "mlm"
        print(f"{step}/3 pretraining: {'MLM + TLM' if tlm else 'MLM only'}")
        model, logs[f"pretrain-{name}"] = pretrain(cfg, data, tlm)
        if len(logs[f"pretrain-{name}"]["loss"]) < cfg.pretrain_iters:
            return logs  # interrupted: the loop printed how to resume
        encoders[name] = {k: v for k, v in model.state_dict().items() if k.startswith("xlm.")}
    print(f"3/3 fine-tuning in A, {cfg.finetune_seeds} runs from each encoder")
    for name in ("tlm", "mlm", "scratch"):
        logs[name] = [
            finetune(cfg, data, encoders.get(name), f"finetune-{name}-{run}", run)
            for run in range(1, cfg.finetune_seeds + 1)
        ]
    from tinyformer.train.xlm.report import report

    report(cfg, logs)
    return logs
