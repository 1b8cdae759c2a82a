"""Neural-network building blocks. `tinyformer.nn.functional` holds the functional ops now;
modules (`nn.Module`, `Linear`, ...) arrive with the GPT issue."""

from tinyformer.nn import functional

__all__ = ["functional"]
