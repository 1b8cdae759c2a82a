"""`tinyformer.backends`, as `torch.backends`: the switches PyTorch scripts set or ask about
before training, so that those lines run unchanged. tinyformer has no cuDNN and no Apple GPU
(MPS) path: `cudnn.benchmark = True` and friends are accepted and change nothing, and
`mps.is_available()` is False. (tinyformer's own array-library layer is `tinyformer.backend`.)
"""

from __future__ import annotations

__all__ = ["cudnn", "mps"]


class _Switches:
    """Attributes a script may set (`torch.backends.cudnn.deterministic = True`)."""

    def __init__(self, name: str, **defaults: bool) -> None:
        self.__dict__.update(defaults)
        self._name = name

    def is_available(self) -> bool:
        return False

    def is_built(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<tinyformer.backends.{self._name}: not used by tinyformer>"


cudnn = _Switches("cudnn", enabled=True, benchmark=False, deterministic=False, allow_tf32=True)
mps = _Switches("mps")
