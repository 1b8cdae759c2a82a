"""A small convolutional classifier: the baseline the lectures set against the ViT.

Convolutions build in two priors a transformer has to learn from data: locality (a filter sees
a small neighbourhood) and translation equivariance (the same filter slides everywhere). On
small datasets those priors win; this model is here to show it.

Shapes: B batch, C_in image channels, H = W image size, K classes.

    images (B, C_in, H, W) -> n_stages x [conv3x3 - ReLU - conv3x3 - ReLU - maxpool 2x2]
           -> (B, channels[-1], H / 2^n_stages, W / 2^n_stages) -> flatten -> Linear -> (B, K)

`convolutionalise(cnn)` is the first step of Long et al.'s FCN (2015): the Linear head becomes a
convolution whose kernel covers the whole last feature map (h x w = H / 2^n_stages), giving
the same logits on an H x W image and, on a larger canvas, a map of logits, one for every
H x W window at a stride of 2^n_stages pixels (a sliding-window classifier in one pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.tensor import Tensor

__all__ = ["CNN", "CNNConfig", "convolutionalise", "linear_to_conv"]


@dataclass(frozen=True)
class CNNConfig:
    image_size: int = 8  # H = W, pixels
    in_channels: int = 1  # colour channels
    num_classes: int = 10  # K
    channels: tuple[int, ...] = (16, 32)  # filters per stage; each stage halves H and W
    dropout: float = 0.0  # before the classifier

    def __post_init__(self) -> None:
        if not self.channels or min(self.channels) < 1:
            raise ValueError(
                f"CNNConfig: channels must be one or more counts >= 1, got {self.channels}"
            )
        if self.image_size % 2 ** len(self.channels):
            raise ValueError(
                f"CNNConfig: image_size {self.image_size} must be divisible by "
                f"2^{len(self.channels)} (one 2x2 pooling per stage)"
            )


def conv_stage(c_in: int, c_out: int) -> nn.Sequential:
    """Two 3x3 convolutions (padding 1 keeps H and W) with ReLUs."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(), nn.Conv2d(c_out, c_out, 3, padding=1),
        nn.ReLU(),
    )  # fmt: skip


class CNN(nn.Module):
    def __init__(self, config: CNNConfig) -> None:
        super().__init__()
        self.config = config
        widths = (config.in_channels, *config.channels)
        self.stages = nn.ModuleList(conv_stage(a, b) for a, b in zip(widths, widths[1:]))
        self.pool = nn.MaxPool2d(2)
        side = config.image_size // 2 ** len(config.channels)
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.channels[-1] * side * side, config.num_classes)

    def forward(self, images: Any, targets: Any = None) -> tuple[Tensor, Tensor | None]:
        """images (B, C_in, H, W) -> logits (B, K), and the cross-entropy with targets (B,).
        A host array of images moves to the model's device here; a Tensor is used where it is."""
        x = images if isinstance(images, Tensor) else (
            Tensor(to_device_of(images, self.head.weight)))  # fmt: skip
        cfg = self.config
        if x.ndim != 4 or x.shape[1:] != (cfg.in_channels, cfg.image_size, cfg.image_size):
            # the head's width is fixed by image_size: another size failed there, as a Linear
            raise ValueError(
                f"CNN: expected images (B, {cfg.in_channels}, {cfg.image_size}, "
                f"{cfg.image_size}), got {x.shape}"
            )
        for stage in self.stages:
            x = self.pool(stage(x))  # (B, c, H, W) -> (B, c', H/2, W/2)
        x = x.reshape(x.shape[0], -1)  # (B, c' h w)
        logits = self.head(self.drop(x))  # (B, K)
        loss = None if targets is None else F.cross_entropy(logits, array_of(targets))
        return logits, loss


def linear_to_conv(
    linear: nn.Linear, in_channels: int, kernel_size: int | tuple[int, int]
) -> nn.Conv2d:
    """The convolution that computes `linear` on every (in_channels, kh, kw) window: a Linear
    over a flattened (C, kh, kw) map (row-major, as `reshape(B, -1)` flattens) has weight
    (K, C kh kw), which is exactly a Conv2d weight (K, C, kh, kw) laid out flat. kernel_size 1
    turns a Linear on vectors of C features into a 1x1 convolution. The new layer shares no
    memory with `linear` and sits on its device, in its dtype."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    out_features, in_features = linear.weight.shape
    if in_features != in_channels * kh * kw:
        raise ValueError(
            f"linear_to_conv: a Linear with {in_features} inputs cannot read in_channels "
            f"{in_channels} x kernel {kh}x{kw} = {in_channels * kh * kw} values"
        )
    w = linear.weight.data
    conv = nn.Conv2d(in_channels, out_features, (kh, kw), bias=linear.bias is not None,
                     dtype=w.dtype)  # fmt: skip
    conv.to(backend.device_of(w))
    state = {"weight": w.reshape(out_features, in_channels, kh, kw)}  # copied in
    if linear.bias is not None:
        state["bias"] = linear.bias.data
    conv.load_state_dict(state)
    return conv


def convolutionalise(model: CNN) -> nn.Sequential:
    """The CNN as a fully convolutional network: its stages and poolings, then the head as a
    convolution over the whole last feature map. (B, C_in, H', W') with H', W' >= image_size
    -> logits (B, K, (H' - image_size) / s + 1, (W' - image_size) / s + 1), s = 2^n_stages
    (for sizes that are multiples of s). The stages are `model`'s own modules (shared
    parameters); the head is a copy. Dropout is left out: the result is for inference."""
    side = model.config.image_size // 2 ** len(model.config.channels)
    layers = [m for stage in model.stages for m in (stage, nn.MaxPool2d(2))]
    head = linear_to_conv(model.head, model.config.channels[-1], side)
    return nn.Sequential(*layers, head).train(model.training)
