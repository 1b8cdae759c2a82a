"""Image-to-image networks for semantic segmentation: a class score for every pixel.

Three ways to get from a downsampled feature map back to full resolution, as the lectures
present them:

- FCN (Long et al., 2015): "convolutionalise" a classifier (its dense layers become 1x1
  convolutions, so it outputs a coarse map of class scores instead of one vector) and upsample
  the scores with one learned transposed convolution.
- SegNet (Badrinarayanan et al., 2017): an encoder-decoder whose decoder upsamples with
  max-unpooling, putting each value back where the encoder's max-pooling found it.
- U-Net (Ronneberger et al., 2015): upsample with transposed convolutions and concatenate the
  encoder's feature map of the same size (a skip connection), so fine detail is not lost.

Shapes: B batch, C_in image channels, H x W image (divisible by 4), K classes.
Every model maps images (B, C_in, H, W) -> logits (B, K, H, W); the loss is the per-pixel
cross-entropy against masks (B, H, W).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tinyformer.nn.functional as F
from tinyformer import nn
from tinyformer.models._checks import check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.models.cnn import conv_stage
from tinyformer.ops import cat
from tinyformer.tensor import Tensor

__all__ = ["FCN", "SEGMENTATION_MODELS", "SegConfig", "SegNet", "UNet"]


@dataclass(frozen=True)
class SegConfig:
    in_channels: int = 3  # colour channels
    num_classes: int = 4  # K, background included
    width: int = 16  # filters in the first stage; doubled at each of the two downsamplings

    def __post_init__(self) -> None:
        check_sizes(self, "in_channels", "num_classes", "width")


def _as_tensor(images: Any, model: nn.Module) -> Tensor:
    """A host array of images on the model's device (that of its first parameter); a Tensor
    is used where it is."""
    x = images if isinstance(images, Tensor) else (
        Tensor(to_device_of(images, next(model.parameters()))))  # fmt: skip
    if x.ndim != 4 or x.shape[2] % 4 or x.shape[3] % 4:
        raise ValueError(
            f"segmentation: images must be (B, C, H, W) with H, W divisible by 4, got {x.shape}"
        )
    return x


def _loss(logits: Tensor, masks: Any) -> Tensor | None:
    return None if masks is None else F.cross_entropy(logits, array_of(masks))


class FCN(nn.Module):
    def __init__(self, config: SegConfig) -> None:
        super().__init__()
        w = config.width
        self.features = nn.Sequential(
            conv_stage(config.in_channels, w),
            nn.MaxPool2d(2),
            conv_stage(w, 2 * w),
            nn.MaxPool2d(2),
        )  # (B, 2w, H/4, W/4)
        self.classifier = nn.Conv2d(2 * w, config.num_classes, 1)  # a dense layer, as a 1x1 conv
        # one learned upsampling by 4: kernel 8, stride 4, padding 2 gives exactly 4x the size
        self.upsample = nn.ConvTranspose2d(config.num_classes, config.num_classes, 8, 4, 2)

    def forward(self, images: Any, masks: Any = None) -> tuple[Tensor, Tensor | None]:
        scores = self.classifier(self.features(_as_tensor(images, self)))  # (B, K, H/4, W/4)
        logits = self.upsample(scores)  # (B, K, H, W)
        return logits, _loss(logits, masks)


class SegNet(nn.Module):
    def __init__(self, config: SegConfig) -> None:
        super().__init__()
        w = config.width
        self.enc1, self.enc2 = conv_stage(config.in_channels, w), conv_stage(w, 2 * w)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.dec2, self.dec1 = conv_stage(2 * w, w), conv_stage(w, w)
        self.classifier = nn.Conv2d(w, config.num_classes, 1)

    def forward(self, images: Any, masks: Any = None) -> tuple[Tensor, Tensor | None]:
        x = _as_tensor(images, self)
        e1 = self.enc1(x)  # (B, w, H, W)
        p1, i1 = self.pool(e1)  # (B, w, H/2, W/2) and where each max was
        e2 = self.enc2(p1)  # (B, 2w, H/2, W/2)
        p2, i2 = self.pool(e2)  # (B, 2w, H/4, W/4)
        d2 = self.dec2(self.unpool(p2, i2, e2.shape[2:]))  # (B, 2w, H/2, W/2) -> (B, w, ...)
        d1 = self.dec1(self.unpool(d2, i1, e1.shape[2:]))  # (B, w, H, W)
        logits = self.classifier(d1)  # (B, K, H, W)
        return logits, _loss(logits, masks)


class UNet(nn.Module):
    def __init__(self, config: SegConfig) -> None:
        super().__init__()
        w = config.width
        self.down1, self.down2 = conv_stage(config.in_channels, w), conv_stage(w, 2 * w)
        self.pool = nn.MaxPool2d(2)
        self.bottom = conv_stage(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)  # doubles H and W
        self.merge2 = conv_stage(4 * w, 2 * w)  # upsampled + skip, concatenated
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, stride=2)
        self.merge1 = conv_stage(2 * w, w)
        self.classifier = nn.Conv2d(w, config.num_classes, 1)

    def forward(self, images: Any, masks: Any = None) -> tuple[Tensor, Tensor | None]:
        x = _as_tensor(images, self)
        s1 = self.down1(x)  # (B, w, H, W)
        s2 = self.down2(self.pool(s1))  # (B, 2w, H/2, W/2)
        b = self.bottom(self.pool(s2))  # (B, 4w, H/4, W/4)
        u2 = self.merge2(cat([self.up2(b), s2], axis=1))  # (B, 4w, H/2, W/2) -> (B, 2w, ...)
        u1 = self.merge1(cat([self.up1(u2), s1], axis=1))  # (B, 2w, H, W) -> (B, w, H, W)
        logits = self.classifier(u1)  # (B, K, H, W)
        return logits, _loss(logits, masks)


SEGMENTATION_MODELS = {"fcn": FCN, "segnet": SegNet, "unet": UNet}
