"""Tensor parallelism (Megatron-LM, Shoeybi et al., 2019): each rank holds a slice of every
weight matrix of the blocks, and the ranks compute one layer together.

Shapes: B batch, T time, C width, nh heads, N ranks; every rank holds nh/N heads and 4C/N of
the MLP's hidden units.

An MLP, x -> GELU(x A) B, splits with one all-reduce in the forward and one in the backward:
- A by columns (`ColumnParallelLinear`): rank r computes GELU(x A_r), its own hidden units; no
  communication, because GELU acts on each unit alone;
- B by rows (`RowParallelLinear`): rank r computes GELU(x A_r) B_r, a partial sum of the
  output; an all-reduce adds the partial sums.
Attention splits the same way: c_attn by columns, so each rank computes its own heads'
queries, keys and values and attends with them, and c_proj by rows.

Megatron's two operators carry the communication, as autograd Functions:
- f = `copy_to_parallel`: identity forward; all-reduce backward (x feeds every rank's slice,
  so its gradient is the sum of the slices' gradients);
- g = `reduce_from_parallel`: all-reduce forward (the partial sums); identity backward (each
  rank's partial sum contributes to the output with weight 1).
Everything else (embeddings, LayerNorms, the LM head) is replicated: its inputs and gradients
are the same on every rank, so its gradients need no communication.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.autograd import Function
from tinyformer.distributed import process_group as pg
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.ops import reshape, split, transpose
from tinyformer.tensor import Tensor

__all__ = [
    "ColumnParallelLinear", "RowParallelLinear", "TensorParallelGPT", "copy_to_parallel",
    "reduce_from_parallel",
]  # fmt: skip


def _all_reduce(a: Any) -> Any:
    out = backend.get_array_module(a).array(a, copy=True)
    pg.all_reduce(out)
    return out


class CopyToParallel(Function):
    """f: y = x; gx = sum over ranks of gy."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, gy):
        return _all_reduce(gy)


class ReduceFromParallel(Function):
    """g: y = sum over ranks of x; gx = gy."""

    @staticmethod
    def forward(ctx, x):
        return _all_reduce(x)

    @staticmethod
    def backward(ctx, gy):
        return gy


def copy_to_parallel(x: Tensor) -> Tensor:
    return CopyToParallel.apply(x)


def reduce_from_parallel(x: Tensor) -> Tensor:
    return ReduceFromParallel.apply(x)


def _share(n: int, what: str, world: int) -> int:
    if n % world:
        raise ValueError(f"tensor parallel: {what} {n} does not divide over {world} ranks")
    return n // world


class ColumnParallelLinear(nn.Module):
    """y_r = f(x) W_r^T + b_r: rank r's out_features/N outputs. weight (out/N, in)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        local = _share(out_features, "out_features", pg.get_world_size())
        self.weight = nn.Parameter(np.zeros((local, in_features), np.float32))
        self.bias = nn.Parameter(np.zeros(local, np.float32)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(copy_to_parallel(x), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """y = g(x_r W_r^T) + b, from rank r's in_features/N inputs. weight (out, in/N)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        local = _share(in_features, "in_features", pg.get_world_size())
        self.weight = nn.Parameter(np.zeros((out_features, local), np.float32))
        self.bias = nn.Parameter(np.zeros(out_features, np.float32)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = reduce_from_parallel(F.linear(x, self.weight))
        return y if self.bias is None else y + self.bias


class ParallelAttention(nn.Module):
    def __init__(self, c: int, n_head: int, bias: bool) -> None:
        super().__init__()
        self.local_heads = _share(n_head, "n_head", pg.get_world_size())
        self.c_attn = ColumnParallelLinear(c, 3 * c, bias)  # this rank's heads' q, k, v
        self.c_proj = RowParallelLinear(c, c, bias)

    def forward(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        q, k, v = split(self.c_attn(x), self.c_attn.weight.shape[0] // 3, axis=2)  # (B, T, C/N)

        def heads(a: Tensor) -> Tensor:  # (B, T, C/N) -> (B, nh/N, T, hs)
            return transpose(reshape(a, b, t, self.local_heads, -1), 1, 2)

        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        return self.c_proj(reshape(transpose(y, 1, 2), b, t, -1))  # (B, T, C)


class ParallelBlock(nn.Module):
    def __init__(self, c: int, n_head: int, bias: bool) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, bias=bias)
        self.attn = ParallelAttention(c, n_head, bias)
        self.ln_2 = nn.LayerNorm(c, bias=bias)
        self.c_fc = ColumnParallelLinear(c, 4 * c, bias)
        self.gelu = nn.GELU()
        self.c_proj = RowParallelLinear(4 * c, c, bias)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))


class TensorParallelGPT(nn.Module):
    """models.gpt.GPT with its blocks split over the ranks (no dropout). `from_gpt` slices a
    one-process GPT's weights, so the two can be compared: same loss, and each rank's gradients
    are its slices of the one-process gradients."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if config.dropout:
            raise ValueError("TensorParallelGPT: dropout is not supported (masks would differ)")
        c = config.n_embd
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, c)
        self.wpe = nn.Embedding(config.block_size, c)
        self.h = nn.ModuleList(
            ParallelBlock(c, config.n_head, config.bias) for _ in range(config.n_layer)
        )
        self.ln_f = nn.LayerNorm(c, bias=config.bias)

    def forward(self, idx: Any, targets: Any) -> tuple[Tensor, Tensor]:
        b, t = idx.shape
        x = self.wte(idx) + self.wpe(np.arange(t))  # (B, T, C), the same on every rank
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # (B, T, V), tied head
        v = self.config.vocab_size
        return logits, F.cross_entropy(reshape(logits, b * t, v), np.reshape(targets, b * t))

    @classmethod
    def from_gpt(cls, gpt: GPT) -> TensorParallelGPT:
        model = cls(gpt.config).to(dtype=gpt.wte.weight.dtype)
        for name, p in model.named_parameters():
            p.data[...] = shard_of(name, gpt.state_dict()[_gpt_name(name)].numpy())
        return model


def _gpt_name(name: str) -> str:
    """This model's parameter name -> GPT's (its MLP sits inside `mlp`)."""
    for part in ("c_fc", "c_proj"):
        if name.startswith("h.") and f".{part}." in name and ".attn." not in name:
            return name.replace(f".{part}.", f".mlp.{part}.")
    return name


def shard_of(name: str, full: np.ndarray) -> np.ndarray:
    """Rank r's slice of a one-process GPT weight, for the parameter `name` of this model."""
    rank, world = pg.get_rank(), pg.get_world_size()
    if ".attn.c_attn." in name:  # rows [q | k | v], each split by heads
        return np.concatenate([np.split(part, world)[rank] for part in np.split(full, 3)])
    if name.endswith("c_fc.weight") or name.endswith("c_fc.bias"):
        return np.split(full, world)[rank]
    if name.endswith("c_proj.weight"):  # row-parallel: split the input columns
        return np.split(full, world, axis=1)[rank]
    return full  # replicated (c_proj's bias is added once, after the reduction)
