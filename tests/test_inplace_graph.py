"""In-place writes into a graph: recorded as in PyTorch (`out[idx] = tokens` in a masked
autoencoder's decoder, `outputs[t] = h` in an RNN loop), gradchecked, compared with PyTorch,
and still guarded by the version counter. The in-place ops themselves: tests/test_inplace.py."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf

try:  # PyTorch is an optional oracle here: the comparisons with it skip where it is absent
    import torch
except ImportError:
    torch = None


def oracle(test):
    skip = pytest.mark.skipif(torch is None, reason="compares with PyTorch; torch not installed")
    return pytest.mark.torch(skip(test))


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
V = RNG.standard_normal((2, 4))
C = RNG.standard_normal((3, 4))  # weighs the output, so that every position's gradient differs


def _both(fn):
    """fn(lib, x, v) run in tinyformer and PyTorch on float64 leaves: (loss, x.grad, v.grad)
    of each."""
    out = []
    for lib, make in ((tf, tf.tensor), (torch, torch.tensor)):
        x, v = make(X.copy(), requires_grad=True), make(V.copy(), requires_grad=True)
        y = fn(lib, x, v)
        (y * make(C)).sum().backward()
        grads = [None if g is None else np.asarray(g) for g in (x.grad, v.grad)]
        out.append((np.asarray(y.detach()), *grads))
    return out


# name -> fn(lib, x, v): the written tensor is built from x (a history) or from zeros (none)
PROGRAMS = {
    "rows of zeros": lambda lib, x, v: _into(lib.zeros(3, 4, dtype=x.dtype), [2, 0], v),
    "rows of an op's output": lambda lib, x, v: _into(x * 2, [2, 0], v),
    "a column, broadcast": lambda lib, x, v: _into(x * 2, (slice(None), 1), v[0, :3]),
    "a boolean mask, a number": lambda lib, x, v: _into(x * 2, _mask(lib, x), 7.0),
    "two writes in a row": lambda lib, x, v: _into(_into(x * 1, 1, v[0]), (0, slice(2)), v[1, :2]),
    "copy_": lambda lib, x, v: (x * 2).copy_(v[1]),
    "fill_ a 0-d tensor": lambda lib, x, v: (x * 2).fill_(v[0, 0]),
    "zero_": lambda lib, x, v: (x * 2).zero_() + v.sum(),
    "masked_fill_ a 0-d tensor": lambda lib, x, v: (x * 2).masked_fill_(_mask(lib, x), v[1, 1]),
    "add_ with alpha": lambda lib, x, v: (x * 2).add_(v[0], alpha=-0.5),
    "sub_ with alpha": lambda lib, x, v: (x * 2).sub_(v[1], alpha=3.0),
    "mul_": lambda lib, x, v: (x * 2).mul_(v[0]),
    "div_": lambda lib, x, v: (x + 3).div_(v[1] + 4),
    "mul_ by a number": lambda lib, x, v: (x * v[0]).mul_(3.0),
    "into zeros, mul_ then": lambda lib, x, v: _into(lib.zeros(3, 4, dtype=x.dtype), 1, v[0]).mul_(
        x
    ),
}


def _into(out, index, value):
    out[index] = value
    return out


def _mask(lib, x):
    mask = np.array([[True, False, True, False]] * 3) & (X > 0)
    return lib.tensor(mask)


@pytest.mark.parametrize("name", PROGRAMS)
@oracle
def test_writes_into_a_graph_give_pytorch_s_values_and_gradients(name):
    (y, gx, gv), (ty, tgx, tgv) = _both(PROGRAMS[name])
    np.testing.assert_allclose(y, ty, rtol=1e-12, atol=1e-12)
    for g, tg in ((gx, tgx), (gv, tgv)):
        assert (g is None) == (tg is None)
        if g is not None:
            np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", PROGRAMS)
def test_writes_into_a_graph_pass_gradcheck(name):
    x, v = tf.tensor(X, requires_grad=True), tf.tensor(V, requires_grad=True)
    tf.gradcheck(lambda x, v: PROGRAMS[name](tf, x, v), [x, v], upstream="random")


def test_the_masked_autoencoder_scatter_rebases_the_written_tensor():
    b, n, d = 2, 5, 3
    tokens = tf.randn(b, 3, d, requires_grad=True)
    idx = tf.tensor([[4, 0, 2], [1, 3, 0]])
    out = tf.zeros(b, n, d)
    assert out.is_leaf and not out.requires_grad
    out[tf.arange(b)[:, None], idx] = tokens
    assert out.grad_fn.name == "IndexPut" and out.requires_grad and not out.is_leaf
    weights = tf.tensor(np.arange(n, dtype=np.float32))[None, :, None]
    (out * weights).sum().backward()
    assert tokens.grad.dtype == np.float32
    np.testing.assert_array_equal(tokens.grad, np.broadcast_to(idx.numpy()[..., None], (b, 3, d)))


def test_an_rnn_loop_writes_each_step_into_one_buffer():
    w = tf.tensor([0.5, -1.0], requires_grad=True)
    h, outputs = tf.ones(2), tf.zeros(4, 2)
    for t in range(4):
        h = (h * w).tanh()
        outputs[t] = h
    ref_w = tf.tensor([0.5, -1.0], requires_grad=True)
    h, steps = tf.ones(2), []
    for _ in range(4):
        h = (h * ref_w).tanh()
        steps.append(h)
    outputs.sum().backward()
    tf.stack(steps).sum().backward()
    np.testing.assert_allclose(w.grad, ref_w.grad, rtol=1e-6)


@oracle
def test_repeated_positions_follow_pytorch_s_index_put():
    """Two values written to one position: one is kept, and each gets that position's gradient
    (PyTorch's index_put_ without accumulate; see ops/getitem.py)."""
    v, tv = tf.tensor([1.0, 2.0, 3.0], requires_grad=True), torch.tensor([1.0, 2.0, 3.0])
    tv.requires_grad_()
    out, tout = tf.zeros(2), torch.zeros(2)
    out[tf.tensor([0, 0, 1])] = v
    tout[torch.tensor([0, 0, 1])] = tv
    (out * tf.tensor([10.0, 100.0])).sum().backward()
    (tout * torch.tensor([10.0, 100.0])).sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), tout.detach().numpy())
    np.testing.assert_array_equal(v.grad, tv.grad.numpy())
    np.testing.assert_array_equal(v.grad, [10, 10, 100])


# -- the version counter still guards what was saved ------------------------------------------


def test_a_recorded_write_over_a_saved_array_is_caught_at_backward():
    w = tf.tensor([0.5, 1.0], requires_grad=True)
    y = w.exp()  # Exp saves its output
    y[0] = w[1] * 3  # recorded, and it overwrites what Exp saved
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[Exp saved"):
        y.sum().backward()

    x = tf.tensor([1.0, 2.0])
    loss = (x * w).sum()  # Mul saves x
    x[1] = w[0]  # x had no history: now it has, and its old values are gone
    with pytest.raises(RuntimeError, match=r"\[Mul saved array 0.*x\[index\] = value"):
        loss.backward()
    x.sum().backward()  # the write's own graph is fine
    np.testing.assert_array_equal(w.grad, [1, 0])


def test_an_array_written_before_an_op_saved_it_still_backwards_after_other_writes():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    x, unrelated = tf.tensor([3.0, 4.0]), tf.zeros(2)
    x.mul_(2)  # written before Mul saves it
    loss = (x * w).sum()
    unrelated.add_(1.0)  # moves the clock, but x was not written since Mul saved it
    loss.backward()
    np.testing.assert_array_equal(w.grad, [6, 8])

    v, x = tf.tensor([5.0], requires_grad=True), tf.zeros(2)
    x[:1] = v  # a recorded write (bumps x at the write), then Mul saves x
    loss = (x * w).sum()
    unrelated.sub_(1.0)
    loss.backward()
    np.testing.assert_array_equal(v.grad, [1])


# -- what is refused, and why -------------------------------------------------------------------


AUGMENTED = {
    "+=": lambda w, y: w.__iadd__(y),
    "-=": lambda w, y: w.__isub__(y),
    "*=": lambda w, y: w.__imul__(y),
    "/=": lambda w, y: w.__itruediv__(y),
}


@pytest.mark.parametrize("rhs_requires_grad", [False, True])
@pytest.mark.parametrize("op", AUGMENTED)
def test_augmented_assignment_to_a_parameter_raises_as_in_pytorch(op, rhs_requires_grad):
    w = tf.ones(3, requires_grad=True)
    y = tf.full((3,), 2.0, requires_grad=rhs_requires_grad)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                       "an in-place operation"):  # fmt: skip
        AUGMENTED[op](w, y)
    assert w._version == 0 and w.is_leaf
    if torch is not None:  # PyTorch refuses the same
        tw, ty = torch.ones(3, requires_grad=True), torch.full((3,), 2.0)
        ty.requires_grad_(rhs_requires_grad)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            AUGMENTED[op](tw, ty)


def test_every_in_place_op_on_a_parameter_names_the_leaf_rule():
    w = tf.ones(2, 3, requires_grad=True)
    v = tf.ones(3, requires_grad=True)
    writes = [
        lambda: w.copy_(v), lambda: w.fill_(2.0), lambda: w.zero_(), lambda: w.normal_(),
        lambda: w.uniform_(), lambda: w.masked_fill_(tf.tensor([True, False, True]), v[0]),
        lambda: w.add_(v, alpha=2), lambda: w.sub_(v, alpha=2), lambda: w.mul_(v),
        lambda: w.div_(v),
    ]  # fmt: skip
    for write in writes:
        with pytest.raises(RuntimeError, match="leaf Variable"):
            write()
    assert w._version == 0


def test_a_recorded_write_into_a_view_is_refused():
    w = tf.ones(2, 3, requires_grad=True)
    h = w * 2
    with pytest.raises(RuntimeError, match=r"__setitem__: .*view of another tensor's memory"):
        h.reshape(6)[0] = 5.0
    with pytest.raises(RuntimeError, match=r"fill_: .*view"):
        tf.zeros(2, 3)[0].fill_(w[0, 0])
    assert h._version == 0
    h.clone().reshape(6)  # the way out: a copy owns its memory
    c = h.clone()
    c[0] = 5.0
    assert c.grad_fn.name == "IndexPut"


def test_a_value_that_requires_grad_is_not_written_into_integers():
    w = tf.ones(3, requires_grad=True)
    idx = tf.zeros(3, dtype=np.int64)
    with pytest.raises(TypeError, match=r"__setitem__: the value requires grad.*int64"):
        idx[0] = w[0]
    idx[0] = w[0].detach()
    with tf.no_grad():
        idx[1] = w[1]


def test_writes_under_no_grad_are_not_recorded():
    w = tf.ones(3, requires_grad=True)
    t = tf.zeros(3)
    with tf.no_grad():
        t[0] = w[0] * 3
        t.add_(w)
    assert t.grad_fn is None and not t.requires_grad
    np.testing.assert_array_equal(t.numpy(), [4, 1, 1])


def test_a_recorded_write_on_the_fake_device():
    v = tf.tensor([1.0, 2.0], requires_grad=True).to("fake")
    out = tf.zeros(3, 2, device="fake")
    out[tf.tensor([2]).to("fake")] = v
    out[0] = 5.0
    (out * 3).sum().backward()
    assert out.device.type == "fake" and v.grad is not None
    np.testing.assert_array_equal(tf.backend.to_host(v.grad), [3, 3])
    with pytest.raises(ValueError, match="__setitem__: expected all arrays on one device"):
        out[1] = tf.tensor([1.0, 2.0], requires_grad=True)


def test_a_float64_value_written_into_float32_gets_a_float64_gradient():
    v = tf.tensor(np.array([1.0, 2.0]), requires_grad=True)
    out = tf.zeros(3, 2)
    out[1] = v  # cast to float32 on the way in
    h = tf.ones(2, requires_grad=True) * 1
    h.add_(v)
    ((out * 3).sum() + h.sum()).backward()
    assert out.dtype == h.dtype == np.float32 and v.grad.dtype == np.float64
    np.testing.assert_array_equal(v.grad, [4, 4])
