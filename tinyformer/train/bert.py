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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import load_text
from tinyformer.data.mlm import mask_tokens, pad_batch
from tinyformer.data.nsp import consecutive_pairs, nsp_examples, pack_pairs
from tinyformer.data.sentences import split_runs, split_sentences, tamper_batch
from tinyformer.data.wordpiece import WordPieceTokenizer
from tinyformer.models.bert import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
)
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.args import BELOW_ONE, COUNT, NONNEGATIVE, POSITIVE, Range, check_ranges, flag
from tinyformer.train.loop import Run, resume_from, resume_into, train_loop
from tinyformer.train.memory import check_batch_fits, transformer_floor
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import config_from_checkpoint

__all__ = ["Phase", "TrainBertConfig", "finetune", "pretrain", "train_bert"]


@dataclass
class TrainBertConfig:
    data: str = flag("pydoc", "corpus: pydoc (embedded), tinyshakespeare, or a text file path")
    vocab_size: int = flag(4000, "WordPiece vocabulary size (built from the corpus)")
    seq_len: int = flag(64, "tokens per sequence, [CLS] and [SEP] included", valid=Range(3))
    n_layer: int = flag(2, "encoder blocks")
    n_head: int = flag(4, "attention heads")
    d_model: int = flag(128, "width")
    d_ff: int = flag(512, "MLP hidden width")
    norm: str = flag("post", "LayerNorm placement: post (BERT) or pre", ["post", "pre"])
    dropout: float = flag(0.1, "dropout in the encoder", valid=BELOW_ONE)
    pretrain_iters: int = flag(2000, "masked-LM steps", valid=COUNT)
    finetune_iters: int = flag(300, "fine-tuning steps (each of the two runs)", valid=COUNT)
    batch_size: int = flag(32, "sequences per batch", valid=COUNT)
    lr: float = flag(1e-3, "peak learning rate of pretraining", valid=POSITIVE)
    finetune_lr: float = flag(3e-4, "peak learning rate of fine-tuning (both runs)", valid=POSITIVE)
    warmup: int = flag(
        100, "linear warm-up steps (fine-tuning: a tenth of its steps)", valid=NONNEGATIVE
    )
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    held_out: int = flag(
        400, "sentences kept out of pretraining and fine-tuning, for testing", valid=COUNT
    )
    eval_interval: int = flag(
        250, "evaluate and checkpoint every this many pretraining steps", valid=COUNT
    )
    nsp: bool = flag(
        False, "pretrain on sentence pairs with next-sentence prediction as well as masked LM"
    )
    seed: int = flag(1337, "seed for initialisation, data and dropout", valid=NONNEGATIVE)
    out_dir: str = flag("out/bert", "folder for the three runs, compare.png and results.json")
    resume: bool = flag(False, "continue an interrupted pretraining in --out-dir")
    overwrite: bool = flag(False, "start a new run in an --out-dir that holds one, replacing it")
    progress: bool = flag(True, "show progress bars")
    device: str = flag("cpu", "where to train: cpu, or cuda (an NVIDIA GPU, through CuPy)")

    def __post_init__(self) -> None:
        check_ranges(self)

    def model_config(self, vocab_size: int) -> BertConfig:
        return BertConfig(
            vocab_size=vocab_size, max_position=self.seq_len, n_layer=self.n_layer,
            n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff, dropout=self.dropout,
            norm=self.norm,
        )  # fmt: skip


@dataclass
class Phase:
    """What the shared training loop reads from a configuration, for one of the three runs."""

    iters: int
    eval_interval: int
    out_dir: str
    progress: bool = True
    grad_clip: float = 1.0
    resume: bool = False


@dataclass
class Corpus:
    tokenizer: WordPieceTokenizer
    pretrain_ids: np.ndarray  # the corpus minus the test sentences, as one id stream
    heldout_ids: np.ndarray  # the test sentences, for the masked-LM validation loss
    train_sentences: list[str]  # for fine-tuning
    test_sentences: list[str]  # never seen in pretraining or fine-tuning
    # next-sentence prediction (empty without --nsp): (sentence, its next) pairs of the text
    nsp_train: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # no test sentence
    nsp_test: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # A: a test sentence
    nsp_pool: list[str] = dataclasses.field(default_factory=list)  # the random Bs of training
    piece_ids: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # sentence -> ids


def prepare(cfg: TrainBertConfig, tokenizer: WordPieceTokenizer | None = None) -> Corpus:
    raw = text = load_text(cfg.data)
    sentences = split_sentences(text)
    if len(sentences) < 2 * cfg.held_out:
        raise ValueError(
            f"train bert: the corpus has {len(sentences)} usable sentences; "
            f"--held-out {cfg.held_out} needs at least {2 * cfg.held_out}"
        )
    order = np.random.default_rng([cfg.seed, 0]).permutation(len(sentences))
    test = [sentences[i] for i in order[: cfg.held_out]]
    train = [sentences[i] for i in order[cfg.held_out :]]
    # Pretraining must not read the test sentences. They were cut from paragraphs with their
    # line breaks made spaces, so the text is cut the same way before they are taken out
    # (WordPiece splits on any whitespace, so nothing else changes).
    text = " ".join(text.split())
    for sentence in test:
        text = text.replace(sentence, " ")
    tokenizer = tokenizer or WordPieceTokenizer.train(text, cfg.vocab_size)
    heldout = np.array([i for s in test for i in tokenizer.encode(s, add_special_tokens=False)])
    ids = np.array(tokenizer.encode(text, add_special_tokens=False))
    corpus = Corpus(tokenizer, ids, heldout, train, test)
    if cfg.nsp:
        _add_pairs(corpus, raw)
    return corpus


def _add_pairs(corpus: Corpus, text: str) -> None:
    """The NSP pairs: training pairs hold no test sentence (so pretraining still never reads
    one); a test pair starts with a test sentence, whose link to its next sentence pretraining
    never saw. The test pairs' random Bs come from the whole corpus, as their true Bs do."""
    held_out = set(corpus.test_sentences)
    pairs = consecutive_pairs(split_runs(text))
    corpus.nsp_train = [(a, b) for a, b in pairs if a not in held_out and b not in held_out]
    corpus.nsp_test = [(a, b) for a, b in pairs if a in held_out]
    train = corpus.nsp_pool = corpus.train_sentences
    if not corpus.nsp_train or len(corpus.nsp_test) < 2:
        raise ValueError(f"train bert --nsp: the corpus gives {len(corpus.nsp_train)} training "
                         f"and {len(corpus.nsp_test)} held-out sentence pairs; it needs more "
                         f"paragraphs of consecutive sentences")  # fmt: skip
    sentences = {s for pair in pairs for s in pair} | set(train) | set(corpus.test_sentences)
    encode = corpus.tokenizer.encode
    corpus.piece_ids = {s: encode(s, add_special_tokens=False) for s in sentences}


def mlm_batch(
    ids: np.ndarray, tok: WordPieceTokenizer, cfg: TrainBertConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random windows of the id stream as [CLS] window [SEP], masked: (inputs, labels) (B, T)."""
    width = cfg.seq_len - 2
    starts = rng.integers(0, len(ids) - width, size=cfg.batch_size)
    windows = ids[starts[:, None] + np.arange(width)]  # (B, T - 2)
    n = cfg.batch_size
    rows = np.concatenate([np.full((n, 1), tok.cls_id), windows, np.full((n, 1), tok.sep_id)], 1)
    return mask_tokens(rows, mask_id=tok.mask_id, vocab_size=tok.vocab_size,
                       special_ids=tok.special_ids, rng=rng)  # fmt: skip


def pair_batch(
    corpus: Corpus,
    pairs: list[tuple[str, str]],
    pool: list[str],
    cfg: TrainBertConfig,
    rng: np.random.Generator,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Sentence pairs, B the true next or (by a fair coin) random from `pool`, packed as
    [CLS] A [SEP] B [SEP]: ((ids, attention_mask, token_type_ids) (N, T), NSP labels (N,))."""
    tok = corpus.tokenizer
    firsts, seconds, nsp_labels = nsp_examples(pairs, pool, rng)
    packed = pack_pairs(
        [corpus.piece_ids[a] for a in firsts], [corpus.piece_ids[b] for b in seconds],
        cls_id=tok.cls_id, sep_id=tok.sep_id, pad_id=tok.pad_id, max_length=cfg.seq_len,
    )  # fmt: skip
    return packed, nsp_labels


def nsp_batch(
    corpus: Corpus, cfg: TrainBertConfig, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A pretraining batch under --nsp: training pairs, packed and masked as BERT's are:
    ((inputs, attention_mask, token_type_ids), (masked-LM labels, NSP labels))."""
    tok = corpus.tokenizer
    picks = rng.integers(0, len(corpus.nsp_train), size=cfg.batch_size)
    pairs = [corpus.nsp_train[i] for i in picks]
    (ids, mask, types), nsp_labels = pair_batch(corpus, pairs, corpus.nsp_pool, cfg, rng)
    inputs, labels = mask_tokens(ids, mask_id=tok.mask_id, vocab_size=tok.vocab_size,
                                 special_ids=tok.special_ids, rng=rng)  # fmt: skip
    return (inputs, mask, types), (labels, nsp_labels)


def _optimizer(model: Any, cfg: TrainBertConfig, lr: float, iters: int, warmup: int) -> tuple:
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=lr, betas=(0.9, 0.999))
    return optimizer, WarmupCosineLR(optimizer, min(warmup, iters), iters, 0.1)


def pretrain(cfg: TrainBertConfig, corpus: Corpus) -> tuple[BertForMaskedLM, dict[str, Any]]:
    """Masked-LM pretraining (with next-sentence prediction under --nsp: the model is then a
    `BertForPreTraining`); returns the model and the run's log."""
    phase = Phase(cfg.pretrain_iters, cfg.eval_interval, str(Path(cfg.out_dir) / "pretrain"),
                  cfg.progress, resume=cfg.resume)  # fmt: skip
    phase, state, saved = resume_from(phase, phase.out_dir)
    tok = corpus.tokenizer
    if saved:
        mconf = config_from_checkpoint(saved["_path"], BertConfig, saved["model_config"], state)
        if saved.get("bert_config", {}).get("nsp", False) != cfg.nsp:
            raise ValueError(f"{saved['_path']} was pretrained "
                             f"{'with' if not cfg.nsp else 'without'} --nsp: resume it "
                             f"{'with' if not cfg.nsp else 'without'} --nsp")  # fmt: skip
    else:
        mconf = cfg.model_config(tok.vocab_size)
    tf.manual_seed(cfg.seed)
    model = (BertForPreTraining if cfg.nsp else BertForMaskedLM)(mconf).to(cfg.device)
    optimizer, scheduler = _optimizer(model, cfg, cfg.lr, phase.iters, cfg.warmup)
    # one fixed draw of the held-out pairs' random halves, the same at every evaluation, and
    # as many training pairs (memorised, or understood? the two accuracies tell)
    nsp_sets = {}
    if cfg.nsp:
        pool = corpus.train_sentences + corpus.test_sentences
        rng = np.random.default_rng([cfg.seed, 4])
        picks = rng.permutation(len(corpus.nsp_train))[: len(corpus.nsp_test)]
        nsp_sets = {
            "val": pair_batch(corpus, corpus.nsp_test, pool, cfg, rng),
            "train": pair_batch(corpus, [corpus.nsp_train[i] for i in picks], corpus.nsp_pool,
                                cfg, rng),
        }  # fmt: skip

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        rng = np.random.default_rng([cfg.seed, 1])  # the same masked windows at every check
        out = {}
        for split, ids in (("train", corpus.pretrain_ids), ("val", corpus.heldout_ids)):
            losses, hits, total = [], 0, 0
            for _ in range(8):
                inputs, labels = mlm_batch(ids, tok, cfg, rng)
                logits, loss = model(inputs, labels)
                logits = logits[0] if cfg.nsp else logits  # (masked-LM, NSP) logits
                losses.append(loss.item())
                target = labels[labels != -100]
                hits, total = (
                    hits + int((backend.to_host(logits.data.argmax(1)) == target).sum()),
                    total + len(target),
                )
            out[split], out[f"{split}_acc"] = float(np.mean(losses)), hits / total
        for split, batch in nsp_sets.items():
            out[f"nsp_{split}"], out[f"nsp_{split}_acc"] = _evaluate_nsp(model, batch)
        model.train()
        return out

    def loss(inputs: tuple, labels: Any) -> Any:
        if not cfg.nsp:
            return model(inputs, labels)[1]
        (ids, mask, types), (mlm_labels, nsp_labels) = inputs, labels
        return model(ids, mlm_labels, mask, types, nsp_labels)[1]

    def get_batch(rng: np.random.Generator) -> tuple:
        if cfg.nsp:
            return nsp_batch(corpus, cfg, rng)
        return mlm_batch(corpus.pretrain_ids, tok, cfg, rng)

    run = Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed),
        get_batch=get_batch, evaluate=evaluate, config=phase, command="bert", loss=loss,
        title="BERT masked-LM" + (" + NSP" if cfg.nsp else "") + " pretraining",
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "tokenizer": tok.to_dict(),
                      "bert_config": dataclasses.asdict(cfg)},
        resume_hint=f"tinyformer train bert --resume --out-dir {cfg.out_dir}"
        + (" --nsp" if cfg.nsp else ""),
    )  # fmt: skip
    resume_into(run, state, saved)
    return model, train_loop(run)


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


def _classify_batch(
    sentences: list[str], corpus: Corpus, seq_len: int, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    tok = corpus.tokenizer
    texts, labels = tamper_batch(sentences, rng)
    ids, mask = pad_batch([tok.encode(t, max_length=seq_len) for t in texts], tok.pad_id)
    return (ids, mask), labels


def finetune(
    cfg: TrainBertConfig, corpus: Corpus, init: dict[str, Any] | None, name: str
) -> dict[str, Any]:
    """Fine-tune a classifier on the tampering task, from an encoder state dict (`init`, the
    "bert.*" entries of a pretrained model's state_dict, Tensors or arrays; they are copied) or
    from random weights (None). Returns the log; its evals hold test loss and accuracy."""
    tok = corpus.tokenizer
    mconf = cfg.model_config(tok.vocab_size)
    tf.manual_seed(cfg.seed + 1)  # the same classifier initialisation for both runs
    model = BertForSequenceClassification(mconf, num_labels=2)
    if init is not None:
        own = model.state_dict()
        model.load_state_dict({**own, **{k: v for k, v in init.items() if k in own}})
    model.to(cfg.device)
    iters = cfg.finetune_iters
    optimizer, scheduler = _optimizer(model, cfg, cfg.finetune_lr, iters, max(1, iters // 10))
    test_rng = np.random.default_rng([cfg.seed, 2])  # one fixed tampering of the test set
    test = [_classify_batch(corpus.test_sentences[i : i + 100], corpus, cfg.seq_len, test_rng)
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
        return _classify_batch([corpus.train_sentences[i] for i in picks], corpus, cfg.seq_len, rng)

    phase = Phase(iters, max(1, iters // 10), str(Path(cfg.out_dir) / name), cfg.progress)
    run = Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 3]), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="bert", title=f"fine-tuning ({name})",
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "tokenizer": tok.to_dict()},
        loss=lambda inputs, labels: model(inputs[0], labels, inputs[1])[1],
        resume_hint=f"tinyformer train bert --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip
    return train_loop(run)


def train_bert(cfg: TrainBertConfig) -> dict[str, Any]:
    """All three runs; returns {"pretrain": log, "pretrained": log, "scratch": log}."""
    # claimed before the corpus and its tokenizer are built: a refusal comes before any work
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_bert(cfg)


def _train_bert(cfg: TrainBertConfig) -> dict[str, Any]:
    floor = transformer_floor(cfg.seq_len, cfg.n_layer, cfg.d_model, cfg.d_ff)
    check_batch_fits(cfg.batch_size, floor, f"this BERT on {cfg.seq_len} tokens", cfg.device)
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
    from tinyformer.train.bert_report import report

    report(cfg, logs)
    return logs
