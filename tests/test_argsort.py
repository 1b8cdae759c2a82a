"""argsort's properties beyond the generic suite (whose spec draws distinct values): ties, NaN,
integer and boolean tensors, 0-d tensors, its errors, and the masked autoencoder's shuffle."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf

try:
    import torch
except ImportError:
    torch = None

TIES = np.array([[2.0, 1.0, 2.0, np.nan, 1.0, 2.0], [0.0, -0.0, 3.0, 3.0, np.nan, np.nan]])


@pytest.mark.torch
@pytest.mark.skipif(torch is None, reason="compares with PyTorch; torch not installed")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(
    "values",
    [
        TIES,
        TIES.T.copy(),
        np.array([[3, 1, 3, 0, 1]], np.int64),
        np.array([[7, 0, 255, 7]], np.uint8),
        np.array([[True, False, True, False]]),
        np.random.default_rng(0).integers(0, 3, size=(2, 64)).astype(np.float32),
    ],
    ids=["float ties and NaN", "transposed", "int64", "uint8", "bool", "long rows of ties"],
)
def test_stable_order_matches_pytorch_at_ties(values, descending):
    for axis in (0, -1):
        got = tf.tensor(values).argsort(dim=axis, descending=descending, stable=True)
        want = torch.from_numpy(values).argsort(dim=axis, descending=descending, stable=True)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"axis {axis}")


def test_it_sorts_and_carries_no_gradient():
    x = tf.randn(3, 5, requires_grad=True)
    order = tf.argsort(x, axis=1, descending=True)
    assert order.dtype == np.int64 and not order.requires_grad and order.grad_fn is None
    values = np.take_along_axis(x.numpy(), order.numpy(), axis=1)
    assert (np.diff(values, axis=1) <= 0).all()
    assert sorted(order.numpy()[0]) == list(range(5))
    assert tf.tensor(3.0).argsort().numpy() == 0


def test_masked_autoencoder_shuffle_keeps_a_random_subset_per_row():
    tf.manual_seed(0)
    noise = tf.rand(4, 10)
    ids_shuffle = noise.argsort(dim=-1)
    ids_restore = ids_shuffle.argsort(dim=-1)  # the inverse permutation
    rows = np.arange(4)[:, None]
    np.testing.assert_array_equal(ids_shuffle.numpy()[rows, ids_restore.numpy()], [range(10)] * 4)
    assert len({tuple(r) for r in ids_shuffle.numpy()[:, :3]}) > 1  # rows draw differently


def test_on_the_fake_device_it_stays_there():
    x = tf.tensor(TIES).to("fake")
    order = x.argsort(descending=True)
    assert order.device.type == "fake"
    np.testing.assert_array_equal(
        tf.backend.to_host(order.data), tf.tensor(TIES).argsort(descending=True).numpy()
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda x: x.argsort(dim=2), r"argsort: axis 2 is out of range .*\(2, 3\)"),
        (lambda x: x.argsort(axis=1.0), "argsort: axis must be an int, got 1.0"),
        (lambda x: tf.argsort(x, dim=0, axis=0), "got both axis= and dim="),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises((tf.OpError, TypeError), match=message):
        call(tf.zeros(2, 3))
