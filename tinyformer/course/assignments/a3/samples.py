"""A3's samples: which drawn samples the forward and backward checks grade, and the widened
ones (padding masks, huge scores).

Each function is named by a `Task` of A3 in `tinyformer/course/definition.py`: `keep` and
`forward_keep` take a drawn sample and say whether it grades the task, `widen` turns one into a
sample where the skill hides.
"""

from __future__ import annotations

import numpy as np

from tinyformer.testing.specs import Draw, Sample

__all__ = ["not_causal", "padding_mask"]


def not_causal(sample: Sample) -> bool:
    return not sample.kwargs.get("is_causal")


def padding_mask(sample: Sample, draw: Draw) -> Sample:
    """A key-padding mask (keys from some index on are masked), a query that sees no key, and
    scores past exp's range (the largest attended score is +800 or +1500): no causal mask
    (A3.2's code)."""
    q, k, v = sample.args
    tq, tk = q.shape[-2], k.shape[-2]
    mask = np.broadcast_to(np.arange(tk) < draw.integers(1, tk), (tq, tk)).copy()
    if tq > 1 and draw.integers(0, 1):
        mask[draw.integers(0, tq - 1)] = False  # that row gives 0, and no NaN
    scores = q @ np.swapaxes(k, -1, -2)
    seen = scores[np.broadcast_to(mask, scores.shape)]
    top = float(seen[np.argmax(np.abs(seen))]) if seen.size else 1.0
    q = -q if top < 0 else q  # the largest score positive: exp(score) overflows
    scale = draw.choice([800.0, 1500.0]) / max(abs(top), 1e-3)
    kwargs = {**sample.kwargs, "attn_mask": mask, "is_causal": False, "scale": scale}
    return Sample([q, k, v], kwargs)
