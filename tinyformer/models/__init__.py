"""Models, each in one readable file: config dataclass, blocks, model."""

from tinyformer.models.gpt import CONFIGS as GPT_CONFIGS
from tinyformer.models.gpt import GPT, GPTConfig

__all__ = ["GPT", "GPT_CONFIGS", "GPTConfig"]
