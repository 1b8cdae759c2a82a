"""Every op, one file each: math docstring, NumPy reference, Function, functional wrapper, spec.

Adding an op: write `ops/<name>.py` (see docs/adding-an-op.md) and import its wrapper here.
"""

from tinyformer.ops.abs import abs
from tinyformer.ops.adaptive_avg_pool2d import adaptive_avg_pool2d
from tinyformer.ops.adaptive_max_pool2d import adaptive_max_pool2d
from tinyformer.ops.adaptive_pool1d import adaptive_avg_pool1d, adaptive_max_pool1d
from tinyformer.ops.add import add
from tinyformer.ops.amax import amax, amin
from tinyformer.ops.argsort import argsort
from tinyformer.ops.astype import astype
from tinyformer.ops.attention import scaled_dot_product_attention
from tinyformer.ops.avg_pool2d import avg_pool2d
from tinyformer.ops.batch_norm import batch_norm
from tinyformer.ops.bilinear import bilinear
from tinyformer.ops.binary_cross_entropy import binary_cross_entropy
from tinyformer.ops.binary_cross_entropy_with_logits import binary_cross_entropy_with_logits
from tinyformer.ops.cat import cat, concatenate, stack
from tinyformer.ops.celu import celu
from tinyformer.ops.clip import clamp, clip
from tinyformer.ops.clone import clone
from tinyformer.ops.conv1d import conv1d
from tinyformer.ops.conv2d import conv2d
from tinyformer.ops.conv_transpose2d import conv_transpose2d
from tinyformer.ops.cos import cos
from tinyformer.ops.cosine_similarity import cosine_similarity
from tinyformer.ops.cross_entropy import cross_entropy
from tinyformer.ops.cumsum import cumsum
from tinyformer.ops.div import div
from tinyformer.ops.dropout import dropout, dropout1d, dropout2d
from tinyformer.ops.einsum import einsum
from tinyformer.ops.embedding import embedding
from tinyformer.ops.erf import erf
from tinyformer.ops.exp import exp
from tinyformer.ops.expand import expand
from tinyformer.ops.gather import gather
from tinyformer.ops.gelu import gelu
from tinyformer.ops.getitem import getitem
from tinyformer.ops.getitem import index_put as index_put  # for Tensor.__setitem__; not public
from tinyformer.ops.glu import glu
from tinyformer.ops.group_norm import group_norm
from tinyformer.ops.gumbel_softmax import gumbel_softmax
from tinyformer.ops.hardsigmoid import hardsigmoid
from tinyformer.ops.hardswish import hardswish
from tinyformer.ops.hardtanh import hardtanh, relu6
from tinyformer.ops.interpolate import interpolate
from tinyformer.ops.kl_div import kl_div
from tinyformer.ops.l1_loss import l1_loss
from tinyformer.ops.layer_norm import layer_norm
from tinyformer.ops.leaky_relu import leaky_relu
from tinyformer.ops.likelihood_losses import gaussian_nll_loss, poisson_nll_loss
from tinyformer.ops.linear import linear
from tinyformer.ops.log import log
from tinyformer.ops.log1p import log1p
from tinyformer.ops.log_softmax import log_softmax
from tinyformer.ops.logsigmoid import logsigmoid
from tinyformer.ops.logsumexp import logsumexp
from tinyformer.ops.margin_losses import (
    cosine_embedding_loss,
    margin_ranking_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from tinyformer.ops.masked_fill import masked_fill
from tinyformer.ops.matmul import matmul
from tinyformer.ops.max import argmax, argmin, max, min
from tinyformer.ops.max_pool2d import max_pool2d
from tinyformer.ops.max_unpool2d import max_unpool2d
from tinyformer.ops.maximum import maximum, minimum
from tinyformer.ops.mean import mean
from tinyformer.ops.meshgrid import meshgrid
from tinyformer.ops.mish import mish
from tinyformer.ops.mse_loss import mse_loss
from tinyformer.ops.mul import mul
from tinyformer.ops.neg import neg
from tinyformer.ops.nll_loss import nll_loss
from tinyformer.ops.norm import norm
from tinyformer.ops.normalize import normalize
from tinyformer.ops.one_hot import one_hot
from tinyformer.ops.outer import outer
from tinyformer.ops.pad import pad
from tinyformer.ops.pairwise_distance import pairwise_distance
from tinyformer.ops.permute import permute, transpose
from tinyformer.ops.pixel_shuffle import pixel_shuffle, pixel_unshuffle
from tinyformer.ops.pool1d import avg_pool1d, max_pool1d
from tinyformer.ops.pow import pow
from tinyformer.ops.prelu import prelu
from tinyformer.ops.prod import prod
from tinyformer.ops.relu import relu
from tinyformer.ops.remainder import remainder
from tinyformer.ops.reshape import flatten, reshape
from tinyformer.ops.rms_norm import rms_norm
from tinyformer.ops.roll import roll
from tinyformer.ops.rsqrt import rsqrt
from tinyformer.ops.scatter import scatter
from tinyformer.ops.selu import selu
from tinyformer.ops.sigmoid import sigmoid
from tinyformer.ops.silu import silu
from tinyformer.ops.sin import sin
from tinyformer.ops.smooth_l1_loss import huber_loss, smooth_l1_loss
from tinyformer.ops.softmax import softmax
from tinyformer.ops.softplus import elu, softplus
from tinyformer.ops.softsign import softsign
from tinyformer.ops.split import chunk, split
from tinyformer.ops.sqrt import sqrt
from tinyformer.ops.squeeze import squeeze, unsqueeze
from tinyformer.ops.sub import sub
from tinyformer.ops.sum import sum
from tinyformer.ops.tanh import tanh
from tinyformer.ops.topk import topk
from tinyformer.ops.tril import tril, triu
from tinyformer.ops.unfold import unfold
from tinyformer.ops.var import std, var
from tinyformer.ops.where import where

__all__ = [
    "abs", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "add", "amax", "amin", "argmax", "argmin", "argsort", "astype",
    "avg_pool1d", "avg_pool2d", "batch_norm", "bilinear", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "cat", "celu", "chunk", "clamp", "clip", "clone",
    "concatenate", "conv1d", "conv2d", "conv_transpose2d", "cos", "cosine_embedding_loss",
    "cosine_similarity", "cross_entropy", "cumsum", "div", "dropout", "dropout1d", "dropout2d",
    "einsum", "elu", "embedding", "erf", "exp", "expand", "flatten", "gather", "gaussian_nll_loss",
    "gelu", "getitem", "glu", "group_norm", "gumbel_softmax", "hardsigmoid", "hardswish",
    "hardtanh", "huber_loss", "interpolate", "kl_div", "l1_loss", "layer_norm", "leaky_relu",
    "linear", "log", "log1p", "log_softmax", "logsigmoid", "logsumexp", "margin_ranking_loss",
    "masked_fill", "matmul", "max", "max_pool1d", "max_pool2d", "max_unpool2d", "maximum", "mean",
    "meshgrid", "min", "minimum", "mish", "mse_loss", "mul", "multilabel_soft_margin_loss", "neg",
    "nll_loss", "norm", "normalize", "one_hot", "outer", "pad", "pairwise_distance", "permute",
    "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss", "pow", "prelu", "prod", "relu", "relu6",
    "remainder", "reshape", "rms_norm", "roll", "rsqrt", "scaled_dot_product_attention", "scatter",
    "selu", "sigmoid", "silu", "sin", "smooth_l1_loss", "soft_margin_loss", "softmax", "softplus",
    "softsign", "split", "sqrt", "squeeze", "stack", "std", "sub", "sum", "tanh", "topk",
    "transpose", "tril", "triplet_margin_loss", "triu", "unfold", "unsqueeze", "var", "where",
]  # fmt: skip
