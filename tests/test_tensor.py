"""Tensor creation, dtypes and the operator sugar."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend


def test_python_floats_become_float32_numpy_keeps_its_dtype():
    assert tf.tensor([1.0, 2.0]).dtype == np.float32
    assert tf.tensor([1, 2]).dtype == np.int64
    assert tf.tensor(np.ones(2)).dtype == np.float64
    assert tf.randn(2, 3).dtype == np.float32 and tf.zeros((2, 3)).shape == (2, 3)
    assert tf.arange(3).dtype == np.int64 and tf.arange(0.0, 1.0, 0.5).dtype == np.float32


def test_float32_stays_float32_through_scalar_arithmetic():
    x = tf.randn(3)
    for y in (x * 2, 2 * x, x / 3, 1 - x, x**2, -x, x + 0.5):
        assert y.dtype == np.float32


def test_operators_match_numpy():
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, -1.0])
    x, y = tf.Tensor(a), tf.Tensor(b)
    np.testing.assert_allclose((x + y).data, a + b)
    np.testing.assert_allclose((x @ y).data, a @ b)
    np.testing.assert_allclose((b - x).data, b - a)  # ndarray on the left defers to Tensor
    np.testing.assert_allclose(x.T.data, a.T)
    assert ((x > 2).data == (a > 2)).all() and (x > 2).dtype == np.bool_


def test_seeded_randomness_is_reproducible():
    tf.manual_seed(123)
    a = tf.randn(5).data
    state = tf.get_rng_state()
    b = tf.randn(5).data
    tf.manual_seed(123)
    np.testing.assert_array_equal(tf.randn(5).data, a)
    tf.set_rng_state(state)
    np.testing.assert_array_equal(tf.randn(5).data, b)


def test_manual_seed_takes_pytorchs_negative_seeds_and_refuses_non_integers():
    tf.manual_seed(-1)  # PyTorch's range: a negative seed stands for seed + 2**64
    a = tf.randn(3).data
    tf.manual_seed(2**64 - 1)
    np.testing.assert_array_equal(tf.randn(3).data, a)
    for bad, error in [(1.5, TypeError), (True, TypeError), (2**64, ValueError)]:
        with pytest.raises(error, match="manual_seed: the seed must be"):
            tf.manual_seed(bad)


def test_repr_item_and_numpy():
    x = tf.tensor([1.5], requires_grad=True)
    assert repr(x) == "tensor([1.5], requires_grad=True)"
    assert "grad_fn=<MulBackward>" in repr(x * 2)
    assert x.item() == 1.5 and isinstance(x.numpy(), np.ndarray)
    assert np.asarray(x).shape == (1,)


def test_split_and_chunk_sizes_follow_pytorch():
    x = tf.arange(10.0)
    assert [p.shape[0] for p in x.split(4)] == [4, 4, 2]
    assert [p.shape[0] for p in x.split([3, 7])] == [3, 7]
    assert [p.shape[0] for p in x.chunk(3)] == [4, 4, 2]


def test_iterating_gives_the_rows_and_their_gradients_flow():
    x = tf.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    rows = list(x)  # stopped with getitem's out-of-range error before Tensor had __iter__
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    np.testing.assert_array_equal(np.stack([r.data for r in rows]), x.data)
    q, k, v = x  # unpacking a fused projection, as ViT code does with qkv
    (q * 1 + k * 2 + v * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [[1, 1], [2, 2], [3, 3]])
    with pytest.raises(TypeError, match="0-d tensor"):
        iter(tf.tensor(1.0))


def test_pytorch_conveniences_numel_tolist_contiguous_flatten():
    x = tf.arange(24.0).reshape(2, 3, 4)
    assert x.numel() == 24 == x.size and x.contiguous() is x
    assert (
        tf.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]] and tf.tensor(2.5).tolist() == 2.5
    )
    assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12)
    assert x.flatten(0, 1).shape == (6, 4) and x.flatten(-2, -1).shape == (2, 12)
    assert tf.tensor(3.0).flatten().shape == (1,)
    np.testing.assert_array_equal(tf.flatten(x, 1).data, x.data.reshape(2, 12))
    with pytest.raises(
        tf.OpError, match=r"flatten: start_dim=3 is out of range for shape \(2, 3, 4\)"
    ):
        x.flatten(3)
    with pytest.raises(tf.OpError, match="flatten: start_dim=2 comes after end_dim=1"):
        x.flatten(2, 1)


def test_clone_copies_memory_and_passes_gradients():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    y.data[0] = 10.0  # new memory: x is untouched
    assert x.data[0] == 1.0
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    assert not x.detach().clone().requires_grad


def test_dtype_conversions_keep_gradients_in_the_inputs_dtype():
    x = tf.tensor([0.5, -1.5], requires_grad=True)  # float32
    y = x.double()
    assert y.dtype == np.float64 and x.to("float64").dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, [1.0, -3.0])
    assert x.float().dtype == np.float32
    pred, target = tf.tensor([1, 2, 3]), tf.tensor([1, 0, 3])
    assert (pred == target).float().mean().item() == pytest.approx(2 / 3)  # accuracy
    assert tf.tensor([1.7, -1.7]).astype("int64").tolist() == [1, -1]
    assert not x.astype("int64").requires_grad  # integers carry no gradient, as in PyTorch
    assert x.to("cpu") is x and x.to("cpu", "float64").dtype == np.float64
    if not backend.cuda_available():  # the message says why, and how to install
        with pytest.raises(backend.DeviceUnavailable, match="'cuda:0' is not available: .*pip"):
            x.to("cuda:0")
    with pytest.raises(tf.OpError, match="astype: 'floatt' is not a dtype"):
        x.to("floatt")
    with pytest.raises(tf.OpError, match="astype: tensors hold booleans, integers or floats"):
        x.astype(object)


def test_argmax_argmin():
    x = tf.tensor([[1.0, 5.0, 5.0], [7.0, 0.0, 2.0]])
    assert x.argmax().item() == 3 and x.argmin().item() == 4  # of the flattened tensor
    assert x.argmax(-1).tolist() == [1, 0] and x.argmax(1).dtype == np.int64  # first at ties
    assert x.argmin(axis=0, keepdims=True).tolist() == [[0, 1, 1]]
    assert tf.argmax(x, 0).tolist() == [1, 0, 0]
    with pytest.raises(tf.OpError, match="argmax: axis 2 is out of range"):
        x.argmax(2)
    with pytest.raises(tf.OpError, match="argmin: cannot search an empty tensor"):
        tf.zeros(0).argmin()


def test_tril_builds_nanogpts_causal_mask():
    t = 4
    mask = tf.tril(tf.ones(t, t))
    scores = tf.randn(2, t, t)
    masked = scores.masked_fill(mask[:t, :t] == 0, float("-inf"))
    np.testing.assert_array_equal(
        np.isinf(masked.data), np.broadcast_to(np.triu(np.ones((t, t)), 1) > 0, (2, t, t))
    )
    x = tf.randn(3, 3, requires_grad=True)
    x.triu(1).sum().backward()
    np.testing.assert_array_equal(x.grad, np.triu(np.ones((3, 3)), 1))
    with pytest.raises(tf.OpError, match=r"tril: needs a matrix .* got shape \(3,\)"):
        tf.tril(tf.ones(3))
    with pytest.raises(tf.OpError, match="triu: diagonal must be an integer, got 0.5"):
        tf.triu(tf.ones(2, 2), 0.5)


def test_randint_takes_pytorchs_two_call_forms_and_is_seeded():
    tf.manual_seed(3)
    a = tf.randint(0, 65, (4, 8))
    tf.manual_seed(3)
    assert (tf.randint(0, 65, size=(4, 8)).data == a.data).all() and a.dtype == np.int64
    b = tf.randint(3, (1000,))
    assert b.shape == (1000,) and set(b.tolist()) == {0, 1, 2}
    with pytest.raises(TypeError, match=r"randint: call as randint\(high, size\)"):
        tf.randint(5)
    with pytest.raises(ValueError, match="randint: need low < high, got low=4, high=4"):
        tf.randint(4, 4, (2,))
