"""`tinyformer.einops_backend.TinyformerBackend`, einops' backend for tinyformer tensors, at its
older import path; the code is in `tinyformer.nn.einops_layers`, beside einops' layers."""

from tinyformer.nn import einops_layers

if einops_layers._missing is not None:  # einops is optional: say how to get it
    raise ImportError(
        f"tinyformer's einops support needs einops, which is not installed: {einops_layers.INSTALL}"
    ) from einops_layers._missing

TinyformerBackend = einops_layers.TinyformerBackend

__all__ = ["TinyformerBackend"]
