# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 15. SIREN: an image as a network, and why sines
#
# An image is a function: a pixel's coordinates `(x, y)` go in, its gray value comes out. A
# **coordinate network** is an MLP trained to *be* that function, one image per network:
# an *implicit neural representation*. Its weights store the image, it can be queried between
# the pixels, and autograd gives its derivatives exactly.
#
# The obvious MLP, with ReLU, is bad at it: the fit comes out blurry. This notebook shows why
# (spectral bias), then two fixes: **Fourier features** (Tancik et al., 2020) and **SIREN**,
# sine activations with a careful initialisation (Sitzmann et al., 2020).
#
# The full run takes a few minutes on two cores; CI runs a small one.

# %%
import math
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.models.siren import ReLUMLP, Siren, SirenConfig
from tinyformer.optim import Adam
from tinyformer.train.siren import TrainSirenConfig, coordinate_grid, train_siren

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
workdir = tempfile.TemporaryDirectory(prefix="siren-")  # removed when this kernel stops

# %% [markdown]
# ## 1. Spectral bias: a ReLU MLP learns the low frequencies first
#
# A 1-D signal with three frequencies, 1, 6 and 24 cycles over [-1, 1]. We fit it with a small
# ReLU MLP and, every few steps, measure how much of each frequency is still missing from the
# fit (the Fourier coefficient of the residual at that frequency).

# %%
x1 = np.linspace(-1, 1, 256, endpoint=False, dtype=np.float32)[:, None]  # (N, 1)
freqs = [1, 6, 24]
signal = sum(np.sin(np.pi * k * x1) for k in freqs).astype(np.float32) / 2  # (N, 1)


def missing(fit: np.ndarray) -> list[float]:
    """|residual's Fourier coefficient| / |signal's| at each of `freqs` (1: not learned)."""
    spectrum = np.abs(np.fft.rfft((signal - fit)[:, 0]))
    return [spectrum[k] / np.abs(np.fft.rfft(signal[:, 0]))[k] for k in freqs]


def fit_1d(model, lr: float, steps: int) -> list[list[float]]:
    opt, history = Adam(model.parameters(), lr=lr), []
    for _ in range(steps):
        values, loss = model(x1, signal)
        history.append(missing(values.numpy()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return history


steps_1d = 60 if SMALL else 1000
config_1d = SirenConfig(in_features=1, hidden=64, n_layers=3)
tf.manual_seed(0)
relu_1d = fit_1d(ReLUMLP(config_1d), 1e-3, steps_1d)
tf.manual_seed(0)
siren_1d = fit_1d(Siren(config_1d), 1e-3, steps_1d // 5)  # for contrast: section 3
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5), sharey=True)
for ax, history, title in ((axes[0], relu_1d, "ReLU MLP"), (axes[1], siren_1d, "SIREN")):
    ax.plot(np.array(history), label=[f"{k} cycles" for k in freqs])
    ax.set(xlabel="step", title=title, ylim=(0, 1.1))
axes[0].set(ylabel="fraction still missing")
axes[0].legend()
plt.show()

# %% [markdown]
# The ReLU MLP learns the slow wave within ~100 steps, the middle one over ~1000, and the
# fastest hardly at all; SIREN, on the right, takes all three in a few dozen steps. This is
# *spectral bias* (Rahaman et al., 2019): gradient descent on a ReLU network fits the
# components of a target roughly in order of frequency, and the rate falls steeply with the
# frequency. A ReLU network is piecewise linear in its input, and its kinks must be placed one
# by one; fine detail needs many of them.
#
# ## 2. Fourier features
#
# Tancik et al. move the frequencies into the input instead: map `v` to
#
#     gamma(v) = [cos(2 pi B v), sin(2 pi B v)],   B (m, D) ~ N(0, sigma^2), fixed,
#
# and put the ReLU MLP on top. The network now combines sinusoids it did not have to learn.
# `sigma` sets the bandwidth: too small and the fit stays blurry, too large and it fits noise
# between the pixels. `FourierFeatureMLP` in `tinyformer/models/siren.py` is exactly this.
#
# ## 3. SIREN: sines all the way, and an initialisation that keeps them in range
#
# SIREN's layers are `sin(w0 * (W x + b))`. A sine network can represent high frequencies
# with few units, but it is only trainable if every layer's pre-activation `z = w0 (W x + b)`
# stays ~ N(0, 1): much narrower and `sin` is just linear, much wider and every unit is a
# noise generator many periods wide. The paper's argument, for a layer with `n` inputs:
#
# - the input `x` of a hidden layer is a sine, with variance ~ 1/2 (for an argument spread
#   over many periods, `sin` is arcsine-distributed on [-1, 1], variance exactly 1/2);
# - with `w0 W` uniform on [-c w0, c w0], `Var(w0 w) = (c w0)^2 / 3`, so
#   `Var(z) = n (c w0)^2 / 3 * 1/2`;
# - `Var(z) = 1` gives `c = sqrt(6 / n) / w0`.
#
# The first layer is different: its input is the coordinate itself, and we *want* `w0 W x`
# to span several periods over [-1, 1]. Its weights are uniform on [-1/n, 1/n], so `w0 = 30`
# gives frequencies up to 30 / n radians per unit.
#
# **Exercise.** Write the initialisation of one `SineLayer` (its `linear.weight` is
# (out, in)); use `tf.nn.init.uniform_(tensor, a, b)`.


# %%
def my_siren_init_(layer, first: bool) -> None:
    """The paper's uniform initialisation of layer.linear.weight, in place."""
    n = layer.linear.weight.shape[1]
    # first layer: U(-1/n, 1/n); later layers: U(-c, c) with c = sqrt(6 / n) / w0
    ### BEGIN SOLUTION
    c = 1 / n if first else math.sqrt(6 / n) / layer.w0
    tf.nn.init.uniform_(layer.linear.weight, -c, c)
    ### END SOLUTION


# %% [markdown]
# Check it: build a deep SIREN, re-initialise its layers with your function, and look at the
# pre-activations of every layer on random coordinates. They should stay near N(0, 1) all the
# way down. For contrast, the same network with `nn.Linear`'s default initialisation
# (uniform on [-1/sqrt(n), 1/sqrt(n)]) times `w0 = 30`.


# %%
def preactivations(model, x: np.ndarray) -> list[np.ndarray]:
    zs, h = [], tf.Tensor(x)
    with tf.no_grad():
        for layer in model.body:
            z = layer.preactivation(h)
            zs.append(z.numpy().ravel())
            h = tf.sin(z)
    return zs


coords_random = np.random.default_rng(0).uniform(-1, 1, (1024, 2)).astype(np.float32)
tf.manual_seed(0)
deep = Siren(SirenConfig(hidden=256, n_layers=6))
for i, layer in enumerate(deep.body):
    my_siren_init_(layer, first=i == 0)
ours = preactivations(deep, coords_random)
for layer in deep.body[1:]:
    layer.linear.weight.data[...] = tf.nn.Linear(256, 256).weight.data
default = preactivations(deep, coords_random)
print("std of the pre-activations, layer by layer")
print("  paper's init :", " ".join(f"{z.std():5.2f}" for z in ours))
print("  default init :", " ".join(f"{z.std():5.2f}" for z in default))
assert all(0.7 < z.std() < 1.3 for z in ours[1:]), "check the bound c"
fig, axes = plt.subplots(1, 2, figsize=(10, 3))
axes[0].hist(ours[-1], bins=80, density=True)
axes[0].set(title="last layer's pre-activation: ~ N(0, 1)")
axes[1].hist(np.sin(ours[-1]), bins=80, density=True)
axes[1].set(title="its sine: mass piles up towards +-1")
plt.show()

# %% [markdown]
# **Question:** why `w0 = 30` rather than folding it into the weights (`w0 = 1` with weights 30
# times larger)? Think of what Adam's step, which has about the same size for every weight,
# does to `W` and to `w0 W`, and of the first layer's frequencies over [-1, 1].
#
# ## 4. PSNR
#
# Image fits are compared by the **peak signal-to-noise ratio**,
# `PSNR = 10 log10(range^2 / MSE)` in dB, where `range` is the span of the value scale
# (1 for images in [0, 1]; our networks output [-1, 1], so 2). +10 dB is a tenth of the
# squared error; 30 dB is an RMS error of about 3% of the range.
#
# **Exercise.** Write it.


# %%
def my_psnr(prediction: np.ndarray, target: np.ndarray, data_range: float = 1.0) -> float:
    ### BEGIN SOLUTION
    mse = np.mean((np.asarray(prediction, np.float64) - target) ** 2)
    return math.inf if mse == 0 else float(10 * np.log10(data_range**2 / mse))
    ### END SOLUTION


t = np.random.default_rng(0).uniform(0, 1, (8, 8))
assert abs(my_psnr(t + 0.1, t) - 20) < 1e-9 and abs(my_psnr(t + 0.2, t, 2.0) - 20) < 1e-9

# %% [markdown]
# ## 5. Three networks, one image
#
# `tinyformer train siren` fits a crop of scikit-learn's `china.jpg` with SIREN, the ReLU MLP
# and the Fourier-feature MLP: the same depth, width and number of full-batch steps (every
# pixel at every step), each through the shared training loop. Here it runs from Python.

# %%
cfg = TrainSirenConfig(
    size=32 if SMALL else 128,
    hidden=32 if SMALL else 128,
    iters=20 if SMALL else 300,
    eval_interval=20 if SMALL else 100,
    out_dir=workdir.name,
    progress=False,
)
result = train_siren(cfg)

# %%
fig, ax = plt.subplots(figsize=(12, 4))
ax.imshow(plt.imread(os.path.join(workdir.name, "psnr.png")))
ax.set_axis_off()
plt.show()

# %% [markdown]
# ## 6. The gradient of the fit
#
# A coordinate network is a differentiable function of its input, so autograd gives the
# gradient of the fitted image with respect to `(x, y)`: make the coordinates a tensor that
# requires grad, and ask `tf.grad` for d(sum of values)/d(coords). (Each value depends only on
# its own coordinate, so the gradient of the sum holds every pixel's gradient.)
#
# **Exercise.** Compute the gradient magnitude image of a fitted network.


# %%
def my_gradient_magnitude(model, size: int) -> np.ndarray:
    """|d value / d (x, y)| at every pixel of a size x size grid, (size, size)."""
    ### BEGIN SOLUTION
    x = tf.Tensor(coordinate_grid(size), requires_grad=True)  # (N, 2)
    values, _ = model(x)  # (N, 1)
    (g,) = tf.grad(values.sum(), [x])  # (N, 2)
    return np.hypot(g[:, 0], g[:, 1]).reshape(size, size)
    ### END SOLUTION


from tinyformer.train.siren.plots import coordinate_gradient  # noqa: E402
from tinyformer.train.state import load_run  # noqa: E402

state, meta = load_run(os.path.join(workdir.name, "siren"))
siren = Siren(SirenConfig(**meta["model_config"]))
siren.load_state_dict(state)
mine = my_gradient_magnitude(siren, cfg.size)
reference = np.hypot(*coordinate_gradient(siren, coordinate_grid(cfg.size)).T)
assert np.allclose(mine.ravel(), reference, rtol=1e-4, atol=1e-4)

# %% [markdown]
# `fits.png` puts them side by side: the target and each fit on top; below, the target's
# Sobel gradient (a finite difference) and each network's autograd gradient. The ReLU MLP's
# gradient is piecewise constant: it is a piecewise linear function. The Fourier-feature
# network gets the edges but adds ripples between the pixels. SIREN's gradient follows the
# image's, and so does its Laplacian: a sine network's derivatives are sine networks too,
# which is what lets SIREN fit a signal from its *derivatives* alone (the paper's Poisson
# image reconstruction; here it would need a double backward, which tinyformer leaves out).

# %%
fig, ax = plt.subplots(figsize=(12, 6.5))
ax.imshow(plt.imread(os.path.join(workdir.name, "fits.png")))
ax.set_axis_off()
plt.show()

# %% [markdown]
# **Question:** a ReLU MLP's fit is continuous but its gradient is piecewise constant and its
# second derivative zero almost everywhere. What does that mean for representing a signal
# whose useful information is in its derivatives (a distance field's normals, a wave
# equation's solution)?
