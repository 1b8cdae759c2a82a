"""ViT: parameter counts against the paper, shapes, attention maps, a whole-model gradcheck."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.models import VIT_CONFIGS, ViT, ViTConfig, attention_rollout

# Table 1 of Dosovitskiy et al. (2021), in millions. Our counts are those of the reference
# implementations (timm's vit_*_224 with a 1000-class head); docs/vision.md explains ViT-L's gap.
PAPER = {"vit_base_patch16_224": 86, "vit_large_patch16_224": 307, "vit_huge_patch14_224": 632}


def test_parameter_counts_match_the_paper():
    counts = {name: VIT_CONFIGS[name].num_parameters() for name in PAPER}
    assert counts["vit_base_patch16_224"] == 86_567_656
    assert counts["vit_large_patch16_224"] == 304_326_632
    assert counts["vit_huge_patch14_224"] == 632_045_800
    for name, millions in PAPER.items():
        assert abs(counts[name] / 1e6 - millions) / millions < 0.01


def test_params_command_prints_the_named_vits(capsys):
    assert cli.main(["params", "vit"]) == 0  # was an invalid choice: gpt and bert only
    out = capsys.readouterr().out
    assert all(name in out for name in VIT_CONFIGS) and "86,567,656 parameters" in out


def test_built_model_counts_what_the_formula_says():
    config = ViTConfig(image_size=8, patch_size=4, in_channels=3, num_classes=5, n_layer=2)
    assert ViT(config).num_parameters() == config.num_parameters()
    with pytest.raises(ValueError, match="multiple of patch_size"):
        ViTConfig(image_size=10, patch_size=4)


def test_forward_shapes_and_attention_maps():
    tf.manual_seed(0)
    model = ViT(VIT_CONFIGS["vit_tiny_digits"])
    images = np.random.default_rng(0).random((3, 1, 8, 8)).astype(np.float32)
    logits, loss = model(images, [0, 1, 2])
    assert logits.shape == (3, 10) and loss.item() > 0
    maps = model.attention_maps(images)
    assert len(maps) == 4 and maps[0].shape == (3, 4, 17, 17)  # 16 patches + [CLS]
    np.testing.assert_allclose(maps[0].sum(-1), 1.0, rtol=1e-5)
    rollout = attention_rollout(maps)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="expected images"):
        model(images[:, :, :4])


def test_tiny_vit_passes_gradcheck_on_all_parameters():
    config = ViTConfig(image_size=4, patch_size=2, num_classes=3, n_layer=1, n_head=2, n_embd=8)
    tf.manual_seed(1)
    model = ViT(config).to(np.float64)
    images = np.random.default_rng(1).random((2, 1, 4, 4))
    params = list(model.parameters())

    def loss(*ps):
        return model(images, [0, 2])[1]

    assert tf.gradcheck(loss, params)
