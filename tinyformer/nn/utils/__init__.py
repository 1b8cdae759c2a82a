"""`torch.nn.utils`'s names: gradient clipping (`nn.utils.clip_grad_norm_(model.parameters(), 1.0)`
and `clip_grad_value_` run as written; `tinyformer.optim` re-exports it for the optimizers' users),
`parameters_to_vector` and `vector_to_parameters`, and `nn.utils.rnn`, sequences of different
lengths for the recurrent layers."""

from tinyformer.nn.utils import rnn
from tinyformer.nn.utils.clip import clip_grad_norm_, clip_grad_value_
from tinyformer.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [
    "clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "rnn", "vector_to_parameters",
]  # fmt: skip
