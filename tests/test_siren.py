"""SIREN and the coordinate MLPs: the paper's initialisation and the activation statistics it
argues for, PSNR, autograd gradients with respect to the input coordinates, the image
helpers, SIREN against a ReLU MLP, and the training command."""

import json
import math

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli, nn
from tinyformer.models.siren import FourierFeatureMLP, ReLUMLP, Siren, SirenConfig, build_model
from tinyformer.optim import Adam
from tinyformer.train.siren import (
    TrainSirenConfig,
    area_resize,
    china_crop,
    coordinate_grid,
    load_image,
    psnr,
)
from tinyformer.train.siren.plots import coordinate_gradient, sobel_gradient


def test_sine_layer_weights_lie_in_the_papers_ranges():
    tf.manual_seed(0)
    model = Siren(SirenConfig(hidden=64, n_layers=3))
    first, *hidden = [layer.linear.weight.numpy() for layer in model.body]
    assert np.abs(first).max() <= 1 / 2 and np.abs(first).max() > 0.45  # U(-1/in, 1/in), in = 2
    bound = math.sqrt(6 / 64) / 30
    for w in [*hidden, model.head.weight.numpy()]:
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    for w in hidden:  # uniform on [-c, c]: variance c^2 / 3 (4096 draws: within a few %)
        assert w.var() == pytest.approx(bound**2 / 3, rel=0.1)


def _preactivation_stds(model, x):
    stds, h = [], tf.Tensor(x)
    with tf.no_grad():
        for layer in model.body:
            z = layer.preactivation(h)
            stds.append(float(z.numpy().std()))
            h = tf.sin(z)
    return np.array(stds), z.numpy().ravel()


def test_preactivations_stay_near_unit_scale_and_gaussian_in_a_deep_siren():
    tf.manual_seed(0)
    model = Siren(SirenConfig(hidden=256, n_layers=8))
    x = np.random.default_rng(0).uniform(-1, 1, (2048, 2)).astype(np.float32)
    stds, last = _preactivation_stds(model, x)
    # Layer 1 sees (x, y) itself; every later layer sees sines. The paper's argument: w0 W x
    # has variance 2 Var(sin) ~ 1 from layer 2 on, at any depth (here the fixed point of
    # v = 1 - exp(-2v), 0.80, for a Gaussian input: std 0.89).
    assert np.all((stds[1:] > 0.75) & (stds[1:] < 1.25)), stds
    assert stds[-1] / stds[1] == pytest.approx(1, abs=0.15)
    z = (last - last.mean()) / last.std()
    assert np.mean(z**4) == pytest.approx(3, abs=0.4)  # Gaussian (a sum of many sines)
    # The same network with nn.Linear's default initialisation: w0 = 30 times a weight of size
    # 1/sqrt(in) makes every later pre-activation ~ 10 periods wide, and the sines noise.
    tf.manual_seed(0)
    for layer in model.body[1:]:
        layer.linear.weight.data[...] = nn.Linear(256, 256).weight.data
    stds, _ = _preactivation_stds(model, x)
    assert np.all(stds[1:] > 5), stds


def test_psnr_is_ten_log_ten_of_range_squared_over_mse():
    target = np.random.default_rng(0).uniform(0, 1, (8, 8))
    assert psnr(target + 0.1, target) == pytest.approx(20.0)  # MSE 0.01
    assert psnr(tf.Tensor(target - 0.01), target) == pytest.approx(40.0)
    assert psnr(2 * (target + 0.1), 2 * target, data_range=2) == pytest.approx(20.0)
    assert psnr(target, target) == math.inf
    with pytest.raises(ValueError, match=r"prediction \(8, 8\) and target \(64,\)"):
        psnr(target, target.ravel())


@pytest.mark.parametrize("kind", ["siren", "fourier"])
def test_coordinate_gradient_by_autograd_equals_finite_differences(kind):
    tf.manual_seed(1)
    model = build_model(kind, SirenConfig(hidden=8, n_layers=2, sigma=2.0)).to(np.float64)
    coords = np.random.default_rng(1).uniform(-1, 1, (5, 2))
    x = tf.Tensor(coords, requires_grad=True)
    assert tf.gradcheck(lambda x: model(x)[0], [x])  # the parameters are checked too
    g = coordinate_gradient(model, coords)  # (5, 2)
    h = 1e-6
    for axis in range(2):
        step = np.zeros(2)
        step[axis] = h
        up, _ = model(coords + step)
        down, _ = model(coords - step)
        numeric = (up.numpy() - down.numpy())[:, 0] / (2 * h)
        np.testing.assert_allclose(g[:, axis], numeric, rtol=1e-6, atol=1e-8)


def test_sobel_gradient_of_a_plane_is_its_slope():
    grid = coordinate_grid(9)  # (81, 2): x along the rows, y down them
    plane = (0.5 * grid[:, 0] - 2.0 * grid[:, 1]).reshape(9, 9).astype(np.float64)
    gx, gy = sobel_gradient(plane, spacing=2 / 8)
    np.testing.assert_allclose(gx[1:-1, 1:-1], 0.5, rtol=1e-6)
    np.testing.assert_allclose(gy[1:-1, 1:-1], -2.0, rtol=1e-6)


def test_image_helpers(tmp_path):
    grid = coordinate_grid(4)
    assert grid.shape == (16, 2) and grid.min() == -1 and grid.max() == 1
    np.testing.assert_array_equal(grid[:4, 1], -1)  # the first row is y = -1
    image = np.arange(36.0).reshape(6, 6)
    np.testing.assert_allclose(area_resize(image, 3), image.reshape(3, 2, 3, 2).mean((1, 3)))
    np.testing.assert_allclose(area_resize(np.full((7, 5), 0.3), 4), 0.3)  # no integer ratio
    crop = china_crop(32)
    assert crop.shape == (32, 32) and crop.dtype == np.float32
    assert 0 <= crop.min() and crop.max() <= 1 and crop.std() > 0.1
    import matplotlib.pyplot as plt

    ramp = np.tile(np.linspace(0, 1, 20), (10, 1))  # (10, 20): the centred 10 x 10 is kept
    plt.imsave(tmp_path / "ramp.png", ramp, cmap="gray", vmin=0, vmax=1)  # RGBA on disk
    image = load_image(str(tmp_path / "ramp.png"), 5)
    np.testing.assert_allclose(image, area_resize(ramp[:, 5:15], 5), atol=3e-3)  # 8-bit
    with pytest.raises(ValueError, match="--image .*nothing.png: cannot read it"):
        load_image(str(tmp_path / "nothing.png"), 5)


def test_configurations_refuse_what_cannot_work():
    with pytest.raises(ValueError, match="hidden must be even"):
        SirenConfig(hidden=7)
    with pytest.raises(ValueError, match="w0 and sigma must be > 0"):
        SirenConfig(w0=0)
    with pytest.raises(ValueError, match="--models must name each of siren, relu, fourier"):
        TrainSirenConfig(models="siren,tanh")
    with pytest.raises(ValueError, match=r"coords must be \(N, 2\), got \(3, 3\)"):
        Siren(SirenConfig(hidden=8))(np.zeros((3, 3), np.float32))


def _fit(model, coords, target, lr, steps):
    opt = Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        _, loss = model(coords, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return psnr(model(coords)[0], target, data_range=2)


def test_siren_beats_a_relu_mlp_of_the_same_size_on_fine_detail():
    n = 24
    coords = coordinate_grid(n)
    x, y = coords[:, 0], coords[:, 1]
    # fine stripes and a sharp-edged disc: detail a ReLU MLP learns last (spectral bias)
    image = 0.5 * np.sin(12 * x + 7 * y) + 0.4 * np.where(x**2 + y**2 < 0.3, 1.0, -1.0)
    target = image.reshape(-1, 1).astype(np.float32)
    cfg = SirenConfig(hidden=64, n_layers=2)
    tf.manual_seed(0)
    siren = _fit(Siren(cfg), coords, target, lr=1e-3, steps=25)
    tf.manual_seed(0)
    relu = _fit(ReLUMLP(cfg), coords, target, lr=1e-3, steps=25)
    # measured: SIREN ~30 dB, the ReLU MLP ~13 dB (it has not left the image's mean yet)
    assert siren > 25 and siren > relu + 10, (siren, relu)


def test_fourier_features_are_fixed_cos_sin_pairs():
    tf.manual_seed(0)
    model = FourierFeatureMLP(SirenConfig(hidden=8, sigma=3.0))
    assert model.B.shape == (4, 2) and "B" not in dict(model.named_parameters())
    v = np.array([[0.25, -0.5]], np.float32)
    features = model.features(tf.Tensor(v)).numpy()
    angle = 2 * np.pi * v @ model.B.numpy().T
    np.testing.assert_allclose(features, np.concatenate([np.cos(angle), np.sin(angle)], 1),
                               rtol=1e-5, atol=1e-6)  # fmt: skip


def test_train_siren_command(tmp_path, capsys):
    out = tmp_path / "siren"
    flags = ["--size", "12", "--hidden", "8", "--n-layers", "2", "--iters", "4",
             "--eval-interval", "4", "--out-dir", str(out), "--no-progress"]  # fmt: skip
    assert cli.main(["train", "siren", *flags]) == 0
    text = capsys.readouterr().out
    assert "SIREN" in text and "ReLU + Fourier features" in text
    for name in ("psnr.png", "fits.png", *(f"{m}/loss.png" for m in ("siren", "relu", "fourier"))):
        assert (out / name).stat().st_size > 0
    results = json.loads((out / "results.json").read_text())["results"]
    assert set(results) == {"siren", "relu", "fourier"}
    assert all(np.isfinite(r["psnr"]) and r["ms_per_step"] > 0 for r in results.values())
    log = json.loads((out / "siren" / "log.json").read_text())
    assert len(log["loss"]) == 4 and [e["iter"] for e in log["evals"]] == [0, 4]
    # a second run would replace the first: refused; --resume extends every network's run
    assert cli.main(["train", "siren", *flags]) == 2
    assert "already holds a run" in capsys.readouterr().err
    # (on the fake device: a host array mixed into device math would fail there)
    assert cli.main(["train", "siren", "--resume", "--iters", "6", "--out-dir", str(out),
                     "--no-progress", "--device", "fake"]) == 0  # fmt: skip
    for name in ("siren", "relu", "fourier"):
        assert len(json.loads((out / name / "log.json").read_text())["loss"]) == 6
