"""What needs no PyTorch to check in the added activations, pixel shuffles, adaptive pools,
nn.Bilinear and nn.utils.parameters_to_vector: their errors (each naming the function and the
shapes), and properties that hold whatever PyTorch does. The added losses and distances are
in test_nn_extras_losses.py."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.autograd import OpError
from tinyformer.nn import functional as F


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _grad(fn, x):
    """d sum(fn(x)) / dx."""
    t = tf.tensor(np.asarray(x, dtype=float), requires_grad=True)
    fn(t).sum().backward()
    return t.grad


# -- activations --------------------------------------------------------------------------------


def test_logsigmoid_is_finite_and_exact_far_from_zero():
    x = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0])
    y = F.logsigmoid(tf.tensor(x)).data
    np.testing.assert_allclose(y, [-1000.0, -40.0, -math.log(2.0), -math.exp(-40.0), 0.0])
    assert y[3] < 0  # log(1 - 4e-18): not rounded to 0
    np.testing.assert_allclose(_grad(F.logsigmoid, x), [1.0, 1.0, 0.5, math.exp(-40.0), 0.0])


def test_selu_keeps_a_standard_normal_input_standard():
    """SELU's constants are chosen so that N(0, 1) inputs give outputs of mean 0, variance 1."""
    y = F.selu(tf.tensor(np.random.default_rng(0).standard_normal(2_000_000))).data
    assert abs(y.mean()) < 3e-3 and abs(y.var() - 1.0) < 3e-3


@pytest.mark.parametrize("alpha", [0.3, 1.0, 4.0])
def test_celu_has_slope_one_on_both_sides_of_zero(alpha):
    np.testing.assert_allclose(_grad(lambda t: F.celu(t, alpha), [-1e-9, 1e-9]), [1.0, 1.0])
    np.testing.assert_allclose(F.celu(tf.tensor([-500.0]), alpha).data, [-alpha])  # saturates
    with pytest.raises(OpError, match="celu: alpha must be a nonzero number, got 0"):
        F.celu(tf.tensor([1.0]), 0)
    with pytest.raises(ValueError, match="CELU: alpha must be nonzero"):
        nn.CELU(0.0)


def test_softsign_and_hardsigmoid_shapes_and_kinks():
    np.testing.assert_allclose(F.softsign(tf.tensor([-3.0, 0.0, 1.0])).data, [-0.75, 0, 0.5])
    np.testing.assert_allclose(_grad(F.softsign, [-3.0, 0.0, 1.0]), [1 / 16, 1.0, 0.25])
    x = [-4.0, -3.0, 0.0, 3.0, 4.0]
    np.testing.assert_allclose(F.hardsigmoid(tf.tensor(x)).data, [0, 0, 0.5, 1, 1])
    np.testing.assert_allclose(_grad(F.hardsigmoid, x), [0, 0, 1 / 6, 0, 0])  # 0 at +-3


def test_glu_gates_the_first_half_with_the_second_and_refuses_odd_lengths():
    x = _x(2, 6)
    y = F.glu(tf.tensor(x), dim=1).data
    np.testing.assert_allclose(y, x[:, :3] / (1 + np.exp(-x[:, 3:])))
    assert nn.GLU(0)(tf.tensor(_x(4, 3))).shape == (2, 3)
    with pytest.raises(OpError, match=r"glu: axis 1 must have an even length .* \(2, 5\)"):
        F.glu(tf.tensor(_x(2, 5)))
    with pytest.raises(OpError, match="glu: a 0-d input"):
        F.glu(tf.tensor(1.0))


def test_softmax2d_sums_to_one_over_the_channels_of_each_pixel():
    y = nn.Softmax2d()(tf.tensor(_x(2, 3, 4, 5))).data
    np.testing.assert_allclose(y.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match=r"Softmax2d: input must be .*got shape \(3, 4\)"):
        nn.Softmax2d()(tf.tensor(_x(3, 4)))


# -- gumbel_softmax -----------------------------------------------------------------------------


def test_gumbel_softmax_draws_probabilities_from_the_generator():
    logits = tf.tensor(_x(5, 4))
    tf.manual_seed(0)
    a = F.gumbel_softmax(logits, tau=0.5)
    tf.manual_seed(0)
    b = F.gumbel_softmax(logits, tau=0.5)
    c = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_array_equal(a.data, b.data)  # reproducible from the seed
    assert not np.allclose(b.data, c.data)  # fresh noise each call
    np.testing.assert_allclose(a.data.sum(axis=-1), 1.0)
    assert (a.data > 0).all()
    np.testing.assert_allclose(F.gumbel_softmax(logits, dim=0).data.sum(axis=0), 1.0)


def test_gumbel_softmax_samples_the_categorical_of_its_logits():
    """The Gumbel-max trick: the argmax of logits + Gumbel noise is a draw from
    softmax(logits), at any temperature."""
    p = np.array([0.1, 0.2, 0.3, 0.4])
    logits = tf.tensor(np.tile(np.log(p), (20_000, 1)))
    tf.manual_seed(1)
    counts = np.bincount(F.gumbel_softmax(logits, tau=3.0).data.argmax(axis=1), minlength=4)
    np.testing.assert_allclose(counts / counts.sum(), p, atol=0.015)


def test_hard_gumbel_softmax_is_one_hot_with_the_soft_samples_gradient():
    logits = tf.tensor(_x(6, 5), requires_grad=True)
    g = tf.tensor(_x(6, 5, seed=1))
    hard = F.gumbel_softmax(logits, tau=0.7, hard=True, seed=4)
    soft = F.gumbel_softmax(logits, tau=0.7, seed=4)
    np.testing.assert_allclose(hard.data, np.eye(5)[soft.data.argmax(axis=1)], atol=1e-15)
    (hard * g).sum().backward()
    hard_grad, logits.grad = logits.grad, None
    (soft * g).sum().backward()
    np.testing.assert_allclose(hard_grad, logits.grad, rtol=1e-12)
    assert np.abs(hard_grad).max() > 0


def test_gumbel_softmax_refuses_bad_temperatures_and_warns_about_eps():
    x = tf.tensor(_x(2, 3))
    for tau in (0, -1.0, True):
        with pytest.raises(OpError, match="gumbel_softmax: tau must be a number > 0"):
            F.gumbel_softmax(x, tau=tau)
    with pytest.warns(UserWarning, match="eps is deprecated"):
        F.gumbel_softmax(x, eps=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.gumbel_softmax(x)  # the default eps does not warn


# -- pixel shuffle ------------------------------------------------------------------------------


def test_pixel_shuffle_moves_channel_blocks_into_pixels():
    x = np.arange(2 * 8 * 2 * 3.0).reshape(2, 8, 2, 3)
    y = F.pixel_shuffle(tf.tensor(x), 2).data
    assert y.shape == (2, 2, 4, 6)
    n, c, h, w, i, j = 1, 1, 1, 2, 1, 0  # y[n, c, h r + i, w r + j] = x[n, c r^2 + i r + j, h, w]
    assert y[n, c, h * 2 + i, w * 2 + j] == x[n, c * 4 + i * 2 + j, h, w]
    np.testing.assert_array_equal(y[0, 0, :2, :2], [[x[0, 0, 0, 0], x[0, 1, 0, 0]],
                                                    [x[0, 2, 0, 0], x[0, 3, 0, 0]]])  # fmt: skip


@pytest.mark.parametrize("shape, r", [((2, 12, 3, 2), 2), ((9, 1, 1), 3), ((2, 1, 4, 2, 3), 2)])
def test_pixel_unshuffle_undoes_pixel_shuffle(shape, r):
    x = tf.tensor(_x(*shape), requires_grad=True)
    y = nn.PixelUnshuffle(r)(nn.PixelShuffle(r)(x))
    np.testing.assert_array_equal(y.data, x.data)
    g = _x(*shape, seed=1)
    (y * tf.tensor(g)).sum().backward()
    np.testing.assert_array_equal(x.grad, g)  # a permutation: the gradient comes back as it was
    image = tf.tensor(_x(*shape[:-3], shape[-3], shape[-2] * r, shape[-1] * r))
    np.testing.assert_array_equal(F.pixel_shuffle(F.pixel_unshuffle(image, r), r).data, image.data)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: F.pixel_shuffle(tf.zeros(2, 6, 3, 3), 2),
            r"divisible by .* 4, got .*\(2, 6, 3, 3\)",
        ),
        (lambda: F.pixel_shuffle(tf.zeros(4, 3), 2), r"input must be \(\*, C, H, W\)"),
        (lambda: F.pixel_shuffle(tf.zeros(4, 3, 3), 0), "upscale_factor must be an int >= 1"),
        (lambda: F.pixel_unshuffle(tf.zeros(1, 3, 4, 5), 2), r"divisible by .* 2, got .*5\)"),
        (lambda: F.pixel_unshuffle(tf.zeros(1, 3, 4, 4), 1.5), "downscale_factor must be an int"),
    ],
)
def test_pixel_shuffles_refuse_shapes_they_cannot_rearrange(call, message):
    with pytest.raises(OpError, match=message):
        call()


# -- adaptive pooling ---------------------------------------------------------------------------


def test_adaptive_pools_use_pytorchs_windows():
    x = tf.tensor(np.array([[[1.0, 5.0, 2.0, 4.0, 3.0]]]), requires_grad=True)  # L = 5 -> 3
    # windows [0, 2), [1, 4), [3, 5): they overlap, and differ in size
    np.testing.assert_allclose(F.adaptive_avg_pool1d(x, 3).data, [[[3.0, 11 / 3, 3.5]]])
    y = F.adaptive_max_pool1d(x, 3)
    np.testing.assert_array_equal(y.data, [[[5.0, 5.0, 4.0]]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [[[0, 2, 0, 1, 0]]])  # x[1] is two windows' maximum
    image = tf.tensor(_x(2, 3, 5, 7))
    np.testing.assert_array_equal(nn.AdaptiveMaxPool2d((5, 7))(image).data, image.data)
    np.testing.assert_array_equal(
        nn.AdaptiveMaxPool2d(1)(image).data, image.data.max(axis=(2, 3), keepdims=True)
    )
    np.testing.assert_array_equal(nn.AdaptiveMaxPool2d((None, 2))(image).shape, (2, 3, 5, 2))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: F.adaptive_max_pool2d(tf.zeros(1, 2, 3, 3), 2, True), "return_indices=True"),
        (lambda: F.adaptive_max_pool1d(tf.zeros(1, 2, 3), 2, True), "return_indices=True"),
        (lambda: F.adaptive_max_pool2d(tf.zeros(3, 3), 2), r"\(N, C, H, W\) .*got shape \(3, 3\)"),
        (lambda: F.adaptive_avg_pool1d(tf.zeros(1, 2, 3, 4), 2), r"pool1d: input must be \(N"),
        (lambda: F.adaptive_max_pool2d(tf.zeros(1, 2, 3, 3), (2, 0)), "ints >= 1"),
        (lambda: F.adaptive_max_pool2d(tf.zeros(1, 2, 3, 3), (1, 2, 3)), "an int or 2 of them"),
        (lambda: F.adaptive_max_pool1d(tf.zeros(1, 2, 3), 1.5), "ints >= 1"),
    ],
)
def test_adaptive_pools_refuse_bad_arguments(call, message):
    with pytest.raises(OpError, match=message):
        call()
    with pytest.raises(ValueError, match="AdaptiveMaxPool2d: return_indices=True"):
        nn.AdaptiveMaxPool2d(2, return_indices=True)


# -- nn.Bilinear and nn.utils -------------------------------------------------------------------


def test_bilinear_is_a_bilinear_form_initialised_as_pytorchs():
    layer = nn.Bilinear(16, 3, 64)  # the bound is in1's, not in2's
    bound = 1 / math.sqrt(16)
    for p in (layer.weight, layer.bias):
        assert np.abs(p.data).max() <= bound and np.abs(p.data).max() > 0.8 * bound
    assert layer.weight.shape == (64, 16, 3) and layer.bias.shape == (64,)
    x1, x2 = _x(5, 16), _x(5, 3, seed=1)
    y = layer(tf.tensor(x1), tf.tensor(x2)).data
    w, b = layer.weight.data.astype(float), layer.bias.data.astype(float)
    np.testing.assert_allclose(y, np.einsum("ni,oij,nj->no", x1, w, x2) + b, rtol=1e-5)
    doubled = layer(tf.tensor(2 * x1), tf.tensor(x2)).data - b  # linear in each input
    np.testing.assert_allclose(doubled, 2 * (y - b), rtol=1e-4, atol=1e-5)
    assert nn.Bilinear(2, 3, 4, bias=False).bias is None
    with pytest.raises(ValueError, match="Bilinear: out_features must be a whole number"):
        nn.Bilinear(2, 3, -1)


@pytest.mark.parametrize(
    "shapes, message",
    [
        ([(2, 3), (3, 4), (5, 3, 4)], r"input1 \(2, 3\) and input2 \(3, 4\) must share"),
        ([(2, 3), (2, 4), (5, 4, 3)], r"need a weight \(out, 3, 4\), got shape \(5, 4, 3\)"),
        ([(2, 3), (2, 4), (5, 12)], r"weight must be \(out, in1, in2\)"),
        ([(2, 3), (2, 4), (5, 3, 4), (4,)], r"bias must be \(5,\), got shape \(4,\)"),
    ],
)
def test_bilinear_refuses_mismatched_shapes(shapes, message):
    with pytest.raises(OpError, match="bilinear: .*" + message):
        F.bilinear(*(tf.zeros(*s) for s in shapes))


def test_parameters_to_vector_and_back_round_trip():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    params = list(model.parameters())
    vec = nn.utils.parameters_to_vector(params)
    assert vec.shape == (3 * 4 + 4 + 4 * 2 + 2,)
    np.testing.assert_array_equal(vec.data[:12], params[0].data.reshape(-1))
    (vec * tf.tensor(np.arange(vec.shape[0], dtype=np.float32))).sum().backward()
    np.testing.assert_array_equal(params[1].grad, np.arange(12, 16))  # each slot's own weight
    new = tf.tensor(np.arange(vec.shape[0], dtype=np.float64))
    nn.utils.vector_to_parameters(new, params)
    np.testing.assert_array_equal(params[2].data, np.arange(16, 24).reshape(2, 4))
    assert params[2].dtype == np.float32  # each parameter keeps its dtype
    np.testing.assert_array_equal(nn.utils.parameters_to_vector(params).data, new.data)
    new.data[:] = 0  # the parameters got copies
    assert params[0].data.sum() > 0


def test_vector_to_parameters_refuses_other_lengths_and_non_tensors():
    params = list(nn.Linear(3, 2).parameters())  # 8 numbers
    with pytest.raises(
        ValueError, match=r"hold 8 numbers, so vec must be \(8,\), got shape \(9,\)"
    ):
        nn.utils.vector_to_parameters(tf.zeros(9), params)
    with pytest.raises(TypeError, match="expected a Tensor, but got ndarray"):
        nn.utils.vector_to_parameters(np.zeros(8), params)
    with pytest.raises(ValueError, match="parameters_to_vector: no parameters given"):
        nn.utils.parameters_to_vector([])
