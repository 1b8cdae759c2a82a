"""Parameter groups for weight decay: decay the weight matrices, not biases or LayerNorm gains
(decaying those only pulls them towards 0, which nothing about them asks for)."""

from __future__ import annotations

from typing import Any

from tinyformer.nn.layers import Embedding
from tinyformer.nn.module import Module

__all__ = ["weight_decay_groups"]


def weight_decay_groups(
    model: Module, weight_decay: float, decay_embeddings: bool = True
) -> list[dict[str, Any]]:
    """Two groups: parameters with 2 or more dims get `weight_decay` (embedding tables too,
    unless `decay_embeddings=False`, as nanoGPT does by default); the rest get 0."""
    embeddings = {
        id(m.weight) for m in model.modules() if isinstance(m, Embedding) and not decay_embeddings
    }
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        (decay if p.ndim >= 2 and id(p) not in embeddings else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
