"""Optimizers, schedules and clipping: exact update rules, state round trips, PyTorch oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinyformer import nn, optim


def _params(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(rng.standard_normal(s).astype(dtype)) for s in [(3, 4), (4,)]]


def _first_lrs(sched, steps):
    """The first group's lr at steps 0 .. steps - 1 (stepping the scheduler between them)."""
    lrs = []
    for _ in range(steps):
        lrs.append(sched.get_last_lr()[0])
        sched.step()
    return lrs


def _grads(step, params):
    rng = np.random.default_rng(100 + step)
    for p in params:
        p.grad = rng.standard_normal(p.shape).astype(p.dtype)


def _run(make, steps=5, seed=0):
    params = _params(seed)
    opt = make(params)
    for step in range(steps):
        _grads(step, params)
        opt.step()
    return params, opt


def test_sgd_follows_the_textbook_rule():
    params, _ = _run(lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01), steps=2)
    p = _params()[0].data
    g0, g1 = (np.random.default_rng(100 + s).standard_normal((3, 4)) for s in range(2))
    g0 = g0 + 0.01 * p
    b = g0
    p = p - 0.1 * b
    g1 = g1 + 0.01 * p
    b = 0.9 * b + g1
    p = p - 0.1 * b
    np.testing.assert_allclose(params[0].data, p, rtol=1e-12)


def test_adamw_first_step_moves_each_weight_by_lr():
    # after one step m_hat = g and v_hat = g^2, so the Adam step is lr * sign(g) (up to eps)
    params = _params()
    before = [p.data.copy() for p in params]
    _grads(0, params)
    optim.AdamW(params, lr=0.01, weight_decay=0.5).step()
    for p, p0 in zip(params, before):
        expected = p0 * (1 - 0.01 * 0.5) - 0.01 * np.sign(p.grad)
        np.testing.assert_allclose(p.data, expected, rtol=1e-6, atol=1e-9)


def test_parameter_groups_have_their_own_hyperparameters():
    params = _params()
    opt = optim.AdamW(
        [{"params": params[:1]}, {"params": params[1:], "weight_decay": 0.0, "lr": 0.5}], lr=0.1
    )
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    with pytest.raises(ValueError, match="two groups"):
        optim.SGD([{"params": params}, {"params": params[:1]}])
    with pytest.raises(ValueError, match="SGD: a parameter appears twice in one group"):
        optim.SGD([params[0], params[0]])  # each step moved it twice
    message = r"AdamW: lr, eps, weight_decay must be finite and >= 0, got -1"
    with pytest.raises(ValueError, match=message):
        optim.AdamW(params, lr=-1)
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        optim.SGD([{"params": params, "momentom": 0.9}])
    for betas in ((0.9,), (0.9, 1.0)):  # one beta failed only at the first step
        with pytest.raises(ValueError, match=r"AdamW: betas must be two numbers in \[0, 1\)"):
            optim.AdamW(params, betas=betas)


def test_weight_decay_groups_skip_biases_and_norms():
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 4), nn.LayerNorm(4))
    decay, no_decay = optim.weight_decay_groups(model, 0.1)
    assert [p.ndim for p in decay["params"]] == [2, 2]
    assert all(p.ndim == 1 for p in no_decay["params"]) and no_decay["weight_decay"] == 0.0
    decay, _ = optim.weight_decay_groups(model, 0.1, decay_embeddings=False)
    assert len(decay["params"]) == 1


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_state_dict_round_trip_continues_identically(name):
    kwargs = {"SGD": dict(lr=0.1, momentum=0.9, nesterov=True)}.get(name, dict(lr=0.01))
    make = lambda ps: getattr(optim, name)(ps, **kwargs)  # noqa: E731
    straight, _ = _run(make, steps=6)
    params, opt = _run(make, steps=3)
    saved = opt.state_dict()
    copy = [nn.Parameter(p.data.copy()) for p in params]
    fresh = make(copy)
    fresh.load_state_dict(saved)
    for step in range(3, 6):
        _grads(step, copy)
        fresh.step()
    for a, b in zip(copy, straight):
        np.testing.assert_array_equal(a.data, b.data)


def test_warmup_cosine_schedule():
    lrs = [optim.warmup_cosine(s, 1.0, 10, 100, 0.1) for s in range(120)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:100], lrs[11:101]))
    assert lrs[55] == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    assert lrs[100] == lrs[119] == pytest.approx(0.1)
    params = _params()
    opt = optim.SGD(params, lr=2.0)
    sched = optim.WarmupCosineLR(opt, warmup=10, total=100, min_lr_ratio=0.1)
    seen = [sched.get_last_lr()[0]]
    for _ in range(30):
        sched.step()
        seen.append(sched.get_last_lr()[0])
    np.testing.assert_allclose(seen, [2 * lr for lr in lrs[:31]])
    step = optim.StepLR(optim.SGD(_params(), lr=1.0), step_size=3, gamma=0.5)
    got = _first_lrs(step, 7)
    assert got == [1, 1, 1, 0.5, 0.5, 0.5, 0.25]


def test_clip_grad_norm():
    params = _params()
    _grads(0, params)
    total = math.sqrt(sum(float((p.grad**2).sum()) for p in params))
    assert float(optim.clip_grad_norm_(params, 1.0)) == pytest.approx(total)
    after = math.sqrt(sum(float((p.grad**2).sum()) for p in params))
    assert after == pytest.approx(1.0, rel=1e-5)
    assert float(optim.clip_grad_norm_(params, 10.0)) == pytest.approx(
        after
    )  # below max: untouched
    with pytest.raises(ValueError, match="max_norm must be >= 0, got -1.0"):
        optim.clip_grad_norm_(params, -1.0)  # it flipped every gradient


@pytest.mark.torch
@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
        ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
        ("Adam", dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.1)),
        ("AdamW", dict(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)),
    ],
)
def test_optimizers_match_pytorch(name, kwargs):
    torch = pytest.importorskip("torch")
    ours, _ = _run(lambda ps: getattr(optim, name)(ps, **kwargs), steps=8)
    theirs = [torch.nn.Parameter(torch.from_numpy(p.data.copy())) for p in _params()]
    opt = getattr(torch.optim, name)(theirs, **kwargs)
    for step in range(8):
        rng = np.random.default_rng(100 + step)
        for p in theirs:
            p.grad = torch.from_numpy(rng.standard_normal(tuple(p.shape)))
        opt.step()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_cosine_annealing_matches_pytorchs_closed_form_and_checks_t_max():
    sched = optim.CosineAnnealingLR(optim.SGD(_params(), lr=1.0), T_max=10, eta_min=0.1)
    got = _first_lrs(sched, 21)
    expected = [0.1 + 0.45 * (1 + math.cos(math.pi * s / 10)) for s in range(21)]
    np.testing.assert_allclose(got, expected)
    assert got[0] == pytest.approx(1.0) and got[10] == pytest.approx(0.1)
    assert got[20] == pytest.approx(1.0)  # past T_max it climbs back, as PyTorch's does
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="CosineAnnealingLR: T_max must be"):
            optim.CosineAnnealingLR(optim.SGD(_params(), lr=1.0), T_max=bad)


def _two_groups(lr):
    return optim.SGD([{"params": _params()[:1]}, {"params": _params()[1:], "lr": 2 * lr}], lr=lr)


@pytest.mark.torch
@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("LambdaLR", {"lr_lambda": lambda step: 1 / (1 + step) ** 0.5}),
        ("LambdaLR", {"lr_lambda": [lambda step: 0.9**step, lambda step: min(1, (step + 1) / 4)]}),
        ("LinearLR", {}),
        ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 6}),
        ("ExponentialLR", {"gamma": 0.8}),
        ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.01}),  # past T_max too
    ],
    ids=["lambda", "lambda-per-group", "linear-warmup", "linear-decay", "exponential", "cosine"],
)
def test_schedules_follow_pytorch(name, kwargs):
    torch = pytest.importorskip("torch")
    params = [torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))]
    theirs = torch.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 1.0}], lr=0.5)
    their_sched = getattr(torch.optim.lr_scheduler, name)(theirs, **kwargs)
    ours = getattr(optim, name)(_two_groups(0.5), **kwargs)
    for _ in range(16):
        np.testing.assert_allclose(ours.get_last_lr(), their_sched.get_last_lr(), rtol=1e-12)
        theirs.step()
        their_sched.step()
        ours.step()


def test_linear_and_lambda_schedules_without_pytorch():
    sched = optim.LinearLR(optim.SGD(_params(), lr=0.9), start_factor=0.1, total_iters=3)
    got = _first_lrs(sched, 5)
    np.testing.assert_allclose(got, [0.09, 0.36, 0.63, 0.9, 0.9])
    warmup = optim.LambdaLR(_two_groups(0.1), lambda step: min(1.0, (step + 1) / 10))
    for _ in range(4):
        warmup.step()
    np.testing.assert_allclose(warmup.get_last_lr(), [0.05, 0.1])
    again = optim.LambdaLR(_two_groups(0.1), lambda step: min(1.0, (step + 1) / 10))
    again.load_state_dict(warmup.state_dict())
    assert again.get_last_lr() == warmup.get_last_lr()
    with pytest.raises(ValueError, match="LambdaLR: got 1 functions for 2 param groups"):
        optim.LambdaLR(_two_groups(0.1), [lambda step: 1.0])
    with pytest.raises(ValueError, match="LinearLR: needs 0 < start_factor <= 1"):
        optim.LinearLR(optim.SGD(_params(), lr=0.1), start_factor=0)
    with pytest.raises(ValueError, match="ExponentialLR: gamma must be > 0, got 0"):
        optim.ExponentialLR(optim.SGD(_params(), lr=0.1), gamma=0)
