"""Pipeline parallelism with GPipe's schedule (Huang et al., 2019): the GPT's blocks are cut
into N consecutive stages, one per rank, and the batch into M micro-batches.

Shapes: B batch, m = B/M micro-batch, T time, C width, V vocabulary.

    rank 0: wte + wpe, blocks [0, L/N)        -> sends (m, T, C) activations to rank 1
    ...
    rank N-1: blocks [.., L), ln_f, lm_head    -> the loss of each micro-batch

GPipe runs every micro-batch forward through the stages, then every micro-batch backward in
reverse order: a stage receives the gradient of its output from the next stage and sends the
gradient of its input to the previous one. While stage 0 works on micro-batch 2, stage 1 works
on micro-batch 1; at the start and the end of each phase some stages wait: the "bubble", a
fraction (N - 1) / (M + N - 1) of the step. `Stage.step` records when each piece ran, so the
bubble can be drawn from real timings.

The embedding and the LM head share one weight (GPT ties them), but they live on the first and
last stage: each keeps a copy, and after backward the two gradients are summed between them
(Megatron's "embedding group"), so both copies take the same step.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import nn
from tinyformer.distributed import process_group as pg
from tinyformer.distributed.schedules import gpipe_schedule, stage_order
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.ops import reshape
from tinyformer.tensor import Tensor

__all__ = ["Stage", "stage_blocks"]


def stage_blocks(n_layer: int, rank: int, world: int) -> range:
    """The blocks of stage `rank`: consecutive, as even as they divide."""
    if world > n_layer:
        raise ValueError(f"pipeline: {world} stages need at least {world} blocks, not {n_layer}")
    bounds = np.linspace(0, n_layer, world + 1).round().astype(int)
    return range(bounds[rank], bounds[rank + 1])


class Stage(nn.Module):
    """This rank's part of a GPT (no dropout): `from_gpt` copies it out of a one-process GPT,
    with the same parameter names, so the two can be compared."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.rank, self.world = pg.get_rank(), pg.get_world_size()
        self.first, self.last = self.rank == 0, self.rank == self.world - 1
        self.blocks = stage_blocks(config.n_layer, self.rank, self.world)
        c = config.n_embd
        if self.first:
            self.wte = nn.Embedding(config.vocab_size, c)
            self.wpe = nn.Embedding(config.block_size, c)
        self.h = nn.ModuleDict(
            {str(i): nn.Block(c, config.n_head, config.bias) for i in self.blocks}
        )
        if self.last:
            self.ln_f = nn.LayerNorm(c, bias=config.bias)
            self.lm_head = nn.Linear(c, config.vocab_size, bias=False)
        self.timeline: list[tuple[str, int, float, float]] = []  # (phase, micro-batch, t0, t1)

    @classmethod
    def from_gpt(cls, gpt: GPT) -> Stage:
        stage = cls(gpt.config).to(dtype=gpt.wte.weight.dtype)
        full = gpt.state_dict()
        for name, p in stage.named_parameters():
            source = "wte.weight" if name == "lm_head.weight" else name
            p.data[...] = full[source].numpy()
        return stage

    def _forward(self, x: Any, targets: Any) -> Tensor:
        if self.first:
            t = x.shape[1]
            x = self.wte(x) + self.wpe(np.arange(t))  # (m, T, C)
        for block in self.h.values():
            x = block(x, is_causal=True)
        if not self.last:
            return x
        logits = self.lm_head(self.ln_f(x))  # (m, T, V)
        m, t, v = logits.shape
        return F.cross_entropy(reshape(logits, m * t, v), np.reshape(targets, m * t))

    def step(self, idx: np.ndarray, targets: np.ndarray, micro_batches: int) -> float | None:
        """Forward and backward of the batch idx, targets (B, T) in `micro_batches` pieces, with
        GPipe's schedule; leaves each parameter's gradient of the batch's mean loss in `.grad`.
        Returns the mean loss on the last stage, None on the others."""
        if len(idx) % micro_batches:
            raise ValueError(
                f"pipeline: a batch of {len(idx)} does not split into {micro_batches} micro-batches"
            )
        xs, ys = np.split(idx, micro_batches), np.split(targets, micro_batches)
        m, t = xs[0].shape
        shape = (m, t, self.config.n_embd)
        dtype = next(iter(self.parameters())).dtype
        self.timeline = []
        inputs, outputs, losses = {}, {}, []
        for phase, i in stage_order(gpipe_schedule(self.world, micro_batches), self.rank):
            if phase == "forward":
                inputs[i], outputs[i] = self._forward_one(xs[i], ys[i], i, shape, dtype)
                if self.last:
                    outputs[i] = outputs[i] / micro_batches  # the batch's mean of the means
                    losses.append(outputs[i].item())
            else:
                self._backward_one(inputs.pop(i), outputs.pop(i), i, shape, dtype)
        self._sum_tied_gradients()
        return float(sum(losses)) if self.last else None

    def _forward_one(self, x: Any, y: Any, i: int, shape: tuple, dtype: Any) -> tuple:
        start = time.perf_counter()
        if not self.first:
            x = Tensor(np.empty(shape, dtype))
            pg.recv(x, self.rank - 1)
            x.requires_grad_()
            start = time.perf_counter()  # waiting is the bubble, not work
        out = self._forward(x, y)
        if not self.last:
            pg.send(out, self.rank + 1)
        self.timeline.append(("forward", i, start, time.perf_counter()))
        return x, out

    def _backward_one(self, x: Any, out: Tensor, i: int, shape: tuple, dtype: Any) -> None:
        start = time.perf_counter()
        if self.last:
            out.backward()
        else:
            g = np.empty(shape, dtype)
            pg.recv(g, self.rank + 1)
            start = time.perf_counter()
            out.backward(g)
        if not self.first:
            pg.send(x.grad, self.rank - 1)
        self.timeline.append(("backward", i, start, time.perf_counter()))

    def _sum_tied_gradients(self) -> None:
        """wte on the first stage and lm_head on the last are one weight: add their gradients
        (every rank joins the all-reduce; the middle stages add zeros)."""
        v, c = self.config.vocab_size, self.config.n_embd
        dtype = next(iter(self.parameters())).dtype
        if self.world == 1:
            total = self.wte.weight.grad + self.lm_head.weight.grad
            self.wte.weight.grad = total
            self.lm_head.weight.grad = total.copy()
            return
        g = np.zeros((v, c), dtype)
        for tied in (self._tied("wte"), self._tied("lm_head")):
            if tied is not None and tied.grad is not None:
                g += tied.grad
        pg.all_reduce(g)
        for tied in (self._tied("wte"), self._tied("lm_head")):
            if tied is not None:
                tied.grad = g.copy()

    def _tied(self, module: str) -> Any:
        return getattr(self, module).weight if module in self._modules else None
