"""normalize: x divided by its p-norm along `axis`, as `torch.nn.functional.normalize`.

Forward   y = x / max(||x||_p, eps)     (the norm over `axis`, kept to broadcast against x)
Backward  through the ops it is made of: norm, clip (min=eps) and div. Where the norm is below
          eps, y = x / eps and the norm gets no gradient (clip's rule), as in PyTorch.
Saved     what those ops save.
"""

from __future__ import annotations

import math

from tinyformer.ops.clip import clip
from tinyformer.ops.div import div
from tinyformer.ops.norm import Norm, norm
from tinyformer.opspec import Draw, OpSpec, Sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["normalize"]


@torch_names
def normalize(x: Tensor, p: float = 2.0, axis: int = 1, eps: float = 1e-12) -> Tensor:
    """`x / max(norm(x, p, axis), eps)`: unit p-norm slices along `axis` (default 1, as in
    PyTorch: the features of a (batch, features, ...) tensor). `F.normalize(x, dim=-1)`.

    Shapes:
        x (...) -> y (...), the same.
    """
    denominator = clip(norm(x, p, axis, keepdims=True), min=eps)
    return div(x, denominator)


def _sample(draw: Draw) -> Sample:
    shape = draw.shape(min_dims=1)
    n, ndim = math.prod(shape), len(shape)
    # Away from 0 with distinct magnitudes (kinks of p = 1 and inf), as norm's own spec draws.
    magnitude = 0.05 + draw.rng.permutation(n) * (1.5 / n)
    x = (magnitude * draw.rng.choice([-1.0, 1.0], size=n)).reshape(shape)
    return Sample(
        [x],
        {
            "p": draw.choice([2.0, 1.0, math.inf, 3.0]),
            "axis": draw.integers(-ndim, ndim - 1),
            # 0.1 clips the norm of some short slices, which then get no gradient
            "eps": draw.choice([1e-12, 0.1]),
        },
    )


SPECS = [OpSpec("normalize", normalize, _sample, functions=(Norm,))]
