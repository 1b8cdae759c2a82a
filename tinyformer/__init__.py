"""tinyformer: a NumPy deep-learning engine for teaching transformers, readable end to end.

    import tinyformer as tf
    import tinyformer.nn.functional as F

    x = tf.randn(4, 8, requires_grad=True)
    loss = F.cross_entropy(x, [1, 0, 3, 7])
    loss.backward()          # x.grad now holds d loss / d x

Reading order: engine.py -> tensor.py -> autograd.py -> ops/ (one file per op) -> gradcheck.py
-> registry.py.
"""

# backends, cuda, nn, optim, registry, utils: as torch's. fake_device registers the "fake"
# device with the device layer when imported: here, once for every program, so that
# `x.to("fake")` works and no spine module imports that wing.
from tinyformer import backends, cuda, fake_device, nn, optim, registry, utils  # noqa: F401
from tinyformer.autograd import (
    Function,
    OpError,
    detect_anomaly,
    enable_grad,
    grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from tinyformer.backend import Device, device
from tinyformer.creation import (
    BoolTensor,
    ByteTensor,
    DoubleTensor,
    FloatTensor,
    IntTensor,
    LongTensor,
    arange,
    as_tensor,
    empty,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    multinomial,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from tinyformer.creation_more import empty_like, logspace, normal, randint_like
from tinyformer.gradcheck import GradcheckError, gradcheck
from tinyformer.ops import (
    abs,
    add,
    amax,
    amin,
    argmax,
    argmin,
    argsort,
    cat,
    chunk,
    clamp,
    clip,
    clone,
    concatenate,
    cos,
    cumsum,
    div,
    einsum,
    erf,
    exp,
    expand,
    flatten,
    gather,
    log,
    log1p,
    log_softmax,
    logsumexp,
    masked_fill,
    matmul,
    maximum,
    mean,
    meshgrid,
    minimum,
    mul,
    neg,
    norm,
    outer,
    permute,
    pow,
    prod,
    relu,
    remainder,
    reshape,
    roll,
    rsqrt,
    scatter,
    sigmoid,
    sin,
    softmax,
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

# tf.all, tf.any and tf.round are left out of __all__, as tf.bool below: a star import would
# hide Python's own all, any and round.
from tinyformer.piecewise import ceil, floor, isfinite, isinf, isnan, round, sign, trunc  # noqa: F401, A004
from tinyformer.random import Generator, get_rng_state, manual_seed, set_rng_state
from tinyformer.serialization import load, save
from tinyformer.tensor import Tensor
from tinyformer.torch_functions import (  # noqa: F401, A004
    all,
    allclose,
    any,
    argwhere,
    bernoulli,
    bmm,
    compile,
    eq,
    equal,
    finfo,
    flip,
    ge,
    gt,
    iinfo,
    index_fill,
    index_select,
    isclose,
    le,
    lt,
    max,
    min,
    narrow,
    ne,
    nonzero,
    numel,
    repeat_interleave,
    set_printoptions,
    sort,
    t,
    unbind,
)
from tinyformer.torch_functions_more import (
    bincount,
    broadcast_to,
    bucketize,
    count_nonzero,
    cumprod,
    diff,
    dot,
    fliplr,
    flipud,
    hstack,
    lerp,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    masked_select,
    mm,
    moveaxis,
    movedim,
    mv,
    nan_to_num,
    reciprocal,
    searchsorted,
    square,
    swapaxes,
    swapdims,
    tile,
    unflatten,
    unique,
    vstack,
)
from tinyformer.torch_settings import (
    are_deterministic_algorithms_enabled,
    get_default_dtype,
    get_num_threads,
    is_deterministic_algorithms_warn_only_enabled,
    set_default_dtype,
    set_num_threads,
    use_deterministic_algorithms,
)

# dtypes under PyTorch's names; each is the NumPy dtype's name, which every creation function,
# `x.to()`, `x.type()` and `x.astype()` take. tf.bool, tf.float and tf.int are left out of
# __all__: a star import would hide Python's own bool, float and int.
float16 = "float16"
float32 = "float32"
float64 = "float64"
uint8 = "uint8"
int8 = "int8"
int16 = "int16"
int32 = "int32"
int64 = "int64"
bool = "bool"  # noqa: A001
half = float16
float = float32  # noqa: A001
double = float64
short = int16
int = int32  # noqa: A001  (torch.int is int32)
long = int64  # tf.zeros(n, dtype=tf.long)


def __getattr__(name: str) -> object:
    # PyTorch's dtypes that NumPy cannot hold: an error that says so, not "no attribute".
    if name in ("bfloat16", "complex64", "complex128", "cfloat", "cdouble"):
        raise AttributeError(
            f"tinyformer.{name}: NumPy, which holds tinyformer's arrays, has no {name} dtype "
            "that tinyformer computes with; use tinyformer.float32 (or float16/float64)"
        )
    raise AttributeError(f"module 'tinyformer' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "Generator", "IntTensor",
    "LongTensor", "empty", "inference_mode", "int8", "int16", "is_inference_mode_enabled",
    "linspace", "load", "randperm", "save", "short", "uint8", "argwhere", "finfo", "flip",
    "iinfo", "index_select", "narrow", "nonzero", "numel", "sort", "unbind", "backends",
    "remainder", "allclose", "bmm", "ceil", "floor", "full_like", "isclose", "isfinite",
    "isinf", "isnan", "log_softmax", "rand_like", "randn_like", "sign", "softmax",
    "trunc", "eq", "ne", "lt", "le", "gt", "ge", "index_fill", "t", "as_tensor", "eye", "equal",
    "repeat_interleave", "set_grad_enabled", "bernoulli", "set_printoptions",
    "Device", "Function", "GradcheckError", "OpError", "Tensor", "abs", "add", "amax", "amin",
    "arange", "argmax", "argmin", "argsort", "cat", "chunk", "clamp", "clip", "clone",
    "concatenate", "cos", "cuda", "cumsum", "detect_anomaly", "device", "div", "double", "einsum",
    "enable_grad", "erf", "exp", "expand", "flatten", "float16", "float32", "float64", "from_numpy",
    "full", "gather", "get_rng_state", "grad", "gradcheck", "half", "int32", "int64",
    "is_grad_enabled", "log", "log1p", "logsumexp", "long", "manual_seed", "masked_fill", "matmul",
    "max", "maximum", "mean", "meshgrid", "min", "minimum", "mul", "multinomial", "neg", "nn",
    "no_grad", "norm", "ones", "ones_like", "optim", "outer", "permute", "pow", "prod", "rand",
    "randint", "randn", "registry", "relu", "reshape", "roll", "rsqrt", "scatter", "set_rng_state",
    "sigmoid", "sin", "split", "sqrt", "squeeze", "stack", "std", "sub", "sum", "tanh", "tensor",
    "topk", "transpose", "tril", "triu", "unsqueeze", "utils", "var", "where", "zeros",
    "zeros_like", "bincount", "broadcast_to", "bucketize", "count_nonzero", "cumprod", "diff",
    "dot", "fliplr", "flipud", "hstack", "lerp", "log2", "log10", "logical_and", "logical_not",
    "logical_or", "logical_xor", "masked_select", "mm", "moveaxis", "movedim", "mv",
    "nan_to_num", "reciprocal", "searchsorted", "square", "swapaxes", "swapdims", "tile",
    "unflatten", "unique", "vstack", "empty_like", "logspace", "normal", "randint_like",
    "are_deterministic_algorithms_enabled", "get_default_dtype", "get_num_threads",
    "is_deterministic_algorithms_warn_only_enabled", "set_default_dtype", "set_num_threads",
    "use_deterministic_algorithms",
]  # fmt: skip
