"""Properties of Swin's shifted windows and MAE's encoder that no shape or gradient check sees:
the shifted block is attention inside windows offset by the shift (no pair across the image
border), a batch of two images gives each image's own output, a stage alternates W-MSA and
SW-MSA in that order, and MAE's kept patches carry their own position embeddings.

Each check takes the model module it tests, so that tests/test_mutation_dedicated.py can run it
on a copy with a planted bug.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn
from tinyformer.models import mae, swin


def _shifted_reference(block, x: np.ndarray, m: int, s: int) -> np.ndarray:
    """What an SW-MSA block computes, from image coordinates alone (no roll, no window
    buffers): full attention in which token (r, c) sees the tokens of its window on the grid
    of windows offset by s, where rows 0..s-1 (and columns) form a window of their own rather
    than wrapping around to the far border; the bias is the table's for their offset."""
    b, h, w, c = x.shape
    attn = block.attn
    nh, hs = attn.num_heads, c // attn.num_heads
    rows, cols = np.indices((h, w)).reshape(2, -1)  # (h*w,) each
    wr, wc = (rows - s) // m, (cols - s) // m  # rows before s fall in window -1: their own
    same = (wr[:, None] == wr[None]) & (wc[:, None] == wc[None])
    dy, dx = rows[:, None] - rows[None], cols[:, None] - cols[None]  # (h*w, h*w)
    offset = np.where(same, (dy + m - 1) * (2 * m - 1) + dx + m - 1, 0)
    bias = attn.relative_position_bias_table.data[offset].transpose(2, 0, 1)  # (nh, L, L)
    with tf.no_grad():
        t = block.norm1(tf.Tensor(x)).data.reshape(b, h * w, c)
        qkv = attn.qkv(tf.Tensor(t)).data.reshape(b, h * w, 3, nh, hs)
        q, k, v = qkv.transpose(2, 0, 3, 1, 4)  # 3 x (B, nh, L, hs)
        y = F.scaled_dot_product_attention(q, k, v, np.where(same, bias, -np.inf)).data
        y = attn.proj(tf.Tensor(y.transpose(0, 2, 1, 3).reshape(b, h * w, c))).data
        x = x + y.reshape(b, h, w, c)
        return x + block.mlp(block.norm2(tf.Tensor(x))).data


def _block(module: ModuleType, m: int, s: int, seed: int = 0):
    tf.manual_seed(seed)
    block = module.SwinBlock(8, 2, window_size=m, shift=s).to(np.float64)
    table = block.attn.relative_position_bias_table
    table.data[:] = np.random.default_rng(seed).normal(size=table.shape)  # not ~0: visible
    return block


def check_shifted_block(module: ModuleType = swin) -> None:
    """SW-MSA equals its definition from image coordinates, for even and odd windows."""
    for side, m in ((4, 2), (6, 3)):
        s = m // 2
        block = _block(module, m, s)
        x = np.random.default_rng(1).normal(size=(1, side, side, 8))
        with tf.no_grad():
            got = block(tf.Tensor(x), module.shifted_window_mask(side, side, m, s)).data
        np.testing.assert_allclose(got, _shifted_reference(block, x, m, s), rtol=1e-10, atol=1e-12)


def check_batch_of_two(module: ModuleType = swin) -> None:
    """A shifted block, and the model, on a batch of two images equal the block (the model)
    on each image alone: the one mask per window must meet every image's windows, not a mix
    of images."""
    block = _block(module, 2, 1)
    mask = module.shifted_window_mask(4, 4, 2, 1)
    x = np.random.default_rng(2).normal(size=(2, 4, 4, 8))
    with tf.no_grad():
        both = block(tf.Tensor(x), mask).data
        alone = [block(tf.Tensor(x[i : i + 1]), mask).data[0] for i in range(2)]
    np.testing.assert_allclose(both, np.stack(alone), rtol=1e-12, atol=1e-12)
    tf.manual_seed(0)
    model = module.SwinTransformer(module.SwinConfig()).to(np.float64)  # the whole model too
    images = np.random.default_rng(3).random((2, 1, 8, 8))
    with tf.no_grad():
        both = model(images)[0].data
        alone = [model(images[i : i + 1])[0].data[0] for i in range(2)]
    np.testing.assert_allclose(both, np.stack(alone), rtol=1e-12, atol=1e-12)


def check_stage_order(module: ModuleType = swin) -> None:
    """Blocks alternate W-MSA (shift 0) and SW-MSA, regular first; a stage's output is its
    blocks applied in that order with the shifted blocks given the stage's mask."""
    config = module.SwinConfig(depths=(4, 2), num_heads=(2, 2), embed_dim=8)
    grid, m, s = config.stages()[0]
    tf.manual_seed(0)
    stage = module.SwinStage(config, 0).to(np.float64)
    assert s == 1 and [b.shift for b in stage.blocks] == [0, s, 0, s]
    x = np.random.default_rng(3).normal(size=(1, grid, grid, 8))
    mask = module.shifted_window_mask(grid, grid, m, s)
    with tf.no_grad():
        want = tf.Tensor(x)
        for j, block in enumerate(stage.blocks):
            want = block(want, mask if j % 2 else None)
        want = stage.downsample(want).data
        got = stage(tf.Tensor(x)).data
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def check_mae_positions(module: ModuleType = mae) -> None:
    """The encoder's tokens before its blocks are [CLS] + pos[0], then each kept patch's
    embedding plus the position embedding of that patch (a direct gather by patch index)."""
    config = module.MAEConfig(image_size=8, patch_size=2, n_layer=1, n_head=2, n_embd=8,
                              decoder_n_layer=1, decoder_n_head=2, decoder_n_embd=4)  # fmt: skip
    tf.manual_seed(0)
    model = module.MAE(config).to(np.float64)
    pos = model.pos_embed.data
    pos[:] = np.random.default_rng(0).normal(size=pos.shape)  # distinct, not ~0
    model.blocks = nn.ModuleList()  # the tokens as the blocks would get them, through the norm
    images = np.random.default_rng(1).random((2, 1, 8, 8))
    noise = np.random.default_rng(2).random((2, config.num_patches))
    with tf.no_grad():
        latent = model.encode(images, noise)[0].data
        tokens = model.patch_embed(tf.Tensor(images)).data  # (B, C, h, w)
        tokens = tokens.reshape(2, 8, -1).transpose(0, 2, 1)  # (B, N, C), patches row-major
        keep = np.argsort(noise, axis=1, kind="stable")[:, : config.num_visible]  # (B, K)
        kept = np.take_along_axis(tokens, keep[..., None], 1) + pos[0, 1 + keep]  # (B, K, C)
        cls = np.broadcast_to(model.cls_token.data + pos[:, :1], (2, 1, 8))
        want = model.norm(tf.Tensor(np.concatenate([cls, kept], axis=1))).data
    np.testing.assert_allclose(latent, want, rtol=1e-12, atol=1e-12)


CHECKS = {
    "swin-shifted-block": (swin, check_shifted_block),
    "swin-batch-of-two": (swin, check_batch_of_two),
    "swin-stage-order": (swin, check_stage_order),
    "mae-kept-positions": (mae, check_mae_positions),
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_model_property(name):
    module, check = CHECKS[name]
    check(module)
