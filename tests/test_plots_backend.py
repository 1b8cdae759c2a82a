"""The library's plots leave the user's matplotlib backend alone.

Calling `matplotlib.use("Agg")` from library code switches a Jupyter notebook away from its
inline backend, after which every figure the notebook draws silently stops displaying. Each
plotting function draws on a `matplotlib.figure.Figure` instead, without pyplot. This runs them
all in a fresh interpreter whose backend is set to something other than Agg, and checks that
the backend is still that one afterwards, that pyplot was never imported, and that every PNG
was written."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRAW_ALL = """
import json, sys
from pathlib import Path

import matplotlib

matplotlib.use(sys.argv[2])
import numpy as np

import tinyformer as tf
from tinyformer.bench import save_chart
from tinyformer.data.dates import DateTask
from tinyformer.models.mae import MAE, MAEConfig
from tinyformer.models.seq2seq import Seq2SeqConfig, Transformer
from tinyformer.models.vit import ViT, ViTConfig
from tinyformer.train.bert import report as bert_report
from tinyformer.train.mae import report as mae_report
from tinyformer.train.report import plot_losses
from tinyformer.train.rlhf.report import plot_ppo
from tinyformer.train.seq2seq.plots import plot_alignment
from tinyformer.train.siren import plots as siren_plots
from tinyformer.train.vision import plots as vision_plots

out = Path(sys.argv[1])
rng = np.random.default_rng(0)
tf.manual_seed(0)
steps = np.linspace(3, 1, 20)
plot_losses({"loss": list(steps), "lr": list(steps * 1e-3),
             "evals": [{"iter": 10, "train": 2.0, "val": 2.1}]}, out / "loss.png", "tiny")
labels = rng.integers(0, 4, 30)
vision_plots.plot_confusion(labels, rng.integers(0, 4, 30), 4, out / "confusion.png")
vision_plots.plot_segmentations(rng.random((2, 1, 8, 8)), rng.integers(0, 4, (2, 8, 8)),
                                rng.integers(0, 4, (2, 8, 8)), out / "segmentations.png")
vit = ViT(ViTConfig(image_size=8, patch_size=4, n_layer=1, n_head=2, n_embd=8))
vision_plots.plot_vit(vit, rng.random((1, 8, 8)), out)
config = Seq2SeqConfig(len(DateTask.SOURCE), len(DateTask.TARGET), max_len=32,
                       n_encoder_layers=1, n_decoder_layers=1, n_head=2, d_model=8, d_ff=16,
                       dropout=0.0)
plot_alignment(Transformer(config).eval(), DateTask(seed=0, test_dates=10), out / "alignment.png")
mae = MAE(MAEConfig(image_size=8, patch_size=4, n_layer=1, n_head=2, n_embd=8,
                    decoder_n_layer=1, decoder_n_head=2, decoder_n_embd=8))
mae_report.plot_reconstructions(mae, rng.random((3, 1, 8, 8)), out / "reconstructions.png")
finetune = {"loss": [], "ms": [1.0], "evals": [{"iter": 1, "test_acc": 0.5, "test": 1.0},
                                               {"iter": 2, "test_acc": 0.7, "test": 0.8}]}
pretrain = {"loss": [1.0, 0.8, 0.5], "ms": [1.0],
            "evals": [{"iter": 3, "val": 0.6, "nsp_val_acc": 0.6, "nsp_train_acc": 0.7}]}
logs = {"pretrain": pretrain, "pretrained": finetune, "scratch": finetune}
mae_report._plot(logs, out / "mae_compare.png", "linear probe")
bert_report._plot(logs, out / "bert_compare.png", nsp=True)
siren_log = {"loss": [0.5, 0.1, 0.01], "ms": [1.0, 1.0, 1.0]}
siren_plots._plot_psnr({"siren": siren_log, "relu": siren_log}, out / "psnr.png")
image = rng.random((8, 8))
siren_plots._plot_fits(image, image, {"siren": image}, {"siren": image},
                       {"siren": {"psnr": 30.0}}, out / "fits.png")
plot_ppo({"reward": [0.1, 0.5], "kl": [0.0, 1.0], "score": [0.2, 0.3]}, out / "ppo.png", 0.1)
save_chart(out / "chart.png", [{"op": "a", "f": 1.0, "b": 2.0}], "op", ["f", "b"], "chart")
print(json.dumps({"backend": matplotlib.get_backend(),
                  "pyplot": "matplotlib.pyplot" in sys.modules}))
"""

PNGS = [
    "loss.png", "confusion.png", "segmentations.png", "patches.png", "attention.png",
    "rollout.png", "alignment.png", "reconstructions.png", "mae_compare.png",
    "bert_compare.png", "psnr.png", "fits.png", "chart.png", "ppo.png",
]  # fmt: skip


def test_plots_keep_the_users_backend_and_never_import_pyplot(tmp_path):
    # Jupyter's own backend where it is installed; otherwise another non-Agg one.
    inline = importlib.util.find_spec("matplotlib_inline") is not None
    backend = "module://matplotlib_inline.backend_inline" if inline else "svg"
    result = subprocess.run(
        [sys.executable, "-c", DRAW_ALL, str(tmp_path), backend],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout.strip().splitlines()[-1])
    assert state == {"backend": backend, "pyplot": False}
    for name in PNGS:
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG", name
