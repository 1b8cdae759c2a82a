"""`tinyformer train vit|swin|cnn|fcn|segnet|unet` and `tinyformer eval`: image models end to
end.

Classification (vit, swin, cnn) trains on scikit-learn's 8x8 digits by default (embedded,
offline), or on MNIST / Fashion-MNIST; segmentation (fcn, segnet, unet) on the generated
shapes dataset. The loop, checkpoints, Ctrl-C and --resume are the GPT command's
(`tinyformer/train/loop.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import load_digits, load_mnist, make_shapes
from tinyformer.models.cnn import CNN, CNNConfig
from tinyformer.models.segmentation import SEGMENTATION_MODELS, SegConfig
from tinyformer.models.swin import SWIN_CONFIGS, SwinConfig, SwinTransformer
from tinyformer.models.vit import VIT_CONFIGS, ViT, ViTConfig
from tinyformer.nn.module import Module
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.loop import Run, start_run
from tinyformer.train.memory import (
    check_batch_fits,
    check_data_fits,
    conv_floor,
    transformer_floor,
)
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.state import checkpoint_errors, load_run
from tinyformer.train.vision.config import CLASSIFIERS, MODELS, TrainVisionConfig

__all__ = [
    "CLASSIFIERS", "MODELS", "TrainVisionConfig", "check_shift", "eval_vision", "evaluate_model",
    "load_trained", "load_vision", "train_vision",
]  # fmt: skip


def load_vision(cfg: TrainVisionConfig) -> tuple[np.ndarray, ...]:
    """-> train images, train targets, val images, val targets (split seeded by cfg.seed)."""
    if cfg.data in ("mnist", "fashion-mnist"):
        return (
            *load_mnist(cfg.data, "train", cfg.data_dir),
            *load_mnist(cfg.data, "test", cfg.data_dir),
        )
    if cfg.data == "digits":
        images, targets = load_digits()
    elif cfg.data == "shapes":
        # three float32 channels and an int64 mask per pixel, all generated up front
        nbytes = cfg.shapes * cfg.image_size**2 * (3 * 4 + 8)
        check_data_fits(
            f"--shapes {cfg.shapes} --image-size {cfg.image_size}", nbytes, "the images"
        )
        images, targets = make_shapes(cfg.shapes, cfg.image_size, seed=cfg.seed)
    else:
        raise ValueError(
            f"unknown image dataset {cfg.data!r}: digits, mnist, fashion-mnist, shapes"
        )
    train, val = split_indices(targets, cfg.val_fraction, cfg.seed, stratified=cfg.data != "shapes")
    if not (train.size and val.size):
        raise ValueError(
            f"--val-fraction {cfg.val_fraction} of {len(targets)} images leaves {train.size} for "
            f"training and {val.size} for validation; each needs at least one"
        )
    return images[train], targets[train], images[val], targets[val]


def split_indices(
    targets: np.ndarray, val_fraction: float, seed: int, stratified: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train / held-out indices. Stratified: each class is split in the same proportion,
    so the held-out set has the class balance of the whole (class labels only)."""
    rng = np.random.default_rng(seed)
    if not stratified:
        order = rng.permutation(len(targets))
        cut = int(len(targets) * (1 - val_fraction))
        return order[:cut], order[cut:]
    train, val = [], []
    for label in np.unique(targets):
        members = rng.permutation(np.flatnonzero(targets == label))
        cut = int(round(len(members) * (1 - val_fraction)))
        train.append(members[:cut])
        val.append(members[cut:])
    return rng.permutation(np.concatenate(train)), np.sort(np.concatenate(val))


def check_shift(max_shift: int, side: int) -> None:
    """Refuse an --augment-shift that moves images of `side` pixels wholly out of the frame
    (most training images would be blank, and a huge one only pads memory full)."""
    if max_shift >= side:
        raise ValueError(f"--augment-shift must be below the images' side of {side} pixels, "
                         f"got {max_shift}")  # fmt: skip


def shift_augment(images: np.ndarray, rng: np.random.Generator, max_shift: int) -> np.ndarray:
    """Move each image by up to `max_shift` pixels in each direction, filling with zeros: the
    label of a digit does not change when it moves a little, and the model should learn that."""
    if max_shift == 0:
        return images
    n, _, h, w = images.shape
    m = max_shift
    padded = np.pad(images, ((0, 0), (0, 0), (m, m), (m, m)))
    dy, dx = rng.integers(0, 2 * m + 1, (2, n))
    rows = dy[:, None] + np.arange(h)  # (N, H): the window of padded rows each image keeps
    cols = dx[:, None] + np.arange(w)
    batch, channel = np.arange(n)[:, None, None, None], np.arange(images.shape[1])[:, None, None]
    return padded[batch, channel, rows[:, None, :, None], cols[:, None, None, :]]


def model_config(cfg: TrainVisionConfig, images: np.ndarray, n_classes: int) -> dict[str, Any]:
    """The model's configuration for this data, as a plain dict (saved in the checkpoint)."""
    channels, size = images.shape[1], images.shape[2]
    if cfg.model == "vit":
        # None: the configuration's value; anything else, 0 included, goes to ViTConfig's checks
        patch = (2 if size <= 16 else 4) if cfg.patch_size is None else cfg.patch_size
        overrides = {
            k: getattr(cfg, k) for k in ("n_layer", "n_embd") if getattr(cfg, k) is not None
        }
        config = dataclasses.replace(
            VIT_CONFIGS[cfg.config or "vit_tiny_digits"], image_size=size, patch_size=patch,
            in_channels=channels, num_classes=n_classes, **overrides,
        )  # fmt: skip
    elif cfg.model == "swin":
        # 28px: 2px patches make a 14x14 grid, four 7x7 windows, then one 7x7 window
        patch = 2 if cfg.patch_size is None else cfg.patch_size
        window = (2 if size <= 16 else 7) if cfg.window_size is None else cfg.window_size
        width = {} if cfg.n_embd is None else {"embed_dim": cfg.n_embd}
        config = dataclasses.replace(
            SWIN_CONFIGS[cfg.config or "swin_tiny_digits"], image_size=size, patch_size=patch,
            window_size=window, in_channels=channels, num_classes=n_classes, **width,
        )  # fmt: skip
    elif cfg.model == "cnn":
        config = CNNConfig(size, channels, n_classes, (cfg.width, 2 * cfg.width))
    else:
        config = SegConfig(channels, n_classes, cfg.width)
    return dataclasses.asdict(config)


def _batch_floor(kind: str, config: dict[str, Any], shape: tuple[int, ...]) -> tuple[int, str]:
    """(bytes, in words) of one image's activations (tinyformer/train/memory.py)."""
    channels, pixels = shape[0], shape[1] * shape[2]
    if kind in ("vit", "swin"):
        tokens = pixels // config["patch_size"] ** 2 + (kind == "vit")  # ViT: + [CLS]
        width = config["n_embd"] if kind == "vit" else config["embed_dim"]
        n_layer = config["n_layer"] if kind == "vit" else config["depths"][0]  # Swin: stage 1
        floor = transformer_floor(tokens, n_layer, width, config["mlp_ratio"] * width)
        return floor, f"this {kind} on {tokens} tokens"
    first = config["channels"][0] if kind == "cnn" else config["width"]
    return conv_floor(pixels, channels, first), f"this {kind} on {shape[1]}x{shape[2]} images"


def build_model(kind: str, config: dict[str, Any]) -> Module:
    if kind == "vit":
        return ViT(ViTConfig(**config))
    if kind == "swin":  # JSON gave the tuples back as lists
        tuples = {k: tuple(config[k]) for k in ("depths", "num_heads")}
        return SwinTransformer(SwinConfig(**{**config, **tuples}))
    if kind == "cnn":
        return CNN(CNNConfig(**{**config, "channels": tuple(config["channels"])}))
    return SEGMENTATION_MODELS[kind](SegConfig(**config))


@tf.no_grad()
def evaluate_model(
    model: Module, kind: str, images: np.ndarray, targets: np.ndarray, n_classes: int
) -> dict[str, Any]:
    """Loss and accuracy (classification) or pixel accuracy and mean IoU (segmentation) over
    all of `images`, in eval mode; also the predictions."""
    was_training = model.training
    model.eval()
    losses, preds = [], []
    for start in range(0, len(images), 256):
        logits, loss = model(images[start : start + 256], targets[start : start + 256])
        losses.append(loss.item() * len(logits))
        preds.append(backend.to_host(logits.data.argmax(axis=1)))  # the metrics are host work
    model.train(was_training)
    pred = np.concatenate(preds)
    out: dict[str, Any] = {"loss": float(np.sum(losses) / len(images))}
    out["accuracy"] = float((pred == targets).mean())
    if kind in SEGMENTATION_MODELS:
        ious = []
        for k in range(n_classes):
            union = ((pred == k) | (targets == k)).sum()
            if union:
                ious.append(((pred == k) & (targets == k)).sum() / union)
        out["miou"] = float(np.mean(ious))
    out["predictions"] = pred
    return out


def train_vision(cfg: TrainVisionConfig, on_step: Any = None) -> dict[str, Any]:
    """Train (or resume) an image model; returns the run's log."""
    out_dir = cfg.out_dir or f"out/{cfg.model}"
    if not cfg.resume:
        cfg.resolved()  # a model and data that do not fit are refused before the folder is
    with claim_out_dir(out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return start_run(cfg, _build, on_step, out_dir=out_dir)[1]


def _build(cfg: TrainVisionConfig, state: dict | None, saved: dict | None) -> Run:
    cfg = cfg.resolved()
    x_train, y_train, x_val, y_val = load_vision(cfg)
    check_shift(cfg.augment_shift, x_train.shape[-1])
    n_classes = int(max(y_train.max(), y_val.max())) + 1
    config = saved["model_config"] if saved else model_config(cfg, x_train, n_classes)
    floor, what = _batch_floor(cfg.model, config, x_train.shape[1:])
    sizes = "the model's sizes (--n-layer, --n-embd, --patch-size, --width, --image-size)"
    check_batch_fits(cfg.batch_size, floor, what, cfg.device, sizes=sizes)
    with checkpoint_errors(saved["_path"]) if saved else contextlib.nullcontext():
        model = build_model(cfg.model, config).to(cfg.device)
    optimizer = AdamW(weight_decay_groups(model, cfg.weight_decay), lr=cfg.lr)
    scheduler = WarmupCosineLR(optimizer, min(cfg.warmup, cfg.iters), cfg.iters, cfg.min_lr_ratio)
    probe = np.random.default_rng(cfg.seed + 1).choice(len(x_train), min(512, len(x_train)), False)

    def get_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        idx = rng.integers(0, len(x_train), cfg.batch_size)
        if cfg.model in SEGMENTATION_MODELS:  # shifting an image would have to shift its mask
            return x_train[idx], y_train[idx]
        return shift_augment(x_train[idx], rng, cfg.augment_shift), y_train[idx]

    def evaluate(it: int) -> dict[str, float]:
        train = evaluate_model(model, cfg.model, x_train[probe], y_train[probe], n_classes)
        val = evaluate_model(model, cfg.model, x_val, y_val, n_classes)
        numbers = {"train": train["loss"], "val": val["loss"], "val_accuracy": val["accuracy"]}
        if "miou" in val:
            numbers["val_miou"] = val["miou"]
        return numbers

    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed), get_batch, evaluate,
        meta=lambda: {"model_kind": cfg.model, "model_config": config, "num_classes": n_classes},
        config=cfg, command=cfg.model, title=f"{cfg.model} on {cfg.data}",
    )  # fmt: skip


def load_trained(path: Any) -> tuple[Module, TrainVisionConfig, dict[str, Any]]:
    """A trained image model, its (resolved) training configuration and the checkpoint meta."""
    state, meta = load_run(path)
    if "model_kind" not in meta:
        raise ValueError(f"{path} is not an image-model checkpoint (it has no model_kind)")
    with checkpoint_errors(meta["_path"]):
        model = build_model(meta["model_kind"], meta["model_config"])
        model.load_state_dict(state)
        cfg = TrainVisionConfig(**meta["train_config"])
        if not isinstance(meta.get("num_classes"), int):
            raise ValueError("its metadata has no whole-number num_classes")
    return model.eval(), cfg, meta


def eval_vision(path: Any, device: str = "cpu") -> dict[str, Any]:
    """Metrics of a trained image model on its held-out data, and plots in its run folder:
    confusion.png (classifiers), predictions.png (segmentation), and for a ViT patches.png,
    attention.png and rollout.png."""
    from tinyformer.train.vision import plots as vision_plots

    tf.device(device)  # a missing GPU is said before the checkpoint is read
    model, cfg, meta = load_trained(path)
    model.to(device)
    _, _, x_val, y_val = load_vision(cfg)
    result = evaluate_model(model, cfg.model, x_val, y_val, meta["num_classes"])
    pred = result.pop("predictions")
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    if cfg.model in SEGMENTATION_MODELS:
        vision_plots.plot_segmentations(x_val, y_val, pred, folder / "predictions.png")
        plots = [folder / "predictions.png"]
    else:
        vision_plots.plot_confusion(y_val, pred, meta["num_classes"], folder / "confusion.png")
        plots = [folder / "confusion.png"]
    if cfg.model == "vit":
        plots += vision_plots.plot_vit(model, x_val[0], folder)
    return {"model": cfg.model, "data": cfg.data, "images": len(x_val), **result, "plots": plots}
