"""A2's samples: which drawn samples grade a task, and the widened ones (huge logits, a large
offset).

Each function is named by a `Task` of A2 in `tinyformer/course/definition.py`: `keep` and
`forward_keep` take a drawn sample and say whether it grades the task, `widen` turns one into a
sample where the skill hides.
"""

from __future__ import annotations

import numpy as np

from tinyformer.testing.specs import Draw, Sample

__all__ = ["large_logits", "large_offset", "unweighted"]


def unweighted(sample: Sample) -> bool:
    # Class weights send cross_entropy through log_softmax and nll_loss: such a sample would
    # grade A2.2's code (and nll_loss's) instead of the fused primitives of A2.3.
    return sample.kwargs.get("weight") is None


def large_logits(sample: Sample, draw: Draw) -> Sample:
    """The logits past exp's range (exp(710) overflows float64, exp(-746) underflows to 0),
    perhaps scaled, and each row (a slice along the softmax's axis, the classes' for
    cross_entropy) shifted by its own +-1000: a softmax that does not subtract the row's
    maximum gives inf or NaN, and so does one that subtracts the whole array's maximum (the
    rows 2000 below it underflow to 0)."""
    x = sample.args[0]
    if draw.integers(0, 1):
        x = x / max(float(np.abs(x).max(initial=0.0)), 1e-3) * draw.choice([800.0, 1500.0])
    rows = list(x.shape)
    if rows:
        rows[sample.kwargs.get("axis", 1 if x.ndim > 1 else 0)] = 1
    signs = np.where(np.arange(int(np.prod(rows))) % 2 == 0, 1.0, -1.0).reshape(rows)
    x = x + signs * draw.choice([-1000.0, 1000.0])
    return Sample([x, *sample.args[1:]], dict(sample.kwargs))


def large_offset(sample: Sample, draw: Draw) -> Sample:
    """x far from 0: a one-pass variance E[x^2] - E[x]^2 cancels catastrophically."""
    x = sample.args[0] + draw.choice([1e6, -1e6, 3e5])
    return Sample([x, *sample.args[1:]], dict(sample.kwargs))
