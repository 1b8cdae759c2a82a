"""Swin Transformer: "Hierarchical Vision Transformer using Shifted Windows" (Liu et al., 2021).

A ViT attends from every patch to every patch: its cost grows with the square of the number of
patches. Swin attends only inside non-overlapping M x M windows (linear in the number of
patches), and lets information cross window borders by alternating two kinds of blocks: W-MSA
(the regular windows) and SW-MSA (windows moved by M/2, done as a cyclic shift of the token grid
with `roll`, plus a mask so that tokens the shift brought together from opposite image borders
do not see each other). Between stages, patch merging concatenates each 2 x 2 neighbourhood
(4C) and projects it to 2C: a pyramid of feature maps, like a CNN's. Attention adds a learned
relative position bias, one number per head for each of the (2M-1)^2 possible offsets.

Shapes: B batch, C_in image channels, H = W image size, P patch size, h x w a stage's token
grid (H/P at the first), C a stage's width, M window side, N = M^2 tokens per window,
nW = (h/M)(w/M) windows per image, nh heads, hs = C / nh head size, K classes.

    images (B, C_in, H, W) -> patch_embed conv + LayerNorm -> (B, h, w, C)
        -> stage: blocks alternating W-MSA and SW-MSA -> patch merging -> (B, h/2, w/2, 2C)
        -> ... -> last stage (no merging) -> LayerNorm -> mean over h, w -> head -> logits (B, K)

Parameter names follow the paper's code and timm (`layers.0.blocks.1.attn.qkv`,
`relative_position_bias_table`, `downsample.reduction`); the MLP is tinyformer's (`c_fc`,
`c_proj`, timm's `fc1`, `fc2`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import nn
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.nn import init
from tinyformer.ops import permute, reshape, roll, split, transpose
from tinyformer.tensor import Tensor

__all__ = [
    "SWIN_CONFIGS", "PatchMerging", "SwinBlock", "SwinConfig", "SwinTransformer",
    "WindowAttention", "relative_position_index", "shifted_window_mask", "window_partition",
    "window_reverse",
]  # fmt: skip


@dataclass(frozen=True)
class SwinConfig:
    image_size: int = 8  # H = W, pixels
    patch_size: int = 2  # P: the first stage sees an (H / P) x (H / P) grid of patch tokens
    in_channels: int = 1  # colour channels of the input
    num_classes: int = 10  # K
    embed_dim: int = 48  # C of the first stage; every patch merging doubles it
    depths: tuple[int, ...] = (2, 2)  # blocks per stage; W-MSA and SW-MSA alternate inside
    num_heads: tuple[int, ...] = (3, 6)  # attention heads per stage
    window_size: int = 2  # M: attention within M x M windows (a smaller grid: the whole grid)
    mlp_ratio: int = 4  # MLP hidden width = mlp_ratio * C
    dropout: float = 0.0  # after the patch embedding and in every residual branch

    def __post_init__(self) -> None:
        check_sizes(
            self, "image_size", "patch_size", "in_channels", "num_classes", "embed_dim",
            "window_size", "mlp_ratio",
        )  # fmt: skip
        check_dropout(self)
        name = type(self).__name__
        if not self.depths or len(self.depths) != len(self.num_heads):
            raise ValueError(
                f"{name}: depths {self.depths} and num_heads {self.num_heads} need one entry per "
                "stage each"
            )
        if min(self.depths) < 1 or min(self.num_heads) < 1:
            raise ValueError(
                f"{name}: depths {self.depths}, num_heads {self.num_heads} must be >= 1"
            )
        if self.image_size % (self.patch_size * 2 ** (len(self.depths) - 1)):
            raise ValueError(
                f"{name}: image_size {self.image_size} must be a multiple of patch_size "
                f"{self.patch_size} x 2^{len(self.depths) - 1} (one 2x2 merging between stages)"
            )
        for i, (grid, window, _) in enumerate(self.stages()):
            dim, heads = self.embed_dim * 2**i, self.num_heads[i]
            if grid % window:
                raise ValueError(
                    f"{name}: stage {i}'s {grid}x{grid} token grid is not a whole number of "
                    f"{window}x{window} windows (window_size {self.window_size})"
                )
            if dim % heads:
                raise ValueError(f"{name}: stage {i}'s width {dim} not divisible by {heads} heads")

    def stages(self) -> list[tuple[int, int, int]]:
        """(grid side, window side M, shift) of each stage. A grid no larger than the window is
        one window (as in the paper's code): M shrinks to the grid and nothing is shifted."""
        out = []
        for i in range(len(self.depths)):
            grid = self.image_size // self.patch_size // 2**i
            window = min(self.window_size, grid)
            out.append((grid, window, 0 if grid <= self.window_size else window // 2))
        return out

    def num_parameters(self) -> int:
        """Parameter count without building the model (buffers are not parameters)."""
        c = self.embed_dim
        total = c * self.in_channels * self.patch_size**2 + c + 2 * c  # conv and its LayerNorm
        for i, ((_, window, _), depth) in enumerate(zip(self.stages(), self.depths)):
            dim, hid = c * 2**i, self.mlp_ratio * c * 2**i
            # qkv (C -> 3C) and proj (C -> C) with biases, and the bias table
            attn = 4 * dim * dim + 4 * dim + (2 * window - 1) ** 2 * self.num_heads[i]
            mlp = dim * hid + hid + hid * dim + dim
            total += depth * (2 * 2 * dim + attn + mlp)
            if i < len(self.depths) - 1:  # patch merging: LayerNorm(4C), Linear 4C -> 2C no bias
                total += 2 * 4 * dim + 4 * dim * 2 * dim
        last = c * 2 ** (len(self.depths) - 1)
        return total + 2 * last + last * self.num_classes + self.num_classes


SWIN_CONFIGS = {
    # 8x8 digits: a 4x4 patch grid in 2x2 windows (shifted by 1), then one 2x2 window
    "swin_tiny_digits": SwinConfig(),
    # the paper's Swin-T / S / B at 224x224 with ImageNet's 1000 classes
    "swin_tiny_patch4_window7_224": SwinConfig(
        224, 4, 3, 1000, 96, (2, 2, 6, 2), (3, 6, 12, 24), 7
    ),
    "swin_small_patch4_window7_224": SwinConfig(
        224, 4, 3, 1000, 96, (2, 2, 18, 2), (3, 6, 12, 24), 7
    ),
    "swin_base_patch4_window7_224": SwinConfig(
        224, 4, 3, 1000, 128, (2, 2, 18, 2), (4, 8, 16, 32), 7
    ),
}


def window_partition(x: Any, m: int) -> Any:
    """(B, h, w, C) -> (B * nW, M*M, C): the windows in row-major order, each window's tokens in
    row-major order. Works on Tensors and on arrays."""
    b, h, w, c = x.shape
    x = x.reshape(b, h // m, m, w // m, m, c)  # (B, h/M, M, w/M, M, C)
    x = _permute(x, 0, 1, 3, 2, 4, 5)  # (B, h/M, w/M, M, M, C): each window's tokens together
    return x.reshape(b * (h // m) * (w // m), m * m, c)


def window_reverse(windows: Any, m: int, h: int, w: int) -> Any:
    """(B * nW, M*M, C) -> (B, h, w, C), the inverse of `window_partition`."""
    c = windows.shape[-1]
    x = windows.reshape(-1, h // m, w // m, m, m, c)  # (B, h/M, w/M, M, M, C)
    x = _permute(x, 0, 1, 3, 2, 4, 5)  # (B, h/M, M, w/M, M, C)
    return x.reshape(-1, h, w, c)


def _permute(x: Any, *axes: int) -> Any:
    return permute(x, *axes) if isinstance(x, Tensor) else x.transpose(axes)


def relative_position_index(m: int) -> np.ndarray:
    """(N, N) ints: entry [i, j] is the row of the bias table for query token i and key token j
    of an M x M window, (dy + M-1) * (2M-1) + (dx + M-1) for the offset (dy, dx) = pos i - pos j
    (each in [-(M-1), M-1])."""
    coords = np.stack(np.meshgrid(np.arange(m), np.arange(m), indexing="ij")).reshape(2, -1)
    delta = coords[:, :, None] - coords[:, None, :] + (m - 1)  # (2, N, N), each in [0, 2M-2]
    return delta[0] * (2 * m - 1) + delta[1]


def shifted_window_mask(h: int, w: int, m: int, shift: int) -> np.ndarray:
    """(nW, N, N) additive mask for the windows of a grid rolled by -shift: 0 where query and
    key come from the same region of the unrolled grid, -inf where the roll made them neighbours
    (one came from the far border). The regions: along each axis, [0, -M), [-M, -shift),
    [-shift, end) of the rolled grid, the last being the one that wrapped around."""
    labels = np.zeros((1, h, w, 1), np.float32)
    bands = (slice(0, -m), slice(-m, -shift), slice(-shift, None))
    for i, rows in enumerate(bands):
        for j, cols in enumerate(bands):
            labels[:, rows, cols, :] = 3 * i + j
    windows = window_partition(labels, m)[..., 0]  # (nW, N)
    same = windows[:, :, None] == windows[:, None, :]  # (nW, N, N)
    return np.where(same, 0.0, -np.inf).astype(np.float32)


class WindowAttention(nn.Module):
    """Multi-head self-attention inside each window, plus the relative position bias."""

    def __init__(self, dim: int, num_heads: int, window_size: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads, self.window_size = num_heads, window_size
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        table = np.zeros(((2 * window_size - 1) ** 2, num_heads), np.float32)
        self.relative_position_bias_table = nn.Parameter(table)  # one bias per offset and head
        init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        # derived from window_size: rebuilt, not saved
        index = relative_position_index(window_size).reshape(-1)  # (N*N,)
        self.register_buffer("relative_position_index", index, persistent=False)

    def bias(self) -> Tensor:
        """(nh, N, N): the table gathered by offset (an integer-array index: its gradient
        scatter-adds back into the table, each offset collecting from every pair it serves)."""
        n = self.window_size**2
        b = self.relative_position_bias_table[self.relative_position_index]  # (N*N, nh)
        return permute(reshape(b, n, n, self.num_heads), 2, 0, 1)

    def forward(self, x: Tensor, mask: Any = None) -> Tensor:
        """x (B*nW, N, C), mask (nW, N, N) additive or None -> (B*nW, N, C)."""
        bw, n, c = x.shape
        nh = self.num_heads
        q, k, v = (
            transpose(reshape(t, bw, n, nh, c // nh), 1, 2) for t in split(self.qkv(x), c, axis=2)
        )  # 3 x (B*nW, nh, N, hs)
        s = (q @ transpose(k, -2, -1)) * (c // nh) ** -0.5 + self.bias()  # (B*nW, nh, N, N)
        if mask is not None:  # the same mask for every image: add it per window
            nw = mask.shape[0]
            s = reshape(reshape(s, bw // nw, nw, nh, n, n) + mask[:, None], bw, nh, n, n)
        # An explicit softmax: the bias is trained, and scaled_dot_product_attention's mask
        # gets no gradient.
        y = F.softmax(s, axis=-1) @ v  # (B*nW, nh, N, hs)
        y = reshape(transpose(y, 1, 2), bw, n, c)  # (B*nW, N, nh, hs) -> (B*nW, N, C)
        return self.drop(self.proj(y))


class SwinBlock(nn.Module):
    """Pre-LN block: x + (S)W-MSA(norm1(x)), then x + MLP(norm2(x)); shift 0 is W-MSA."""

    def __init__(
        self, dim: int, num_heads: int, window_size: int, shift: int, mlp_ratio: int = 4,
        dropout: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        self.window_size, self.shift = window_size, shift
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads, window_size, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.MLP(dim, mlp_ratio * dim, dropout=dropout)

    def forward(self, x: Tensor, mask: Any = None) -> Tensor:
        """x (B, h, w, C) -> (B, h, w, C); `mask` is the stage's shifted-window mask."""
        _, h, w, _ = x.shape
        m, s = self.window_size, self.shift
        y = self.norm1(x)
        if s:  # move the grid up-left by s: the fixed windows now straddle the old borders
            y = roll(y, (-s, -s), (1, 2))
        y = self.attn(window_partition(y, m), mask if s else None)  # (B*nW, N, C)
        y = window_reverse(y, m, h, w)  # (B, h, w, C)
        if s:
            y = roll(y, (s, s), (1, 2))
        x = x + y
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    """(B, h, w, C) -> (B, h/2, w/2, 2C): each 2x2 neighbourhood concatenated (4C), normalised,
    projected to 2C: half the resolution, twice the width, like a strided conv."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        b, h, w, c = x.shape
        x = reshape(x, b, h // 2, 2, w // 2, 2, c)  # (B, h/2, dy, w/2, dx, C)
        # (B, h/2, w/2, dx, dy, C): the paper's order, (0,0), (1,0), (0,1), (1,1) as (dy, dx)
        x = permute(x, 0, 1, 3, 4, 2, 5)
        return self.reduction(self.norm(reshape(x, b, h // 2, w // 2, 4 * c)))


class SwinStage(nn.Module):
    """`depth` blocks (even ones W-MSA, odd ones SW-MSA), then patch merging unless last."""

    def __init__(self, config: SwinConfig, i: int) -> None:
        super().__init__()
        grid, window, shift = config.stages()[i]
        dim = config.embed_dim * 2**i
        self.blocks = nn.ModuleList(
            SwinBlock(dim, config.num_heads[i], window, shift if j % 2 else 0, config.mlp_ratio,
                      config.dropout)
            for j in range(config.depths[i])
        )  # fmt: skip
        # one mask for the stage's SW-MSA blocks: it depends on the grid, not on the data
        mask = shifted_window_mask(grid, grid, window, shift) if shift else None
        self.register_buffer("attn_mask", mask, persistent=False)
        last = i == len(config.depths) - 1
        self.downsample = None if last else PatchMerging(dim)

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x, self.attn_mask)
        return x if self.downsample is None else self.downsample(x)


class SwinTransformer(nn.Module):
    def __init__(self, config: SwinConfig) -> None:
        super().__init__()
        self.config = config
        c, p = config.embed_dim, config.patch_size
        self.patch_embed = nn.Conv2d(config.in_channels, c, kernel_size=p, stride=p)
        self.patch_norm = nn.LayerNorm(c)
        self.drop = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(SwinStage(config, i) for i in range(len(config.depths)))
        last = c * 2 ** (len(config.depths) - 1)
        self.norm = nn.LayerNorm(last)
        self.head = nn.Linear(last, config.num_classes)

    def features(self, images: Any) -> Tensor:
        """images (B, C_in, H, W) -> the last stage's map (B, h, w, C), normalised. A host
        array moves to the model's device here; a Tensor is used where it is."""
        cfg = self.config
        x = images if isinstance(images, Tensor) else (
            Tensor(to_device_of(images, self.patch_embed.weight)))  # fmt: skip
        if x.ndim != 4 or x.shape[1:] != (cfg.in_channels, cfg.image_size, cfg.image_size):
            raise ValueError(
                f"SwinTransformer: expected images (B, {cfg.in_channels}, {cfg.image_size}, "
                f"{cfg.image_size}), got {x.shape}"
            )
        x = permute(self.patch_embed(x), 0, 2, 3, 1)  # (B, C, h, w) -> (B, h, w, C)
        x = self.drop(self.patch_norm(x))
        for stage in self.layers:
            x = stage(x)  # (B, h, w, C) -> (B, h/2, w/2, 2C), the last stage keeps its size
        return self.norm(x)

    def forward(self, images: Any, targets: Any = None) -> tuple[Tensor, Tensor | None]:
        """images (B, C_in, H, W) -> logits (B, K), and the cross-entropy with targets (B,)."""
        logits = self.head(self.features(images).mean(axis=(1, 2)))  # average pool -> (B, K)
        loss = None if targets is None else F.cross_entropy(logits, array_of(targets))
        return logits, loss
