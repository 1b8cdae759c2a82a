"""`torch.nn.utils`'s names: gradient clipping, which lives in `tinyformer.optim` beside the
optimizers that use it (`nn.utils.clip_grad_norm_(model.parameters(), 1.0)` runs as written),
and `nn.utils.rnn`, sequences of different lengths for the recurrent layers."""

from tinyformer.nn.utils import rnn
from tinyformer.optim.clip import clip_grad_norm_

__all__ = ["clip_grad_norm_", "rnn"]
