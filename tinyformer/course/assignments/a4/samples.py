"""A4's samples: the widened ones of max pooling (ties).

Each function is named by a `Task` of A4 in `tinyformer/course/definition.py`: `keep` and
`forward_keep` take a drawn sample and say whether it grades the task, `widen` turns one into a
sample where the skill hides.
"""

from __future__ import annotations

import numpy as np

from tinyformer.testing.specs import Draw, Sample

__all__ = ["ties"]


def ties(sample: Sample, draw: Draw) -> Sample:
    """Values rounded to halves: windows hold ties, where the gradient goes to the first
    maximum only (PyTorch's rule, the returned index)."""
    x = np.floor(sample.args[0] * draw.choice([2.0, 1.0])) / 2.0
    return Sample([x, *sample.args[1:]], dict(sample.kwargs))
