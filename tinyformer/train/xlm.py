"""`tinyformer train xlm`: cross-lingual pretraining, measured by zero-shot transfer.

Two made-up languages write the numbers 0-999 with no letter in common and opposite word
orders (`tinyformer.data.numerals`); one byte-level BPE vocabulary is trained on both. Five
runs, one command:

1. Pretrain with MLM + TLM: half of each batch is masked monolingual sentences (either
   language), half is masked translation pairs.                  -> out/xlm/pretrain-tlm/
2. Pretrain with MLM only: the same steps and rows, all monolingual.  -> out/xlm/pretrain-mlm/
3. Fine-tune each of the two encoders, and a random one, on a relation between two numbers
   (less / same / greater), in language A only.       -> out/xlm/finetune-{tlm,mlm,scratch}/

Each fine-tuned classifier is tested on the same held-out pairs written in A (the language it
was trained in) and in B (zero-shot: it never saw a labelled example in B). The closing table
and out/xlm/compare.png put the three side by side.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data.mlm import mask_tokens
from tinyformer.data.numerals import MAX_NUMBER, compare_pairs, count_sentence, write_number
from tinyformer.data.tlm import pack_monolingual, pack_translation_pairs
from tinyformer.data.tokenizers import BPETokenizer
from tinyformer.models.xlm import XLMConfig, XLMForMaskedLM, XLMForSequenceClassification
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.args import BELOW_ONE, COUNT, NONNEGATIVE, POSITIVE, Range, check_ranges, flag
from tinyformer.train.loop import Phase, Run, resume_from, resume_into, train_loop
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import config_from_checkpoint

__all__ = [
    "NumeralData",
    "TrainXLMConfig",
    "finetune",
    "pair_batch",
    "prepare",
    "pretrain",
    "pretrain_batch",
    "train_xlm",
]

LANG_A, LANG_B = 0, 1


@dataclass
class TrainXLMConfig:
    vocab_size: int = flag(320, "BPE vocabulary size (bytes + merges), trained on both languages",
                           valid=Range(256))  # fmt: skip
    sentence_len: int = flag(3, "consecutive numbers per pretraining sentence", valid=COUNT)
    n_layer: int = flag(2, "encoder blocks")
    n_head: int = flag(4, "attention heads")
    d_model: int = flag(64, "width")
    d_ff: int = flag(256, "MLP hidden width")
    dropout: float = flag(0.1, "dropout in the encoder", valid=BELOW_ONE)
    pretrain_iters: int = flag(800, "pretraining steps (each of the two runs)", valid=COUNT)
    finetune_iters: int = flag(400, "fine-tuning steps (each of the three runs)", valid=COUNT)
    batch_size: int = flag(32, "rows per batch", valid=Range(2))
    lr: float = flag(1e-3, "peak learning rate of pretraining", valid=POSITIVE)
    finetune_lr: float = flag(1e-3, "peak learning rate of fine-tuning", valid=POSITIVE)
    freeze_embeddings: bool = flag(
        False, "fine-tune with the token, position and language embeddings frozen"
    )
    warmup: int = flag(50, "linear warm-up steps of pretraining", valid=NONNEGATIVE)
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    train_pairs: int = flag(2000, "labelled number pairs in language A to fine-tune on",
                            valid=COUNT)  # fmt: skip
    test_pairs: int = flag(600, "held-out pairs, tested in A and (zero-shot) in B", valid=COUNT)
    eval_interval: int = flag(100, "evaluate and checkpoint every this many steps", valid=COUNT)
    seed: int = flag(1337, "seed for initialisation, data and dropout", valid=NONNEGATIVE)
    out_dir: str = flag("out/xlm", "folder for the five runs, compare.png and results.json")
    resume: bool = flag(False, "continue an interrupted pretraining in --out-dir")
    overwrite: bool = flag(False, "start a new run in an --out-dir that holds one, replacing it")
    progress: bool = flag(True, "show progress bars")
    device: str = flag("cpu", "where to train: cpu, or cuda (an NVIDIA GPU, through CuPy)")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.sentence_len > MAX_NUMBER:
            raise ValueError(f"--sentence-len must be at most {MAX_NUMBER}, got "
                             f"{self.sentence_len}")  # fmt: skip

    def model_config(self, vocab_size: int) -> XLMConfig:
        # the longest part of a row: [CLS], a sentence of sentence_len numbers (at most 4
        # words each, and the commas between), [SEP]; positions restart for the second part
        return XLMConfig(
            vocab_size=vocab_size, n_langs=2, max_position=8 * (5 * self.sentence_len + 2),
            n_layer=self.n_layer, n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff,
            dropout=self.dropout,
        )  # fmt: skip


@dataclass
class NumeralData:
    """The shared vocabulary and the task's pairs. Special tokens follow the BPE tokens."""

    tokenizer: BPETokenizer
    train: tuple[np.ndarray, np.ndarray]  # pairs (N, 2) and labels (N,), fine-tuned in A
    test: tuple[np.ndarray, np.ndarray]  # held out, tested in A and in B

    @property
    def pad_id(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def cls_id(self) -> int:
        return self.tokenizer.vocab_size + 1

    @property
    def sep_id(self) -> int:
        return self.tokenizer.vocab_size + 2

    @property
    def mask_id(self) -> int:
        return self.tokenizer.vocab_size + 3

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size + 4

    def encode(self, n: int, lang: int) -> list[int]:
        return self.tokenizer.encode(write_number(int(n), "ab"[lang]))

    def sentence(self, start: int, length: int, lang: int) -> list[int]:
        return self.tokenizer.encode(count_sentence(int(start), length, "ab"[lang]))

    def special(self) -> dict[str, int]:
        return {"cls_id": self.cls_id, "sep_id": self.sep_id, "pad_id": self.pad_id}


def prepare(cfg: TrainXLMConfig) -> NumeralData:
    """The BPE vocabulary (trained on every number and a comma-separated count in both
    languages) and the task's training and test pairs (no test pair is a training pair)."""
    text = "\n".join(count_sentence(0, MAX_NUMBER + 1, lang) for lang in "ab")
    tokenizer = BPETokenizer.train(text, cfg.vocab_size)
    rng = np.random.default_rng([cfg.seed, 0])
    test = compare_pairs(cfg.test_pairs, rng)
    seen = {tuple(p) for p in test[0]}
    pairs, labels = compare_pairs(2 * cfg.train_pairs + cfg.test_pairs, rng)
    keep = np.flatnonzero([tuple(p) not in seen for p in pairs])[: cfg.train_pairs]
    return NumeralData(tokenizer, (pairs[keep], labels[keep]), test)


def _stack(batches: list[tuple[np.ndarray, ...]], fills: tuple[int, ...]) -> tuple:
    """Row-stack batches of (B_i, T_i) arrays, padding each to the widest T with `fills`."""
    width = max(b[0].shape[1] for b in batches)
    return tuple(
        np.concatenate(
            [
                np.pad(b[k], ((0, 0), (0, width - b[k].shape[1])), constant_values=fill)
                for b in batches
            ]
        )  # fmt: skip
        for k, fill in enumerate(fills)
    )


def pretrain_batch(
    data: NumeralData, cfg: TrainXLMConfig, tlm: bool, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """A masked batch: monolingual sentences in random languages (all rows without `tlm`, half
    with it) and translation pairs (the other half, each direction equally often) ->
    ((inputs, positions, langs, mask) (B, T), labels (B, T))."""
    n_pairs = cfg.batch_size // 2 if tlm else 0
    n_mono = cfg.batch_size - n_pairs
    top = MAX_NUMBER + 1 - cfg.sentence_len
    starts, langs = rng.integers(0, top + 1, n_mono), rng.integers(0, 2, n_mono)
    rows = [data.sentence(s, cfg.sentence_len, lang) for s, lang in zip(starts, langs)]
    parts = [pack_monolingual(rows, langs, **data.special())]
    if n_pairs:
        starts, first = rng.integers(0, top + 1, n_pairs), rng.integers(0, 2, n_pairs)
        a = [data.sentence(s, cfg.sentence_len, lang) for s, lang in zip(starts, first)]
        b = [data.sentence(s, cfg.sentence_len, 1 - lang) for s, lang in zip(starts, first)]
        parts.append(pack_translation_pairs(a, b, first, 1 - first, **data.special()))
    ids, positions, lang_ids, mask = _stack(parts, (data.pad_id, 0, 0, 0))
    inputs, labels = mask_tokens(
        ids, mask_id=data.mask_id, vocab_size=data.tokenizer.vocab_size, rng=rng,
        special_ids=(data.pad_id, data.cls_id, data.sep_id, data.mask_id),
    )  # fmt: skip
    return (inputs, positions, lang_ids, mask), labels


def _optimizer(model: Any, cfg: TrainXLMConfig, lr: float, iters: int, warmup: int) -> tuple:
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=lr, betas=(0.9, 0.999))
    return optimizer, WarmupCosineLR(optimizer, min(warmup, iters), iters, 0.1)


def pretrain(cfg: TrainXLMConfig, data: NumeralData, tlm: bool) -> tuple[XLMForMaskedLM, dict]:
    """MLM + TLM pretraining (`tlm`), or MLM only; returns the model and the run's log."""
    name = "pretrain-tlm" if tlm else "pretrain-mlm"
    out = Path(cfg.out_dir) / name
    # resumed only if it had started: an interrupted first run leaves no second checkpoint
    phase = Phase(cfg.pretrain_iters, cfg.eval_interval, str(out), cfg.progress,
                  resume=cfg.resume and (out / "ckpt.npz").exists())  # fmt: skip
    phase, state, saved = resume_from(phase, phase.out_dir)
    if saved:
        mconf = config_from_checkpoint(saved["_path"], XLMConfig, saved["model_config"], state)
    else:
        mconf = cfg.model_config(data.vocab_size)
    tf.manual_seed(cfg.seed)  # both pretrainings start from the same weights
    model = XLMForMaskedLM(mconf).to(cfg.device)
    optimizer, scheduler = _optimizer(model, cfg, cfg.lr, phase.iters, cfg.warmup)

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        out = {}
        for kind, with_pairs in (("mlm", False), ("tlm", True)):
            rng = np.random.default_rng([cfg.seed, 1])  # the same masked rows at every check
            (inputs, positions, langs, mask), labels = pretrain_batch(data, cfg, with_pairs, rng)
            logits, loss = model(inputs, langs, labels, positions, mask)
            target = labels[labels != -100]
            hits = int((backend.to_host(logits.data.argmax(1)) == target).sum())
            out[kind], out[f"{kind}_acc"] = loss.item(), hits / len(target)
        model.train()
        return out

    run = Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 2]),
        get_batch=lambda rng: pretrain_batch(data, cfg, tlm, rng), evaluate=evaluate,
        config=phase, command="xlm", title=("MLM + TLM" if tlm else "MLM-only") + " pretraining",
        loss=lambda inputs, labels: model(inputs[0], inputs[2], labels, inputs[1], inputs[3])[1],
        meta=lambda: {"model_config": dataclasses.asdict(mconf),
                      "tokenizer": data.tokenizer.to_dict(), "xlm_config": dataclasses.asdict(cfg)},
        resume_hint=f"tinyformer train xlm --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip
    resume_into(run, state, saved)
    return model, train_loop(run)


def pair_batch(
    data: NumeralData, pairs: np.ndarray, lang: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Number pairs (N, 2) written in `lang`, packed as [CLS] x [SEP] y [SEP] with positions
    restarting at y, as TLM's pairs are: (ids, positions, langs, mask) (N, T)."""
    first = [data.encode(x, lang) for x in pairs[:, 0]]
    second = [data.encode(y, lang) for y in pairs[:, 1]]
    langs = [lang] * len(pairs)
    return pack_translation_pairs(first, second, langs, langs, **data.special())


def finetune(
    cfg: TrainXLMConfig, data: NumeralData, init: dict[str, Any] | None, name: str
) -> dict[str, Any]:
    """Fine-tune a classifier on the relation task in language A, from an encoder state dict
    (the "xlm.*" entries of a pretrained model's state_dict) or from random weights (None).
    Returns the log; its evals hold test accuracy in A (`acc_a`) and zero-shot in B (`acc_b`)."""
    tf.manual_seed(cfg.seed + 1)  # the same classifier initialisation for all three runs
    model = XLMForSequenceClassification(cfg.model_config(data.vocab_size), num_labels=3)
    if init is not None:
        own = model.state_dict()
        model.load_state_dict({**own, **{k: v for k, v in init.items() if k in own}})
    if cfg.freeze_embeddings:  # B's tokens keep the places pretraining gave them, next to A's
        for table in (model.xlm.tok_emb, model.xlm.pos_emb, model.xlm.lang_emb):
            table.weight.requires_grad_(False)
    model.to(cfg.device)
    iters = cfg.finetune_iters
    optimizer, scheduler = _optimizer(model, cfg, cfg.finetune_lr, iters, max(1, iters // 10))
    pairs, labels = data.test
    tests = {lang: pair_batch(data, pairs, lang) for lang in (LANG_A, LANG_B)}

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        out = {}
        for lang, (ids, positions, langs, mask) in tests.items():
            logits, loss = model(ids, langs, labels, positions, mask)
            hits = int((backend.to_host(logits.data.argmax(1)) == labels).sum())
            out[f"test_{'ab'[lang]}"], out[f"acc_{'ab'[lang]}"] = loss.item(), hits / len(labels)
        model.train()
        return out

    def get_batch(rng: np.random.Generator) -> tuple:
        picks = rng.integers(0, len(data.train[1]), cfg.batch_size)
        return pair_batch(data, data.train[0][picks], LANG_A), data.train[1][picks]

    every = max(1, min(cfg.eval_interval, iters // 5))  # at least five evaluations
    phase = Phase(iters, every, str(Path(cfg.out_dir) / name), cfg.progress)
    run = Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 3]), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="xlm", title=f"fine-tuning in A ({name})",
        loss=lambda inputs, labels: model(inputs[0], inputs[2], labels, inputs[1], inputs[3])[1],
        meta=lambda: {"model_config": dataclasses.asdict(model.config),
                      "tokenizer": data.tokenizer.to_dict()},
        resume_hint=f"tinyformer train xlm --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip
    return train_loop(run)


def train_xlm(cfg: TrainXLMConfig) -> dict[str, Any]:
    """All five runs; returns their logs by name ("pretrain-tlm", ..., "scratch")."""
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
        print(f"{step}/5 pretraining: {'MLM + TLM' if tlm else 'MLM only'}")
        model, logs[f"pretrain-{name}"] = pretrain(cfg, data, tlm)
        if len(logs[f"pretrain-{name}"]["loss"]) < cfg.pretrain_iters:
            return logs  # interrupted: the loop printed how to resume
        encoders[name] = {k: v for k, v in model.state_dict().items() if k.startswith("xlm.")}
    for step, name in ((3, "tlm"), (4, "mlm"), (5, "scratch")):
        print(f"{step}/5 fine-tuning in A: {name}")
        logs[name] = finetune(cfg, data, encoders.get(name), f"finetune-{name}")
    from tinyformer.train.xlm_report import report

    report(cfg, logs)
    return logs
