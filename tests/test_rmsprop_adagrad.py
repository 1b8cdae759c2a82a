"""RMSprop and Adagrad: their update rules by hand, argument checks, parameters without gradients,
state round trips, in-place version bumps, the fake device, and PyTorch as the oracle."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tinyformer import backend, nn, optim
from tinyformer.fake_device import FakeArray

SKIPPED = {(2, 1), (5, 1), (6, 0)}  # (step, parameter) pairs that get no gradient


def _params(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(rng.standard_normal(s).astype(dtype)) for s in [(3, 4), (4,)]]


def _grad(step, i, shape):
    return np.random.default_rng(1000 * step + i).standard_normal(shape)


def _grads(step, params, to=lambda a: a):
    for i, p in enumerate(params):
        skip = (step, i) in SKIPPED
        p.grad = None if skip else to(_grad(step, i, p.shape).astype(p.dtype))


def _run(make, steps, params=None, start=0):
    params = _params() if params is None else params
    opt = make(params)
    for step in range(start, steps):
        _grads(step, params)
        opt.step()
    return params, opt


def _rmsprop_by_hand(p, grads, lr, alpha, eps, wd, mu, centered):
    v, m, b = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        v = alpha * v + (1 - alpha) * g**2
        m = alpha * m + (1 - alpha) * g
        a = np.sqrt(v - m**2 if centered else v) + eps
        b = mu * b + g / a
        p = p - lr * (b if mu else g / a)
    return p


def _adagrad_by_hand(p, grads, lr, lr_decay, wd, init, eps):
    s = np.full_like(p, init)
    for t, g in enumerate(grads, start=1):
        g = g + wd * p
        s = s + g**2
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s) + eps)
    return p


@pytest.mark.parametrize("centered, mu", [(False, 0.0), (True, 0.9)])
def test_rmsprop_follows_its_update_rule(centered, mu):
    hyper = dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=mu, centered=centered)
    params, _ = _run(lambda ps: optim.RMSprop(ps, **hyper), steps=4)
    grads = [_grad(s, 0, (3, 4)) for s in range(4)]
    expected = _rmsprop_by_hand(_params()[0].data, grads, *hyper.values())
    np.testing.assert_allclose(params[0].data, expected, rtol=1e-12)


def test_adagrad_follows_its_update_rule():
    hyper = dict(lr=0.1, lr_decay=0.5, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-4)
    params, _ = _run(lambda ps: optim.Adagrad(ps, **hyper), steps=4)
    grads = [_grad(s, 0, (3, 4)) for s in range(4)]
    expected = _adagrad_by_hand(_params()[0].data, grads, *hyper.values())
    np.testing.assert_allclose(params[0].data, expected, rtol=1e-12)


def test_arguments_are_checked():
    params = _params()
    bad_rmsprop = [dict(lr=-1), dict(eps=float("nan")), dict(weight_decay=float("inf"))]
    for kwargs in bad_rmsprop + [dict(momentum=-0.5)]:
        (value,) = kwargs.values()
        message = (
            rf"RMSprop: lr, eps, weight_decay and momentum must be finite and >= 0, got .*{value}"
        )
        with pytest.raises(ValueError, match=message):
            optim.RMSprop(params, **kwargs)
    for alpha in (-0.1, 1.5):
        with pytest.raises(ValueError, match=rf"RMSprop: alpha must be in \[0, 1\], got {alpha}"):
            optim.RMSprop(params, alpha=alpha)
    names = ["lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"]
    for name in names:
        with pytest.raises(ValueError, match=r"Adagrad: lr, lr_decay, .* got .*-2"):
            optim.Adagrad(params, **{name: -2})
    with pytest.raises(ValueError, match="Adagrad: .* got 0.01, 0.0, 0.0, 0.0, inf"):
        optim.Adagrad(params, eps=float("inf"))
    for make in (optim.RMSprop, optim.Adagrad):  # PyTorch's options we do not implement
        with pytest.raises(TypeError, match="maximize"):
            make(params, maximize=True)
        with pytest.raises(ValueError, match="unknown hyperparameters"):
            make([{"params": params, "foreach": True}])


def test_parameters_without_gradients_are_left_alone():
    for make in (optim.RMSprop, optim.Adagrad):
        params = _params()
        frozen = params[1].data.copy()
        opt = make(params, lr=0.1, weight_decay=0.1)  # decay would move it if it were stepped
        params[0].grad = np.ones((3, 4))
        for _ in range(3):
            opt.step()
        np.testing.assert_array_equal(params[1].data, frozen)
        assert opt.state[id(params[0])]["step"] == 3
        if make is optim.RMSprop:  # as PyTorch's: RMSprop makes state at the first step
            assert id(params[1]) not in opt.state
        else:  # Adagrad makes it for every parameter at construction
            assert opt.state[id(params[1])]["step"] == 0
            np.testing.assert_array_equal(opt.state[id(params[1])]["sum"], 0.0)


def test_groups_have_their_own_hyperparameters():
    a, b = _params()
    opt = optim.Adagrad([{"params": [a]}, {"params": [b], "initial_accumulator_value": 2.0}])
    np.testing.assert_array_equal(opt.state[id(a)]["sum"], 0.0)
    np.testing.assert_array_equal(opt.state[id(b)]["sum"], 2.0)
    a, b = _params()
    opt = optim.RMSprop([{"params": [a]}, {"params": [b], "centered": True, "momentum": 0.5}])
    a.grad, b.grad = np.ones(a.shape), np.ones(b.shape)
    opt.step()
    assert set(opt.state[id(a)]) == {"step", "square_avg"}
    assert set(opt.state[id(b)]) == {"step", "square_avg", "momentum_buffer", "grad_avg"}


SETTINGS = [
    ("RMSprop", dict(lr=0.01, alpha=0.9, weight_decay=0.1, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.2)),
]


@pytest.mark.parametrize("name, kwargs", SETTINGS)
def test_state_dict_round_trip_continues_identically(name, kwargs):
    make = lambda ps: getattr(optim, name)(ps, **kwargs)  # noqa: E731
    straight, _ = _run(make, steps=7)
    params, opt = _run(make, steps=3)
    saved = opt.state_dict()
    names = {"RMSprop": {"step", "square_avg"}, "Adagrad": {"step", "sum"}}[name]
    names |= {"momentum_buffer"} if kwargs.get("momentum") else set()
    names |= {"grad_avg"} if kwargs.get("centered") else set()
    assert all(set(s) == names for s in saved["state"].values())
    assert all(isinstance(s["step"], int) for s in saved["state"].values())
    copy = [nn.Parameter(p.data.copy()) for p in params]
    resumed, _ = _run(make, steps=7, params=copy, start=3)  # without the state: different
    copy = [nn.Parameter(p.data.copy()) for p in params]
    opt = make(copy)
    opt.load_state_dict(saved)
    for step in range(3, 7):
        _grads(step, copy)
        opt.step()
    for a, b, c in zip(copy, straight, resumed):
        np.testing.assert_array_equal(a.data, b.data)
        assert not np.allclose(c.data, b.data, rtol=1e-6)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad"])
def test_a_step_bumps_the_parameters_version(name):
    w = nn.Parameter(np.array([1.0, 2.0]))
    loss = (w * w).sum()  # Mul saves w
    w.grad = np.ones(2)
    getattr(optim, name)([w], lr=0.1).step()
    with pytest.raises(RuntimeError, match=rf"{name}\.step\(\)"):
        loss.backward()


class _Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = _params()


@pytest.mark.parametrize("name, kwargs", SETTINGS)
def test_the_fake_device_gives_the_hosts_numbers(name, kwargs):
    def train(device):
        model = _Two()
        opt = getattr(optim, name)(model.parameters(), **kwargs)
        params = [model.first, model.second]
        for step in range(6):
            if step == 2:  # two steps on the host, then the move
                model.to(device)
            _grads(step, params, to=lambda a: backend.to_device(a, params[0].device))
            opt.step()
        if device == "fake":  # the state made on the host followed its parameter
            arrays = [v for s in opt.state.values() for k, v in s.items() if k != "step"]
            assert arrays and all(type(v) is FakeArray for v in arrays)
        saved = opt.state_dict()["state"]
        assert all(type(v) is not FakeArray for s in saved.values() for v in s.values())
        return [backend.host_copy(p.data) for p in params], saved

    host, host_state = train("cpu")
    fake, fake_state = train("fake")
    for a, b in zip(fake, host):
        np.testing.assert_array_equal(a, b)
    for i, state in host_state.items():
        for key, value in state.items():
            np.testing.assert_array_equal(fake_state[i][key], value, err_msg=key)


def test_float32_parameters_stay_float32():
    for make in (optim.RMSprop, optim.Adagrad):
        params = _params(dtype=np.float32)
        opt = make(params, momentum=0.9, centered=True) if make is optim.RMSprop else make(params)
        for step in range(2):
            _grads(step, params)
            for p in params:  # a float64 gradient, as a loss computed in float64 gives
                p.grad = None if p.grad is None else p.grad.astype(np.float64)
            opt.step()
        assert all(p.dtype == np.float32 for p in params)
        assert all(
            v.dtype == np.float32
            for s in opt.state.values()
            for v in s.values()
            if hasattr(v, "dtype")
        )


def _versus_pytorch(name, kwargs, steps=10):
    torch = pytest.importorskip("torch")
    ours, _ = _run(lambda ps: getattr(optim, name)(ps, **kwargs), steps=steps)
    theirs = [torch.nn.Parameter(torch.from_numpy(p.data.copy())) for p in _params()]
    opt = getattr(torch.optim, name)(theirs, **kwargs)
    for step in range(steps):
        for i, p in enumerate(theirs):
            skip = (step, i) in SKIPPED
            p.grad = None if skip else torch.from_numpy(_grad(step, i, tuple(p.shape)))
        opt.step()
    for a, b, start in zip(ours, theirs, _params()):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-12, atol=1e-15)
        assert not np.allclose(a.data, start.data, rtol=1e-4)  # they did move


@pytest.mark.torch
@pytest.mark.parametrize(
    "centered, momentum, weight_decay, alpha",
    list(itertools.product([False, True], [0.0, 0.9], [0.0, 0.1], [0.99, 0.3])),
)
def test_rmsprop_matches_pytorch(centered, momentum, weight_decay, alpha):
    kwargs = dict(centered=centered, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
    _versus_pytorch("RMSprop", dict(lr=0.01, eps=1e-6, **kwargs))


@pytest.mark.torch
@pytest.mark.parametrize(
    "lr_decay, weight_decay, initial_accumulator_value",
    list(itertools.product([0.0, 0.1], [0.0, 0.1], [0.0, 0.5])),
)
def test_adagrad_matches_pytorch(lr_decay, weight_decay, initial_accumulator_value):
    kwargs = dict(
        lr_decay=lr_decay, weight_decay=weight_decay,
        initial_accumulator_value=initial_accumulator_value,
    )  # fmt: skip
    _versus_pytorch("Adagrad", dict(lr=0.1, **kwargs))


@pytest.mark.torch
def test_defaults_match_pytorch():
    _versus_pytorch("RMSprop", {})
    _versus_pytorch("Adagrad", {})
