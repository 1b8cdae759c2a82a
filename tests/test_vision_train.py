"""Image models end to end: each trains a little, the CNN and segmentation nets pass gradcheck,
a vision run resumes bit for bit, and the train / eval commands work."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.data import make_shapes
from tinyformer.models.cnn import CNN, CNNConfig
from tinyformer.models.segmentation import SEGMENTATION_MODELS, SegConfig
from tinyformer.train.vision import TrainVisionConfig, load_trained, train_vision


def _cfg(tmp_path, model, **changes):
    base = dict(
        model=model, iters=8, eval_interval=4, batch_size=8, width=4, shapes=40, image_size=8,
        n_layer=1, n_embd=16, warmup=2, out_dir=str(tmp_path / model), progress=False,
    )  # fmt: skip
    return TrainVisionConfig(**{**base, **changes})


@pytest.mark.parametrize("name", sorted(SEGMENTATION_MODELS))
def test_segmentation_nets_pass_gradcheck(name):
    tf.manual_seed(0)
    net = SEGMENTATION_MODELS[name](SegConfig(in_channels=2, num_classes=3, width=2)).to(np.float64)
    rng = np.random.default_rng(0)
    images, masks = rng.random((1, 2, 4, 4)), rng.integers(0, 3, (1, 4, 4))
    params = list(net.parameters())
    assert net(images, masks)[0].shape == (1, 3, 4, 4)
    assert tf.gradcheck(lambda *ps: net(images, masks)[1], params, upstream="random")


def test_cnn_passes_gradcheck():
    tf.manual_seed(1)
    net = CNN(CNNConfig(image_size=4, num_classes=3, channels=(2, 3))).to(np.float64)
    images = np.random.default_rng(1).random((2, 1, 4, 4))
    assert tf.gradcheck(lambda *ps: net(images, [0, 2])[1], list(net.parameters()))
    with pytest.raises(
        ValueError, match=r"CNN: expected images \(B, 1, 4, 4\), got \(2, 1, 8, 8\)"
    ):
        net(np.zeros((2, 1, 8, 8)))  # failed at the head, as a Linear width mismatch


def test_unet_learns_the_shapes_a_little(tmp_path):
    log = train_vision(_cfg(tmp_path, "unet", iters=40, eval_interval=40, width=8, shapes=120,
                            image_size=16, lr=3e-3))  # fmt: skip
    first, last = log["evals"][0], log["evals"][-1]
    assert last["val"] < first["val"] - 0.3 and last["val_accuracy"] > 0.8


@pytest.mark.parametrize("model", ["vit", "cnn", "segnet"])
def test_vision_resume_equals_an_uninterrupted_run(tmp_path, model):
    train_vision(_cfg(tmp_path / "a", model))
    train_vision(_cfg(tmp_path / "b", model), on_step=lambda it: it == 5)
    train_vision(_cfg(tmp_path / "b", model, resume=True, iters=None))
    a, _, meta_a = load_trained(tmp_path / "a" / model)
    b, _, meta_b = load_trained(tmp_path / "b" / model)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.data, pb.data, err_msg=name)
    assert meta_a["log"]["evals"] == meta_b["log"]["evals"]
    if model == "vit":  # another model's command, pointed at this run, refuses it
        with pytest.raises(ValueError, match="holds a vit run: resume it with the command"):
            train_vision(_cfg(tmp_path / "b", "cnn", resume=True, out_dir=str(tmp_path / "b/vit")))


def test_train_and_eval_commands(tmp_path, capsys):
    out = str(tmp_path / "vit")
    flags = ["--iters", "4", "--eval-interval", "2", "--n-layer", "1", "--n-embd", "16",
             "--batch-size", "8", "--out-dir", out, "--no-progress"]  # fmt: skip
    assert cli.main(["train", "vit", *flags]) == 0
    assert cli.main(["eval", "--ckpt", out]) == 0
    printed = capsys.readouterr().out
    assert "model vit, data digits, images 359" in printed and "rollout.png" in printed
    for plot in ("confusion.png", "patches.png", "attention.png", "rollout.png", "loss.png"):
        assert (tmp_path / "vit" / plot).read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["train", "unet", "--data", "digits", "--out-dir", out]) == 2
    assert "cannot train on --data digits" in capsys.readouterr().err


def test_shapes_masks_align_with_model_outputs():
    images, masks = make_shapes(2, size=8)
    net = SEGMENTATION_MODELS["unet"](SegConfig(width=2))
    logits, loss = net(images, masks)
    assert logits.shape == (2, 4, 8, 8) and np.isfinite(loss.item())
