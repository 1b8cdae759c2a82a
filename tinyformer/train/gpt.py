"""`tinyformer train gpt` and `tinyformer sample`: train a GPT on text, checkpoint, resume, sample.

The loop is nanoGPT's: random windows of the training text, AdamW with linear warm-up and cosine
decay, gradient clipping, a periodic estimate of train and validation loss on fixed batches,
and a checkpoint after every evaluation. Ctrl-C finishes the current step, saves, and exits; the
run then continues with `--resume` and ends with exactly the weights an uninterrupted run would
have had (the checkpoint holds the optimizer moments, the schedule and both RNG states).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer.data import BPETokenizer, CharTokenizer, LMData, load_text, tokenizer_from_dict
from tinyformer.data.tokenizers import Tokenizer
from tinyformer.models.gpt import CONFIGS, GPT, GPTConfig
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.args import (
    BELOW_ONE,
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
from tinyformer.train.memory import check_batch_fits, transformer_floor
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import checkpoint_errors, config_from_checkpoint, load_run

__all__ = ["TrainGPTConfig", "load_model", "sample", "train_gpt"]


@dataclass
class TrainGPTConfig(RunFlags):
    data: str = flag("pydoc", "corpus: pydoc (embedded), tinyshakespeare, or a text file path")
    tokenizer: str = flag("char", "tokenizer trained on the corpus", ["char", "bpe"])
    bpe_vocab_size: int = flag(
        512, "vocabulary size of the BPE tokenizer (256 bytes and the merges)", valid=Range(256)
    )
    config: str = flag("baby", "named model configuration", sorted(CONFIGS))
    n_layer: int | None = flag(None, "override the config's number of blocks")
    n_head: int | None = flag(None, "override the config's number of heads")
    n_embd: int | None = flag(None, "override the config's width")
    block_size: int | None = flag(None, "override the config's context length")
    dropout: float | None = flag(None, "override the config's dropout", valid=BELOW_ONE)
    iters: int | None = flag(
        None, "training iterations: 2000, or on --resume the saved run's", valid=COUNT
    )
    batch_size: int = flag(12, "sequences per batch", valid=COUNT)
    lr: float = flag(1e-3, "peak learning rate", valid=POSITIVE)
    min_lr_ratio: float = flag(0.1, "final learning rate as a fraction of lr", valid=FRACTION)
    warmup: int = flag(100, "linear warm-up iterations (at most --iters)", valid=NONNEGATIVE)
    weight_decay: float = flag(0.1, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    beta1: float = flag(0.9, "AdamW beta1", valid=BELOW_ONE)
    beta2: float = flag(0.99, "AdamW beta2", valid=BELOW_ONE)
    grad_clip: float = flag(
        1.0, "clip the global gradient norm to this (0: off)", valid=NONNEGATIVE
    )
    eval_interval: int = flag(
        250, "evaluate and checkpoint every this many iterations", valid=COUNT
    )
    eval_iters: int = flag(20, "batches per loss estimate", valid=COUNT)
    seed: int = flag(1337, "seed for initialisation, batches and dropout", valid=NONNEGATIVE)
    out_dir: str = flag("out/gpt", "folder for ckpt.npz, log.json and loss.png")
    sample_tokens: int = flag(
        300, "tokens to sample when training ends (0: none)", valid=NONNEGATIVE
    )

    def __post_init__(self) -> None:
        check_ranges(self)

    def model_config(self, vocab_size: int) -> GPTConfig:
        overrides = {
            name: getattr(self, name)
            for name in ("n_layer", "n_head", "n_embd", "block_size", "dropout")
            if getattr(self, name) is not None
        }
        return dataclasses.replace(CONFIGS[self.config], vocab_size=vocab_size, **overrides)


DEFAULT_ITERS = 2000


def _tokenizer(cfg: TrainGPTConfig, text: str) -> Tokenizer:
    if cfg.tokenizer == "bpe":
        return BPETokenizer.train(text, cfg.bpe_vocab_size)
    return CharTokenizer.train(text)


@tf.no_grad()
def estimate_loss(model: GPT, data: LMData, cfg: TrainGPTConfig, it: int) -> dict[str, float]:
    """Mean loss over `eval_iters` batches of each split, in eval mode. The batches come from a
    generator seeded by (seed, iteration): fixed for a given run and point, and independent of
    the training batches, so evaluating never changes what training sees."""
    model.eval()
    rng = np.random.default_rng([cfg.seed, it])
    out = {}
    for split in ("train", "val"):
        losses = [
            float(model(*data.get_batch(split, cfg.batch_size, rng))[1].item())
            for _ in range(cfg.eval_iters)
        ]
        out[split] = float(np.mean(losses))
    model.train()
    return out


def train_gpt(cfg: TrainGPTConfig, on_step: Any = None) -> dict[str, Any]:
    """Train (or resume) a GPT as configured; returns the run's log. `on_step(it)` is called
    after every completed step; returning True stops the run as Ctrl-C would."""
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        run, log = start_run(cfg, _build, on_step, default_iters=DEFAULT_ITERS)
    cfg = run.config
    if len(log["loss"]) == cfg.iters and cfg.sample_tokens:
        print("\n--- sample ---")
        tokenizer = run.extra["tokenizer"]
        print(_generate(run.model, tokenizer, _start(tokenizer), cfg.sample_tokens, 0.8, 40, None))
    return log


def _build(cfg: TrainGPTConfig, state: dict | None, saved: dict | None) -> Run:
    text = load_text(cfg.data)
    if saved:
        with checkpoint_errors(saved["_path"]):
            tokenizer = tokenizer_from_dict(saved["tokenizer"])
            mconf = config_from_checkpoint(saved["_path"], GPTConfig, saved["model_config"], state)
    else:
        tokenizer = _tokenizer(cfg, text)
        mconf = cfg.model_config(tokenizer.vocab_size)
    floor = transformer_floor(
        mconf.block_size, mconf.n_layer, mconf.n_embd, 4 * mconf.n_embd, mconf.vocab_size
    )
    sizes = f"--n-layer {mconf.n_layer} --n-embd {mconf.n_embd} --block-size {mconf.block_size}"
    what = f"this GPT on {mconf.block_size} tokens"
    check_batch_fits(cfg.batch_size, floor, what, cfg.device, sizes=sizes)
    data = LMData(np.array(tokenizer.encode(text)), mconf.block_size)
    model = GPT(mconf).to(cfg.device)
    optimizer = AdamW(
        weight_decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2)
    )
    scheduler = WarmupCosineLR(optimizer, min(cfg.warmup, cfg.iters), cfg.iters, cfg.min_lr_ratio)
    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed),
        get_batch=lambda rng: data.get_batch("train", cfg.batch_size, rng),
        evaluate=lambda it: estimate_loss(model, data, cfg, it),
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "tokenizer": tokenizer.to_dict()},
        config=cfg, command="gpt", title=f"GPT {cfg.config} on {cfg.data}",
        extra={"tokenizer": tokenizer},
    )  # fmt: skip


def load_model(path: Any) -> tuple[GPT, Tokenizer, dict[str, Any]]:
    """A trained GPT, its tokenizer and the checkpoint's metadata from a run folder or file."""
    state, meta = load_run(path)
    # BERT's runs also save a model_config and a tokenizer; its sizes have other names
    sizes = set(meta.get("model_config", ())) <= {f.name for f in dataclasses.fields(GPTConfig)}
    if "tokenizer" not in meta or "model_config" not in meta or not sizes:
        raise ValueError(
            f"{path} is not a GPT checkpoint (this reads what `tinyformer train gpt` writes)"
        )
    with checkpoint_errors(meta["_path"]):
        model = GPT(config_from_checkpoint(meta["_path"], GPTConfig, meta["model_config"], state))
        model.load_state_dict(state)
        tokenizer = tokenizer_from_dict(meta["tokenizer"])
    return model.eval(), tokenizer, meta


def _start(tokenizer: Tokenizer) -> str:
    """The prompt when none is given: a newline, where the vocabulary has one (a corpus with no
    line breaks trained a character vocabulary without it); else "", the first token."""
    try:
        tokenizer.encode("\n")
    except ValueError:
        return ""
    return "\n"


def _generate(
    model: GPT,
    tokenizer: Tokenizer,
    prompt: str,
    tokens: int,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
) -> str:
    ids = tokenizer.encode(prompt) if prompt else [0]
    out = model.generate(np.array([ids]), tokens, temperature, top_k, top_p)
    return tokenizer.decode(out[0])


def sample(
    ckpt: str,
    prompt: str | None = None,
    tokens: int = 300,
    temperature: float = 0.8,
    top_k: int | None = 40,
    top_p: float | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> str:
    """Text sampled from a checkpoint, starting with `prompt` (None: a newline, where the
    vocabulary has one), by the model on `device`."""
    tf.device(device)  # a missing GPU is said before the checkpoint is read
    model, tokenizer, _ = load_model(ckpt)
    model.to(device)
    tf.manual_seed(seed)
    prompt = _start(tokenizer) if prompt is None else prompt
    return _generate(model, tokenizer, prompt, tokens, temperature, top_k, top_p)
