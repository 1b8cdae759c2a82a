"""`tinyformer.utils`: as `torch.utils`, the data loading utilities (`tinyformer.utils.data`)."""

from tinyformer.utils import data

__all__ = ["data"]
