"""bilinear: a bilinear form per output feature, y = x1^T A x2 + b (PyTorch's nn.Bilinear).

Shapes    x1 (*, in1), x2 (*, in2) with the same leading axes; weight (out, in1, in2);
          bias (out,) -> y (*, out)
Forward   y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o]
          (one einsum, "...i,oij,...j->...o")
Backward  through einsum: gx1[..., i] = sum_oj gy[..., o] weight[o, i, j] x2[..., j],
          gx2 alike, gweight[o, i, j] = sum over the leading axes of gy[..., o] x1[..., i]
          x2[..., j], gbias = gy summed over the leading axes.
Saved     what einsum saves (its three operands).
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.einsum import einsum
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["bilinear"]


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`x1^T A_o x2 + b_o` for each output feature o, over the leading axes."""
    op = "bilinear"
    if weight.ndim != 3:
        raise OpError(f"{op}: weight must be (out, in1, in2), got shape {weight.shape}")
    if input1.ndim < 1 or input1.shape[:-1] != input2.shape[:-1]:
        raise OpError(
            f"{op}: input1 {input1.shape} and input2 {input2.shape} must share all axes but "
            "the last"
        )
    if (input1.shape[-1], input2.shape[-1]) != weight.shape[1:]:
        raise OpError(
            f"{op}: inputs of {input1.shape[-1]} and {input2.shape[-1]} features need a weight "
            f"(out, {input1.shape[-1]}, {input2.shape[-1]}), got shape {weight.shape}"
        )
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    if bias is None:
        return y
    if bias.shape != weight.shape[:1]:
        raise OpError(f"{op}: bias must be ({weight.shape[0]},), got shape {bias.shape}")
    return y + bias


def _sample(draw) -> Sample:
    lead = draw.shape(min_dims=0, max_dims=2)
    in1, in2, out = draw.integers(1, 4), draw.integers(1, 4), draw.integers(1, 3)
    args = [floats(draw, (*lead, in1)), floats(draw, (*lead, in2)), floats(draw, (out, in1, in2))]
    if draw.integers(0, 1):
        args.append(floats(draw, (out,)))
    return Sample(args)


SPECS = [OpSpec("bilinear", bilinear, _sample)]
