"""`tinyformer train vilbert`: pretrain a tiny ViLBERT on captioned digit scenes, then show
that it helps a question-answering task with few labelled examples.

Three runs, one command (scenes: `tinyformer.data.scenes`, two 8x8 digits on a 16x16 canvas):

1. Pretrain on freshly drawn captioned scenes ("a seven left of a two") from the training
   digits: masked words, masked regions (predict the digit) and image-text alignment (the
   scene's caption, or another scene's).                      -> out/vilbert/pretrain/
   Then coattention.png: who attends to whom, for one held-out scene.
2. Fine-tune the pretrained encoder to answer "what is left of the two ?" from only
   `--finetune-examples` labelled scenes.                     -> out/vilbert/finetune-pretrained/
3. The same fine-tuning (same examples, steps, learning rate, head and batch order) from
   random weights.                                            -> out/vilbert/finetune-scratch/

Every evaluation reads scenes built from held-out digits, which no run trains on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import load_digits
from tinyformer.data.mlm import mask_tokens
from tinyformer.data.scenes import (
    DIGIT_WORDS,
    MASK,
    SPECIAL_IDS,
    VOCAB,
    Scenes,
    caption_text,
    encode,
    make_scenes,
    mask_regions,
    questions,
)  # fmt: skip
from tinyformer.models.vilbert import (
    ViLBERTConfig,
    ViLBERTForPreTraining,
    ViLBERTForQuestionAnswering,
    encoder_state,
)  # fmt: skip
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.loop import Phase, Run, start_run
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import config_from_checkpoint
from tinyformer.train.vilbert.config import TrainViLBERTConfig
from tinyformer.train.vision import split_indices

__all__ = ["Digits", "TrainViLBERTConfig", "evaluate_pretraining", "finetune", "load_split",
           "pretrain", "pretrain_batch", "qa_batch", "train_vilbert"]  # fmt: skip


@dataclass
class Digits:
    train: np.ndarray  # (M, 1, 8, 8): every training scene is built from these
    train_labels: np.ndarray
    test: np.ndarray  # every evaluation scene is built from these
    test_labels: np.ndarray


def load_split(cfg: TrainViLBERTConfig) -> Digits:
    images, labels = load_digits()
    train, test = split_indices(labels, cfg.val_fraction, cfg.seed)
    return Digits(images[train], labels[train], images[test], labels[test])


def pretrain_batch(
    scenes: Scenes, cfg: TrainViLBERTConfig, rng: np.random.Generator
) -> tuple[tuple, tuple]:
    """Masked, and half of them mismatched: ((ids, mask, regions, boxes), (word labels (B, T),
    region labels (B, R), alignment (B,): 1 where the caption is another scene's)). As in
    ViLBERT, a mismatched pair has no masked-word or masked-region targets."""
    n = len(scenes)
    own = [caption_text(scenes, i) for i in range(n)]
    swap = rng.random(n) < 0.5
    other = (np.arange(n) + rng.integers(1, max(n, 2), size=n)) % n  # another scene (n > 1)
    texts = [own[other[i]] if swap[i] else own[i] for i in range(n)]
    align = np.array([t != c for t, c in zip(texts, own)], np.int64)  # the same words: a match
    ids, mask = encode(texts)
    ids, words = mask_tokens(ids, mask_id=MASK, vocab_size=len(VOCAB), special_ids=SPECIAL_IDS,
                             rng=rng, mlm_probability=cfg.word_mask)  # fmt: skip
    regions, classes = mask_regions(scenes.regions, scenes.labels, rng, cfg.region_mask)
    words[align == 1], classes[align == 1] = -100, -100
    return (ids, mask, regions, scenes.boxes), (words, classes, align)


def qa_batch(scenes: Scenes) -> tuple[tuple, np.ndarray]:
    """Questions about the scenes: ((ids, mask, regions, boxes), answers (B,))."""
    texts, answers = questions(scenes)
    ids, mask = encode(texts)
    return (ids, mask, scenes.regions, scenes.boxes), answers


def _optimizer(model: Any, cfg: TrainViLBERTConfig, lr: float, iters: int, warmup: int) -> tuple:
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=lr)
    return optimizer, WarmupCosineLR(optimizer, min(warmup, iters), iters, 0.1)


def _host(logits: Any) -> np.ndarray:
    return backend.to_host(logits.data.argmax(-1))


@tf.no_grad()
def evaluate_pretraining(model: ViLBERTForPreTraining, batch: tuple) -> dict[str, float]:
    """Loss and accuracies on a fixed batch: masked words (all, and digit names alone), masked
    regions, alignment."""
    inputs, (words, classes, align) = batch
    (w_logits, r_logits, a_logits), loss = model(inputs, (words, classes, align))
    w_pred, r_pred, a_pred = _host(w_logits), _host(r_logits), _host(a_logits)
    digit = words >= VOCAB.index(DIGIT_WORDS[0])
    return {
        "val": loss.item(),
        "word_acc": float((w_pred == words)[words != -100].mean()),
        "digit_word_acc": float((w_pred == words)[digit].mean()),
        "region_acc": float((r_pred == classes)[classes != -100].mean()),
        "align_acc": float((a_pred == align).mean()),
    }


def pretrain(cfg: TrainViLBERTConfig, data: Digits) -> tuple[ViLBERTForPreTraining, dict]:
    """The pretraining run; returns the model and its log."""
    phase = Phase(cfg.pretrain_iters, cfg.eval_interval, str(Path(cfg.out_dir) / "pretrain"),
                  cfg.progress, resume=cfg.resume)  # fmt: skip

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        return _pretraining_run(cfg, data, phase, state, saved)

    run, log = start_run(phase, build, seed=cfg.seed)
    return run.model, log


def _pretraining_run(
    cfg: TrainViLBERTConfig, data: Digits, phase: Phase, state: dict | None, saved: dict | None
) -> Run:
    if saved:
        mconf = config_from_checkpoint(saved["_path"], ViLBERTConfig, saved["model_config"], state)
    else:
        mconf = cfg.model_config()
    model = ViLBERTForPreTraining(mconf).to(cfg.device)
    optimizer, scheduler = _optimizer(model, cfg, cfg.lr, phase.iters, cfg.warmup)
    # the same held-out scenes, masks and mismatches at every evaluation (their own generator)
    fixed = np.random.default_rng([cfg.seed, 1])
    held_out = pretrain_batch(make_scenes(data.test, data.test_labels, cfg.test_scenes, fixed),
                              cfg, fixed)  # fmt: skip

    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        numbers = evaluate_pretraining(model, held_out)
        model.train()
        return numbers

    def get_batch(rng: np.random.Generator) -> tuple:
        return pretrain_batch(make_scenes(data.train, data.train_labels, cfg.batch_size, rng),
                              cfg, rng)  # fmt: skip

    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="vilbert",
        title="ViLBERT pretraining: masked words + masked regions + alignment",
        loss_label="sum of the three cross-entropies",
        meta=lambda: {"model_config": dataclasses.asdict(mconf),
                      "vilbert_config": dataclasses.asdict(cfg)},
        loss=lambda inputs, targets: model(inputs, targets)[1],
        resume_hint=f"tinyformer train vilbert --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def finetune(
    cfg: TrainViLBERTConfig, data: Digits, mconf: ViLBERTConfig, init: dict | None, name: str
) -> dict[str, Any]:
    """Question answering from the encoder weights `init` (`encoder_state(model)`) or from
    random weights (None). Returns the log; its evals hold test loss and accuracy."""
    iters = cfg.finetune_iters
    phase = Phase(iters, max(1, iters // 5), str(Path(cfg.out_dir) / name), cfg.progress)

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        return _finetuning_run(cfg, data, mconf, init, name, phase)

    # seed + 1: the same answer head for both runs
    return start_run(phase, build, seed=cfg.seed + 1)[1]


def _finetuning_run(
    cfg: TrainViLBERTConfig, data: Digits, mconf: ViLBERTConfig, init: dict | None, name: str,
    phase: Phase,
) -> Run:  # fmt: skip
    model = ViLBERTForQuestionAnswering(mconf, num_answers=len(DIGIT_WORDS))
    if init is not None:
        model.load_state_dict({**model.state_dict(), **init})
    model.to(cfg.device)
    iters = phase.iters
    optimizer, scheduler = _optimizer(model, cfg, cfg.finetune_lr, iters, max(1, iters // 10))
    rng = np.random.default_rng([cfg.seed, 2])  # the same examples for both runs
    train_inputs, train_answers = qa_batch(
        make_scenes(data.train, data.train_labels, cfg.finetune_examples, rng)
    )
    test_inputs, test_answers = qa_batch(
        make_scenes(data.test, data.test_labels, cfg.test_scenes, rng)
    )

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        logits, loss = model(test_inputs, test_answers)
        model.train()
        return {"test": loss.item(), "test_acc": float((_host(logits) == test_answers).mean())}

    def get_batch(rng: np.random.Generator) -> tuple:
        idx = rng.integers(0, len(train_answers), cfg.batch_size)
        return tuple(x[idx] for x in train_inputs), train_answers[idx]

    return Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 3]), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="vilbert", title=f"question answering ({name})",
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "model_kind": "vilbert_qa"},
        resume_hint=f"tinyformer train vilbert --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def train_vilbert(cfg: TrainViLBERTConfig) -> dict[str, Any]:
    """All three runs; returns {"pretrain": log, "pretrained": log, "scratch": log}."""
    # claimed before the data is read: a refusal comes before any work
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_vilbert(cfg)


def _train_vilbert(cfg: TrainViLBERTConfig) -> dict[str, Any]:
    from tinyformer.train.vilbert.report import plot_coattention, report

    data = load_split(cfg)
    print(f"digits: {len(data.train)} for training scenes, {len(data.test)} held out for test "
          f"scenes; fine-tuning reads {cfg.finetune_examples} labelled questions")  # fmt: skip
    print("1/3 pretraining: masked words, masked regions, image-text alignment")
    model, pre_log = pretrain(cfg, data)
    if len(pre_log["loss"]) < cfg.pretrain_iters:
        return {"pretrain": pre_log}  # interrupted: the loop printed how to resume
    figure = Path(cfg.out_dir) / "coattention.png"
    scene = make_scenes(data.test, data.test_labels, 1, np.random.default_rng([cfg.seed, 5]))
    plot_coattention(model.vilbert, scene, figure)
    print(f"co-attention of a held-out scene: {figure}")
    print("2/3 question answering from the pretrained encoder")
    mconf = model.config
    logs = {
        "pretrain": pre_log,
        "pretrained": finetune(cfg, data, mconf, encoder_state(model), "finetune-pretrained"),
    }
    print("3/3 the same fine-tuning from random weights")
    logs["scratch"] = finetune(cfg, data, mconf, None, "finetune-scratch")
    report(cfg, logs)
    return logs
