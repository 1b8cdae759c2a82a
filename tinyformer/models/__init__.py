"""Models, each in one readable file: config dataclass, blocks, model."""

from tinyformer.models.gpt import CONFIGS as GPT_CONFIGS
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.models.vit import VIT_CONFIGS, ViT, ViTConfig, attention_rollout

__all__ = [
    "GPT", "GPT_CONFIGS", "VIT_CONFIGS", "GPTConfig", "ViT", "ViTConfig", "attention_rollout",
]  # fmt: skip
