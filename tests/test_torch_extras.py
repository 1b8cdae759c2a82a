"""PyTorch functions and methods that tutorial code calls and the op suite has no spec for:
the step functions and float tests (`tinyformer/piecewise.py`), `bmm`, `isclose`/`allclose`,
`softmax`/`log_softmax` at the top level, the `*_like` creators, `clamp_`, `new_tensor` and
`Module.buffers`."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

import tinyformer as torch  # as pasted code calls it
from tinyformer import OpError, nn
from tinyformer.nn import functional as F

V = np.array([[1.5, -2.5, 0.5, np.nan], [np.inf, -np.inf, 0.4, -0.6]], np.float32)


@pytest.mark.parametrize("name", ["sign", "round", "floor", "ceil", "trunc"])
def test_step_functions_give_numpys_values_as_functions_and_methods(name):
    x = torch.tensor(V)
    want = getattr(np, name)(V)
    for got in (getattr(torch, name)(x), getattr(x, name)(), getattr(torch, name)(V)):
        np.testing.assert_array_equal(got.data, want)
        assert got.dtype == V.dtype and not got.requires_grad


def test_round_halves_to_even_and_takes_decimals():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, 1.25])
    assert x.round().tolist() == [0.0, 2.0, 2.0, -0.0, 1.0]
    np.testing.assert_allclose(x.round(decimals=1).data, [0.5, 1.5, 2.5, -0.5, 1.2])


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite"])
def test_float_tests_are_boolean_tensors(name):
    got = getattr(torch, name)(torch.tensor(V))
    np.testing.assert_array_equal(got.data, getattr(np, name)(V))
    assert got.dtype == np.bool_ and getattr(torch.tensor(V), name)().data.tolist() == got.tolist()


def test_rounding_carries_no_gradient_and_the_straight_through_estimator_does():
    x = torch.tensor([0.2, 1.7, -1.4], requires_grad=True)
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x.round() * w).sum().backward()  # the rounded values are constants: w gets them
    assert w.grad.tolist() == [0.0, 2.0, -1.0] and x.grad is None
    x.grad = None
    (x + (x.round() - x).detach()).pow(2).sum().backward()  # gradient 2 round(x), as PyTorch
    assert x.grad.tolist() == [0.0, 4.0, -2.0]


def test_bmm_multiplies_batches_and_refuses_other_shapes():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    x = torch.tensor(a, requires_grad=True)
    y = torch.bmm(x, torch.tensor(b))
    np.testing.assert_allclose(y.data, a @ b)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, np.ones((2, 3, 5)) @ b.transpose(0, 2, 1))
    for shapes in [((3, 4), (4, 5)), ((2, 3, 4), (3, 4, 5)), ((2, 3, 4), (2, 5, 4))]:
        with pytest.raises(OpError, match=r"bmm: expected \(B, n, m\) and \(B, m, p\)"):
            torch.bmm(torch.zeros(shapes[0]), torch.zeros(shapes[1]))


def test_isclose_and_allclose_follow_their_tolerances():
    a = torch.tensor([1.0, 2.0, np.nan])
    b = torch.tensor([1.0 + 1e-6, 2.1, np.nan])
    assert torch.isclose(a, b).tolist() == [True, False, False]
    assert torch.isclose(a, b, atol=0.2, equal_nan=True).tolist() == [True, True, True]
    assert torch.allclose(a[:1], b[:1]) is True
    assert torch.allclose(a, b) is False and torch.allclose(a, b, atol=0.2, equal_nan=True)


def test_softmax_and_log_softmax_at_the_top_level_are_the_functional_ones():
    x = torch.tensor(np.random.default_rng(1).standard_normal((3, 5)))
    np.testing.assert_array_equal(torch.softmax(x, dim=-1).data, F.softmax(x, dim=-1).data)
    np.testing.assert_array_equal(torch.log_softmax(x, 1).data, F.log_softmax(x, 1).data)


@pytest.mark.parametrize("make", ["randn_like", "rand_like", "zeros_like", "ones_like"])
def test_like_creators_take_shape_dtype_and_device_from_their_argument(make):
    x = torch.zeros(2, 3, dtype=torch.float64)
    y = getattr(torch, make)(x)
    assert y.shape == (2, 3) and y.dtype == np.float64 and y.device == x.device
    assert getattr(torch, make)(x, dtype=torch.float32).dtype == np.float32
    on_fake = getattr(torch, make)(x.to("fake"))
    assert str(on_fake.device).startswith("fake") and on_fake.dtype == np.float64


def test_random_like_creators_draw_from_the_seed_and_refuse_integer_dtypes():
    x = torch.zeros(4)
    torch.manual_seed(3)
    a = torch.randn_like(x)
    torch.manual_seed(3)
    np.testing.assert_array_equal(a.data, torch.randn(4).data)
    assert 0 <= torch.rand_like(x).data.min() and torch.rand_like(x).data.max() < 1
    with pytest.raises(TypeError, match="randn_like: samples need a floating dtype, got int64"):
        torch.randn_like(torch.tensor([1, 2]))
    assert torch.full_like(x, 7).tolist() == [7.0] * 4


def test_clamp_in_place_writes_refuses_a_parameter_and_records_a_history():
    x = torch.tensor([-1.0, 0.5, 2.0])
    assert x.clamp_(0, 1) is x and x.tolist() == [0.0, 0.5, 1.0]
    assert x.clip_(max=0.25).tolist() == [0.0, 0.25, 0.25]
    p = torch.tensor([-1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="clamp_: a leaf Variable that requires grad"):
        p.clamp_(0, 1)
    with torch.no_grad():
        p.clamp_(min=0)
    assert p.tolist() == [0.0, 2.0]
    q = torch.tensor([0.1, 3.0], requires_grad=True)
    h = q * 2
    h.clamp_(max=1.0)
    h.sum().backward()
    assert q.grad.tolist() == [2.0, 0.0]  # the clamped element passes nothing back


def test_new_tensor_copies_onto_the_tensors_device_in_its_dtype():
    x = torch.zeros(2, dtype=torch.float64)
    y = x.new_tensor([1, 2])
    assert y.dtype == np.float64 and y.tolist() == [1.0, 2.0]
    assert x.new_tensor(x).data is not x.data
    assert x.new_tensor([1, 2], dtype=torch.int64).dtype == np.int64
    assert str(x.to("fake").new_tensor([1.0]).device).startswith("fake")


def test_module_buffers_are_every_registered_buffer():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    assert [b.shape for b in model.buffers()] == [(3,), (3,), ()]
    assert [n for n, _ in model.named_buffers()] == [
        "1.running_mean", "1.running_var", "1.num_batches_tracked",
    ]  # fmt: skip


def test_comparison_and_reduction_functions_are_the_methods():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        np.testing.assert_array_equal(getattr(torch, name)(x, 2.0).data, getattr(x, name)(2.0).data)
    assert bool(torch.all(x > 0)) and not bool(torch.any(x > 4))
    assert torch.any(x > 3, dim=1).tolist() == [False, True]
    assert torch.t(x).tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert torch.index_fill(x, 1, torch.tensor([0]), -1.0).tolist() == [[-1.0, 2.0], [-1.0, 4.0]]
    namespace: dict = {}
    exec("from tinyformer import *", namespace)
    # Python's own stay in reach
    assert not {"all", "any", "round", "bool", "float", "int"} & set(namespace)
    assert builtins.all([1]) and not builtins.any([0])


def test_nelement_is_numel():
    assert (
        torch.zeros(3, 4).nelement()
        == 12
        == sum(p.nelement() for p in nn.Linear(3, 3).parameters())
    )


def test_isclose_refuses_tensors_on_two_devices_and_shapes_that_do_not_broadcast():
    with pytest.raises(OpError, match=r"isclose: shapes \(2,\) and \(3,\) do not broadcast"):
        torch.allclose(torch.zeros(2), torch.zeros(3))
    with pytest.raises(ValueError, match="isclose: expected all arrays on one device"):
        torch.isclose(torch.zeros(2).to("fake"), torch.zeros(2))
    assert torch.allclose(torch.zeros(2).to("fake"), torch.zeros(2).to("fake"))


def test_flatten_takes_pytorchs_start_and_end_dims():
    # "Learning PyTorch with examples": nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)) turns
    # (N, 1) predictions into (N,); Flatten took no arguments and refused it.
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Flatten(start_dim=-3, end_dim=-2)(x).shape == (2, 12, 5)
    model = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1))
    out = model(torch.randn(7, 3))
    assert out.shape == (7,)
    out.sum().backward()
    assert model[0].weight.grad.shape == (1, 3)
    assert "start_dim=0, end_dim=1" in repr(model)
    with pytest.raises(
        OpError, match=r"flatten: start_dim=4 is out of range for shape \(2, 3, 4, 5\)"
    ):
        nn.Flatten(4)(x)
    with pytest.raises(TypeError, match="Flatten: end_dim must be an int, got 1.5"):
        nn.Flatten(0, 1.5)


def test_unflatten_splits_one_axis():
    x = torch.randn(2, 10, 3, requires_grad=True)
    assert nn.Unflatten(1, (2, 5))(x).shape == (2, 2, 5, 3)
    assert nn.Unflatten(-2, (5, -1))(x).shape == (2, 5, 2, 3)
    y = nn.Unflatten(2, [3, 1])(x)
    assert y.shape == (2, 10, 3, 1)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, np.ones((2, 10, 3), np.float32))
    with pytest.raises(ValueError, match=r"axis 1 of shape \(2, 10, 3\) has 10 elements.*\(3, 4\)"):
        nn.Unflatten(1, (3, 4))(x)
    with pytest.raises(
        ValueError, match=r"axis 1 of shape \(2, 10, 3\) has 10 elements.*\(3, -1\)"
    ):
        nn.Unflatten(1, (3, -1))(x)
    with pytest.raises(ValueError, match="dim 3 is out of range"):
        nn.Unflatten(3, (1, 1))(x)
    with pytest.raises(ValueError, match="one -1"):
        nn.Unflatten(1, (-1, -1))
    with pytest.raises(TypeError, match="must be ints"):
        nn.Unflatten(1, (2.0, 5))


def test_var_and_std_take_pytorchs_unbiased():
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    t = torch.tensor(x)
    np.testing.assert_allclose(t.var(1, unbiased=False).data, x.var(1), rtol=1e-5)
    np.testing.assert_allclose(t.std(dim=0, unbiased=True).data, x.std(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(torch.var(t, unbiased=False).data, x.var(), rtol=1e-5)
    with pytest.raises(TypeError, match="var: got unbiased=False and correction=0; pass one"):
        t.var(unbiased=False, correction=0)
    with pytest.raises(TypeError, match="std: unbiased must be a bool, got 0"):
        t.std(unbiased=0)


def test_equal_is_a_python_bool_of_shape_and_values():
    a = torch.tensor([[1.0, 2.0]])
    assert torch.equal(a, a.clone()) is True
    assert torch.equal(a, torch.tensor([1.0, 2.0])) is False  # same values, other shape
    assert torch.equal(a, torch.tensor([[1.0, 3.0]])) is False
    assert torch.equal(torch.tensor([np.nan]), torch.tensor([np.nan])) is False


def test_repeat_interleave_repeats_each_element_and_sends_gradients_back():
    assert torch.repeat_interleave(torch.tensor([1, 2]), 2).tolist() == [1, 1, 2, 2]
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert torch.repeat_interleave(x, 2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]  # flattened
    y = torch.repeat_interleave(x, torch.tensor([1, 3]), dim=0)
    assert y.tolist() == [[1, 2], [3, 4], [3, 4], [3, 4]]
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [[1, 1], [3, 3]])
    assert torch.repeat_interleave(torch.tensor(5.0), 3).tolist() == [5, 5, 5]
    for bad in (-1, [1, 2, 3], 1.5):
        with pytest.raises(OpError, match=r"repeat_interleave: repeats must be a count >= 0 or 2"):
            torch.repeat_interleave(x, bad, dim=1)
    with pytest.raises(OpError, match=r"dim 2 is out of range for shape \(2, 2\)"):
        torch.repeat_interleave(x, 2, dim=2)


def test_eye_and_as_tensor():
    np.testing.assert_array_equal(torch.eye(3).data, np.eye(3, dtype=np.float32))
    assert torch.eye(2, 4, dtype=torch.long).data.tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]
    with pytest.raises(ValueError, match="eye: m must be an int >= 0, got -1"):
        torch.eye(2, -1)
    a = np.zeros(3)
    t = torch.as_tensor(a)  # shares memory and keeps float64, as torch.as_tensor
    a[0] = 7
    assert t.dtype == np.float64 and t.tolist() == [7, 0, 0]
    assert torch.as_tensor(t) is t
    assert torch.as_tensor(t, dtype=torch.float32).dtype == np.float32
    assert torch.as_tensor([1.0, 2.0]).dtype == np.float32


def test_set_grad_enabled_as_a_call_a_block_and_a_decorator():
    w = torch.ones(2, requires_grad=True)
    try:
        torch.set_grad_enabled(False)
        assert not torch.is_grad_enabled() and not (w * 2).requires_grad
    finally:
        torch.set_grad_enabled(True)
    assert (w * 2).requires_grad
    with torch.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    assert torch.is_grad_enabled()

    @torch.set_grad_enabled(False)
    def f():
        return w * 2

    assert torch.is_grad_enabled() and not f().requires_grad and torch.is_grad_enabled()
    with pytest.raises(TypeError, match="set_grad_enabled: mode must be a bool, got 'no'"):
        torch.set_grad_enabled("no")


def test_mT_swaps_the_last_two_axes():
    x = torch.randn(2, 3, 4)
    assert x.mT.shape == (2, 4, 3)
    np.testing.assert_array_equal(x.mT.data, np.swapaxes(x.data, -1, -2))
    with pytest.raises(ValueError, match=r"mT: needs at least 2 axes, got shape \(3,\)"):
        _ = torch.randn(3).mT


def test_clip_grad_value_clamps_every_gradient_in_place():
    model = nn.Linear(3, 2)
    model(torch.randn(4, 3) * 10).sum().backward()
    grad = model.weight.grad
    nn.utils.clip_grad_value_(model.parameters(), 0.5)
    assert model.weight.grad is grad and np.abs(grad).max() <= 0.5
    assert np.abs(model.bias.grad).max() <= 0.5
    with pytest.raises(ValueError, match="clip_value must be >= 0, got -1"):
        nn.utils.clip_grad_value_(model.parameters(), -1)


def test_dcgan_pieces_run_as_the_tutorial_writes_them():
    # PyTorch's DCGAN tutorial: ReLU(True), LeakyReLU(0.2, inplace=True), BCELoss on a
    # Sigmoid's output, and weights_init calling nn.init on `m.weight.data`.
    net_g = nn.Sequential(
        nn.ConvTranspose2d(8, 4, 4, 1, 0, bias=False), nn.BatchNorm2d(4), nn.ReLU(True),
        nn.ConvTranspose2d(4, 3, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip
    net_d = nn.Sequential(
        nn.Conv2d(3, 4, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(4, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
    )  # fmt: skip

    def weights_init(m):
        if m.__class__.__name__.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif m.__class__.__name__.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    torch.manual_seed(0)
    net_g.apply(weights_init)
    net_d.apply(weights_init)
    assert abs(float(net_d[0].weight.data.std()) - 0.02) < 0.005
    assert (net_g[1].bias.data == 0).all()
    fake = net_g(torch.randn(2, 8, 1, 1))
    output = net_d(fake.detach()).view(-1)
    err = nn.BCELoss()(output, torch.full((2,), 1.0))
    err.backward()
    assert fake.shape == (2, 3, 8, 8) and net_d[0].weight.grad is not None
    assert "negative_slope=0.2" in repr(net_d)


def test_leaky_relu_and_binary_cross_entropy_match_their_formulas():
    x = torch.tensor([-2.0, 0.0, 3.0], requires_grad=True)
    y = F.leaky_relu(x, 0.1)
    y.sum().backward()
    np.testing.assert_allclose(y.data, [-0.2, 0.0, 3.0])
    np.testing.assert_allclose(x.grad, [0.1, 0.1, 1.0])  # at 0 the slope, as PyTorch
    p = torch.tensor([0.2, 0.9, 1.0], requires_grad=True)
    t = torch.tensor([0.0, 1.0, 0.0])
    loss = F.binary_cross_entropy(p, t, reduction="none")
    np.testing.assert_allclose(loss.data, [-np.log(0.8), -np.log(0.9), 100.0], rtol=1e-6)
    loss.sum().backward()  # p = 1 against t = 0: the log clamps at -100, the slope at 1e-12
    np.testing.assert_allclose(p.grad, [1 / 0.8, -1 / 0.9, 1e12], rtol=1e-5)
    with pytest.raises(OpError, match=r"binary_cross_entropy: input must be probabilities in"):
        F.binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0]))
    with pytest.raises(OpError, match="binary_cross_entropy: weight of shape"):
        F.binary_cross_entropy(p, t, weight=np.ones(2))
    with pytest.raises(OpError, match="leaky_relu: negative_slope must be a number"):
        F.leaky_relu(x, "0.1")


def test_grad_takes_one_input_tensor_and_refuses_create_graph():
    x = torch.randn(2, 3, requires_grad=True)
    y = (x**2).sum()
    (g,) = torch.grad(y, x, retain_graph=True)  # one tensor, as torch.autograd.grad takes it
    np.testing.assert_allclose(g, 2 * x.data, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="create_graph=True"):
        torch.grad(y, [x], create_graph=True)


def test_parameter_list_and_dict_register_their_parameters():
    class Mixture(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(2)), torch.zeros(3)])
            self.named = nn.ParameterDict({"shift": nn.Parameter(torch.ones(2))})

        def forward(self, x):
            return x * self.scales[0] + self.named["shift"] + self.scales[1].sum()

    m = Mixture()
    assert list(m.state_dict()) == ["scales.0", "scales.1", "named.shift"]
    assert len(m.scales) == 2 and "shift" in m.named and list(m.named) == ["shift"]
    m(torch.ones(2)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    opt.step()
    np.testing.assert_allclose(m.scales[0].data, [0.9, 0.9], rtol=1e-6)
    m.scales.append(torch.ones(1))
    assert len(list(m.parameters())) == 4
    with pytest.raises(TypeError, match="ParameterList: '0' must be a Parameter or array data"):
        nn.ParameterList(["not a number"])
    with pytest.raises(KeyError, match="names must be non-empty strings without '.'"):
        nn.ParameterDict({"a.b": torch.ones(1)})


def test_a_leafs_grad_takes_pytorchs_in_place_calls():
    # "What is torch.nn really?" clears its gradients with weights.grad.zero_(); older code
    # with p.grad.data.zero_(). .grad is an array, which has no zero_: the engine hands out a
    # NumPy array subclass that has the in-place calls and gives plain arrays from arithmetic.
    w = torch.randn(3, 2, requires_grad=True)
    (w * 2).sum().backward()
    grad = w.grad
    assert isinstance(grad, np.ndarray)
    assert grad.zero_() is grad and w.grad is grad and (grad == 0).all()
    (w * 2).sum().backward()  # accumulates into a new array, which has the calls too
    w.grad.mul_(0.5).add_(torch.ones(3, 2), alpha=2).clamp_(max=2.5)
    np.testing.assert_array_equal(w.grad, np.full((3, 2), 2.5))
    w.grad.data.zero_()
    assert (w.grad == 0).all()
    w.grad *= 3  # in place: still the same array
    assert hasattr(w.grad, "zero_")
    assert type(w.grad * 2) is np.ndarray and type(w.grad.sum()) is np.float32
    assert repr(w.grad).startswith("array(")
    with torch.no_grad():
        w -= w.grad * 0.1
    w.grad.fill_(1.0).sub_(w.grad)
    assert (w.grad == 0).all()


def test_a_parameters_data_takes_pytorchs_in_place_calls():
    # The Transformer tutorial's init_weights, and RL's soft target update, as written.
    torch.manual_seed(0)
    encoder, decoder = nn.Embedding(50, 8), nn.Linear(8, 50)
    encoder.weight.data.uniform_(-0.1, 0.1)
    decoder.bias.data.zero_()
    decoder.weight.data.normal_(0.0, 0.02)
    assert np.abs(encoder.weight.data).max() <= 0.1 and (decoder.bias.data == 0).all()
    assert abs(float(decoder.weight.data.std()) - 0.02) < 0.005
    target, tau = nn.Linear(8, 50), 0.25
    for t, p in zip(target.parameters(), decoder.parameters()):
        expected = tau * p.data + (1 - tau) * t.data
        t.data.copy_(tau * p.data + (1 - tau) * t.data)
        np.testing.assert_allclose(t.data, expected, rtol=1e-6)
    # the arrays stay arrays: ops on them give plain ones, and the class survives .to()
    out = decoder(encoder(torch.tensor([[1, 2]])))
    assert type(out.data) is np.ndarray and type(decoder.weight.data * 2) is np.ndarray
    decoder.to(torch.float64)
    decoder.weight.data.copy_(np.full((8, 50), 2.0).T)  # a transposed (strided) source
    assert (decoder.weight.data == 2).all()
    decoder.weight.data.fill_(1.0)
    assert decoder.weight.dtype == np.float64 and (decoder.weight.data == 1).all()
    torch.manual_seed(3)
    a = nn.Linear(4, 4).weight.data.uniform_(-1, 1).copy()
    torch.manual_seed(3)
    np.testing.assert_array_equal(nn.Linear(4, 4).weight.data.uniform_(-1, 1), a)  # seeded
