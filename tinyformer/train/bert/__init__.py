"""`tinyformer train bert`: pretrain a tiny BERT with masked LM, then show that it helps.

Three runs, one command:

1. Pretrain: masked-LM on windows of the corpus (BERT's 15% / 80-10-10 masking), with a
   WordPiece vocabulary built from the corpus.                   -> out/bert/pretrain/
2. Fine-tune the pretrained encoder on a sentence task: are the sentence's words in their
   written order, or shuffled?                                   -> out/bert/finetune-pretrained/
3. The same fine-tuning, same data, steps, learning rate and seed, from random weights.
                                                                 -> out/bert/finetune-scratch/

With `--nsp`, pretraining is BERT's joint one: masked LM on sentence pairs packed as
[CLS] A [SEP] B [SEP], plus next-sentence prediction (is B the sentence after A, or a random
one?) on the pooled [CLS] vector; NSP accuracy on held-out pairs joins the evaluations.

The sentences the task is tested on are cut out of the pretraining text, so pretraining never
sees them; the held-out NSP pairs are those whose first sentence is one of them. The closing
table and out/bert/compare.png put the two fine-tuning runs side by side:
"pretrain once, fine-tune many times" as a measurement.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data.wordpiece import WordPieceTokenizer
from tinyformer.models.bert import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
)
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.bert.config import TrainBertConfig
from tinyformer.train.bert.data import (
    Corpus,
    classify_batch,
    mlm_batch,
    nsp_batch,
    pair_batch,
    prepare,
)
from tinyformer.train.loop import Phase, Run, start_run
from tinyformer.train.memory import check_batch_fits, transformer_floor
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import config_from_checkpoint

__all__ = ["Phase", "TrainBertConfig", "finetune", "pretrain", "train_bert"]


def _optimizer(model: Any, cfg: TrainBertConfig, lr: float, iters: int, warmup: int) -> tuple:
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=lr, betas=(0.9, 0.999))
    return optimizer, WarmupCosineLR(optimizer, min(warmup, iters), iters, 0.1)


def pretrain(cfg: TrainBertConfig, corpus: Corpus) -> tuple[BertForMaskedLM, dict[str, Any]]:
    """Masked-LM pretraining (with next-sentence prediction under --nsp: the model is then a
    `BertForPreTraining`); returns the model and the run's log."""
    phase = Phase(cfg.pretrain_iters, cfg.eval_interval, str(Path(cfg.out_dir) / "pretrain"),
                  cfg.progress, resume=cfg.resume)  # fmt: skip
    training = _nsp_run if cfg.nsp else _mlm_run

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        return training(cfg, corpus, phase, state, saved)

    run, log = start_run(phase, build, seed=cfg.seed)
    return run.model, log


def _pretraining_model(
    cfg: TrainBertConfig, corpus: Corpus, state: dict | None, saved: dict | None
) -> tuple[Any, BertConfig]:
    """The pretraining model, new or (on --resume) shaped as the saved one."""
    if saved:
        mconf = config_from_checkpoint(saved["_path"], BertConfig, saved["model_config"], state)
        if saved.get("bert_config", {}).get("nsp", False) != cfg.nsp:
            raise ValueError(f"{saved['_path']} was pretrained "
                             f"{'with' if not cfg.nsp else 'without'} --nsp: resume it "
                             f"{'with' if not cfg.nsp else 'without'} --nsp")  # fmt: skip
    else:
        mconf = cfg.model_config(corpus.tokenizer.vocab_size)
    model = (BertForPreTraining if cfg.nsp else BertForMaskedLM)(mconf).to(cfg.device)
    return model, mconf


def _mlm_evaluation(model: Any, corpus: Corpus, cfg: TrainBertConfig) -> Any:
    """Masked-LM loss and accuracy on the same masked windows of the corpus and of the
    held-out sentences at every evaluation."""

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        rng = np.random.default_rng([cfg.seed, 1])  # the same masked windows at every check
        out = {}
        for split, ids in (("train", corpus.pretrain_ids), ("val", corpus.heldout_ids)):
            losses, hits, total = [], 0, 0
            for _ in range(8):
                inputs, labels = mlm_batch(ids, corpus.tokenizer, cfg, rng)
                logits, loss = model(inputs, labels)
                logits = logits[0] if cfg.nsp else logits  # (masked-LM, NSP) logits
                losses.append(loss.item())
                target = labels[labels != -100]
                hits, total = (
                    hits + int((backend.to_host(logits.data.argmax(1)) == target).sum()),
                    total + len(target),
                )
            out[split], out[f"{split}_acc"] = float(np.mean(losses)), hits / total
        model.train()
        return out

    return evaluate


def _pretraining_run(
    cfg: TrainBertConfig, phase: Phase, model: Any, mconf: BertConfig, tok: WordPieceTokenizer,
    **parts: Any,
) -> Run:  # fmt: skip
    """The Run of either pretraining, given its batches, evaluation and loss (`parts`)."""
    optimizer, scheduler = _optimizer(model, cfg, cfg.lr, phase.iters, cfg.warmup)
    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed), **parts, config=phase,
        command="bert", title="BERT masked-LM" + (" + NSP" if cfg.nsp else "") + " pretraining",
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "tokenizer": tok.to_dict(),
                      "bert_config": dataclasses.asdict(cfg)},
        resume_hint=f"tinyformer train bert --resume --out-dir {cfg.out_dir}"
        + (" --nsp" if cfg.nsp else ""),
    )  # fmt: skip


def _mlm_run(
    cfg: TrainBertConfig, corpus: Corpus, phase: Phase, state: dict | None, saved: dict | None
) -> Run:
    """Masked-LM pretraining on random windows of the corpus."""
    model, mconf = _pretraining_model(cfg, corpus, state, saved)
    tok = corpus.tokenizer
    return _pretraining_run(
        cfg, phase, model, mconf, tok,
        get_batch=lambda rng: mlm_batch(corpus.pretrain_ids, tok, cfg, rng),
        evaluate=_mlm_evaluation(model, corpus, cfg),
        loss=lambda inputs, labels: model(inputs, labels)[1],
    )  # fmt: skip


def _nsp_run(
    cfg: TrainBertConfig, corpus: Corpus, phase: Phase, state: dict | None, saved: dict | None
) -> Run:
    """BERT's joint pretraining: masked LM on packed sentence pairs, and next-sentence
    prediction, whose loss and accuracy join the masked-LM evaluation."""
    model, mconf = _pretraining_model(cfg, corpus, state, saved)
    # one fixed draw of the held-out pairs' random halves, the same at every evaluation, and
    # as many training pairs (memorised, or understood? the two accuracies tell)
    pool = corpus.train_sentences + corpus.test_sentences
    rng = np.random.default_rng([cfg.seed, 4])
    picks = rng.permutation(len(corpus.nsp_train))[: len(corpus.nsp_test)]
    nsp_sets = {
        "val": pair_batch(corpus, corpus.nsp_test, pool, cfg, rng),
        "train": pair_batch(corpus, [corpus.nsp_train[i] for i in picks], corpus.nsp_pool,
                            cfg, rng),
    }  # fmt: skip
    masked_lm = _mlm_evaluation(model, corpus, cfg)

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        out = masked_lm(it)
        model.eval()
        for split, batch in nsp_sets.items():
            out[f"nsp_{split}"], out[f"nsp_{split}_acc"] = _evaluate_nsp(model, batch)
        model.train()
        return out

    def loss(inputs: tuple, labels: tuple) -> Any:
        (ids, mask, types), (mlm_labels, nsp_labels) = inputs, labels
        return model(ids, mlm_labels, mask, types, nsp_labels)[1]

    return _pretraining_run(
        cfg, phase, model, mconf, corpus.tokenizer, evaluate=evaluate, loss=loss,
        get_batch=lambda rng: nsp_batch(corpus, cfg, rng),
    )  # fmt: skip


def _evaluate_nsp(model: BertForPreTraining, batch: tuple, size: int = 100) -> tuple[float, float]:
    """NSP loss and accuracy on a batch of pairs (unmasked, as a task would read them), `size`
    pairs at a time."""
    (ids, mask, types), labels = batch
    losses, hits = [], 0
    for i in range(0, len(labels), size):
        rows = slice(i, i + size)
        (_, logits), loss = model(ids[rows], None, mask[rows], types[rows], labels[rows])
        losses.append(loss.item() * len(labels[rows]))
        hits += int((backend.to_host(logits.data.argmax(1)) == labels[rows]).sum())
    return float(np.sum(losses) / len(labels)), hits / len(labels)


def finetune(
    cfg: TrainBertConfig, corpus: Corpus, init: dict[str, Any] | None, name: str
) -> dict[str, Any]:
    """Fine-tune a classifier on the tampering task, from an encoder state dict (`init`, the
    "bert.*" entries of a pretrained model's state_dict, Tensors or arrays; they are copied) or
    from random weights (None). Returns the log; its evals hold test loss and accuracy."""
    iters = cfg.finetune_iters
    phase = Phase(iters, max(1, iters // 10), str(Path(cfg.out_dir) / name), cfg.progress)

    def build(phase: Phase, state: None, saved: None) -> Run:  # a fine-tuning never resumes
        return _finetuning_run(cfg, corpus, init, phase)

    # seed + 1: the same classifier initialisation for both runs
    return start_run(phase, build, seed=cfg.seed + 1)[1]


def _finetuning_run(
    cfg: TrainBertConfig, corpus: Corpus, init: dict[str, Any] | None, phase: Phase
) -> Run:
    tok = corpus.tokenizer
    mconf = cfg.model_config(tok.vocab_size)
    model = BertForSequenceClassification(mconf, num_labels=2)
    if init is not None:
        own = model.state_dict()
        model.load_state_dict({**own, **{k: v for k, v in init.items() if k in own}})
    model.to(cfg.device)
    iters = phase.iters
    optimizer, scheduler = _optimizer(model, cfg, cfg.finetune_lr, iters, max(1, iters // 10))
    test_rng = np.random.default_rng([cfg.seed, 2])  # one fixed tampering of the test set
    test = [classify_batch(corpus.test_sentences[i : i + 100], corpus, cfg.seq_len, test_rng)
            for i in range(0, len(corpus.test_sentences), 100)]  # fmt: skip

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        losses, hits = [], 0
        for (ids, mask), labels in test:
            logits, loss = model(ids, labels, mask)
            losses.append(loss.item() * len(labels))
            hits += int((backend.to_host(logits.data.argmax(1)) == labels).sum())
        model.train()
        n = len(corpus.test_sentences)
        return {"test": float(np.sum(losses) / n), "test_acc": hits / n}

    def get_batch(rng: np.random.Generator) -> tuple:
        picks = rng.choice(len(corpus.train_sentences), size=cfg.batch_size, replace=False)
        return classify_batch([corpus.train_sentences[i] for i in picks], corpus, cfg.seq_len, rng)

    return Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 3]), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="bert",
        title=f"fine-tuning ({Path(phase.out_dir).name})",
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "tokenizer": tok.to_dict()},
        loss=lambda inputs, labels: model(inputs[0], labels, inputs[1])[1],
        resume_hint=f"tinyformer train bert --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def train_bert(cfg: TrainBertConfig) -> dict[str, Any]:
    """All three runs; returns {"pretrain": log, "pretrained": log, "scratch": log}."""
    # claimed before the corpus and its tokenizer are built: a refusal comes before any work
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_bert(cfg)


def _train_bert(cfg: TrainBertConfig) -> dict[str, Any]:
    floor = transformer_floor(cfg.seq_len, cfg.n_layer, cfg.d_model, cfg.d_ff)
    sizes = (
        f"--n-layer {cfg.n_layer} --d-model {cfg.d_model} --d-ff {cfg.d_ff} --seq-len {cfg.seq_len}"
    )
    what = f"this BERT on {cfg.seq_len} tokens"
    check_batch_fits(cfg.batch_size, floor, what, cfg.device, sizes=sizes)
    corpus = prepare(cfg)
    if cfg.batch_size > len(corpus.train_sentences):  # fine-tuning draws them without repeats
        raise ValueError(
            f"--batch-size {cfg.batch_size} is more than the {len(corpus.train_sentences)} "
            f"sentences fine-tuning draws each batch from"
        )
    print(f"corpus {cfg.data}: {len(corpus.pretrain_ids):,} pretraining tokens, vocabulary "
          f"{corpus.tokenizer.vocab_size}; task: {len(corpus.train_sentences)} training and "
          f"{len(corpus.test_sentences)} test sentences")  # fmt: skip
    print("1/3 masked-LM pretraining")
    model, pre_log = pretrain(cfg, corpus)
    if len(pre_log["loss"]) < cfg.pretrain_iters:
        return {"pretrain": pre_log}  # interrupted: the loop printed how to resume
    encoder = {k: v for k, v in model.state_dict().items() if k.startswith("bert.")}
    print("2/3 fine-tuning the pretrained encoder")
    logs = {
        "pretrain": pre_log,
        "pretrained": finetune(cfg, corpus, encoder, "finetune-pretrained"),
    }
    print("3/3 the same fine-tuning from random weights")
    logs["scratch"] = finetune(cfg, corpus, None, "finetune-scratch")
    from tinyformer.train.bert.report import report

    report(cfg, logs)
    return logs
