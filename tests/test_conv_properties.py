"""Properties that explain the convolution and pooling ops (the generic suite checks their
gradients and float32 behaviour; the PyTorch oracle checks their semantics)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F


def _t(a):
    return tf.tensor(np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize(
    "stride, padding, dilation, groups",
    [(1, 0, 1, 1), (2, 1, 1, 1), ((2, 3), (1, 2), (1, 2), 1), (2, 1, 2, 2)],
)
def test_conv_transpose_is_the_adjoint_of_conv(stride, padding, dilation, groups):
    """<conv(x), y> == <x, conv_T(y)> with the same weights: conv_T is conv's transpose."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 11, 13))
    w = rng.standard_normal((6, 4 // groups, 3, 3))  # (O, C/g, kh, kw) for conv2d
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y_shape = F.conv2d(_t(x), _t(w), **kw).shape
    y = rng.standard_normal(y_shape)
    # conv_transpose2d's weight is (C_in_of_it, C_out/g, kh, kw): the same array, read as (O, C/g)
    out = F.conv_transpose2d(_t(y), _t(w), **kw)
    # output_padding picks the size conv2d's stride rounding lost; crop or pad to x's size
    back = np.zeros_like(x)
    h, ww = min(out.shape[2], x.shape[2]), min(out.shape[3], x.shape[3])
    back[:, :, :h, :ww] = out.data[:, :, :h, :ww]
    lhs = float((F.conv2d(_t(x), _t(w), **kw).data * y).sum())
    rhs = float((x * back).sum())
    assert lhs == pytest.approx(rhs, rel=1e-12)


def test_max_unpool_keeps_exactly_the_maxima_in_place():
    rng = np.random.default_rng(1)
    x = rng.permutation(2 * 3 * 8 * 8).reshape(2, 3, 8, 8).astype(np.float64)
    pooled, indices = F.max_pool2d(_t(x), 2, return_indices=True)
    restored = F.max_unpool2d(pooled, indices, 2).data
    window_max = x.reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5))
    is_max = x == np.repeat(np.repeat(window_max, 2, axis=2), 2, axis=3)
    assert np.array_equal(restored, np.where(is_max, x, 0.0))
    assert (restored != 0).sum() == pooled.size


def test_one_by_one_conv_is_a_per_pixel_linear():
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((2, 5, 4, 3)), rng.standard_normal((7, 5)), rng.standard_normal(7)
    conv = F.conv2d(_t(x), _t(w[:, :, None, None]), _t(b)).data
    per_pixel = F.linear(_t(x.transpose(0, 2, 3, 1)), _t(w), _t(b)).data  # (N, H, W, O)
    np.testing.assert_allclose(conv, per_pixel.transpose(0, 3, 1, 2), rtol=1e-12, atol=1e-12)


def test_patch_embedding_conv_equals_patches_then_linear():
    """ViT's patch embedding: a conv with kernel = stride = P is cutting the image into P x P
    patches, flattening each, and applying one Linear."""
    rng = np.random.default_rng(3)
    n, c, size, p, d = 2, 3, 8, 4, 5
    x, w = rng.standard_normal((n, c, size, size)), rng.standard_normal((d, c, p, p))
    conv = F.conv2d(_t(x), _t(w), stride=p).data  # (N, D, 2, 2)
    g = size // p
    patches = x.reshape(n, c, g, p, g, p).transpose(0, 2, 4, 1, 3, 5).reshape(n, g * g, c * p * p)
    linear = F.linear(_t(patches), _t(w.reshape(d, -1))).data  # (N, patches, D)
    np.testing.assert_allclose(conv.reshape(n, d, -1).transpose(0, 2, 1), linear, rtol=1e-12)


def test_bad_arguments_name_the_op_and_shapes():
    x = tf.randn(1, 4, 5, 5)
    with pytest.raises(tf.OpError, match="conv2d: groups=3"):
        F.conv2d(x, tf.randn(6, 1, 3, 3), groups=3)
    with pytest.raises(tf.OpError, match="conv2d: .*does not fit the input 5x5"):
        F.conv2d(x, tf.randn(2, 4, 7, 7))
    with pytest.raises(tf.OpError, match="output_padding"):
        F.conv_transpose2d(x, tf.randn(4, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(tf.OpError, match="max_unpool2d: indices"):
        F.max_unpool2d(x, np.zeros((1, 4, 2, 2), np.int64), 2)
    with pytest.raises(tf.OpError, match="must be \\(N, C, H, W\\)"):
        F.max_pool2d(tf.randn(4, 5, 5), 2)
