"""In-place ops (PyTorch as the oracle), the version counter that keeps them from silently
corrupting gradients, and state_dict values that share memory with the model."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend, nn, versions
from tinyformer.fake_device import FakeArray
from tinyformer.inplace import InPlaceOps
from tinyformer.optim import AdamW, StepLR
from tinyformer.safetensors import load_file, save_file
from tinyformer.train.state import load_run, save_run

try:  # PyTorch is an optional oracle here: the comparisons with it skip where it is absent
    import torch
except ImportError:
    torch = None


def oracle(test):
    """A comparison with PyTorch: marked `torch`, and skipped where torch is not installed."""
    skip = pytest.mark.skipif(torch is None, reason="compares with PyTorch; torch not installed")
    return pytest.mark.torch(skip(test))


VERSION_ERROR = r"modified by an inplace operation: \[Mul .*is at version 1; expected version 0"

# -- the ops, against PyTorch ------------------------------------------------------------------

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
MASK = np.array([[True], [False], [True]])

CASES = {  # name -> (tinyformer call, torch call), each on a fresh copy of X
    "copy_ broadcasts and casts": (
        lambda t: t.copy_(np.arange(4, dtype=np.int64)),
        lambda t: t.copy_(torch.arange(4)),
    ),
    "copy_ a number": (lambda t: t.copy_(2.5), lambda t: t.copy_(torch.tensor(2.5))),
    "zero_": (lambda t: t.zero_(), lambda t: t.zero_()),
    "fill_": (lambda t: t.fill_(-1.5), lambda t: t.fill_(-1.5)),
    "fill_ a 0-d tensor": (
        lambda t: t.fill_(tf.Tensor(np.float32(3))),
        lambda t: t.fill_(torch.tensor(3.0)),
    ),
    "add_ with alpha": (
        lambda t: t.add_(tf.Tensor(np.ones(4, np.float32)), alpha=2),
        lambda t: t.add_(torch.ones(4), alpha=2),
    ),
    "sub_": (lambda t: t.sub_(0.5), lambda t: t.sub_(0.5)),
    "sub_ with alpha": (
        lambda t: t.sub_(tf.Tensor(np.arange(4, dtype=np.float32)), alpha=-3),
        lambda t: t.sub_(torch.arange(4.0), alpha=-3),
    ),
    "mul_ a column": (
        lambda t: t.mul_(tf.Tensor(np.array([[1.0], [2.0], [3.0]], np.float32))),
        lambda t: t.mul_(torch.tensor([[1.0], [2.0], [3.0]])),
    ),
    "div_": (lambda t: t.div_(4), lambda t: t.div_(4)),
    "masked_fill_": (
        lambda t: t.masked_fill_(tf.Tensor(MASK), 7.0),
        lambda t: t.masked_fill_(torch.from_numpy(MASK), 7.0),
    ),
    "scatter_ a src": (
        lambda t: t.scatter_(1, tf.tensor([[0, 2]] * 3), tf.ones(3, 2), reduce=None),
        lambda t: t.scatter_(1, torch.tensor([[0, 2]] * 3), torch.ones(3, 2)),
    ),
    "scatter_ a value": (
        lambda t: t.scatter_(0, tf.tensor([[2, 0, 1, 0]]), value=5.0),
        lambda t: t.scatter_(0, torch.tensor([[2, 0, 1, 0]]), value=5.0),
    ),
    "index_fill_": (
        lambda t: t.index_fill_(1, tf.tensor([3, 0]), -2.0),
        lambda t: t.index_fill_(1, torch.tensor([3, 0]), -2.0),
    ),
    "clamp_": (lambda t: t.clamp_(-2.0, 3.5), lambda t: t.clamp_(-2.0, 3.5)),
    "clamp_ a max alone": (lambda t: t.clamp_(max=1.0), lambda t: t.clamp_(max=1.0)),
    "clip_": (lambda t: t.clip_(min=0.5, max=4.0), lambda t: t.clip_(min=0.5, max=4.0)),
}


@pytest.mark.parametrize("name", CASES)
@oracle
def test_in_place_ops_match_pytorch_and_return_self(name):
    ours, theirs = CASES[name]
    t, want = tf.Tensor(X.copy()), torch.from_numpy(X.copy())
    assert ours(t) is t
    theirs(want)
    np.testing.assert_array_equal(t.numpy(), want.numpy())
    assert t.dtype == np.float32 and t._version == 1


def test_the_tests_draw_every_keyword_of_every_in_place_op(monkeypatch):
    """Every argument an in-place op takes with a default is passed by some test here (CASES,
    the random fills' test), or a branch of it goes untested."""
    ops = [n for n in vars(InPlaceOps) if n.endswith("_") and not n.startswith("_")]
    passed = {op: set() for op in ops}
    for op in ops:
        original = getattr(tf.Tensor, op)

        def spy(self, *args, _op=op, _original=original, **kwargs):
            bound = inspect.signature(_original).bind(self, *args, **kwargs)
            passed[_op].update(bound.arguments)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(tf.Tensor, op, spy)
    for ours, _ in CASES.values():
        ours(tf.Tensor(X.copy()))
    test_normal_and_uniform_draw_from_the_seeded_generator()
    for op in ops:
        params = inspect.signature(getattr(InPlaceOps, op)).parameters.values()
        untested = {p.name for p in params if p.default is not p.empty} - passed[op]
        assert passed[op], f"no test here calls {op}"
        assert not untested, f"no test here passes {op} its {sorted(untested)}"


@pytest.mark.parametrize(
    "index",
    [1, (slice(None), 2), (Ellipsis, slice(1, 3)), [0, 2], (np.array([2, 0]), slice(None, 2))],
)
@oracle
def test_item_assignment_matches_pytorch(index):
    t, want = tf.Tensor(X.copy()), torch.from_numpy(X.copy())
    t[index] = 9.0
    want[index] = 9.0
    np.testing.assert_array_equal(t.numpy(), want.numpy())
    t[index] = t[index] * 2  # a Tensor value, broadcasting to the part
    want[index] = want[index] * 2
    np.testing.assert_array_equal(t.numpy(), want.numpy())
    assert t._version == 2


@oracle
def test_nanogpts_top_k_line_runs_as_in_pytorch():
    logits = tf.Tensor(np.random.default_rng(0).standard_normal((2, 10)).astype(np.float32))
    want = torch.from_numpy(logits.numpy().copy())
    with tf.no_grad():
        v, _ = tf.topk(logits, 3)
        logits[logits < v[:, [-1]]] = -float("Inf")
    tv, _ = torch.topk(want, 3)
    want[want < tv[:, [-1]]] = -float("Inf")
    np.testing.assert_array_equal(logits.numpy(), want.numpy())
    assert np.isfinite(logits.numpy()).sum(axis=1).tolist() == [3, 3]


def test_normal_and_uniform_draw_from_the_seeded_generator():
    a, b = tf.zeros(1000), tf.zeros(1000)
    tf.manual_seed(0)
    assert a.normal_(2.0, 0.5) is a
    tf.manual_seed(0)
    b.normal_(2.0, 0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.dtype == np.float32 and abs(a.numpy().mean() - 2) < 0.1
    assert abs(a.numpy().std() - 0.5) < 0.05
    u = tf.zeros(1000, dtype=np.float64).uniform_(-1.0, 3.0)
    assert u.dtype == np.float64 and -1 <= u.numpy().min() and u.numpy().max() < 3
    assert u.numpy().min() < 0 < 2 < u.numpy().max()
    with pytest.raises(TypeError, match="normal_: fills floating-point tensors.*int64"):
        tf.zeros(3, dtype=np.int64).normal_()


def test_bad_writes_name_the_op_and_the_shapes():
    t = tf.zeros(3, 4)
    with pytest.raises(ValueError, match=r"copy_: the source of shape \(2,\) does not broadcast"):
        t.copy_(np.ones(2))
    with pytest.raises(ValueError, match=r"masked_fill_: mask of shape \(4, 1\)"):
        t.masked_fill_(np.ones((4, 1), bool), 0.0)
    with pytest.raises(TypeError, match="masked_fill_: mask must be boolean"):
        t.masked_fill_(np.ones((3, 4)), 0.0)
    with pytest.raises(TypeError, match=r"add_: .*\(tensor of shape \(3,\), int64\)"):
        tf.zeros(3, dtype=np.int64).add_(0.5)  # PyTorch refuses this cast too
    with pytest.raises(ValueError, match=r"fill_: .*read-only"):
        tf.zeros(1, 4).expand(3, 4).fill_(1.0)  # expand's view: one element, many places
    assert t._version == 0  # nothing was written


# -- when in-place writes are allowed ----------------------------------------------------------


def test_a_leaf_that_requires_grad_is_written_only_under_no_grad():
    w = tf.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                       "an in-place operation.*tf.no_grad"):  # fmt: skip
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w[0] = 1.0
    with tf.no_grad():
        w.add_(1.0)
        w[0] = 5.0
    np.testing.assert_array_equal(w.numpy(), [5, 1, 1])
    assert w.requires_grad and w.is_leaf and w._version == 2


# Writes into a graph (recorded, as in PyTorch): tests/test_inplace_graph.py.


# -- the version counter -----------------------------------------------------------------------


def test_views_share_their_base_s_version_counter():
    x = tf.zeros(4, 3)
    row, col, flat, same = x[1], x[:, 0], x.reshape(12), x.detach()
    assert [v._version for v in (x, row, col, flat, same)] == [0] * 5
    row.fill_(1.0)
    assert [v._version for v in (x, row, col, flat, same)] == [1] * 5
    x.zero_()
    col[0] = 2.0
    assert flat._version == 3 and tf.zeros(4, 3)._version == 0  # other memory: its own count


def _program(x, w):
    """y = sum(x * w): Mul saves x (dL/dw = x) and w (dL/dx = w)."""
    return (x * w).sum()


def test_the_check_prevents_a_wrong_gradient(monkeypatch):
    x0 = np.array([1.0, 2.0, 3.0], np.float32)
    true_grad = x0  # d sum(x * w) / dw at the x the loss was computed with

    x, w = tf.Tensor(x0.copy()), tf.ones(3, requires_grad=True)
    y = _program(x, w)
    x.mul_(10)  # Mul's saved x is this memory: its backward would read the new values
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        y.backward()
    assert w.grad is None

    # What backward returns without the check: the gradient at the modified x, not at x0.
    x, w = tf.Tensor(x0.copy()), tf.ones(3, requires_grad=True)
    y = _program(x, w)
    x.mul_(10)
    monkeypatch.setattr(versions, "check", lambda node: None)
    y.backward()
    assert not np.allclose(w.grad, true_grad)
    np.testing.assert_allclose(w.grad, 10 * x0)


@oracle
def test_pytorch_refuses_the_same_program_the_same_way():
    x0 = np.array([1.0, 2.0, 3.0], np.float32)
    tx, tw = torch.from_numpy(x0.copy()), torch.ones(3, requires_grad=True)
    ty = (tx * tw).sum()
    tx.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*version 1; "
                       "expected version 0"):  # fmt: skip
        ty.backward()


def test_writes_through_views_are_seen_both_ways():
    w = tf.ones(2, requires_grad=True)
    base = tf.Tensor(np.arange(6, dtype=np.float32).reshape(3, 2))
    y = (base[1] * w).sum()  # Mul saved a view of base
    base.zero_()  # the base written: the view's values changed
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        y.backward()

    y = (base * w).sum()  # Mul saved base itself
    base[2].fill_(3.0)  # written through a view
    with pytest.raises(RuntimeError, match=r"version 2; expected version 1"):
        y.backward()


def test_a_saved_output_written_under_no_grad_is_caught():
    w = tf.Tensor(np.array([0.5, 1.0], np.float32), requires_grad=True)
    y = w.exp()  # Exp saves its output
    with tf.no_grad():
        y.mul_(2)  # allowed under no_grad, as in PyTorch, and then backward refuses
    with pytest.raises(RuntimeError, match=r"\[Exp saved array 0, float32 of shape \(2,\)\] is "
                       "at version 1.*mul_\\(\\) on a tensor of shape"):  # fmt: skip
        y.sum().backward()
    y = w.exp()
    y.detach().zero_()  # detach() shares memory, and so the counter
    with pytest.raises(RuntimeError, match="Exp saved array 0"):
        y.sum().backward()


def test_detect_anomaly_names_inputs_and_outputs():
    x, w = tf.ones(3), tf.ones(3, requires_grad=True)
    with tf.autograd.detect_anomaly():
        y = _program(x, w)
    x[0] = 2.0
    with pytest.raises(RuntimeError, match=r"\[Mul input 0, float32 of shape \(3,\)\].*x\[index\]"):
        y.backward()


def test_no_error_when_the_written_array_was_not_saved():
    x, w = tf.Tensor(np.array([1.0, 2.0], np.float32)), tf.ones(2, requires_grad=True)
    other = tf.zeros(2)
    y = ((x + w) * 3).sum()  # Add saves nothing; Mul saves the constant 3, not x
    x.fill_(100.0)
    other.add_(1.0)
    y.backward()
    np.testing.assert_array_equal(w.grad, [3, 3])


def test_no_error_once_the_graph_was_consumed():
    x, w = tf.ones(3), tf.ones(3, requires_grad=True)
    y = _program(x, w)
    y.backward()
    x.fill_(2.0)  # after backward: the saved arrays were freed
    with tf.no_grad():
        w.sub_(w.grad)
    w.grad = None
    _program(x, w).backward()  # a new graph saves x at version 1
    np.testing.assert_array_equal(w.grad, [2, 2, 2])


def test_a_retained_graph_is_checked_again():
    x, w = tf.ones(3), tf.ones(3, requires_grad=True)
    y = _program(x, w)
    y.backward(retain_graph=True)
    x.zero_()
    with pytest.raises(RuntimeError, match=VERSION_ERROR):
        y.backward()


def test_no_check_runs_on_a_training_step_without_in_place_writes(monkeypatch):
    def fail(node):
        raise AssertionError(f"checked {node.name}")

    model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
    optimizer = AdamW(model.parameters(), lr=0.1)
    monkeypatch.setattr(versions, "check", fail)
    for _ in range(2):
        loss = (model(tf.randn(5, 4)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_on_the_fake_device():
    x = tf.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).to("fake")
    w = tf.ones(3, requires_grad=True).to("fake")
    y = (x[1] * w).sum()
    x[0] = 1.0  # a host number: moved there
    x.masked_fill_(x > 4, 0.0)
    x.add_(tf.ones(3).to("fake")).normal_()
    assert isinstance(x.data, FakeArray) and x._version == 4
    with pytest.raises(RuntimeError, match=r"\[Mul saved array 0"):
        y.backward()
    with pytest.raises(ValueError, match="copy_: expected all arrays on one device"):
        x.copy_(tf.zeros(2, 3))  # a host Tensor, as for every op: move it first


# -- state_dict shares memory with the model ---------------------------------------------------


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 2)
        self.register_buffer("scale", np.full(2, 2.0, np.float32))

    def forward(self, x):
        return self.proj(x) * self.scale


def test_state_dict_values_share_memory_and_writes_reach_the_model():
    model = Net()
    sd = model.state_dict()
    assert all(isinstance(v, tf.Tensor) and not v.requires_grad for v in sd.values())
    assert sd["proj.weight"].data is model.proj.weight.data and sd["scale"].data is model.scale.data
    x = tf.ones(1, 3)
    initialised = model.proj.weight._version  # the initialiser's write
    with tf.no_grad():
        sd["proj.weight"].copy_(np.ones((2, 3)))
        sd["proj.bias"].zero_()
        sd["scale"].fill_(0.5)
    np.testing.assert_array_equal(model(x).numpy(), [[1.5, 1.5]])
    assert model.proj.weight._version == initialised + 1 and model.proj.weight.requires_grad

    other = Net()
    other.load_state_dict(model.state_dict())  # Tensors
    np.testing.assert_array_equal(other(x).numpy(), [[1.5, 1.5]])
    other.load_state_dict({k: v.numpy() * 2 for k, v in sd.items()})  # arrays
    np.testing.assert_array_equal(other(x).numpy(), [[6.0, 6.0]])


def test_checkpoints_hold_copies_made_at_save_time(tmp_path):
    model = Net()
    optimizer = AdamW(model.parameters(), lr=0.1)
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    save_run(
        tmp_path / "ckpt.npz", model, optimizer, StepLR(optimizer, 1), np.random.default_rng(0), {}
    )
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    with tf.no_grad():
        for v in model.state_dict().values():
            v.add_(1.0)  # a later step changes the model, not what was saved
    state, _ = load_run(tmp_path / "ckpt.npz")
    tensors = load_file(tmp_path / "model.safetensors")
    for key, value in before.items():
        assert type(state[key]) is np.ndarray and type(tensors[key]) is np.ndarray
        np.testing.assert_array_equal(state[key], value, err_msg=key)
        np.testing.assert_array_equal(tensors[key], value, err_msg=key)
    model.load_state_dict(state)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key], err_msg=key)


def test_state_dict_on_a_device_stays_there_and_saves_from_there(tmp_path):
    model = Net().to("fake")
    sd = model.state_dict()
    assert all(isinstance(v.data, FakeArray) for v in sd.values())
    with tf.no_grad():
        sd["scale"].copy_(np.array([3.0, 4.0]))  # host data, moved to the module's device
    np.testing.assert_array_equal(backend.to_host(model.scale.data), [3, 4])
    save_file(sd, tmp_path / "model.safetensors")  # copied to the host on the way
    np.testing.assert_array_equal(load_file(tmp_path / "model.safetensors")["scale"], [3, 4])


@pytest.mark.parametrize(
    "make", [lambda ps: tf.optim.AdamW(ps, lr=0.1), lambda ps: tf.optim.SGD(ps, lr=0.1)]
)
def test_an_optimizer_step_between_forward_and_backward_is_caught(make):
    """As in PyTorch: the step writes the weights in place, and the graph saved the old ones."""
    layer = tf.nn.Linear(3, 2)
    optimizer = make(layer.parameters())
    x = tf.randn(4, 3, requires_grad=True)
    (layer(x) ** 2).sum().backward()
    loss = (layer(x) ** 2).sum()  # matmul saved the weight
    optimizer.step()
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation.*step\(\)"):
        loss.backward()
    optimizer.zero_grad()
    (layer(x) ** 2).sum().backward()  # the usual order: forward after the step is fine


def test_initialisers_are_in_place_writes():
    w = tf.zeros(3, 3)
    before = w._version
    tf.nn.init.normal_(w)
    tf.nn.init.zeros_(w)
    assert w._version == before + 2
