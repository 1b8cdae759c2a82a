"""Neural-network building blocks with PyTorch's names: `Module`, `Parameter`, layers,
containers and transformer blocks; `tinyformer.nn.functional` holds the functional ops.
`Rearrange` and `Reduce` are einops' layers (they need einops, an optional dependency); where
einops is installed, importing them also lets einops take tinyformer tensors."""

from tinyformer.nn import functional, init, utils
from tinyformer.nn.activations import (
    CELU,
    ELU,
    GLU,
    SELU,
    Dropout1d,
    Dropout2d,
    Hardsigmoid,
    Hardtanh,
    LogSigmoid,
    Mish,
    PReLU,
    ReLU6,
    Softmax2d,
    Softplus,
    Softsign,
)
from tinyformer.nn.batchnorm import BatchNorm1d, BatchNorm2d
from tinyformer.nn.bilinear import Bilinear
from tinyformer.nn.conv import (
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Flatten,
    MaxPool1d,
    MaxPool2d,
    MaxUnpool2d,
    Unflatten,
    Unfold,
    Upsample,
)
from tinyformer.nn.distance import CosineSimilarity, PairwiseDistance
from tinyformer.nn.einops_layers import Rearrange, Reduce
from tinyformer.nn.embedding_bag import EmbeddingBag
from tinyformer.nn.layers import (
    GELU,
    Dropout,
    Embedding,
    Hardswish,
    Identity,
    LayerNorm,
    LeakyReLU,
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
from tinyformer.nn.losses import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from tinyformer.nn.losses_more import (
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    MarginRankingLoss,
    MultiLabelSoftMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from tinyformer.nn.module import Module, Parameter, StateDictError
from tinyformer.nn.multihead_attention import MultiheadAttention
from tinyformer.nn.normalization import GroupNorm, InstanceNorm1d, InstanceNorm2d
from tinyformer.nn.padding import (
    ConstantPad1d,
    ConstantPad2d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    ZeroPad1d,
    ZeroPad2d,
)
from tinyformer.nn.parameters import ParameterDict, ParameterList
from tinyformer.nn.pixelshuffle import PixelShuffle, PixelUnshuffle
from tinyformer.nn.pooling_more import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AdaptiveMaxPool2d
from tinyformer.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell
from tinyformer.nn.transformer import MLP, Attention, Block
from tinyformer.nn.transformer_layers import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Attention",
    "AvgPool1d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d",
    "Bilinear", "Block", "CELU", "ConstantPad1d", "ConstantPad2d", "Conv1d", "Conv2d",
    "ConvTranspose2d", "CosineEmbeddingLoss", "CosineSimilarity", "CrossEntropyLoss", "Dropout",
    "Dropout1d", "Dropout2d", "ELU", "Embedding", "EmbeddingBag", "Flatten", "GELU", "GLU", "GRU",
    "GRUCell", "GaussianNLLLoss", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh", "HuberLoss",
    "Identity", "InstanceNorm1d", "InstanceNorm2d", "KLDivLoss", "L1Loss", "LSTM", "LSTMCell",
    "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid", "LogSoftmax", "MLP", "MSELoss",
    "MarginRankingLoss", "MaxPool1d", "MaxPool2d", "MaxUnpool2d", "Mish", "Module", "ModuleDict",
    "ModuleList", "MultiLabelSoftMarginLoss", "MultiheadAttention", "NLLLoss", "PReLU",
    "PairwiseDistance", "Parameter", "ParameterDict", "ParameterList", "PixelShuffle",
    "PixelUnshuffle", "PoissonNLLLoss", "RMSNorm", "RNN", "RNNBase", "RNNCell", "ReLU", "ReLU6",
    "Rearrange", "Reduce", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
    "ReplicationPad2d", "SELU", "Sequential", "SiLU", "Sigmoid", "SmoothL1Loss", "SoftMarginLoss",
    "Softmax", "Softmax2d", "Softplus", "Softsign", "StateDictError", "Tanh", "Transformer",
    "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerEncoderLayer", "TripletMarginLoss", "Unflatten", "Unfold", "Upsample", "ZeroPad1d",
    "ZeroPad2d", "functional", "init", "utils",
]  # fmt: skip
