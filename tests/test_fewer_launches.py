"""Launch-saving rewrites keep their results: the embedding's one-comparison range check, the
Linear backward's kept ones vector, and attention's contiguous heads saved for its backward."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import tinyformer as tf
from tinyformer.fake_device import to_fake
from tinyformer.launches import counting
from tinyformer.ops.embedding import _out_of_range

linear_op = importlib.import_module("tinyformer.ops.linear")  # the package exports the function


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16])
def test_the_range_check_finds_every_negative_and_too_large_index(dtype):
    info = np.iinfo(dtype)
    values = np.unique(np.array([info.min, info.min + 1, -1 if info.min else 0, 0, 1, 5, 127,
                                 info.max - 1, info.max], dtype=dtype))  # fmt: skip
    for n in (1, 5, 127, 128, 129, 255, 256, 300, 40_000, 2**40):
        want = (values.astype(object) < 0) | (values.astype(object) >= n)
        assert list(_out_of_range(values, n)) == list(want), (dtype, n)
        with counting() as launches:
            bad = _out_of_range(to_fake(values), n)
        assert list(bad.get()) == list(want)
        assert launches.total <= (1 if info.min == 0 or n <= info.max + 1 else 3)


def test_linears_bias_gradient_is_the_same_with_a_kept_ones_vector():
    rng = np.random.default_rng(0)
    layer = tf.nn.Linear(3, 2).to("fake")
    x = tf.Tensor(to_fake(rng.standard_normal((4, 3)).astype(np.float32)))
    gy = rng.standard_normal((4, 2)).astype(np.float32)
    grads = []
    for _ in range(2):  # the second backward reuses the first one's ones vector
        layer.zero_grad()
        with counting() as launches:
            layer(x).backward(to_fake(gy))
        grads.append(layer.bias.grad.get())
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_array_equal(grads[1], np.ones(4, np.float32) @ gy)
    assert launches.by_label()["Linear.backward"] == 2  # gw and gb; no fill
    assert len(linear_op._ONES) <= linear_op.MOST_ONES


def test_attention_on_a_device_saves_contiguous_heads_and_copies_them_once():
    rng = np.random.default_rng(0)
    qkv = tf.Tensor(to_fake(rng.standard_normal((2, 5, 3, 2, 4)).astype(np.float32)),
                    requires_grad=True)  # fmt: skip
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # (B, H, T, d) strided views
    y = tf.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    ctx = y.grad_fn
    assert all(a.flags.c_contiguous for a in ctx.saved_tensors[:3])
    want = tf.nn.functional.scaled_dot_product_attention(
        *(tf.Tensor(a.data.get()) for a in (q, k, v)), is_causal=True
    )
    np.testing.assert_allclose(y.data.get(), want.data, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("t", [5, 40])  # one tile; more than one of queries and of keys
def test_attention_gradients_come_back_in_the_layout_of_the_merged_heads(t):
    """gy arrives as (B, H, T, d) views of (B, T, H, d) memory (heads merged back into one
    projection): the CUDA backward writes gq, gk, gv in that layout, so that they flow back to
    the projection they were split from with no copy, and equal the reference's."""
    from tinyformer import registry
    from tinyformer.ops import reshape, split, transpose

    rng = np.random.default_rng(1)
    b, h, d = 2, 3, 4
    x = rng.standard_normal((b, t, 3 * h * d)).astype(np.float32)
    gy = rng.standard_normal((b, t, h * d)).astype(np.float32)

    def run(device):
        qkv = tf.Tensor(x, requires_grad=True).to(device)
        qkv = qkv.detach().requires_grad_()
        heads = [transpose(reshape(a, b, t, h, d), 1, 2) for a in split(qkv, h * d, axis=2)]
        y = tf.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
        merged = reshape(transpose(y, 1, 2), b, t, h * d)
        with counting() as launches:
            merged.backward(to_fake(gy) if device == "fake" else gy)
        return qkv.grad, launches

    with registry.prefer("cuda", force=True):
        got, launches = run("fake")
    want, _ = run("cpu")
    np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-6)
    labels = launches.by_label()
    assert labels.get("Reshape.backward", 0) == 0  # no copy of gq, gk or gv
    assert labels["ScaledDotProductAttention.backward"] == 3  # gy's copy and two kernels
