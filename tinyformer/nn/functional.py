"""The functional ops under their `torch.nn.functional` names (`import tinyformer.nn.functional
as F`). Each is defined, with its backward, in `tinyformer/ops/<name>.py`."""

from tinyformer.ops import (
    avg_pool2d,
    conv2d,
    conv_transpose2d,
    cross_entropy,
    dropout,
    embedding,
    gelu,
    layer_norm,
    linear,
    log_softmax,
    max_pool2d,
    max_unpool2d,
    pad,
    relu,
    scaled_dot_product_attention,
    sigmoid,
    softmax,
    tanh,
)

__all__ = [
    "avg_pool2d",
    "conv2d",
    "conv_transpose2d",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "max_pool2d",
    "max_unpool2d",
    "pad",
    "relu",
    "scaled_dot_product_attention",
    "sigmoid",
    "softmax",
    "tanh",
]
