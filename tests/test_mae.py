"""MAE: random masking, unshuffling, the asymmetric encoder, the masked-patch loss on normalised
targets, gradients through the gather of visible patches, and the training command."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.models.mae import (
    MAE,
    MAEConfig,
    masked_patch_loss,
    normalized_patches,
    patchify,
    random_masking,
    unpatchify,
)
from tinyformer.models.vit import ViT

TINY = MAEConfig(image_size=4, patch_size=2, n_layer=1, n_head=2, n_embd=8, decoder_n_layer=1,
                 decoder_n_head=2, decoder_n_embd=4, mlp_ratio=2)  # fmt: skip


def _model(config=TINY, seed=0, dtype=np.float64):
    tf.manual_seed(seed)
    return MAE(config).to(dtype)


@pytest.mark.parametrize("n, ratio", [(16, 0.75), (49, 0.75), (10, 0.15), (7, 0.5)])
def test_exactly_round_ratio_n_patches_are_hidden_and_masks_differ(n, ratio):
    tf.manual_seed(0)
    ids_shuffle, ids_restore, mask = random_masking(32, n, ratio)
    assert (mask.sum(axis=1) == round(ratio * n)).all()
    assert len({row.tobytes() for row in mask}) > 1  # drawn per image, not once per batch
    for row in ids_shuffle:  # each row a permutation; its first K are exactly the kept ones
        assert sorted(row) == list(range(n))
    keep = n - round(ratio * n)
    kept = np.zeros_like(mask)
    np.put_along_axis(kept, ids_shuffle[:, :keep], 1.0, axis=1)
    np.testing.assert_array_equal(kept, 1 - mask)


def test_ids_restore_inverts_the_shuffle():
    tf.manual_seed(1)
    ids_shuffle, ids_restore, _ = random_masking(5, 16, 0.75)
    x = np.random.default_rng(0).random((5, 16, 3))
    shuffled = np.take_along_axis(x, ids_shuffle[..., None], axis=1)
    np.testing.assert_array_equal(np.take_along_axis(shuffled, ids_restore[..., None], 1), x)
    # given noise, the mask is reproducible: the smallest noise values are kept
    noise = np.array([[0.9, 0.1, 0.5, 0.3]])
    np.testing.assert_array_equal(random_masking(1, 4, 0.5, noise)[2], [[1, 0, 1, 0]])
    with pytest.raises(ValueError, match=r"noise must be \(B, N\) = \(1, 4\), got \(1, 3\)"):
        random_masking(1, 4, 0.5, noise[:, :3])


def test_decoder_gets_mask_tokens_at_hidden_positions_and_visible_tokens_in_place():
    model = _model()
    images = np.random.default_rng(0).random((3, 1, 4, 4))
    noise = np.random.default_rng(1).random((3, 4))
    seen = []
    block = model.decoder_blocks[0]
    block.forward = lambda x, _forward=block.forward: seen.append(x.data) or _forward(x)
    model(images, noise)
    tokens = seen[0][:, 1:] - model.decoder_pos_embed.data[:, 1:]  # (B, N, D), image order
    latent, mask, _ = model.encode(images, noise)
    visible = model.decoder_embed(latent).data[:, 1:]  # (B, K, D), in shuffled order
    ids_shuffle, _, _ = random_masking(3, 4, TINY.mask_ratio, noise)
    hidden = mask.astype(bool)
    np.testing.assert_allclose(tokens[hidden], np.broadcast_to(
        model.mask_token.data[0], (hidden.sum(), 4)), rtol=1e-12)  # fmt: skip
    for b in range(3):  # patch ids_shuffle[b, j] was the j-th kept one
        np.testing.assert_allclose(tokens[b, ids_shuffle[b, : visible.shape[1]]], visible[b],
                                   rtol=1e-12)  # fmt: skip


def test_encoder_sees_only_the_visible_patches_plus_cls():
    config = MAEConfig()  # 8x8 images, 2x2 patches: 16 patches, 12 hidden
    model = _model(config, dtype=np.float32)
    images = np.random.default_rng(0).random((2, 1, 8, 8)).astype(np.float32)
    latent, mask, ids_restore = model.encode(images)
    assert latent.shape == (2, 1 + 4, 64) and config.num_visible == 4
    pred, loss = model(images)
    assert pred.shape == (2, 16, 4) and mask.shape == ids_restore.shape == (2, 16)
    # a hidden patch's pixels cannot change what the encoder computes
    noise = np.random.default_rng(1).random((2, 16))
    base = model.encode(images, noise)[0].data
    _, _, mask = random_masking(2, 16, 0.75, noise)
    patches = patchify(images, 2).copy()
    patches[mask.astype(bool)] += 5.0
    changed = model.encode(unpatchify(patches, 2, 1), noise)[0].data
    np.testing.assert_array_equal(changed, base)
    with pytest.raises(ValueError, match=r"expected images \(B, 1, 8, 8\), got \(2, 1, 4, 4\)"):
        model(images[:, :, :4, :4])


def test_patchify_round_trips_and_normalised_targets_have_zero_mean_unit_variance():
    images = np.random.default_rng(0).random((2, 3, 8, 8))
    patches = patchify(images, 4)
    assert patches.shape == (2, 4, 48)
    np.testing.assert_array_equal(patches[0, 1, :3], images[0, :, 0, 4])  # (row, col, channel)
    np.testing.assert_array_equal(unpatchify(patches, 4, 3), images)
    target = normalized_patches(patches)
    np.testing.assert_allclose(target.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(target.var(-1, ddof=1), 1.0, rtol=1e-4)
    assert (normalized_patches(np.full((1, 1, 4), 0.7)) == 0).all()  # a flat patch: zeros


def test_loss_reads_only_hidden_patches_and_normalised_targets():
    model = _model()
    images = np.random.default_rng(2).random((2, 1, 4, 4))
    noise = np.random.default_rng(3).random((2, 4))
    pred, loss = model(images, noise)
    _, _, mask = random_masking(2, 4, TINY.mask_ratio, noise)
    target = normalized_patches(patchify(images, 2))
    per_patch = ((pred.data - target) ** 2).mean(-1)
    np.testing.assert_allclose(loss.item(), (per_patch * mask).sum() / mask.sum(), rtol=1e-12)
    # changing the prediction of a visible patch leaves the loss; a hidden one's changes it
    moved = pred.data.copy()
    moved[mask == 0] += 3.0
    same = masked_patch_loss(tf.Tensor(moved), target, mask)
    np.testing.assert_allclose(same.item(), loss.item(), rtol=1e-12)
    moved[mask == 1] += 3.0
    assert masked_patch_loss(tf.Tensor(moved), target, mask).item() > loss.item() + 1
    # the targets ignore each patch's brightness and contrast; without norm_pix_loss, raw pixels
    scaled = images * 3.0 + 0.5
    np.testing.assert_allclose(model.targets(scaled), target, rtol=1e-5, atol=1e-5)
    raw = _model(MAEConfig(**{**TINY.__dict__, "norm_pix_loss": False}))
    np.testing.assert_array_equal(raw.targets(scaled), patchify(scaled, 2))
    with pytest.raises(ValueError, match=r"pred \(2, 4, 4\), target \(2, 4, 3\)"):
        masked_patch_loss(pred, target[..., :3], mask)


def test_masking_and_gather_path_passes_gradcheck():
    model = _model(seed=4)
    images = np.random.default_rng(4).random((2, 1, 4, 4))
    noise = np.random.default_rng(5).random((2, 4))
    target = model.targets(images)  # a constant: the targets are not differentiated
    x = tf.Tensor(images, requires_grad=True)

    # Through the patch embedding, the gather of the visible patches, the encoder, the gather
    # that unshuffles the mask tokens, and the decoder.
    def loss(x, *params):
        latent, mask, ids_restore = model.encode(x, noise)
        return masked_patch_loss(model.decode(latent, ids_restore), target, mask)

    # the parameters on either side of the two gathers (every parameter would be a slow check)
    path = [model.patch_embed.weight, model.pos_embed, model.cls_token, model.mask_token,
            model.decoder_pos_embed, model.decoder_embed.weight]  # fmt: skip
    assert tf.gradcheck(loss, [x, *path])
    model.zero_grad()
    model(x, noise)[1].backward()
    assert model.mask_token.grad is not None and np.abs(model.mask_token.grad).sum() > 0


def test_config_errors_and_the_encoder_loads_into_a_vit():
    with pytest.raises(ValueError, match="mask_ratio 0.01 hides 0 of 16 patches"):
        MAEConfig(mask_ratio=0.01)
    with pytest.raises(ValueError, match="decoder_n_embd 30 is not divisible by decoder_n_head 4"):
        MAEConfig(decoder_n_embd=30)
    model = _model(MAEConfig(), dtype=np.float32)
    vit = ViT(model.config.vit_config(num_classes=10))
    encoder = model.encoder_state_dict()
    assert set(vit.state_dict()) - set(encoder) == {"head.weight", "head.bias"}
    vit.load_state_dict({**vit.state_dict(), **encoder})
    np.testing.assert_array_equal(vit.pos_embed.data, model.pos_embed.data)


def test_train_mae_command_pretrains_plots_and_compares(tmp_path, capsys):
    out = tmp_path / "mae"
    flags = ["--pretrain-iters", "4", "--finetune-iters", "3", "--eval-interval", "2",
             "--batch-size", "8", "--n-layer", "1", "--n-embd", "16", "--decoder-n-layer", "1",
             "--decoder-n-embd", "8", "--out-dir", str(out), "--no-progress"]  # fmt: skip
    assert cli.main(["train", "mae", *flags]) == 0
    text = capsys.readouterr().out
    assert "MAE-pretrained encoder" in text and "random weights" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["finetune"]) == {"pretrained", "scratch"}
    assert results["pretrain"]["ms_per_step"] > 0
    for name in ("pretrain", "finetune-pretrained", "finetune-scratch"):
        assert (out / name / "ckpt.npz").is_file()
    for figure in ("reconstructions.png", "compare.png", "pretrain/loss.png"):
        assert (out / figure).stat().st_size > 0
    log = json.loads((out / "pretrain" / "log.json").read_text())
    assert len(log["loss"]) == 4 and [e["iter"] for e in log["evals"]] == [0, 2, 4]
    assert cli.main(["train", "mae", *flags]) == 2  # a finished run is not replaced silently


def test_linear_probe_trains_only_the_head(tmp_path, monkeypatch):
    from tinyformer.train.mae import TrainMAEConfig, finetune, load_images

    cfg = TrainMAEConfig(probe=True, finetune_iters=2, batch_size=8, n_layer=1, n_embd=16,
                         out_dir=str(tmp_path), progress=False)  # fmt: skip
    mae = _model(cfg.model_config(8, 1), dtype=np.float32)
    encoder = {k: v.data.copy() for k, v in mae.encoder_state_dict().items()}
    built, load = [], ViT.load_state_dict

    def keep(self, state, *args, **kwargs):  # catch the classifier finetune builds
        built.append(self)
        return load(self, state, *args, **kwargs)

    monkeypatch.setattr(ViT, "load_state_dict", keep)
    log = finetune(cfg, load_images(cfg), mae.config, mae.encoder_state_dict(), "probe")
    state = built[0].state_dict()
    assert all(np.array_equal(state[k].data, v) for k, v in encoder.items())
    assert len(log["loss"]) == 2 and 0 <= log["evals"][-1]["test_acc"] <= 1
