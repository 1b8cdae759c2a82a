"""tinyformer: a NumPy deep-learning engine for teaching transformers, readable end to end.

    import tinyformer as tf
    import tinyformer.nn.functional as F

    x = tf.randn(4, 8, requires_grad=True)
    loss = F.cross_entropy(x, [1, 0, 3, 7])
    loss.backward()          # x.grad now holds d loss / d x

Reading order: tensor.py -> autograd.py -> ops/ (one file per op) -> gradcheck.py -> registry.py.
"""

from tinyformer import cuda, nn, optim, registry  # tf.nn.Linear, tf.cuda: as torch.nn, torch.cuda
from tinyformer.autograd import (
    Function,
    OpError,
    detect_anomaly,
    enable_grad,
    grad,
    is_grad_enabled,
    no_grad,
)
from tinyformer.backend import Device, device
from tinyformer.creation import (
    arange,
    from_numpy,
    full,
    multinomial,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from tinyformer.gradcheck import GradcheckError, gradcheck
from tinyformer.ops import (
    abs,
    add,
    argmax,
    argmin,
    cat,
    chunk,
    clamp,
    clip,
    clone,
    concatenate,
    cumsum,
    div,
    einsum,
    exp,
    expand,
    flatten,
    gather,
    log,
    logsumexp,
    masked_fill,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    permute,
    pow,
    relu,
    reshape,
    sigmoid,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    sub,
    sum,
    tanh,
    topk,
    transpose,
    tril,
    triu,
    unsqueeze,
    var,
    where,
)
from tinyformer.random import get_rng_state, manual_seed, set_rng_state
from tinyformer.tensor import Tensor

float32 = "float32"
float64 = "float64"
int64 = "int64"
long = int64  # PyTorch's name: tf.zeros(n, dtype=tf.long)

__version__ = "0.1.0"

__all__ = [
    "Device", "Function", "GradcheckError", "OpError", "Tensor", "abs", "add", "arange", "argmax",
    "argmin", "cat", "chunk", "clamp", "clip", "clone", "concatenate", "cuda", "cumsum",
    "detect_anomaly", "device", "div", "einsum", "enable_grad", "exp", "expand", "flatten",
    "float32", "float64", "from_numpy", "full", "gather", "get_rng_state", "grad", "gradcheck",
    "int64", "is_grad_enabled", "log", "logsumexp", "long", "manual_seed", "masked_fill", "matmul",
    "max", "maximum", "mean", "min", "minimum", "mul", "multinomial", "neg", "nn", "no_grad",
    "ones", "ones_like", "optim", "permute", "pow", "rand", "randint", "randn", "registry", "relu",
    "reshape", "set_rng_state", "sigmoid", "split", "sqrt", "squeeze", "stack", "std", "sub",
    "sum", "tanh", "tensor", "topk", "transpose", "tril", "triu", "unsqueeze", "var", "where",
    "zeros", "zeros_like",
]  # fmt: skip
