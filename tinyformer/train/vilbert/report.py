"""What `tinyformer train vilbert` leaves to look at: coattention.png after pretraining, and at
the end a table, results.json and compare.png (pretrained vs scratch on the questions)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data.scenes import Scenes, caption_text, encode
from tinyformer.fileio import save_figure, save_json
from tinyformer.models.vilbert import ViLBERT

__all__ = ["coattention_maps", "plot_coattention", "report"]


@tf.no_grad()
def coattention_maps(model: ViLBERT, scene: Scenes, text: str) -> tuple[np.ndarray, np.ndarray]:
    """The last co-attention layer's weights for scene 0 and `text`, averaged over heads:
    text-to-image (T, 1 + R) and image-to-text (1 + R, T)."""
    ids, mask = encode([text])
    was_training = model.training
    model.eval()
    *_, maps = model(ids, scene.regions[:1], scene.boxes[:1], mask, need_weights=True)
    model.train(was_training)
    to_image, to_text = (backend.to_host(w.data)[0].mean(0) for w in maps[-1])
    return to_image, to_text


def plot_coattention(model: ViLBERT, scene: Scenes, path: Path, text: str | None = None) -> Any:
    """The scene with its regions numbered, then who attends to whom in the last co-attention
    layer: each word over [IMG] and the regions, and each region over the words. Returns the
    Figure (saved to `path` unless it is None)."""
    from matplotlib.figure import Figure

    text = caption_text(scene, 0) if text is None else text
    to_image, to_text = coattention_maps(model, scene, text)
    words = ["[CLS]", *text.split(), "[SEP]"]
    regions = ["[IMG]", *(f"region {r + 1}" for r in range(len(scene.labels[0])))]
    fig = Figure(figsize=(12, 3.8))
    ax_img, ax_t2i, ax_i2t = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 2]})
    ax_img.imshow(scene.canvas[0, 0], cmap="gray", vmin=0, vmax=1)
    side = scene.canvas.shape[-1]
    for r, (x1, y1, _, _, _) in enumerate(scene.boxes[0]):
        ax_img.text(x1 * side + 0.3, y1 * side + 1.2, str(r + 1), color="tab:orange", fontsize=12)
    ax_img.set(xticks=[], yticks=[], title=f'"{text}"')
    ax_t2i.imshow(to_image, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax_t2i.set(xticks=range(len(regions)), yticks=range(len(words)),
               title="words attend to regions")  # fmt: skip
    ax_t2i.set_xticklabels(regions, rotation=45, fontsize=8)
    ax_t2i.set_yticklabels(words, fontsize=8)
    shown = ax_i2t.imshow(to_text, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax_i2t.set(xticks=range(len(words)), yticks=range(len(regions)),
               title="regions attend to words")  # fmt: skip
    ax_i2t.set_xticklabels(words, rotation=45, fontsize=8)
    ax_i2t.set_yticklabels(regions, fontsize=8)
    # both maps share the scale [0, 1]: one bar, beside the second
    fig.colorbar(shown, ax=ax_i2t, fraction=0.04, pad=0.02, label="attention weight")
    fig.suptitle("last co-attention layer, mean over heads (rows sum to 1)")
    fig.tight_layout()
    if path is not None:
        save_figure(path, fig)
    return fig


def report(cfg: Any, logs: dict[str, Any]) -> dict[str, Any]:
    """Print the pretrained-vs-scratch table; write results.json and compare.png."""
    out = Path(cfg.out_dir)
    pre = logs["pretrain"]["evals"][-1]
    rows = {name: logs[name]["evals"][-1] for name in ("pretrained", "scratch")}
    best = {name: max(e["test_acc"] for e in logs[name]["evals"]) for name in rows}
    ms = {name: float(np.median(logs[name]["ms"])) for name in ("pretrain", *rows)}
    print(f"\npretraining, {cfg.pretrain_iters} steps, held-out scenes: masked words "
          f"{pre['word_acc']:.1%} (digit names {pre['digit_word_acc']:.1%}), masked regions "
          f"{pre['region_acc']:.1%}, alignment {pre['align_acc']:.1%}")  # fmt: skip
    print(
        f"question answering, {cfg.finetune_examples} labelled scenes, "
        f"{cfg.finetune_iters} steps each, {cfg.test_scenes} held-out scenes:"
    )
    print(f"  {'start':<20} {'test accuracy':>14} {'best':>8} {'test loss':>10} {'ms/step':>8}")
    for name, label in (("pretrained", "pretrained ViLBERT"), ("scratch", "random weights")):
        e = rows[name]
        print(f"  {label:<20} {e['test_acc']:>14.1%} {best[name]:>8.1%} {e['test']:>10.3f} "
              f"{ms[name]:>8.1f}")  # fmt: skip
    gain = rows["pretrained"]["test_acc"] - rows["scratch"]["test_acc"]
    print(f"  pretraining adds {gain * 100:+.1f} points of accuracy (chance: 10%)")
    results = {
        "config": dataclasses.asdict(cfg),
        "pretrain": {**pre, "ms_per_step": ms["pretrain"]},
        "finetune": {
            name: {**rows[name], "best_test_acc": best[name], "ms_per_step": ms[name]}
            for name in rows
        },  # fmt: skip
        "gain": gain,
    }
    save_json(out / "results.json", results)
    _plot(logs, out / "compare.png")
    print(f"{out / 'compare.png'}, {out / 'results.json'}")
    return results


def _plot(logs: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4))
    ax_pre, ax_acc = fig.subplots(1, 2)
    evals = logs["pretrain"]["evals"]
    steps = [e["iter"] for e in evals]
    for key, label in (("digit_word_acc", "masked digit names"), ("region_acc", "masked regions"),
                       ("align_acc", "alignment")):  # fmt: skip
        ax_pre.plot(steps, [e[key] for e in evals], marker="o", label=label)
    ax_pre.set(xlabel="pretraining step", ylabel="held-out accuracy", title="pretraining")
    for name, color in (("pretrained", "tab:blue"), ("scratch", "tab:orange")):
        evals = logs[name]["evals"]
        ax_acc.plot([e["iter"] for e in evals], [e["test_acc"] for e in evals], marker="o",
                    color=color, label=name)  # fmt: skip
    ax_acc.axhline(0.1, color="gray", linestyle=":", label="chance")
    ax_acc.set(xlabel="fine-tuning step", ylabel="test accuracy",
               title='"what is left of the two ?"')  # fmt: skip
    for ax in (ax_pre, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(path, fig)
