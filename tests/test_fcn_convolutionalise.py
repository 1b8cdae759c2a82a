"""The first step of an FCN: a classifier's Linear head as a convolution. Same logits on one
image; on a canvas, a map of logits with one cell per window, at the network's stride."""

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend, nn
from tinyformer.models.cnn import CNN, CNNConfig, convolutionalise, linear_to_conv


def _cnn(**kw) -> CNN:
    tf.manual_seed(0)
    return CNN(CNNConfig(**{"channels": (4, 6), **kw})).to(np.float64).eval()


def test_linear_to_conv_reads_the_flattened_map_as_a_kernel():
    tf.manual_seed(0)
    linear = nn.Linear(3 * 2 * 2, 5).to(np.float64)
    x = np.random.default_rng(0).normal(size=(4, 3, 2, 2))
    conv = linear_to_conv(linear, 3, 2)
    assert conv.weight.shape == (5, 3, 2, 2)
    y_conv = conv(tf.tensor(x)).data  # (4, 5, 1, 1)
    y_linear = linear(tf.tensor(x.reshape(4, -1))).data  # (4, 5)
    np.testing.assert_allclose(y_conv[:, :, 0, 0], y_linear, rtol=1e-12, atol=1e-12)
    conv.weight.data[...] = 0.0  # a copy: the Linear keeps its weights
    assert np.abs(linear.weight.data).sum() > 0
    # a Linear on C features is a 1x1 convolution applied at every position
    one = linear_to_conv(nn.Linear(3, 2).to(np.float64), 3, 1)
    y = one(tf.tensor(x)).data  # (4, 2, 2, 2)
    np.testing.assert_allclose(y[:, :, 1, 0], x[:, :, 1, 0] @ one.weight.data[:, :, 0, 0].T
                               + one.bias.data, rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match=r"12 inputs cannot read in_channels 3 x kernel 3x3"):
        linear_to_conv(linear, 3, 3)


@pytest.mark.parametrize("channels", [(4, 6), (4,)])
def test_convolutional_cnn_gives_the_same_logits_on_one_image(channels):
    model = _cnn(channels=channels)
    fcn = convolutionalise(model)
    images = np.random.default_rng(1).random((5, 1, 8, 8))
    logits, _ = model(images)
    scores = fcn(tf.tensor(images)).data
    assert scores.shape == (5, 10, 1, 1)
    np.testing.assert_allclose(scores[:, :, 0, 0], logits.data, rtol=1e-10, atol=1e-12)


def test_canvas_gives_one_cell_per_window_at_the_network_stride():
    model = _cnn()  # two poolings: stride 4
    fcn = convolutionalise(model)
    rng = np.random.default_rng(2)
    canvas = rng.random((1, 1, 32, 48))
    scores = fcn(tf.tensor(canvas)).data
    assert scores.shape == (1, 10, (32 - 8) // 4 + 1, (48 - 8) // 4 + 1)  # (1, 10, 7, 11)
    # moving the content by one stride (4 pixels) moves the map by one cell, exactly, where a
    # cell's receptive field (20 pixels: rows 4i-6 .. 4i+13) stays inside the canvas
    content = np.zeros((1, 1, 32, 48))
    content[:, :, 8:24, 12:32] = rng.random((1, 1, 16, 20))
    moved = np.roll(content, 4, axis=3)
    a, b = fcn(tf.tensor(content)).data, fcn(tf.tensor(moved)).data
    np.testing.assert_allclose(b[..., 2:4, 3:9], a[..., 2:4, 2:8], rtol=1e-10, atol=1e-12)
    assert not np.allclose(b[..., 2:4, 2:8], a[..., 2:4, 2:8])


def test_convolutionalise_follows_the_device_and_mode():
    model = _cnn().train()
    assert convolutionalise(model).training
    fake = _cnn().to("fake")
    fcn = convolutionalise(fake)
    assert backend.device_of(fcn[-1].weight.data).type == "fake"
