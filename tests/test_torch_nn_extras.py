"""The activations, pixel shuffles, adaptive pools, losses, distances, nn.Bilinear and
nn.utils.parameters_to_vector added beside PyTorch's own, each against PyTorch (float64, values
and gradients of every input and parameter) with `compare` (test_torch_layers.py): the module
and the functional form, under several settings."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.nn import functional as F

from .test_torch_layers import _load, compare

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

REDUCTIONS = ["mean", "sum", "none"]


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _functional(name, *args, **kwargs):
    """A `compare` call running F.<name> on our tensors and torch.nn.functional's on PyTorch's,
    with the inputs first, then `args` and `kwargs`."""

    def call(module, *xs):
        functional = F if isinstance(xs[0], tf.Tensor) else torch.nn.functional
        return getattr(functional, name)(*xs, *args, **kwargs)

    return call


def _pair(name, *args, **kwargs):
    """Our module and PyTorch's (float64), built with the same arguments."""
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs).double()


def _identity(inputs, call, constants=()):
    compare(nn.Identity(), torch.nn.Identity(), *inputs, call=call, constants=constants)


# -- activations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, args, shape",
    [
        ("LogSigmoid", (), (4, 5)),
        ("Softsign", (), (4, 5)),
        ("SELU", (), (4, 5)),
        ("CELU", (), (3, 4)),
        ("CELU", (0.5,), (3, 4)),
        ("CELU", (2.0,), (2, 3, 4)),
        ("GLU", (), (3, 6)),
        ("GLU", (0,), (4, 3)),
        ("GLU", (1,), (2, 4, 3)),
        ("Softmax2d", (), (2, 3, 4, 5)),
        ("Softmax2d", (), (3, 4, 5)),
    ],
)
def test_activation_modules_match_pytorch(name, args, shape):
    ours, theirs = _pair(name, *args)
    compare(ours, theirs, _x(*shape) * 3.0)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("logsigmoid", {}),
        ("softsign", {}),
        ("selu", {}),
        ("celu", {"alpha": 0.25}),
        ("glu", {"dim": -2}),
    ],
)
def test_functional_activations_match_pytorch(name, kwargs):
    _identity([_x(4, 6) * 3.0], _functional(name, **kwargs))


def test_logsigmoid_matches_pytorch_far_from_zero():
    x = np.array([-1000.0, -60.0, -35.0, -20.5, -1e-3, 0.0, 1e-3, 20.5, 35.0, 60.0, 1000.0])
    _identity([x], _functional("logsigmoid"))


def test_hardsigmoid_matches_pytorch_whose_gradient_rounds_one_sixth_to_float32():
    x = np.concatenate([_x(20) * 3.0, [-5.0, -3.0, -2.999, 0.0, 2.999, 3.0, 5.0]])
    g = _x(len(x), seed=1)
    ours = tf.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    y, y_t = nn.Hardsigmoid()(ours), torch.nn.Hardsigmoid()(theirs)
    np.testing.assert_allclose(y.data, y_t.detach().numpy(), rtol=1e-15, atol=0)
    (y * tf.tensor(g)).sum().backward()
    (y_t * torch.from_numpy(g)).sum().backward()
    # PyTorch's backward multiplies by 1.0f / 6.0f, a float32 constant even for float64 (off by
    # 3e-8): with that constant made exact, its gradient is ours. Both are 0 at -3 and 3.
    exact = theirs.grad.numpy() * (1 / 6) / float(np.float32(1.0) / np.float32(6.0))
    np.testing.assert_allclose(ours.grad, exact, rtol=1e-14, atol=0)
    assert ours.grad[-6] == ours.grad[-2] == 0.0  # x = -3 and x = 3
    np.testing.assert_array_equal(F.hardsigmoid(tf.tensor(x)).data, y.data)


@pytest.mark.parametrize(
    "tau, hard, dim, seed", [(1.0, False, -1, 0), (0.5, True, -1, 1), (2.0, True, 0, 2)]
)
def test_gumbel_softmax_is_pytorchs_given_the_same_noise(tau, hard, dim, seed, monkeypatch):
    """PyTorch's gumbel_softmax with its exponential draws replaced by the ones ours makes for
    a seed: the same soft and hard samples and the same gradients (the straight-through
    estimator's included)."""
    logits = _x(4, 5)
    draws = torch.from_numpy(np.random.default_rng(seed).exponential(size=logits.shape))
    monkeypatch.setattr(torch.Tensor, "exponential_", lambda self, *a, **k: self.copy_(draws))

    def call(module, x):
        if isinstance(x, tf.Tensor):
            return F.gumbel_softmax(x, tau=tau, hard=hard, dim=dim, seed=seed)
        return torch.nn.functional.gumbel_softmax(x, tau=tau, hard=hard, dim=dim)

    _identity([logits], call)


# -- pixel shuffle and adaptive pooling ---------------------------------------------------------


@pytest.mark.parametrize(
    "name, factor, shape",
    [
        ("PixelShuffle", 2, (2, 8, 3, 4)),
        ("PixelShuffle", 3, (9, 2, 2)),
        ("PixelShuffle", 2, (2, 1, 4, 2, 3)),
        ("PixelShuffle", 1, (2, 3, 2, 2)),
        ("PixelUnshuffle", 2, (2, 3, 4, 6)),
        ("PixelUnshuffle", 3, (2, 6, 3)),
        ("PixelUnshuffle", 2, (2, 1, 2, 4, 2)),
    ],
)
def test_pixel_shuffles_match_pytorch(name, factor, shape):
    ours, theirs = _pair(name, factor)
    compare(ours, theirs, _x(*shape))
    functional = "pixel_shuffle" if name == "PixelShuffle" else "pixel_unshuffle"
    _identity([_x(*shape, seed=1)], _functional(functional, factor))


@pytest.mark.parametrize(
    "name, size, shape",
    [
        ("AdaptiveAvgPool1d", 3, (2, 3, 7)),
        ("AdaptiveAvgPool1d", 4, (3, 10)),
        ("AdaptiveAvgPool1d", 5, (2, 2, 3)),  # more outputs than inputs: windows overlap
        ("AdaptiveAvgPool1d", 1, (2, 3, 6)),
        ("AdaptiveMaxPool1d", 3, (2, 3, 7)),
        ("AdaptiveMaxPool1d", 4, (3, 10)),
        ("AdaptiveMaxPool1d", 5, (2, 2, 3)),
        ("AdaptiveMaxPool1d", 1, (2, 3, 6)),
        ("AdaptiveMaxPool2d", 3, (2, 3, 7, 5)),
        ("AdaptiveMaxPool2d", (2, 4), (2, 3, 5, 9)),
        ("AdaptiveMaxPool2d", (None, 3), (3, 4, 7)),
        ("AdaptiveMaxPool2d", (6, 1), (1, 2, 4, 4)),
        ("AdaptiveMaxPool2d", 1, (2, 2, 3, 3)),
    ],
)
def test_adaptive_pools_match_pytorch(name, size, shape):
    ours, theirs = _pair(name, size)
    compare(ours, theirs, _x(*shape))
    functional = {"AdaptiveAvgPool1d": "adaptive_avg_pool1d"}.get(
        name, "adaptive_max_pool1d" if name.endswith("1d") else "adaptive_max_pool2d"
    )
    _identity([_x(*shape, seed=1)], _functional(functional, output_size=size))


# -- losses -------------------------------------------------------------------------------------


def _signs(*shape, seed=3):
    return np.random.default_rng(seed).choice([-1.0, 1.0], size=shape)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "margin, shapes", [(0.0, [(6,)] * 3), (0.5, [(4, 3)] * 3), (0.2, [(4, 1), (4, 3), (1, 3)])]
)
def test_margin_ranking_loss_matches_pytorch(reduction, margin, shapes):
    inputs = [_x(*shapes[0], seed=1), _x(*shapes[1], seed=2), _signs(*shapes[2])]
    ours, theirs = _pair("MarginRankingLoss", margin, reduction=reduction)
    compare(ours, theirs, *inputs)  # the target gets a gradient in both
    kwargs = {"margin": margin, "reduction": reduction}
    _identity(inputs, _functional("margin_ranking_loss", **kwargs))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "kwargs, shape",
    [
        ({}, (5, 4)),
        ({"swap": True}, (6, 3)),
        ({"margin": 2.0, "p": 1.0}, (5, 4)),
        ({"margin": 0.5, "p": 3.0, "swap": True, "eps": 1e-3}, (5, 4)),
        ({"p": math.inf}, (5, 4)),
        ({"margin": 1.5}, (4,)),
    ],
)
def test_triplet_margin_loss_matches_pytorch(reduction, kwargs, shape):
    inputs = [_x(*shape, seed=s) for s in (1, 2, 3)]
    ours, theirs = _pair("TripletMarginLoss", **kwargs, reduction=reduction)
    compare(ours, theirs, *inputs)
    _identity(inputs, _functional("triplet_margin_loss", **kwargs, reduction=reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.2])
def test_cosine_embedding_loss_matches_pytorch(reduction, margin):
    x1, x2 = _x(8, 5, seed=1), _x(8, 5, seed=2)
    target = np.array([1, -1, 1, -1, -1, 1, 0, -1])  # a 0 target adds 0, as in PyTorch
    ours, theirs = _pair("CosineEmbeddingLoss", margin, reduction=reduction)
    compare(ours, theirs, x1, x2, target)
    call = _functional("cosine_embedding_loss", margin=margin, reduction=reduction)
    _identity([x1, x2, target], call)
    one = [_x(5, seed=4), _x(5, seed=5), np.array(-1)]  # a single pair and a 0-d target
    compare(ours, theirs, *one)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin_losses_match_pytorch(reduction):
    x = _x(5, 4) * 3.0
    ours, theirs = _pair("SoftMarginLoss", reduction=reduction)
    compare(ours, theirs, x, _signs(5, 4), constants=(1,))  # PyTorch has no target gradient
    _identity([x, _signs(5, 4)], _functional("soft_margin_loss", reduction=reduction), (1,))
    labels = np.random.default_rng(4).random((5, 4))  # soft labels: a gradient in both
    for weight in (None, np.random.default_rng(5).uniform(0.5, 2.0, 4)):
        weight_t = None if weight is None else torch.from_numpy(weight)
        theirs = torch.nn.MultiLabelSoftMarginLoss(weight_t, reduction=reduction)
        ours = nn.MultiLabelSoftMarginLoss(weight, reduction=reduction)
        assert ours.state_dict().keys() == theirs.state_dict().keys()  # weight is a buffer
        compare(_load(ours, theirs), theirs, x, labels)
        call = _functional("multilabel_soft_margin_loss", reduction=reduction)
        _identity([x, labels] + ([] if weight is None else [weight]), call, constants=(2,))
    ours, theirs = _pair("MultiLabelSoftMarginLoss", reduction=reduction)
    compare(ours, theirs, _x(6, seed=6), (_x(6, seed=7) > 0).astype(float))  # one sample (C,)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize(
    "var_shape",
    [(4, 3), (4,), (4, 1), (1, 3), "number"],  # heteroscedastic, per row, one axis of 1, all
)
def test_gaussian_nll_loss_matches_pytorch(reduction, full, var_shape):
    x, t = _x(4, 3, seed=1), _x(4, 3, seed=2)
    ours, theirs = _pair("GaussianNLLLoss", full=full, reduction=reduction)
    if var_shape == "number":
        for var in (0.7, 1e-9):  # 1e-9 is clamped to eps
            compare(ours, theirs, x, t, call=lambda m, a, b, var=var: m(a, b, var))
        return
    var = np.random.default_rng(3).uniform(0.1, 2.0, var_shape)
    var.flat[0] = 1e-8  # clamped to eps: its gradient goes through the clamp, as PyTorch's
    compare(ours, theirs, x, t, var)
    kwargs = {"full": full, "eps": 0.5, "reduction": reduction}  # a large eps clamps more
    _identity([x, t, var], _functional("gaussian_nll_loss", **kwargs))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
def test_poisson_nll_loss_matches_pytorch(reduction, log_input, full):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3)) if log_input else rng.uniform(0.1, 3.0, (5, 3))
    # counts above and below 1 (Stirling's term counts only above); none at 0, where PyTorch's
    # target gradient with full=True is NaN (0 * log(0)'s gradient) and ours is 0
    t = np.concatenate([rng.uniform(0.05, 1.0, 6), rng.uniform(1.2, 6.0, 9)]).reshape(5, 3)
    ours, theirs = _pair("PoissonNLLLoss", log_input, full, reduction=reduction)
    compare(ours, theirs, x, t)
    kwargs = {"log_input": log_input, "full": full, "eps": 1e-3, "reduction": reduction}
    _identity([x, t], _functional("poisson_nll_loss", **kwargs))


# -- distances ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, shapes",
    [
        ((), [(5, 4), (5, 4)]),
        ((1.0,), [(5, 4), (1, 4)]),
        ((3.0, 1e-3, True), [(2, 3, 4), (3, 4)]),
        ((math.inf,), [(5, 4), (5, 4)]),
        ((2.0, 1e-6, True), [(4,), (4,)]),
    ],
)
def test_pairwise_distance_matches_pytorch(args, shapes):
    inputs = [_x(*shapes[0], seed=1), _x(*shapes[1], seed=2)]
    ours, theirs = _pair("PairwiseDistance", *args)
    compare(ours, theirs, *inputs)
    names = ("p", "eps", "keepdim")
    _identity(inputs, _functional("pairwise_distance", **dict(zip(names, args))))


@pytest.mark.parametrize("args, shape", [((), (5, 4)), ((-1, 1e-6), (2, 3, 4)), ((0,), (3, 2))])
def test_cosine_similarity_module_matches_pytorch(args, shape):
    ours, theirs = _pair("CosineSimilarity", *args)
    compare(ours, theirs, _x(*shape, seed=1), _x(*shape, seed=2))


# -- nn.Bilinear and nn.utils -------------------------------------------------------------------


@pytest.mark.parametrize(
    "bias, shapes",
    [(True, [(6, 3), (6, 4)]), (False, [(2, 3, 3), (2, 3, 4)]), (True, [(3,), (4,)])],
)
def test_bilinear_matches_pytorch(bias, shapes):
    theirs = torch.nn.Bilinear(3, 4, 5, bias=bias).double()
    ours = _load(nn.Bilinear(3, 4, 5, bias=bias), theirs)
    inputs = [_x(*shapes[0], seed=1), _x(*shapes[1], seed=2)]
    compare(ours, theirs, *inputs)
    weights = [_x(5, 3, 4, seed=3)] + ([_x(5, seed=4)] if bias else [])
    _identity(inputs + weights, _functional("bilinear"))


def _model_pair():
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2, bias=False)
    ).double()
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2, bias=False))
    return _load(ours, theirs), theirs


def test_parameters_to_vector_matches_pytorch_with_gradients():
    ours, theirs = _model_pair()

    def call(model):
        utils = nn.utils if isinstance(model, nn.Module) else torch.nn.utils
        return utils.parameters_to_vector(model.parameters())

    compare(ours, theirs, call=call)  # the vector and each parameter's gradient


def test_vector_to_parameters_matches_pytorch():
    ours, theirs = _model_pair()
    vec = _x(sum(p.numel() for p in theirs.parameters()), seed=5)
    nn.utils.vector_to_parameters(tf.tensor(vec), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.from_numpy(vec), theirs.parameters())
    for (name, p), (name_t, p_t) in zip(
        ours.named_parameters(), theirs.named_parameters(), strict=True
    ):
        assert name == name_t
        np.testing.assert_array_equal(p.data, p_t.detach().numpy())
    x = _x(2, 3, seed=6)
    np.testing.assert_allclose(
        ours(tf.tensor(x)).data, theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-12
    )
