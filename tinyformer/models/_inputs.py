"""How a model's inputs reach the model's device, with one rule for every model.

Token ids, images and masks come from the data pipeline as host NumPy arrays (or lists); a model
moved with `model.to("cuda")` moves them to the device of one of its parameters as they enter,
so that `model(ids, targets)` reads the same on every device. On the host nothing is copied.
Targets are left where they arrive: the losses check them there (on the host, no read-back from
the device) and then move them to the logits' device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = ["array_of", "to_device_of"]


def to_device_of(x: Any, like: Tensor) -> Any:
    """`array_of(x)` on the device of `like` (a parameter of the model): the same array if it
    is there already, else one copy (an upload from the host, no read-back)."""
    a = array_of(x)
    if isinstance(like.data, np.ndarray) and isinstance(a, np.ndarray):
        return a  # the host path: no copy, no device look-up
    return backend.to_device(a, backend.device_of(like.data))
