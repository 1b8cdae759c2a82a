"""A leaf's first gradient becomes its .grad without a copy when no one else can see that
memory (a copy is a GPU launch per parameter and step), and is copied whenever it could be
shared: with another leaf, with the caller's gradient, or as a read-only broadcast view."""

from __future__ import annotations

import numpy as np

import tinyformer as tf
from tinyformer.fake_device import FakeArray, memory
from tinyformer.launches import counting
from tinyformer.leaf_grads import can_take


def _leaf(*shape):
    return tf.Tensor(np.ones(shape, np.float32), requires_grad=True)


def _shares(a, b) -> bool:
    return np.shares_memory(*(memory(x) if isinstance(x, FakeArray) else x for x in (a, b)))


def test_leaves_that_receive_one_array_get_their_own_copies():
    a, b = _leaf(3), _leaf(3)
    (a + b).sum().backward()  # Add's backward hands the same array to both
    assert not _shares(a.grad, b.grad)
    a.grad *= 2  # what clip_grad_norm_ does in place
    np.testing.assert_array_equal(b.grad, np.ones(3, np.float32))


def test_a_reshaped_gradient_shared_by_two_leaves_is_copied():
    a, b = _leaf(2, 3), _leaf(6)
    (a.reshape(6) + b).sum().backward()
    assert not _shares(a.grad, b.grad)


def test_the_callers_gradient_is_never_taken():
    a, b = _leaf(3), _leaf(3)
    g = np.full(3, 2.0, np.float32)
    (a * 1.0 + b).backward(g)
    a.backward(g)  # a root that is a leaf: its gradient is the caller's array
    for leaf in (a, b):
        assert not _shares(leaf.grad, g)
    g[:] = 0
    np.testing.assert_array_equal(b.grad, np.full(3, 2.0, np.float32))


def test_a_broadcast_gradient_is_copied_and_writable():
    a = _leaf(1)
    a.expand(4).sum().backward()
    a.grad *= 3
    np.testing.assert_array_equal(a.grad, np.full(1, 12.0, np.float32))


def test_a_parameters_first_gradient_costs_no_launch_on_a_device():
    layer = tf.nn.Linear(4, 3).to("fake")
    x = tf.ones(2, 4, device="fake")
    loss = layer(x).sum()
    with counting() as launches:
        loss.backward()
    # the root's gradient (ones) is the engine's one launch: none for the two parameters
    assert launches.by_label().get("Tensor.backward", 0) == 1
    w = layer.weight.grad
    assert not _shares(w, layer.bias.grad)


def test_an_owner_freed_during_backward_cannot_make_a_later_gradient_copy():
    # A leaf's first gradient is taken, then replaced by its sum with a second and freed; a
    # later gradient may get the freed array's id. Owners were once remembered by id alone, so
    # that gradient was copied (a GPU launch) on the runs where the id came back: the ViT
    # step's launch count in CI was one more than here. Which array gets which id is up to the
    # allocator, so this frees an owner and makes a thousand arrays of its size.
    taken = {}
    first = np.ones(4, np.float32)
    assert can_take(first, taken)
    freed = id(first)
    del first
    later = [np.ones(4, np.float32) for _ in range(1000)]
    assert freed not in {id(g) for g in later}  # the taken owner is still alive
    assert all(can_take(g, taken) for g in later)
