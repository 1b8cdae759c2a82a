"""ViT: the Vision Transformer, "An Image is Worth 16x16 Words" (Dosovitskiy et al., 2021).

An image is cut into P x P patches; each patch is flattened and linearly embedded (done as one
conv with kernel = stride = P, which is the same map); a learned [CLS] token is prepended and
learned position embeddings are added; a stack of pre-LN transformer encoder blocks (no causal
mask: every patch sees every patch) mixes them; the classifier reads the final [CLS] vector.

Shapes: B batch, C_in image channels, H = W image size, P patch size, N = (H / P)^2 patches,
T = N + 1 tokens, C width (n_embd), nh heads, K classes.

    images (B, C_in, H, W) -> patch_embed conv -> (B, C, H/P, W/P) -> (B, N, C)
          -> [CLS] prepended -> (B, T, C) + pos_embed -> n_layer blocks -> norm -> head on [CLS]
          -> logits (B, K)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.nn import init
from tinyformer.ops import cat, expand, reshape, transpose
from tinyformer.tensor import Tensor

__all__ = ["VIT_CONFIGS", "ViT", "ViTConfig", "attention_rollout"]


@dataclass(frozen=True)
class ViTConfig:
    image_size: int = 8  # H = W, pixels
    patch_size: int = 2  # P: the image is cut into (H / P)^2 patches of P x P pixels
    in_channels: int = 1  # colour channels of the input
    num_classes: int = 10  # K
    n_layer: int = 4  # encoder blocks
    n_head: int = 4  # attention heads per block
    n_embd: int = 64  # width C of every token
    mlp_ratio: int = 4  # MLP hidden width = mlp_ratio * C
    dropout: float = 0.0  # after the embeddings and in every residual branch

    def __post_init__(self) -> None:
        check_sizes(
            self, "image_size", "patch_size", "in_channels", "num_classes", "n_layer", "n_head",
            "n_embd", "mlp_ratio",
        )  # fmt: skip
        check_dropout(self)
        if self.image_size % self.patch_size:
            raise ValueError(
                f"ViTConfig: image_size {self.image_size} is not a multiple of patch_size "
                f"{self.patch_size}"
            )
        if self.n_embd % self.n_head:
            raise ValueError(
                f"ViTConfig: n_embd {self.n_embd} not divisible by n_head {self.n_head}"
            )

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    def num_parameters(self) -> int:
        """Parameter count without building the model."""
        c, h = self.n_embd, self.mlp_ratio * self.n_embd
        patch = c * self.in_channels * self.patch_size**2 + c
        block = 2 * 2 * c + (3 * c * c + 3 * c) + (c * c + c) + (c * h + h) + (h * c + c)
        tokens = c + (self.num_patches + 1) * c  # [CLS] and position embeddings
        head = 2 * c + c * self.num_classes + self.num_classes  # final norm and classifier
        return patch + tokens + self.n_layer * block + head


VIT_CONFIGS = {
    # trains on scikit-learn's 8x8 digits in a couple of minutes on 2 cores
    "vit_tiny_digits": ViTConfig(),
    # the paper's table 1 models, at 224x224 with ImageNet's 1000 classes
    "vit_base_patch16_224": ViTConfig(224, 16, 3, 1000, 12, 12, 768),
    "vit_large_patch16_224": ViTConfig(224, 16, 3, 1000, 24, 16, 1024),
    "vit_huge_patch14_224": ViTConfig(224, 14, 3, 1000, 32, 16, 1280),
}


class ViT(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        c, p = config.n_embd, config.patch_size
        self.patch_embed = nn.Conv2d(config.in_channels, c, kernel_size=p, stride=p)
        self.cls_token = nn.Parameter(np.zeros((1, 1, c), np.float32))
        self.pos_embed = nn.Parameter(np.zeros((1, config.num_patches + 1, c), np.float32))
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            nn.Block(c, config.n_head, dropout=config.dropout, eps=1e-6)
            for _ in range(config.n_layer)
        )
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.head = nn.Linear(c, config.num_classes)
        init.normal_(self.cls_token, std=0.02)
        init.normal_(self.pos_embed, std=0.02)

    def tokens(self, images: Any) -> Tensor:
        """images (B, C_in, H, W) -> embedded tokens (B, T, C), [CLS] first. A host array
        moves to the model's device here; a Tensor is used where it is."""
        x = images if isinstance(images, Tensor) else (
            Tensor(to_device_of(images, self.patch_embed.weight)))  # fmt: skip
        if x.ndim != 4 or x.shape[1:] != (self.config.in_channels, *(self.config.image_size,) * 2):
            cfg = self.config
            raise ValueError(
                f"ViT: expected images (B, {cfg.in_channels}, {cfg.image_size}, "
                f"{cfg.image_size}), got {x.shape}"
            )
        b = x.shape[0]
        x = self.patch_embed(x)  # (B, C, H/P, W/P)
        x = transpose(reshape(x, b, x.shape[1], -1), 1, 2)  # (B, C, N) -> (B, N, C)
        cls = expand(self.cls_token, b, 1, x.shape[2])  # (B, 1, C)
        return self.drop(cat([cls, x], axis=1) + self.pos_embed)  # (B, T, C)

    def forward(self, images: Any, targets: Any = None) -> tuple[Tensor, Tensor | None]:
        """images (B, C_in, H, W) -> logits (B, K), and the cross-entropy with targets (B,)."""
        x = self.tokens(images)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        logits = self.head(self.norm(x)[:, 0])  # the [CLS] token -> (B, K)
        loss = None if targets is None else F.cross_entropy(logits, array_of(targets))
        return logits, loss

    def attention_maps(self, images: Any) -> list[np.ndarray]:
        """Every block's attention weights, each (B, nh, T, T) (no gradient), on the host, for
        plots."""
        from tinyformer.autograd import no_grad

        maps = []
        with no_grad():
            x = self.tokens(images)
            for block in self.blocks:
                x, weights = block(x, need_weights=True)
                maps.append(backend.to_host(weights.data))  # a read-back from a device
        return maps


def attention_rollout(maps: list[np.ndarray]) -> np.ndarray:
    """Abnar & Zuidema's attention rollout: average heads, add the residual (identity), renormalise,
    multiply through the layers. Returns (B, T, T); row 0 is how much [CLS] draws on each token."""
    rollout = None
    for weights in maps:
        a = weights.mean(axis=1)  # (B, T, T)
        a = a + np.eye(a.shape[-1])
        a = a / a.sum(axis=-1, keepdims=True)
        rollout = a if rollout is None else a @ rollout
    return rollout
