"""`tinyformer train mae`: pretrain a ViT as a masked autoencoder, then show what it learned.

Three runs, one command, on scikit-learn's 8x8 digits by default (offline) or MNIST:

1. Pretrain: hide 75% of every image's patches and reconstruct them (no labels used), on the
   training images.                                       -> out/mae/pretrain/
   Then reconstructions.png: held-out images masked, rebuilt, and as they are.
2. Fine-tune the pretrained encoder as a ViT classifier (`--probe`: train only a linear
   classifier on the frozen encoder).                     -> out/mae/finetune-pretrained/
3. The same classifier, same data, steps, learning rate and seeds, from random weights.
                                                          -> out/mae/finetune-scratch/

The closing table, results.json and compare.png put the two classifiers side by side, with
the pretraining loss curve and the milliseconds per step of every run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import load_digits, load_mnist
from tinyformer.models.mae import MAE, MAEConfig
from tinyformer.models.vit import ViT
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.loop import Phase, Run, start_run
from tinyformer.train.mae.config import TrainMAEConfig
from tinyformer.train.memory import check_batch_fits, transformer_floor
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import config_from_checkpoint
from tinyformer.train.vision import check_shift, shift_augment, split_indices

__all__ = ["Images", "Phase", "TrainMAEConfig", "finetune", "load_images", "pretrain", "train_mae"]


@dataclass
class Images:
    train: np.ndarray  # (N, C_in, H, W) in [0, 1]: pretraining reads these without labels
    train_labels: np.ndarray
    test: np.ndarray  # never trained on, by any of the three runs
    test_labels: np.ndarray

    @property
    def num_classes(self) -> int:
        return int(max(self.train_labels.max(), self.test_labels.max())) + 1


def load_images(cfg: TrainMAEConfig) -> Images:
    if cfg.data == "mnist":
        return Images(*load_mnist("mnist", "train", cfg.data_dir),
                      *load_mnist("mnist", "test", cfg.data_dir))  # fmt: skip
    images, labels = load_digits()
    train, test = split_indices(labels, cfg.val_fraction, cfg.seed)
    return Images(images[train], labels[train], images[test], labels[test])


def _optimizer(params: Any, lr: float, iters: int, warmup: int) -> tuple:
    # betas (0.9, 0.95): the MAE paper's, for pretraining and fine-tuning alike
    optimizer = AdamW(params, lr=lr, betas=(0.9, 0.95))
    return optimizer, WarmupCosineLR(optimizer, min(warmup, iters), iters, 0.1)


def pretrain(cfg: TrainMAEConfig, data: Images) -> tuple[MAE, dict[str, Any]]:
    """The masked-autoencoder run; returns the model and the run's log."""
    phase = Phase(cfg.pretrain_iters, cfg.eval_interval, str(Path(cfg.out_dir) / "pretrain"),
                  cfg.progress, resume=cfg.resume)  # fmt: skip

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        return _pretraining_run(cfg, data, phase, state, saved)

    run, log = start_run(phase, build, seed=cfg.seed)
    return run.model, log


def _pretraining_run(
    cfg: TrainMAEConfig, data: Images, phase: Phase, state: dict | None, saved: dict | None
) -> Run:
    if saved:
        mconf = config_from_checkpoint(saved["_path"], MAEConfig, saved["model_config"], state)
    else:
        mconf = cfg.model_config(data.train.shape[2], data.train.shape[1])
    model = MAE(mconf).to(cfg.device)
    optimizer, scheduler = _optimizer(weight_decay_groups(model, cfg.weight_decay), cfg.lr,
                                      phase.iters, cfg.warmup)  # fmt: skip
    # The same images under the same masks at every evaluation (their own generator: drawing
    # from tinyformer's would change the training masks of a resumed run).
    fixed = np.random.default_rng([cfg.seed, 1])
    probe = data.train[fixed.choice(len(data.train), min(512, len(data.train)), replace=False)]
    held_out = data.test[:512]
    noise = {"train": fixed.random((len(probe), mconf.num_patches)),
             "val": fixed.random((len(held_out), mconf.num_patches))}  # fmt: skip

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        out = {}
        for split, images in (("train", probe), ("val", held_out)):
            losses = [model(images[i : i + 256], noise[split][i : i + 256])[1].item()
                      * len(images[i : i + 256]) for i in range(0, len(images), 256)]  # fmt: skip
            out[split] = float(np.sum(losses) / len(images))
        model.train()
        return out

    def get_batch(rng: np.random.Generator) -> tuple[np.ndarray, None]:
        idx = rng.integers(0, len(data.train), cfg.batch_size)
        return shift_augment(data.train[idx], rng, cfg.augment_shift), None

    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="mae",
        title=f"MAE pretraining on {cfg.data} ({mconf.mask_ratio:.0%} of patches hidden)",
        loss_label="squared error on the hidden patches",
        meta=lambda: {"model_config": dataclasses.asdict(mconf),
                      "mae_config": dataclasses.asdict(cfg)},
        loss=lambda images, _: model(images)[1],
        resume_hint=f"tinyformer train mae --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def finetune(
    cfg: TrainMAEConfig, data: Images, mconf: MAEConfig, init: dict[str, Any] | None, name: str
) -> dict[str, Any]:
    """Train a ViT classifier from the encoder weights `init` (`MAE.encoder_state_dict()`) or
    from random weights (None). Returns the log; its evals hold test loss and accuracy."""
    iters = cfg.finetune_iters
    # six evaluations: enough for the accuracy curve; each also writes a checkpoint and a plot
    phase = Phase(iters, max(1, iters // 5), str(Path(cfg.out_dir) / name), cfg.progress)

    def build(phase: Phase, state: None, saved: None) -> Run:  # a fine-tuning never resumes
        return _finetuning_run(cfg, data, mconf, init, phase)

    # seed + 1: the same classifier head for both runs
    return start_run(phase, build, seed=cfg.seed + 1)[1]


def _finetuning_run(
    cfg: TrainMAEConfig, data: Images, mconf: MAEConfig, init: dict[str, Any] | None, phase: Phase
) -> Run:
    model = ViT(mconf.vit_config(data.num_classes))
    if init is not None:
        model.load_state_dict({**model.state_dict(), **init})
    model.to(cfg.device)
    iters = phase.iters
    if cfg.probe:  # everything frozen but the head: what the features alone are worth
        for p in model.parameters():
            p.requires_grad_(False)
        for p in model.head.parameters():
            p.requires_grad_(True)
    groups = weight_decay_groups(model.head if cfg.probe else model, cfg.weight_decay)
    optimizer, scheduler = _optimizer(groups, cfg.finetune_lr, iters, max(1, iters // 10))

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        losses, hits = [], 0
        for i in range(0, len(data.test), 256):
            images, labels = data.test[i : i + 256], data.test_labels[i : i + 256]
            logits, loss = model(images, labels)
            losses.append(loss.item() * len(labels))
            hits += int((backend.to_host(logits.data.argmax(1)) == labels).sum())
        model.train()
        n = len(data.test)
        return {"test": float(np.sum(losses) / n), "test_acc": hits / n}

    def get_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        idx = rng.integers(0, len(data.train), cfg.batch_size)
        return shift_augment(data.train[idx], rng, cfg.augment_shift), data.train_labels[idx]

    return Run(
        model, optimizer, scheduler, np.random.default_rng([cfg.seed, 3]), get_batch=get_batch,
        evaluate=evaluate, config=phase, command="mae",
        title=f"{'linear probe' if cfg.probe else 'fine-tuning'} ({Path(phase.out_dir).name})",
        meta=lambda: {"model_config": dataclasses.asdict(model.config), "model_kind": "vit"},
        resume_hint=f"tinyformer train mae --resume --out-dir {cfg.out_dir}",
    )  # fmt: skip


def train_mae(cfg: TrainMAEConfig) -> dict[str, Any]:
    """All three runs; returns {"pretrain": log, "pretrained": log, "scratch": log}."""
    # claimed before the data is read: a refusal comes before any work
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_mae(cfg)


def _train_mae(cfg: TrainMAEConfig) -> dict[str, Any]:
    from tinyformer.train.mae.report import plot_reconstructions, report

    data = load_images(cfg)
    check_shift(cfg.augment_shift, data.train.shape[-1])
    mconf = cfg.model_config(data.train.shape[-1], data.train.shape[1])
    tokens = (mconf.image_size // mconf.patch_size) ** 2 + 1  # fine-tuning's ViT: every patch
    floor = transformer_floor(tokens, mconf.n_layer, mconf.n_embd, mconf.mlp_ratio * mconf.n_embd)
    sizes = f"--n-layer {mconf.n_layer} --n-embd {mconf.n_embd} --patch-size {mconf.patch_size}"
    what = f"this ViT on {tokens} tokens"
    check_batch_fits(cfg.batch_size, floor, what, cfg.device, sizes=sizes)
    print(f"{cfg.data}: {len(data.train)} training images (labels unused in pretraining), "
          f"{len(data.test)} held out, {data.train.shape[1:]} each")  # fmt: skip
    print("1/3 masked-autoencoder pretraining")
    model, pre_log = pretrain(cfg, data)
    if len(pre_log["loss"]) < cfg.pretrain_iters:
        return {"pretrain": pre_log}  # interrupted: the loop printed how to resume
    figure = Path(cfg.out_dir) / "reconstructions.png"
    plot_reconstructions(model, data.test[:8], figure, seed=cfg.seed)
    print(f"reconstructions of held-out images: {figure}")
    what = "linear probe" if cfg.probe else "fine-tuning"
    print(f"2/3 {what} of the pretrained encoder")
    mconf = model.config
    logs = {
        "pretrain": pre_log,
        "pretrained": finetune(cfg, data, mconf, model.encoder_state_dict(), "finetune-pretrained"),
    }
    print(f"3/3 the same {what} from random weights")
    logs["scratch"] = finetune(cfg, data, mconf, None, "finetune-scratch")
    report(cfg, logs)
    return logs
