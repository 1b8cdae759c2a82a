"""`torch.nn.utils`'s name for gradient clipping, which lives in `tinyformer.optim` beside the
optimizers that use it: `nn.utils.clip_grad_norm_(model.parameters(), 1.0)` runs as written."""

from tinyformer.optim.clip import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
