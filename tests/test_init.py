"""nn.init: the PyTorch initialisers draw what their formulas say, from tinyformer's generator."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.nn import init


def weight(*shape):
    return nn.Parameter(np.zeros(shape, np.float64))


def test_fans_count_the_kernel_and_the_stds_follow_the_formulas():
    tf.manual_seed(0)
    w = init.xavier_uniform_(weight(300, 200), gain=2.0)  # Linear(200, 300)
    a = 2.0 * math.sqrt(6.0 / 500)
    assert np.abs(w.data).max() <= a and np.abs(w.data).max() > 0.99 * a
    np.testing.assert_allclose(w.data.std(), a / math.sqrt(3), rtol=0.02)
    conv = init.kaiming_normal_(weight(64, 32, 3, 3), mode="fan_out", nonlinearity="relu")
    np.testing.assert_allclose(conv.data.std(), math.sqrt(2 / (64 * 9)), rtol=0.02)
    conv = init.xavier_normal_(weight(64, 32, 3, 3))
    np.testing.assert_allclose(conv.data.std(), math.sqrt(2 / (96 * 9)), rtol=0.02)
    np.testing.assert_allclose(conv.data.mean(), 0, atol=0.003)


def test_kaiming_uniform_with_a_sqrt5_is_pytorchs_default_linear():
    tf.manual_seed(1)
    w = init.kaiming_uniform_(weight(256, 100), a=math.sqrt(5))
    bound = 1 / math.sqrt(100)  # what nn.Linear(100, 256) draws from
    assert bound * 0.99 < np.abs(w.data).max() <= bound


def test_trunc_normal_stays_inside_and_has_the_truncated_spread():
    tf.manual_seed(2)
    w = init.trunc_normal_(weight(200, 200), mean=0.5, std=1.0, a=-0.5, b=1.5)
    assert w.data.min() >= -0.5 and w.data.max() <= 1.5
    # N(0, 1) cut at +-1 has variance 1 - 2 phi(1) / (2 Phi(1) - 1)
    phi, big_phi = math.exp(-0.5) / math.sqrt(2 * math.pi), 0.5 * math.erfc(-1 / math.sqrt(2))
    np.testing.assert_allclose(w.data.std(), math.sqrt(1 - 2 * phi / (2 * big_phi - 1)), rtol=0.01)
    np.testing.assert_allclose(w.data.mean(), 0.5, atol=0.005)
    with pytest.raises(ValueError, match=r"trunc_normal_: \[5, 6\] holds 2.9e-07 of N\(0.0, 1.0"):
        init.trunc_normal_(weight(3, 3), a=5, b=6)
    with pytest.raises(ValueError, match="trunc_normal_: needs a < b, got a=1, b=1"):
        init.trunc_normal_(weight(3, 3), a=1, b=1)


def test_initialisers_are_seeded_and_skippable():
    draws = []
    for _ in range(2):
        tf.manual_seed(3)
        draws.append(init.trunc_normal_(weight(4, 5), std=0.02).data.copy())
    np.testing.assert_array_equal(*draws)
    with init.skip_init():
        assert not init.xavier_uniform_(weight(4, 5)).data.any()
    np.testing.assert_array_equal(init.constant_(weight(2, 2), 0.5).data, np.full((2, 2), 0.5))


def test_initialiser_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"xavier_uniform_: fan in and fan out need .* \(5,\)"):
        init.xavier_uniform_(weight(5))
    with pytest.raises(ValueError, match="kaiming_normal_: mode must be fan_in or fan_out"):
        init.kaiming_normal_(weight(2, 2), mode="fan")
    with pytest.raises(ValueError, match="calculate_gain: unknown nonlinearity 'swish'"):
        init.calculate_gain("swish")


@pytest.mark.torch
def test_gains_are_pytorchs():
    torch = pytest.importorskip("torch")
    gains = [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None)]
    gains += [("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None), ("conv2d", None)]
    for name, param in gains:
        assert init.calculate_gain(name, param) == pytest.approx(
            torch.nn.init.calculate_gain(name, param), rel=1e-15
        )
