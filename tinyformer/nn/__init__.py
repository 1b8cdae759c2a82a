"""Neural-network building blocks with PyTorch's names: `Module`, `Parameter`, layers,
containers and transformer blocks; `tinyformer.nn.functional` holds the functional ops.
`Rearrange` and `Reduce` are einops' layers (they need einops, an optional dependency); where
einops is installed, importing them also lets einops take tinyformer tensors."""

from tinyformer.nn import functional, init, utils
from tinyformer.nn.batchnorm import BatchNorm1d, BatchNorm2d
from tinyformer.nn.conv import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Flatten,
    MaxPool2d,
    MaxUnpool2d,
    Unfold,
    Upsample,
)
from tinyformer.nn.einops_layers import Rearrange, Reduce
from tinyformer.nn.layers import (
    GELU,
    Dropout,
    Embedding,
    Hardswish,
    Identity,
    LayerNorm,
    Linear,
    LogSoftmax,
    ModuleDict,
    ModuleList,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from tinyformer.nn.losses import BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, MSELoss, NLLLoss
from tinyformer.nn.module import Module, Parameter, StateDictError
from tinyformer.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from tinyformer.nn.transformer import MLP, Block, MultiheadAttention

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Hardswish", "KLDivLoss",
    "RNN", "RNNCell", "Unfold", "BCEWithLogitsLoss", "Block", "Conv1d", "Conv2d", "ConvTranspose2d",
    "CrossEntropyLoss", "Dropout", "Embedding", "Flatten", "GELU", "GRU", "GRUCell", "Identity",
    "LSTM", "LSTMCell", "LayerNorm", "Linear", "LogSoftmax", "MLP", "MSELoss", "MaxPool2d",
    "MaxUnpool2d", "Module", "ModuleDict", "ModuleList", "MultiheadAttention", "NLLLoss",
    "Parameter", "RMSNorm", "ReLU", "Rearrange", "Reduce",
    "Sequential", "SiLU", "Sigmoid", "Softmax", "StateDictError", "Tanh", "Upsample", "functional",
    "init", "utils",
]  # fmt: skip
