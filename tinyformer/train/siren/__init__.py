"""`tinyformer train siren`: fit one image with SIREN, a ReLU MLP and a Fourier-feature MLP.

Each network maps a pixel's (x, y) in [-1, 1]^2 to its gray value in [-1, 1]; all three have
the same depth and width and train for the same number of full-batch steps (every pixel at
every step) with Adam and a constant learning rate, each through the shared training loop in
its own folder: out/siren/siren/, out/siren/relu/, out/siren/fourier/. With full batches the
training loss *is* the image's mean squared error, so the PSNR curve comes with every step.

At the end: a table of PSNR (dB), steps to 30 dB and ms/step; psnr.png (PSNR over steps and
over seconds); fits.png (the target and each fit, above the target's Sobel gradient and each
fit's gradient with respect to its input coordinates, computed by autograd); results.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.models.siren import MODELS, SirenConfig, build_model
from tinyformer.optim import Adam, LambdaLR
from tinyformer.train.loop import Run, resume_from, start_run
from tinyformer.train.rundir import claim_out_dir
from tinyformer.train.siren.config import DEFAULT_ITERS, TrainSirenConfig
from tinyformer.train.state import checkpoint_errors, config_from_checkpoint

__all__ = [
    "TrainSirenConfig", "china_crop", "coordinate_grid", "load_image", "psnr", "train_siren",
]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The image and its coordinates


def area_resize(image: np.ndarray, size: int) -> np.ndarray:
    """(H, W) -> (size, size): each output pixel is the mean of the input area it covers (R A
    R^T, with R's rows the overlaps of an output pixel's interval with the input pixels')."""

    def weights(n: int) -> np.ndarray:
        edges = np.linspace(0, n, size + 1)  # output pixel i covers [edges[i], edges[i+1])
        left, right = np.arange(n), np.arange(1, n + 1)
        overlap = np.minimum(edges[1:, None], right) - np.maximum(edges[:-1, None], left)
        w = np.clip(overlap, 0, None)  # (size, n)
        return w / w.sum(axis=1, keepdims=True)

    return weights(image.shape[0]) @ image @ weights(image.shape[1]).T


def _gray(image: np.ndarray) -> np.ndarray:
    """(H, W), (H, W, 3) or (H, W, 4), uint8 or float -> gray (H, W) in [0, 1] (ITU-R 601)."""
    image = np.asarray(image)
    if image.dtype.kind in "ui":
        image = image / np.iinfo(image.dtype).max
    if image.ndim == 3:
        image = image[..., :3] @ np.array([0.299, 0.587, 0.114]) if image.shape[2] >= 3 else (
            image[..., 0])  # fmt: skip
    if image.ndim != 2:
        raise ValueError(f"expected a gray or colour image (H, W[, C]), got shape {image.shape}")
    return image.astype(np.float64)


def china_crop(size: int = 128) -> np.ndarray:
    """The top of the pagoda in scikit-learn's china.jpg: rows 40-295 and columns 100-355
    (sky, roofs and carvings: smooth areas and fine detail), gray, resized to (size, size)
    in [0, 1]."""
    from sklearn.datasets import load_sample_image  # ships with scikit-learn: offline

    square = _gray(load_sample_image("china.jpg"))[40:296, 100:356]  # (256, 256)
    return area_resize(square, size).astype(np.float32)


def load_image(path: str, size: int) -> np.ndarray:
    """An image file (PNG through matplotlib; other formats need Pillow) as gray (size, size)
    in [0, 1]: its largest centred square, resized."""
    import matplotlib.pyplot as plt

    try:
        image = _gray(plt.imread(path))
    except (OSError, ValueError, SyntaxError) as err:
        raise ValueError(f"--image {path}: cannot read it as an image ({err})") from None
    h, w = image.shape
    side = min(h, w)
    square = image[
        (h - side) // 2 : (h - side) // 2 + side, (w - side) // 2 : (w - side) // 2 + side
    ]
    return area_resize(square, size).astype(np.float32)


def coordinate_grid(size: int) -> np.ndarray:
    """(size * size, 2) pixel centres (x, y) in [-1, 1]^2, row by row (y down the rows)."""
    t = np.linspace(-1.0, 1.0, size, dtype=np.float32)
    y, x = np.meshgrid(t, t, indexing="ij")  # (size, size) each
    return np.stack([x.ravel(), y.ravel()], axis=1)


def psnr(prediction: Any, target: Any, data_range: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB: 10 log10(data_range^2 / MSE); data_range is max - min
    of the value scale (1 for images in [0, 1], 2 for [-1, 1]). Equal images: inf."""
    p, t = (
        np.asarray(backend.to_host(getattr(a, "data", a)), np.float64) for a in (prediction, target)
    )
    if p.shape != t.shape:
        raise ValueError(f"psnr: prediction {p.shape} and target {t.shape} must have one shape")
    return _psnr_of_mse(float(np.mean((p - t) ** 2)), data_range)


def _psnr_of_mse(mse: float, data_range: float = 2.0) -> float:
    return math.inf if mse == 0 else 10 * math.log10(data_range**2 / mse)


# ---------------------------------------------------------------------------------------------
# Training


def train_siren(cfg: TrainSirenConfig) -> dict[str, Any]:
    """Fit the image with every network of --models; returns {"logs": {name: log}, "results":
    {name: numbers}} (no results for a run that was stopped)."""
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_siren(cfg)


def _resume_settings(cfg: TrainSirenConfig) -> tuple[TrainSirenConfig, dict[str, tuple]]:
    """With --resume: the settings the runs were started with (so that the networks still to
    train fit the same image the same way), and (state, meta) of each saved run."""
    if not cfg.resume:
        return cfg, {}
    out, saved = Path(cfg.out_dir), {}
    for name in MODELS:
        if not (out / name / "ckpt.npz").exists() or (saved and name not in cfg.model_names()):
            continue  # (a network the saved run does not fit: left over from an older run)
        sub, state, meta = resume_from(dataclasses.replace(cfg, out_dir=str(out / name)),
                                       str(out / name))  # fmt: skip
        cfg = dataclasses.replace(sub, out_dir=str(out))  # the next resume_from sees no change
        saved[name] = (state, meta)
    if not saved:
        raise ValueError(f"--resume: {out} holds no saved run (no */ckpt.npz) to continue")
    return cfg, saved


def _fit(cfg: TrainSirenConfig, name: str, coords: Any, target: Any, saved: tuple | None) -> tuple:
    """Train one network through the shared loop in out_dir/name; -> (model, log)."""
    sub = dataclasses.replace(cfg, out_dir=str(Path(cfg.out_dir) / name))

    def build(cfg: TrainSirenConfig, state: dict | None, meta: dict | None) -> Run:
        return _network_run(cfg, name, coords, target, state, meta)

    # resumed already, all networks at once (_resume_settings)
    run, log = start_run(sub, build, saved=saved or (None, None))
    return run.model, log


def _network_run(
    cfg: TrainSirenConfig, name: str, coords: Any, target: Any, state: dict | None,
    meta: dict | None,
) -> Run:  # fmt: skip
    if meta:
        mconf = config_from_checkpoint(meta["_path"], SirenConfig, meta["model_config"], state)
    else:
        mconf = cfg.model_config()
    with checkpoint_errors(meta["_path"]) if meta else contextlib.nullcontext():
        model = build_model(name, mconf).to(cfg.device)
    optimizer = Adam(model.parameters(), lr=cfg.lr if name == "siren" else cfg.baseline_lr)
    scheduler = LambdaLR(optimizer, lambda step: 1.0)  # constant, as in both papers

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        _, mse = model(coords, target)
        return {"mse": float(mse.item()), "psnr": _psnr_of_mse(float(mse.item()))}

    return Run(
        model, optimizer, scheduler, np.random.default_rng(cfg.seed),
        get_batch=lambda rng: (coords, target),  # full batch: every pixel, every step
        evaluate=evaluate, config=cfg, command="siren", title=f"{name}: mean squared error",
        loss_label="mean squared error",
        meta=lambda: {"model_config": dataclasses.asdict(mconf), "network": name},
        resume_hint=f"tinyformer train siren --resume --out-dir {Path(cfg.out_dir).parent}",
    )  # fmt: skip


def _train_siren(cfg: TrainSirenConfig) -> dict[str, Any]:
    cfg, saved = _resume_settings(cfg)
    if cfg.iters is None:
        cfg = dataclasses.replace(cfg, iters=DEFAULT_ITERS)
    image = load_image(cfg.image, cfg.size) if cfg.image else china_crop(cfg.size)  # (H, W)
    coords = backend.to_device(coordinate_grid(cfg.size), cfg.device)  # (N, 2)
    target = backend.to_device(image.reshape(-1, 1) * 2 - 1, cfg.device)  # (N, 1) in [-1, 1]
    source = cfg.image or "china.jpg (pagoda crop)"
    print(f"fitting {source} at {cfg.size}x{cfg.size} ({coords.shape[0]:,} pixels per "
          f"step): {cfg.n_layers} hidden layers of width {cfg.hidden}, {cfg.iters} steps "
          "each")  # fmt: skip
    models, logs = {}, {}
    names = cfg.model_names()
    for i, name in enumerate(names, 1):
        lr = cfg.lr if name == "siren" else cfg.baseline_lr
        print(f"{i}/{len(names)} {name} (Adam, lr {lr:g})")
        models[name], logs[name] = _fit(cfg, name, coords, target, saved.get(name))
        if len(logs[name]["loss"]) < cfg.iters:
            return {"logs": logs, "results": {}}  # stopped: the loop said how to resume
    from tinyformer.train.siren.plots import report

    return {"logs": logs, "results": report(cfg, models, logs, coords, image)}
