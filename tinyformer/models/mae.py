"""MAE: "Masked Autoencoders Are Scalable Vision Learners" (He et al., 2022).

Cut an image into patches, hide most of them (75%) at random, and train an autoencoder to paint
the hidden ones back. Images are redundant: a missing patch can mostly be guessed from its
neighbours' low-level texture, so only a high masking ratio makes the task need an
understanding of the whole object. The design is asymmetric:

- the encoder, a ViT, sees only the visible patches (no mask tokens), so with 75% masking it
  runs on a quarter of the sequence: this is what makes pretraining cheap;
- a light decoder (narrower, fewer blocks) gets the encoded visible tokens plus one learned
  mask token at every hidden position, put back in image order, and predicts every patch's
  pixels. After pretraining it is thrown away; the encoder is kept.

The loss is the mean squared error on the hidden patches only, against each patch's pixels
normalised by that patch's own mean and variance (the paper's default, `norm_pix_loss`).
Parameter names are those of the official code (`patch_embed`, `cls_token`, `pos_embed`,
`blocks`, `norm`, `decoder_*`, `mask_token`); the encoder's are also the ViT's, so that
`encoder_state_dict()` loads straight into a `ViT` for fine-tuning.

Shapes: B batch, C_in image channels, H = W image size, P patch size, N = (H / P)^2 patches,
K = N - round(mask_ratio * N) visible patches, C encoder width, D decoder width,
L = P * P * C_in pixels per patch.

    images (B, C_in, H, W) -> patch_embed conv -> (B, N, C) + positions
          -> keep K per image, chosen at random (gather) -> [CLS] prepended -> (B, 1 + K, C)
          -> encoder blocks -> norm                                  -> latent (B, 1 + K, C)
    latent -> decoder_embed (B, 1 + K, D) -> append N - K mask tokens -> unshuffle (gather)
          -> + decoder positions -> decoder blocks -> decoder_norm -> decoder_pred
          -> pred (B, N, L), the pixels of every patch; the loss reads the hidden ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyformer import backend, nn, random
from tinyformer.autograd import no_grad
from tinyformer.models._checks import check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.models.vit import ViTConfig
from tinyformer.nn import init
from tinyformer.ops import cat, expand, gather, reshape, transpose
from tinyformer.tensor import Tensor

__all__ = [
    "MAE", "MAEConfig", "masked_patch_loss", "normalized_patches", "patchify", "random_masking",
    "unpatchify",
]  # fmt: skip


@dataclass(frozen=True)
class MAEConfig:
    image_size: int = 8  # H = W, pixels
    patch_size: int = 2  # P
    in_channels: int = 1  # C_in
    mask_ratio: float = 0.75  # share of patches hidden from the encoder (BERT hides 15%)
    n_layer: int = 4  # encoder blocks (the ViT's)
    n_head: int = 4
    n_embd: int = 64  # C, the encoder's width
    decoder_n_layer: int = 2  # the decoder is lighter: fewer blocks ...
    decoder_n_head: int = 4
    decoder_n_embd: int = 32  # ... and narrower (D)
    mlp_ratio: int = 4  # MLP hidden width = mlp_ratio * width, in both stacks
    norm_pix_loss: bool = True  # targets: each patch normalised by its own mean and variance

    def __post_init__(self) -> None:
        check_sizes(
            self, "image_size", "patch_size", "in_channels", "n_layer", "n_head", "n_embd",
            "decoder_n_layer", "decoder_n_head", "decoder_n_embd", "mlp_ratio",
        )  # fmt: skip
        if self.image_size % self.patch_size:
            raise ValueError(f"MAEConfig: image_size {self.image_size} is not a multiple of "
                             f"patch_size {self.patch_size}")  # fmt: skip
        for width, heads in (("n_embd", "n_head"), ("decoder_n_embd", "decoder_n_head")):
            if getattr(self, width) % getattr(self, heads):
                raise ValueError(f"MAEConfig: {width} {getattr(self, width)} is not divisible "
                                 f"by {heads} {getattr(self, heads)}")  # fmt: skip
        hidden = round(self.mask_ratio * self.num_patches)
        if not 0 < hidden < self.num_patches:  # one hidden for the loss, one seen by the encoder
            raise ValueError(
                f"MAEConfig: mask_ratio {self.mask_ratio} hides {hidden} of "
                f"{self.num_patches} patches; it must hide at least one and leave one visible"
            )

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def num_visible(self) -> int:
        """K: the patches the encoder sees."""
        return self.num_patches - round(self.mask_ratio * self.num_patches)

    def vit_config(self, num_classes: int, dropout: float = 0.0) -> ViTConfig:
        """The ViT whose weights the encoder shares: its classifier for fine-tuning."""
        return ViTConfig(
            self.image_size, self.patch_size, self.in_channels, num_classes, self.n_layer,
            self.n_head, self.n_embd, self.mlp_ratio, dropout,
        )  # fmt: skip


def patchify(images: Any, patch_size: int) -> Any:
    """images (B, C_in, H, W) -> patches (B, N, P*P*C_in), row-major over the patch grid, each
    patch's pixels in (row, column, channel) order, as the official code writes them."""
    b, c, h, w = images.shape
    p = patch_size
    x = images.reshape(b, c, h // p, p, w // p, p)  # (B, C_in, H/P, P, W/P, P)
    x = x.transpose(0, 2, 4, 3, 5, 1)  # (B, H/P, W/P, P, P, C_in)
    return x.reshape(b, (h // p) * (w // p), p * p * c)


def unpatchify(patches: Any, patch_size: int, channels: int) -> Any:
    """The inverse of `patchify`: (B, N, P*P*C_in) -> (B, C_in, H, W)."""
    b, n, _ = patches.shape
    p, g = patch_size, int(round(n**0.5))  # g = H / P patches per side
    x = patches.reshape(b, g, g, p, p, channels)  # (B, H/P, W/P, P, P, C_in)
    return x.transpose(0, 5, 1, 3, 2, 4).reshape(b, channels, g * p, g * p)


def normalized_patches(patches: Any, eps: float = 1e-6) -> Any:
    """Each patch's pixels minus their mean, over their standard deviation (unbiased, as
    `torch.var` computes it in the official code), so that every target patch has the same
    contrast: a faint stroke counts as much as a bold one. A flat patch becomes all zeros."""
    mean = patches.mean(axis=-1, keepdims=True)
    var = patches.var(axis=-1, keepdims=True, ddof=1)
    return (patches - mean) / (var + eps) ** 0.5


def random_masking(
    batch: int, num_patches: int, mask_ratio: float, noise: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Choose, for every image independently, round(mask_ratio * N) patches to hide.

    Draw one uniform number per patch (`noise`, (B, N), from tinyformer's generator unless
    given) and sort: `ids_shuffle` (B, N) lists the patches by their noise, a random
    permutation; its first K are kept. `ids_restore` = argsort(ids_shuffle) (B, N) is the
    inverse permutation: where each patch went, used to put the decoder's tokens back in
    image order. `mask` (B, N) is 1 at hidden patches, 0 at visible ones, in image order.
    Host arrays (the model moves them to its device)."""
    if noise is None:
        noise = random.generator().random((batch, num_patches))
    noise = np.asarray(noise)
    if noise.shape != (batch, num_patches):
        raise ValueError(f"random_masking: noise must be (B, N) = {(batch, num_patches)}, got "
                         f"{noise.shape}")  # fmt: skip
    keep = num_patches - round(mask_ratio * num_patches)
    ids_shuffle = np.argsort(noise, axis=1, kind="stable")  # ascending: the smallest are kept
    ids_restore = np.argsort(ids_shuffle, axis=1, kind="stable")
    mask = (ids_restore >= keep).astype(np.float32)  # a patch is kept iff its rank is < K
    return ids_shuffle, ids_restore, mask


def _along_tokens(ids: Any, width: int) -> Any:
    """ids (B, n) -> (B, n, width): gather along axis 1 picks whole tokens."""
    xp = backend.get_array_module(ids)
    return xp.ascontiguousarray(xp.broadcast_to(ids[:, :, None], (*ids.shape, width)))


def masked_patch_loss(pred: Tensor, target: Any, mask: Any) -> Tensor:
    """Mean squared error over the hidden patches only: pred (B, N, L), target (B, N, L) (an
    array, no gradient), mask (B, N) 1 at hidden patches. Visible patches count for nothing,
    whatever is predicted there: reconstructing them would be copying the input."""
    if pred.shape != target.shape or tuple(mask.shape) != pred.shape[:2]:
        raise ValueError(
            f"masked_patch_loss: pred {pred.shape}, target {target.shape} and mask "
            f"{tuple(mask.shape)} must be (B, N, L), (B, N, L), (B, N)"
        )
    weight = Tensor(mask.astype(pred.dtype))  # a constant: no gradient flows into the mask
    per_patch = ((pred - Tensor(target)) ** 2).mean(axis=-1)  # (B, N)
    return (per_patch * weight).sum() / weight.sum()


class MAE(nn.Module):
    def __init__(self, config: MAEConfig) -> None:
        super().__init__()
        self.config = cfg = config
        c, d, n = cfg.n_embd, cfg.decoder_n_embd, cfg.num_patches
        # the encoder: the ViT's pieces, under the ViT's names
        self.patch_embed = nn.Conv2d(cfg.in_channels, c, cfg.patch_size, stride=cfg.patch_size)
        self.cls_token = nn.Parameter(np.zeros((1, 1, c), np.float32))
        self.pos_embed = nn.Parameter(np.zeros((1, n + 1, c), np.float32))
        self.blocks = nn.ModuleList(
            nn.Block(c, cfg.n_head, eps=1e-6, hidden=cfg.mlp_ratio * c) for _ in range(cfg.n_layer)
        )
        self.norm = nn.LayerNorm(c, eps=1e-6)
        # the decoder, used only for pretraining
        self.decoder_embed = nn.Linear(c, d)
        self.mask_token = nn.Parameter(np.zeros((1, 1, d), np.float32))
        self.decoder_pos_embed = nn.Parameter(np.zeros((1, n + 1, d), np.float32))
        self.decoder_blocks = nn.ModuleList(
            nn.Block(d, cfg.decoder_n_head, eps=1e-6, hidden=cfg.mlp_ratio * d)
            for _ in range(cfg.decoder_n_layer)
        )
        self.decoder_norm = nn.LayerNorm(d, eps=1e-6)
        self.decoder_pred = nn.Linear(d, cfg.patch_size**2 * cfg.in_channels)
        for p in (self.cls_token, self.pos_embed, self.mask_token, self.decoder_pos_embed):
            init.normal_(p, std=0.02)

    def encoder_state_dict(self) -> dict[str, Any]:
        """The encoder's weights, named as in `ViT` (its classifier head is not among them)."""
        return {k: v for k, v in self.state_dict().items()
                if not k.startswith(("decoder_", "mask_token"))}  # fmt: skip

    def _images(self, images: Any) -> Tensor:
        x = images if isinstance(images, Tensor) else (
            Tensor(to_device_of(images, self.patch_embed.weight)))  # fmt: skip
        cfg = self.config
        if x.ndim != 4 or x.shape[1:] != (cfg.in_channels, cfg.image_size, cfg.image_size):
            raise ValueError(f"MAE: expected images (B, {cfg.in_channels}, {cfg.image_size}, "
                             f"{cfg.image_size}), got {x.shape}")  # fmt: skip
        return x

    def encode(self, images: Any, noise: Any = None) -> tuple[Tensor, Any, Any]:
        """images (B, C_in, H, W) -> latent (B, 1 + K, C) of [CLS] and the visible patches,
        mask (B, N), ids_restore (B, N) (on the model's device). `noise` (B, N): see
        `random_masking`."""
        x = self._images(images)
        b, n, k = x.shape[0], self.config.num_patches, self.config.num_visible
        x = self.patch_embed(x)  # (B, C, H/P, W/P)
        c = x.shape[1]
        x = transpose(reshape(x, b, c, n), 1, 2)  # (B, C, N) -> (B, N, C)
        x = x + self.pos_embed[:, 1:]  # positions first: a kept patch keeps its place
        ids_shuffle, ids_restore, mask = (
            to_device_of(a, self.pos_embed)
            for a in random_masking(b, n, self.config.mask_ratio, noise)
        )
        x = gather(x, 1, _along_tokens(ids_shuffle[:, :k], c))  # (B, K, C): the visible ones
        cls = expand(self.cls_token + self.pos_embed[:, :1], b, 1, c)  # (B, 1, C)
        x = cat([cls, x], axis=1)  # (B, 1 + K, C)
        for block in self.blocks:
            x = block(x)
        return self.norm(x), mask, ids_restore

    def decode(self, latent: Tensor, ids_restore: Any) -> Tensor:
        """latent (B, 1 + K, C), ids_restore (B, N) -> predicted pixels of every patch
        (B, N, L)."""
        x = self.decoder_embed(latent)  # (B, 1 + K, D)
        b, t, d = x.shape
        n = ids_restore.shape[1]
        hidden = expand(self.mask_token, b, n + 1 - t, d)  # (B, N - K, D): one token, shared
        x_ = cat([x[:, 1:], hidden], axis=1)  # (B, N, D), in shuffled order
        x_ = gather(x_, 1, _along_tokens(ids_restore, d))  # (B, N, D), back in image order
        x = cat([x[:, :1], x_], axis=1) + self.decoder_pos_embed  # (B, 1 + N, D)
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]  # (B, N, L), [CLS] dropped

    def targets(self, images: Any) -> Any:
        """What the decoder is trained to output: (B, N, L) patch pixels, normalised per patch
        when `norm_pix_loss`."""
        target = patchify(array_of(images), self.config.patch_size)
        return normalized_patches(target) if self.config.norm_pix_loss else target

    def forward(self, images: Any, noise: Any = None) -> tuple[Tensor, Tensor]:
        """images (B, C_in, H, W) -> pred (B, N, L), loss on the hidden patches."""
        x = self._images(images)
        latent, mask, ids_restore = self.encode(x, noise)
        pred = self.decode(latent, ids_restore)
        return pred, masked_patch_loss(pred, self.targets(x.data).astype(pred.dtype), mask)

    @no_grad()
    def reconstruct(self, images: Any, noise: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """For pictures: (images rebuilt from the predicted patches (B, C_in, H, W), mask
        (B, N)), on the host. With `norm_pix_loss` the predictions are in normalised units;
        they are mapped back with each true patch's mean and deviation (which the model never
        saw for hidden patches: the picture shows shapes, not absolute brightness)."""
        x = self._images(images)
        latent, mask, ids_restore = self.encode(x, noise)
        pred = backend.to_host(self.decode(latent, ids_restore).data)
        patches = patchify(backend.to_host(x.data), self.config.patch_size)
        if self.config.norm_pix_loss:
            std = (patches.var(-1, keepdims=True, ddof=1) + 1e-6) ** 0.5
            pred = pred * std + patches.mean(-1, keepdims=True)
        cfg = self.config
        return unpatchify(pred, cfg.patch_size, cfg.in_channels), backend.to_host(mask)
