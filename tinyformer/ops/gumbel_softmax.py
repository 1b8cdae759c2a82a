"""gumbel_softmax: a differentiable sample from a categorical distribution (Jang et al., 2017;
Maddison et al., 2017), as PyTorch's.

Forward   g = -log(e), e ~ Exponential(1) (so g ~ Gumbel(0, 1)), one per element;
          y_soft = softmax((logits + g) / tau, axis).
          hard=True: y_hard = one_hot(argmax(y_soft)) along axis, and the straight-through
          estimator y = y_hard - detach(y_soft) + y_soft: its values are one-hot, its gradient
          is y_soft's.
Backward  through the ops it is made of (add, mul, softmax): softmax's, scaled by 1 / tau; the
          noise is a constant.
Saved     what those ops save.

The noise comes from tinyformer's generator (`tinyformer.manual_seed` makes it reproducible),
or, with `seed=`, from a generator of its own (the same noise every call: for tests).
"""

from __future__ import annotations

import warnings

import numpy as np

from tinyformer import backend, random
from tinyformer.autograd import OpError
from tinyformer.ops.softmax import check_axis, softmax
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["gumbel_softmax"]


@torch_names
def gumbel_softmax(
    logits: Tensor,
    tau: float = 1.0,
    hard: bool = False,
    eps: float = 1e-10,
    axis: int = -1,
    *,
    seed: int | None = None,
) -> Tensor:
    """A sample of probabilities along `axis` (PyTorch's `dim`), softened by temperature
    `tau`; with `hard`, one-hot values whose gradient is the soft sample's. `eps` is
    deprecated in PyTorch and unused, as there; `seed` fixes the noise (by default it comes
    from tinyformer's generator)."""
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau > 0:
        raise OpError(f"gumbel_softmax: tau must be a number > 0, got {tau!r}")
    if eps != 1e-10:
        warnings.warn("gumbel_softmax: eps is deprecated and has no effect", stacklevel=3)
    axis = check_axis("gumbel_softmax", axis, logits.ndim)
    rng = random.generator() if seed is None else np.random.default_rng(seed)
    gumbels = (-np.log(rng.exponential(size=logits.shape))).astype(logits.dtype)  # Gumbel(0, 1)
    gumbels = Tensor(backend.to_device(gumbels, logits.device))
    y_soft = softmax((logits + gumbels) / float(tau), axis)
    if not hard:
        return y_soft
    xp = backend.get_array_module(y_soft.data)
    index = xp.argmax(y_soft.data, axis=axis, keepdims=True)
    positions = xp.arange(logits.shape[axis])
    positions = positions.reshape([-1 if a == axis else 1 for a in range(logits.ndim)])
    y_hard = Tensor((positions == index).astype(logits.dtype))
    return y_hard - y_soft.detach() + y_soft


def _sample(draw) -> Sample:
    # hard=False only: finite differences of one-hot values are 0, not the soft gradient that
    # the straight-through estimator gives on purpose (tested in tests/test_nn_extras.py)
    shape = draw.shape(min_dims=1)
    kwargs = {
        "tau": draw.choice([1.0, 0.5, 2.0]),
        "axis": draw.integers(-len(shape), len(shape) - 1),
    }
    return Sample([floats(draw, shape)], {**kwargs, "seed": draw.integers(0, 2**31)})


SPECS = [OpSpec("gumbel_softmax", gumbel_softmax, _sample)]
