"""Swin Transformer: windows, the shifted-window mask, relative positions, patch merging,
parameter counts against the reference implementations, a gradcheck, the training command."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import backend, cli, registry
from tinyformer.fake_device import FakeArray
from tinyformer.models.swin import (
    SWIN_CONFIGS,
    PatchMerging,
    SwinBlock,
    SwinConfig,
    SwinTransformer,
    WindowAttention,
    relative_position_index,
    shifted_window_mask,
    window_partition,
    window_reverse,
)
from tinyformer.nn import init
from tinyformer.optim import AdamW


def test_window_partition_and_reverse_round_trip():
    x = np.arange(2 * 6 * 4 * 3).reshape(2, 6, 4, 3)  # (B, h, w, C), h != w
    windows = window_partition(x, 2)
    assert windows.shape == (2 * 3 * 2, 4, 3)
    # the second window of the first image: rows 0-1, columns 2-3, row-major inside
    np.testing.assert_array_equal(windows[1], x[0, 0:2, 2:4].reshape(4, 3))
    np.testing.assert_array_equal(window_reverse(windows, 2, 6, 4), x)
    t = tf.Tensor(x.astype(np.float64))  # the same on Tensors, through the differentiable ops
    np.testing.assert_array_equal(window_reverse(window_partition(t, 2), 2, 6, 4).data, x)


@pytest.mark.parametrize(("side", "m"), [(4, 2), (8, 4), (12, 4), (14, 7)])
def test_shifted_mask_blocks_exactly_the_pairs_the_roll_brought_together(side, m):
    s = m // 2
    # Independently of the mask's region labels: where each token of the rolled grid came
    # from. Two tokens of one window were neighbours before the roll iff their original
    # coordinates are less than M apart; a pair the roll wrapped around is ~side apart.
    rows, cols = np.indices((side, side))
    origin = np.stack([rows, cols], axis=-1)[None]  # (1, h, w, 2)
    origin = np.roll(origin, (-s, -s), axis=(1, 2))  # what the block's roll does to the tokens
    windows = window_partition(origin, m)  # (nW, N, 2)
    apart = np.abs(windows[:, :, None, :] - windows[:, None, :, :]).max(axis=-1)  # (nW, N, N)
    mask = shifted_window_mask(side, side, m, s)
    assert mask.shape == ((side // m) ** 2, m * m, m * m)
    np.testing.assert_array_equal(mask == -np.inf, apart >= m)
    assert set(np.unique(mask)) <= {0.0, -np.inf} and (mask == -np.inf).any()
    # only windows touching the last row or column of windows hold wrapped tokens
    per_side = side // m
    interior = [i * per_side + j for i in range(per_side - 1) for j in range(per_side - 1)]
    assert (mask[interior] == 0).all()


def test_relative_position_index_on_a_2x2_window_by_hand():
    # tokens (0,0), (0,1), (1,0), (1,1); offset (dy, dx) = query - key -> (dy+1)*3 + (dx+1)
    expected = [[4, 3, 1, 0], [5, 4, 2, 1], [7, 6, 4, 3], [8, 7, 5, 4]]
    np.testing.assert_array_equal(relative_position_index(2), expected)
    index = relative_position_index(7)
    assert index.shape == (49, 49) and set(np.unique(index)) == set(range(13 * 13))
    assert (np.diag(index) == 6 * 13 + 6).all()  # every token to itself: offset (0, 0)


def _full_attention(attn: WindowAttention, x: np.ndarray, m: int) -> np.ndarray:
    """The same layer as full attention over the whole h x w grid: -inf between tokens of
    different windows, and between tokens of one window the table's bias for their offset,
    both computed from image coordinates (no windows, no index buffer)."""
    b, h, w, c = x.shape
    nh, hs = attn.num_heads, c // attn.num_heads
    rows, cols = np.indices((h, w)).reshape(2, -1)  # (h*w,) each
    same = (rows[:, None] // m == rows[None] // m) & (cols[:, None] // m == cols[None] // m)
    dy, dx = rows[:, None] - rows[None], cols[:, None] - cols[None]  # (h*w, h*w)
    offset = np.where(same, (dy + m - 1) * (2 * m - 1) + dx + m - 1, 0)
    bias = attn.relative_position_bias_table.data[offset].transpose(2, 0, 1)  # (nh, L, L)
    mask = np.where(same, bias, -np.inf)
    qkv = attn.qkv(tf.Tensor(x.reshape(b, h * w, c))).data.reshape(b, h * w, 3, nh, hs)
    q, k, v = qkv.transpose(2, 0, 3, 1, 4)  # 3 x (B, nh, L, hs)
    y = F.scaled_dot_product_attention(q, k, v, mask).data  # (B, nh, L, hs)
    y = attn.proj(tf.Tensor(y.transpose(0, 2, 1, 3).reshape(b, h * w, c))).data
    return y.reshape(b, h, w, c)


def test_window_attention_equals_full_attention_with_a_block_diagonal_mask():
    tf.manual_seed(0)
    m, (b, h, w, c) = 2, (2, 4, 6, 8)
    attn = WindowAttention(c, 2, m).to(np.float64)
    attn.relative_position_bias_table.data[:] = np.random.default_rng(1).normal(size=(9, 2))
    x = np.random.default_rng(0).normal(size=(b, h, w, c))
    windowed = window_reverse(attn(window_partition(tf.Tensor(x), m)), m, h, w).data
    np.testing.assert_allclose(windowed, _full_attention(attn, x, m), rtol=1e-10, atol=1e-12)


def test_shifted_block_keeps_wrapped_tokens_apart():
    """A token's SW-MSA output does not depend on a token the roll only made a neighbour:
    changing the bottom-right token leaves the top-left token's output unchanged, while
    without the mask it would change (they share a window after the roll)."""
    tf.manual_seed(0)
    block = SwinBlock(8, 2, window_size=2, shift=1).to(np.float64)
    mask = shifted_window_mask(4, 4, 2, 1)
    x = np.random.default_rng(0).normal(size=(1, 4, 4, 8))
    x2 = x.copy()
    x2[0, 3, 3] += np.linspace(-1, 1, 8)  # not a constant: LayerNorm would remove it
    with tf.no_grad():
        a, b = (block(tf.Tensor(v), mask).data for v in (x, x2))
        c, d = (block(tf.Tensor(v), np.zeros_like(mask)).data for v in (x, x2))
    np.testing.assert_array_equal(a[0, 0, 0], b[0, 0, 0])
    assert np.abs(c[0, 0, 0] - d[0, 0, 0]).max() > 1e-6


def test_patch_merging_concatenates_2x2_neighbours():
    merge = PatchMerging(3).to(np.float64)
    x = np.random.default_rng(0).normal(size=(2, 4, 6, 3))
    y = merge(tf.Tensor(x))
    assert y.shape == (2, 2, 3, 6)
    # the paper's order of the four neighbours: (0,0), (1,0), (0,1), (1,1) as (dy, dx)
    cat = np.concatenate(
        [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1
    )
    np.testing.assert_allclose(y.data, merge.reduction(merge.norm(tf.Tensor(cat))).data)


def test_parameter_counts_match_the_reference_implementations():
    # timm's and torchvision's swin_t / swin_s / swin_b with a 1000-class head
    counts = {name: c.num_parameters() for name, c in SWIN_CONFIGS.items()}
    assert counts["swin_tiny_patch4_window7_224"] == 28_288_354
    assert counts["swin_small_patch4_window7_224"] == 49_606_258
    assert counts["swin_base_patch4_window7_224"] == 87_768_224
    with init.skip_init():  # zeros, no random draws: only the count is wanted
        model = SwinTransformer(SWIN_CONFIGS["swin_tiny_patch4_window7_224"])
    assert sum(p.size for p in model.parameters()) == 28_288_354
    assert [(g, m, s) for g, m, s in model.config.stages()] == [
        (56, 7, 3), (28, 7, 3), (14, 7, 3), (7, 7, 0),
    ]  # fmt: skip
    for config in (SwinConfig(), SwinConfig(16, 2, 3, 5, 12, (1, 2, 1), (1, 2, 4), 4)):
        assert sum(p.size for p in SwinTransformer(config).parameters()) == config.num_parameters()


def test_forward_shapes_and_clear_errors():
    tf.manual_seed(0)
    model = SwinTransformer(SWIN_CONFIGS["swin_tiny_digits"])
    images = np.random.default_rng(0).random((3, 1, 8, 8)).astype(np.float32)
    logits, loss = model(images, [0, 1, 2])
    assert logits.shape == (3, 10) and np.isfinite(loss.item())
    assert model.layers[0].attn_mask.shape == (4, 4, 4) and model.layers[1].attn_mask is None
    assert "attn_mask" not in model.state_dict()  # derived from the config, not saved
    with pytest.raises(ValueError, match=r"expected images \(B, 1, 8, 8\)"):
        model(images[:, :, :4])
    with pytest.raises(ValueError, match="not a whole number of 3x3 windows"):
        SwinConfig(image_size=16, patch_size=2, window_size=3)
    with pytest.raises(ValueError, match="one entry per stage"):
        SwinConfig(depths=(2, 2), num_heads=(3,))


def test_tiny_shifted_swin_block_and_merging_pass_gradcheck():
    # SW-MSA with its mask (roll, windows, the gathered bias table), then patch merging
    tf.manual_seed(1)
    block = SwinBlock(4, 2, window_size=2, shift=1, mlp_ratio=2).to(np.float64)
    merge = PatchMerging(4).to(np.float64)
    mask = shifted_window_mask(4, 4, 2, 1)
    x = tf.Tensor(np.random.default_rng(1).normal(size=(1, 4, 4, 4)), requires_grad=True)
    params = [*block.parameters(), *merge.parameters()]

    def f(x, *ps):
        return merge(block(x, mask))

    assert tf.gradcheck(f, [x, *params], upstream="random")


def test_a_training_step_on_the_fake_device_gives_the_hosts_numbers():
    """The buffers (bias index, shifted-window mask) move with `.to()`: a step on the fake
    device gives the host's loss and parameters."""
    tf.manual_seed(0)
    host = SwinTransformer(SwinConfig(8, 2, 1, 3, 4, (2, 1), (2, 2), 2, dropout=0.1))
    fake = copy.deepcopy(host).to("fake")
    assert isinstance(fake.layers[0].attn_mask.data, FakeArray)
    rng = np.random.default_rng(0)
    images, targets = rng.standard_normal((2, 1, 8, 8)).astype(np.float32), np.array([0, 2])

    def step(model):
        optimizer = AdamW(model.parameters(), lr=1e-2)
        tf.manual_seed(1)
        _, loss = model(images, targets)
        loss.backward()
        optimizer.step()
        return loss, {k: backend.host_copy(v.data) for k, v in model.state_dict().items()}

    fake_loss, fake_state = step(fake)
    with registry.prefer(registry.REFERENCE):  # the arithmetic the fake device does
        host_loss, host_state = step(host)
    assert fake_loss.device == backend.device("fake")
    assert fake_loss.item() == pytest.approx(host_loss.item(), rel=1e-6)
    for key, value in host_state.items():
        np.testing.assert_allclose(fake_state[key], value, rtol=1e-6, atol=1e-7, err_msg=key)


def test_train_swin_command(tmp_path, capsys):
    out = str(tmp_path / "swin")
    flags = ["--iters", "4", "--eval-interval", "2", "--n-embd", "12", "--batch-size", "8",
             "--out-dir", out, "--no-progress"]  # fmt: skip
    assert cli.main(["train", "swin", *flags]) == 0
    assert (tmp_path / "swin" / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "swin" / "log.json").exists()
    assert cli.main(["train", "swin", *flags[:-3], "--out-dir", out, "--resume"]) == 0
    assert cli.main(["eval", "--ckpt", out]) == 0
    assert "model swin, data digits" in capsys.readouterr().out
    assert cli.main(["train", "swin", "--config", "vit_tiny_digits", "--out-dir", out]) == 2
    assert "not a swin configuration" in capsys.readouterr().err
    assert cli.main(["params", "swin", "--config", "swin_tiny_patch4_window7_224"]) == 0
    assert "28,288,354 parameters" in capsys.readouterr().out
