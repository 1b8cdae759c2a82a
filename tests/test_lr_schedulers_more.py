"""MultiStepLR, OneCycleLR, SequentialLR and ReduceLROnPlateau: closed forms, argument checks and
state round trips, then step for step against PyTorch (lrs, momenta and betas)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn, optim


def _opt(name="SGD", lr=0.1, **kwargs):
    """Two param groups, the second at twice the lr."""
    ps = [nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(3))]
    groups = [{"params": ps[:1]}, {"params": ps[1:], "lr": 2 * lr}]
    return getattr(optim, name)(groups, lr=lr, **kwargs)


def _lrs(sched, steps):
    """The first group's lr at steps 0 .. steps - 1."""
    seen = []
    for _ in range(steps):
        seen.append(sched.optimizer.param_groups[0]["lr"])
        sched.step()
    return seen


class _NoMomentum(optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {"lr": 0.1})


# MultiStepLR


def test_multistep_decays_at_each_milestone():
    sched = optim.MultiStepLR(_opt(lr=1.0), milestones=[2, 5], gamma=0.1)
    np.testing.assert_allclose(_lrs(sched, 7), [1, 1, 0.1, 0.1, 0.1, 0.01, 0.01], rtol=1e-15)
    assert sched.get_last_lr() == pytest.approx([0.01, 0.02])  # each group from its own base


@pytest.mark.parametrize("bad", [[5, 2], [3, 3], [-1, 4], [1.5], [True]])
def test_multistep_wants_increasing_whole_milestones(bad):
    with pytest.raises(ValueError, match=r"MultiStepLR: milestones must be increasing"):
        optim.MultiStepLR(_opt(), milestones=bad)


def test_multistep_checks_gamma():
    with pytest.raises(ValueError, match="MultiStepLR: gamma must be > 0, got 0"):
        optim.MultiStepLR(_opt(), milestones=[1], gamma=0)


# OneCycleLR


def test_one_cycle_rises_then_anneals_and_cycles_momentum_the_other_way():
    opt = _opt(lr=0.5, momentum=0.9)
    sched = optim.OneCycleLR(opt, max_lr=1.0, total_steps=10, div_factor=10, final_div_factor=100)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)  # set at construction
    group = opt.param_groups[1]
    assert (group["initial_lr"], group["max_lr"], group["min_lr"]) == (0.1, 1.0, 0.001)
    lrs, momenta = [], []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        momenta.append(opt.param_groups[0]["momentum"])
        sched.step()

    # Warm-up over steps 0..2 (pct_start * total - 1 = 2), then a cosine down to step 9.
    def cos(lo, hi, pct):
        return lo + (hi - lo) * (1 + math.cos(math.pi * pct)) / 2

    want = [cos(1.0, 0.1, s / 2) for s in range(3)] + [cos(0.001, 1.0, s / 7) for s in range(1, 8)]
    np.testing.assert_allclose(lrs, want, rtol=1e-13)
    assert lrs[0] == pytest.approx(0.1) and lrs[2] == 1.0 and lrs[9] == pytest.approx(0.001)
    assert momenta[0] == pytest.approx(0.95) and momenta[2] == 0.85
    assert momenta[9] == pytest.approx(0.95) and momenta[1] == pytest.approx(0.9)


def test_one_cycle_three_phase_linear_with_betas():
    opt = _opt("Adam", lr=0.5, betas=(0.9, 0.99))
    sched = optim.OneCycleLR(
        opt, max_lr=[1.0, 2.0], total_steps=20, pct_start=0.25, anneal_strategy="linear",
        three_phase=True, base_momentum=0.8, max_momentum=0.9,
    )  # fmt: skip
    lrs, betas = [], []
    for _ in range(20):
        lrs.append([g["lr"] for g in opt.param_groups])
        betas.append(opt.param_groups[1]["betas"])
        sched.step()
    lrs = np.array(lrs)
    # phases end at steps 4 (peak), 8 (back to the start) and 19 (the minimum)
    np.testing.assert_allclose(lrs[[0, 2, 4, 6, 8, 19], 1], [0.08, 1.04, 2, 1.04, 0.08, 8e-6])
    np.testing.assert_allclose(lrs[:, 0] * 2, lrs[:, 1], rtol=1e-14)
    assert [b[0] for b in betas[:5]] == pytest.approx([0.9, 0.875, 0.85, 0.825, 0.8])
    assert betas[8][0] == pytest.approx(0.9) and betas[19][0] == pytest.approx(0.9)
    assert all(b[1] == 0.99 for b in betas)  # beta2 is left alone


def test_one_cycle_steps_total_steps_times_then_refuses():
    sched = optim.OneCycleLR(_opt(), max_lr=1.0, epochs=3, steps_per_epoch=4)
    for _ in range(12):  # as PyTorch's: step total_steps is allowed
        sched.step()
    with pytest.raises(ValueError, match="OneCycleLR: stepped 13 times, past total_steps=12"):
        sched.step()


def test_one_cycle_without_momentum_cycling():
    opt = _opt(lr=0.5, momentum=0.3)
    optim.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False).step()
    assert opt.param_groups[0]["momentum"] == 0.3 and "max_momentum" not in opt.param_groups[0]
    params = [nn.Parameter(np.zeros(2))]
    optim.OneCycleLR(_NoMomentum(params), max_lr=1.0, total_steps=10, cycle_momentum=False)
    with pytest.raises(ValueError, match="_NoMomentum has no momentum or betas to cycle"):
        optim.OneCycleLR(_NoMomentum(params), max_lr=1.0, total_steps=10)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "give total_steps, or both epochs and steps_per_epoch"),
        ({"epochs": 3}, "give total_steps, or both epochs and steps_per_epoch"),
        ({"total_steps": 0}, "total_steps must be a whole number >= 1, got 0"),
        ({"total_steps": 10.0}, "total_steps must be a whole number >= 1, got 10.0"),
        ({"epochs": 2, "steps_per_epoch": -1}, "steps_per_epoch must be a whole number >= 1"),
        ({"total_steps": 10, "pct_start": 0.0}, r"pct_start must be in \(0, 1\), got 0.0"),
        ({"total_steps": 10, "pct_start": 1.0}, r"pct_start must be in \(0, 1\), got 1.0"),
        ({"total_steps": 10, "pct_start": 0.1}, "pct_start=0.1 leaves a phase of the 10-step"),
        (
            {"total_steps": 10, "anneal_strategy": "exp"},
            "anneal_strategy must be 'cos' or 'linear'",
        ),
        ({"total_steps": 10, "div_factor": 0}, "div_factor and final_div_factor must be > 0"),
        ({"total_steps": 10, "max_lr": [1.0]}, "max_lr has 1 values for 2 param groups"),
        ({"total_steps": 10, "max_lr": -1.0}, "max_lr must be > 0, got -1.0"),
        ({"total_steps": 10, "base_momentum": [0.8] * 3}, "base_momentum has 3 values for 2"),
    ],
)
def test_one_cycle_checks_its_arguments(kwargs, message):
    kwargs = {"max_lr": 1.0, **kwargs}
    with pytest.raises(ValueError, match=f"OneCycleLR: {message}"):
        optim.OneCycleLR(_opt(momentum=0.9), **kwargs)


# ReduceLROnPlateau


def test_plateau_waits_patience_then_cuts_then_cools_down():
    opt = _opt(lr=1.0)
    sched = optim.ReduceLROnPlateau(opt, factor=0.5, patience=2, cooldown=1, min_lr=[0.2, 0.0])
    metrics = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    seen = []
    for m in metrics:
        sched.step(tf.tensor(m))  # a 0-d tensor works, as a loss would be passed
        seen.append(opt.param_groups[0]["lr"])
    # bad steps 2, 3, 4 -> cut after step 4; step 5 is cooldown; 6, 7... 0.5 improves at 8,
    # then 9, 10, 11 bad -> cut (0.25); 12 cooldown; 13, 14, 15 bad -> 0.125, clamped to 0.2
    assert seen == [1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25, 0.2]
    assert opt.param_groups[1]["lr"] == 0.25  # the second group's floor is 0
    assert sched.get_last_lr() == [0.2, 0.25]


def test_plateau_thresholds_modes_and_eps():
    opt = _opt(lr=1.0)
    sched = optim.ReduceLROnPlateau(opt, mode="max", patience=0, threshold=0.1)
    sched.step(1.0)
    sched.step(1.09)  # not 10% better: bad, and patience 0 cuts at once
    assert sched.get_last_lr() == pytest.approx([0.1, 0.2]) and sched.best == 1.0
    sched.step(1.11)
    assert sched.get_last_lr() == pytest.approx([0.1, 0.2]) and sched.best == 1.11
    sched = optim.ReduceLROnPlateau(_opt(lr=1.0), threshold=0.1, threshold_mode="abs", patience=0)
    sched.step(1.0)
    sched.step(0.91)
    assert sched.best == 1.0 and sched.get_last_lr() == pytest.approx([0.1, 0.2])
    sched = optim.ReduceLROnPlateau(_opt(lr=1.0), patience=0, factor=0.9, eps=0.15)
    sched.step(1.0)
    sched.step(float("nan"))  # no improvement; the cut of 0.1 (0.2 for group 2) is below eps
    assert sched.get_last_lr() == [1.0, pytest.approx(1.8)]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "mean"}, "mode must be 'min' or 'max', got 'mean'"),
        ({"threshold_mode": "pct"}, "threshold_mode must be 'rel' or 'abs', got 'pct'"),
        ({"factor": 1.0}, r"factor must be in \[0, 1\), got 1.0"),
        ({"patience": -1}, "patience must be a whole number >= 0, got -1"),
        ({"cooldown": 0.5}, "cooldown must be a whole number >= 0, got 0.5"),
        ({"threshold": -1e-4}, "threshold and eps must be >= 0"),
        ({"min_lr": [0.1]}, "min_lr has 1 values for 2 param groups"),
        ({"min_lr": -0.1}, "min_lr must be >= 0, got -0.1"),
    ],
)
def test_plateau_checks_its_arguments(kwargs, message):
    with pytest.raises(ValueError, match=f"ReduceLROnPlateau: {message}"):
        optim.ReduceLROnPlateau(_opt(), **kwargs)


# SequentialLR


def test_sequential_restarts_each_scheduler_at_its_milestone():
    opt = _opt(lr=1.0)
    warmup = optim.LinearLR(opt, start_factor=0.25, total_iters=3)
    decay = optim.ExponentialLR(opt, gamma=0.5)
    steps = optim.StepLR(opt, step_size=2, gamma=0.1)
    sched = optim.SequentialLR(opt, [warmup, decay, steps], milestones=[4, 6])
    got = _lrs(sched, 10)
    np.testing.assert_allclose(got, [0.25, 0.5, 0.75, 1, 1, 0.5, 1, 1, 0.1, 0.1], rtol=1e-15)
    assert sched.get_last_lr() == pytest.approx([0.01, 0.02])
    assert steps.last_step == 4  # the scheduler in charge counts from its milestone


def test_sequential_milestone_zero_skips_the_first():
    opt = _opt(lr=1.0)
    first, second = optim.ExponentialLR(opt, 0.5), optim.StepLR(opt, 2, 0.5)
    sched = optim.SequentialLR(opt, [first, second], milestones=[0])
    assert _lrs(sched, 5) == [1, 1, 0.5, 0.5, 0.25]


def test_sequential_checks_its_arguments():
    opt, other = _opt(), _opt()
    a, b = optim.StepLR(opt, 2), optim.ExponentialLR(opt, 0.9)
    with pytest.raises(ValueError, match=r"one milestone fewer than schedulers, got 2 .* \[\]"):
        optim.SequentialLR(opt, [a, b], milestones=[])
    with pytest.raises(ValueError, match="one milestone fewer than schedulers, got 0"):
        optim.SequentialLR(opt, [], milestones=[])
    with pytest.raises(ValueError, match=r"SequentialLR: milestones must be increasing.*\[5, 3\]"):
        optim.SequentialLR(opt, [a, b, a], milestones=[5, 3])
    with pytest.raises(ValueError, match=r"schedulers\[1\] \(StepLR\) drives another optimizer"):
        optim.SequentialLR(opt, [a, optim.StepLR(other, 2)], milestones=[3])
    with pytest.raises(ValueError, match=r"schedulers\[0\] is a ReduceLROnPlateau"):
        optim.SequentialLR(opt, [optim.ReduceLROnPlateau(opt), b], milestones=[3])
    with pytest.raises(TypeError, match=r"SequentialLR: schedulers\[1\] is a function"):
        optim.SequentialLR(opt, [a, lambda step: 1.0], milestones=[3])


# State round trips: a scheduler loaded from a checkpoint (through JSON, as plain data) goes on
# exactly as the one that saved it.


def _one_cycle(opt):
    return optim.OneCycleLR(opt, max_lr=[1.0, 3.0], total_steps=30, three_phase=True)


def _sequential(opt):
    parts = [optim.LinearLR(opt, 0.1, 1.0, 5), _one_cycle(opt), optim.MultiStepLR(opt, [2], 0.3)]
    return optim.SequentialLR(opt, parts, milestones=[6, 20])


ROUND_TRIPS = {
    "multistep": lambda opt: optim.MultiStepLR(opt, [3, 9, 12], 0.5),
    "one-cycle": _one_cycle,
    "sequential": _sequential,
    "plateau": lambda opt: optim.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1),
}


def _hyper(opt):
    """Each group's lr, momentum and betas: all a scheduler may set."""
    out = []
    for g in opt.param_groups:
        out += [g["lr"], g.get("momentum", -1.0), *g.get("betas", ())]
    return out


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_state_round_trip_continues_the_schedule(name):
    metrics = [1.0, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.7] * 3

    def step(sched, i):
        sched.step(metrics[i]) if name == "plateau" else sched.step()

    opt = _opt(momentum=0.9)
    sched = ROUND_TRIPS[name](opt)
    for i in range(11):
        step(sched, i)
    saved = json.loads(json.dumps(sched.state_dict()))
    fresh_opt = _opt(momentum=0.9)
    fresh = ROUND_TRIPS[name](fresh_opt)
    assert _hyper(fresh_opt) != _hyper(opt)  # else the test proves nothing
    fresh.load_state_dict(saved)
    assert _hyper(fresh_opt) == _hyper(opt)
    for i in range(11, 27):
        step(sched, i)
        step(fresh, i)
        assert _hyper(fresh_opt) == _hyper(opt), f"step {i}"


def test_one_cycle_state_keeps_the_cycle():
    sched = optim.OneCycleLR(_opt(), max_lr=1.0, total_steps=20, anneal_strategy="linear")
    for _ in range(5):
        sched.step()
    longer = optim.OneCycleLR(_opt(), max_lr=1.0, total_steps=50)
    longer.load_state_dict(sched.state_dict())
    assert longer.get_last_lr() == sched.get_last_lr()
    for _ in range(15):
        sched.step()
        longer.step()
    assert longer.get_last_lr() == sched.get_last_lr()
    with pytest.raises(ValueError, match="stepped 21 times, past total_steps=20"):
        longer.step()


def test_lr_scheduler_module_has_them_where_pytorch_users_look():
    from tinyformer.optim import lr_scheduler

    for name in ("MultiStepLR", "OneCycleLR", "ReduceLROnPlateau", "SequentialLR"):
        assert getattr(lr_scheduler, name) is getattr(optim, name)
        assert name in lr_scheduler.__all__ and name in optim.__all__


# PyTorch oracle: both optimizers' groups after every step, rtol 1e-12.


def _torch_opt(torch, name="SGD", lr=0.1, **kwargs):
    ps = [torch.nn.Parameter(torch.zeros(2, dtype=torch.float64)) for _ in range(2)]
    groups = [{"params": ps[:1]}, {"params": ps[1:], "lr": 2 * lr}]
    return getattr(torch.optim, name)(groups, lr=lr, **kwargs)


def _follow(torch, opt_kwargs, make, steps, metrics=None):
    """Run `make(module, optimizer)` in tinyformer and PyTorch for `steps` steps and compare
    every group's lr, momentum and betas after construction and after each step."""
    ours_opt, theirs_opt = _opt(**opt_kwargs), _torch_opt(torch, **opt_kwargs)
    ours, theirs = make(optim, ours_opt), make(torch.optim.lr_scheduler, theirs_opt)
    for i in range(steps + 1):
        np.testing.assert_allclose(
            _hyper(ours_opt), _hyper(theirs_opt), rtol=1e-12, atol=0, err_msg=f"step {i}"
        )
        if i == steps:
            return ours, theirs
        if metrics is None:
            theirs_opt.step()  # else PyTorch warns that the scheduler stepped first
            theirs.step()
            ours.step()
        else:
            theirs.step(metrics[i])
            ours.step(metrics[i])


@pytest.mark.torch
@pytest.mark.parametrize(
    "milestones, gamma", [([3, 7, 20], 0.5), ([0, 1, 2, 30], 0.1), ([], 0.1)], ids=str
)
def test_multistep_follows_pytorch(milestones, gamma):
    torch = pytest.importorskip("torch")
    _follow(torch, {}, lambda m, opt: m.MultiStepLR(opt, milestones, gamma), 40)


ONE_CYCLES = {
    "sgd-cos": ({"momentum": 0.9}, {"max_lr": 1.0, "total_steps": 37, "pct_start": 0.25}),
    "sgd-nesterov-per-group": (
        {"momentum": 0.5, "nesterov": True},
        {
            "max_lr": [0.3, 2.0],
            "epochs": 5,
            "steps_per_epoch": 9,
            "div_factor": 10.0,
            "base_momentum": [0.8, 0.7],
            "max_momentum": [0.9, 0.99],
        },
    ),  # fmt: skip
    "adam-linear-three-phase": (
        {"name": "Adam", "betas": (0.8, 0.95)},
        {
            "max_lr": 0.01,
            "total_steps": 41,
            "anneal_strategy": "linear",
            "three_phase": True,
            "pct_start": 0.35,
            "final_div_factor": 100.0,
        },
    ),  # fmt: skip
    "adamw-cos-three-phase": (
        {"name": "AdamW"},
        {"max_lr": [0.01, 0.02], "total_steps": 30, "three_phase": True},
    ),
    "sgd-no-momentum-cycle": ({}, {"max_lr": 1.0, "total_steps": 25, "cycle_momentum": False}),
    "sgd-short-warmup": ({"momentum": 0.9}, {"max_lr": 1.0, "total_steps": 30, "pct_start": 0.02}),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", ONE_CYCLES)
def test_one_cycle_follows_pytorch(case):
    torch = pytest.importorskip("torch")
    opt_kwargs, kwargs = ONE_CYCLES[case]
    total = kwargs.get("total_steps") or kwargs["epochs"] * kwargs["steps_per_epoch"]
    ours, theirs = _follow(torch, opt_kwargs, lambda m, opt: m.OneCycleLR(opt, **kwargs), total)
    for sched in (ours, theirs):  # both refuse a step past total_steps
        with pytest.raises(ValueError):
            sched.step()
    keys = ("initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum")
    for a, b in zip(ours.optimizer.param_groups, theirs.optimizer.param_groups):
        assert [a.get(k) for k in keys] == [b.get(k) for k in keys]


# Plateaus, improvements too small for the threshold (0.7 * (1 - 5e-5)), a NaN, and values
# that improve under one threshold mode and not the other (0.76, 0.699885, 0.56, 0.54, ...).
PLATEAU_METRICS = [
    1.0, 0.9, 0.95, 0.9, 0.91, 0.92, 0.85, 0.85, 0.85, 0.85, 0.76, 0.7, 0.7 * (1 - 5e-5),
    0.699885, 0.71, 0.72, 0.73, 0.69, float("nan"), 0.69, 0.6, 0.61, 0.56, 0.54, 0.5, 0.5,
    0.49993, *[0.5] * 20, 0.38, *[0.5] * 20,
]  # fmt: skip
PLATEAUS = {
    "rel-cooldown-min-lr": {
        "factor": 0.5,
        "patience": 2,
        "cooldown": 1,
        "min_lr": [1e-3, 0.02],
    },
    "eps-skips-small-cuts": {"factor": 0.5, "patience": 1, "threshold": 0.1, "eps": 0.01},
    "abs": {"factor": 0.7, "patience": 3, "threshold": 0.05, "threshold_mode": "abs"},
    "defaults": {},
}


@pytest.mark.torch
@pytest.mark.parametrize("case", PLATEAUS)
@pytest.mark.parametrize("mode", ["min", "max"])
def test_plateau_follows_pytorch(case, mode):
    torch = pytest.importorskip("torch")
    kwargs = {**PLATEAUS[case], "mode": mode}
    metrics = [m if mode == "min" else 2.0 - m for m in PLATEAU_METRICS]  # max: mirrored
    ours, theirs = _follow(
        torch, {}, lambda m, opt: m.ReduceLROnPlateau(opt, **kwargs), len(metrics), metrics
    )
    assert (ours.best, ours.num_bad_epochs, ours.cooldown_counter) == (
        theirs.best, theirs.num_bad_epochs, theirs.cooldown_counter,
    )  # fmt: skip
    assert ours.get_last_lr() == theirs.get_last_lr() != [0.1, 0.2]  # it did cut


SEQUENCES = {
    "warmup-exponential": lambda m, opt: (
        [m.LinearLR(opt, start_factor=0.1, total_iters=5), m.ExponentialLR(opt, gamma=0.9)],
        [5],
    ),
    "linear-cosine-multistep": lambda m, opt: (
        [
            m.LinearLR(opt, 0.2, 1.0, 4),
            m.CosineAnnealingLR(opt, T_max=8, eta_min=0.01),
            m.MultiStepLR(opt, [3, 9], 0.5),
        ],
        [6, 25],
    ),  # fmt: skip  (the cosine runs past T_max)
    "lambda-per-group-then-step": lambda m, opt: (
        [m.LambdaLR(opt, [lambda s: 0.9**s, lambda s: 1 / (1 + s)]), m.StepLR(opt, 4, 0.5)],
        [10],
    ),
    "one-cycle-then-exponential": lambda m, opt: (
        [m.OneCycleLR(opt, max_lr=[0.5, 1.0], total_steps=12), m.ExponentialLR(opt, 0.95)],
        [12],
    ),
    "milestone-zero": lambda m, opt: ([m.ExponentialLR(opt, 0.5), m.StepLR(opt, 3, 0.5)], [0]),
}


@pytest.mark.torch
@pytest.mark.parametrize("case", SEQUENCES)
def test_sequential_follows_pytorch(case):
    torch = pytest.importorskip("torch")

    def make(m, opt):
        schedulers, milestones = SEQUENCES[case](m, opt)
        return m.SequentialLR(opt, schedulers, milestones)

    _follow(torch, {"momentum": 0.9}, make, 45)
