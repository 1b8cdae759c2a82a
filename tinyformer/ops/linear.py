"""linear: y = x @ W^T + b, the affine map of `torch.nn.functional.linear`.

Shapes    x (..., in), W (out, in), b (out,) or None -> y (..., out)
Forward   y = x W^T + b
Backward  gx = gy W;   gW = sum over rows of gy^T x (all leading dims flattened into rows);
          gb = sum over rows of gy
Saved     x and W.

One Function instead of matmul + transpose + add: one node in the graph, and gW comes from a
single (out, rows) @ (rows, in) product.
"""

from __future__ import annotations

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["linear"]


@registry.reference("linear.forward")
def linear_forward(x2, w, b):
    """x2 (rows, in) -> y (rows, out)."""
    y = x2 @ w.T
    if b is not None:
        y += b  # y is a fresh array: add in place, no second temporary
    return y


@registry.reference("linear.backward")
def linear_backward(gy2, x2, w, need_x, need_w, need_b):
    """-> gx (rows, in), gW, gb; None for what is not needed."""
    xp = backend.get_array_module(gy2)
    gx = gy2 @ w if need_x else None
    gw = gy2.T @ x2 if need_w else None
    # gb = 1^T gy as a matrix-vector product: BLAS runs it on every core it has, and faster
    # than NumPy's single-threaded sum over axis 0 even on one (docs/kernels.md).
    gb = _ones(xp, gy2.shape[0], gy2.dtype, gy2) @ gy2 if need_b else None
    return gx, gw, gb


# The ones vectors of gb = 1^T gy, kept between calls: making one is a fill, a launch on a
# GPU in every Linear's backward. Read-only operands; a step uses a few (rows, dtype) pairs.
# The least recently used goes first, so the vectors a step keeps using are never the ones
# dropped for a new one (dropping the oldest made a step pay a fill after earlier work).
_ONES: dict[tuple, object] = {}
MOST_ONES = 16


def _ones(xp, n: int, dtype, like):
    key = (xp, type(like), backend.device_of(like), n, dtype)
    ones = _ONES.pop(key, None)
    if ones is None:
        if len(_ONES) >= MOST_ONES:
            _ONES.pop(next(iter(_ONES)))
        ones = xp.ones_like(like, shape=(n,))
    _ONES[key] = ones  # now the most recently used
    return ones


class Linear(Function):
    @staticmethod
    def forward(ctx, x, w, b):
        if x.ndim < 1 or w.ndim != 2 or x.shape[-1] != w.shape[1]:
            raise OpError(
                f"linear: input of shape {x.shape} does not fit weight of shape {w.shape} "
                "(expected input (..., in) and weight (out, in))"
            )
        if b is not None and b.shape != (w.shape[0],):
            raise OpError(f"linear: bias of shape {b.shape} does not fit weight {w.shape}")
        ctx.save_for_backward(x, w)
        # One (rows, in) @ (in, out) product: NumPy would run a 3-D input as one small product
        # per leading index, each with its own call overhead.
        y = registry.call("linear.forward", x.reshape(-1, x.shape[-1]), w, b)  # (rows, out)
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        gy2 = gy.reshape(-1, gy.shape[-1])  # (rows, out)
        x2 = x.reshape(-1, x.shape[-1])  # (rows, in)
        gx, gw, gb = registry.call("linear.backward", gy2, x2, w, *ctx.needs_input_grad)
        return None if gx is None else gx.reshape(x.shape), gw, gb


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`x @ weight.T + bias`, with `weight` of shape (out_features, in_features)."""
    return Linear.apply(x, weight, bias)


def _sample(draw) -> Sample:
    lead = draw.shape(min_dims=1, max_dims=3)
    n_in, n_out = draw.integers(1, 4), draw.integers(1, 4)
    bias = floats(draw, (n_out,)) if draw.integers(0, 1) else None
    return Sample([floats(draw, (*lead, n_in)), floats(draw, (n_out, n_in)), bias])


SPECS = [
    OpSpec(
        "linear",
        linear,
        _sample,
        functions=(Linear,),
        primitives=("linear.forward", "linear.backward"),
    )
]
