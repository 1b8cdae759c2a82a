"""The functional ops under their `torch.nn.functional` names (`import tinyformer.nn.functional
as F`). Each is defined, with its backward, in `tinyformer/ops/<name>.py`."""

from tinyformer.ops import (
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    pad,
    relu,
    scaled_dot_product_attention,
    sigmoid,
    softmax,
    tanh,
)

__all__ = [
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "pad",
    "relu",
    "scaled_dot_product_attention",
    "sigmoid",
    "softmax",
    "tanh",
]
