"""The settings of `tinyformer train seq2seq`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.data.dates import DateTask
from tinyformer.models.seq2seq import Seq2SeqConfig
from tinyformer.train.args import (
    BELOW_ONE,
    COUNT,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    Range,
    RunFlags,
    check_ranges,
    flag,
)

__all__ = ["TrainSeq2SeqConfig"]


@dataclass
class TrainSeq2SeqConfig(RunFlags):
    n_encoder_layers: int = flag(2, "encoder blocks")
    n_decoder_layers: int = flag(2, "decoder layers")
    n_head: int = flag(4, "attention heads")
    d_model: int = flag(128, "width")
    d_ff: int = flag(512, "MLP hidden width")
    dropout: float = flag(0.1, "dropout", valid=BELOW_ONE)
    positions: str = flag("sinusoidal", "position encoding", ["sinusoidal", "learned"])
    norm: str = flag("post", "LayerNorm placement: post (the paper's) or pre", ["post", "pre"])
    label_smoothing: float = flag(0.1, "label smoothing of the cross-entropy", valid=FRACTION)
    iters: int | None = flag(
        None, "training steps: 2000, or on --resume the saved run's", valid=COUNT
    )
    batch_size: int = flag(64, "sentence pairs per batch", valid=COUNT)
    lr: float = flag(1e-3, "peak learning rate", valid=POSITIVE)
    warmup: int = flag(200, "linear warm-up steps", valid=NONNEGATIVE)
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    grad_clip: float = flag(
        1.0, "clip the global gradient norm to this (0: off)", valid=NONNEGATIVE
    )
    beam: int = flag(4, "beam width for the final evaluation", valid=COUNT)
    test_dates: int = flag(
        1000, "held-out dates (never seen in training, in any format)",
        valid=Range(1, DateTask.DATES - 1),
    )  # fmt: skip
    eval_interval: int = flag(250, "evaluate and checkpoint every this many steps", valid=COUNT)
    seed: int = flag(1337, "seed for initialisation, data and dropout", valid=NONNEGATIVE)
    out_dir: str = flag("out/seq2seq", "folder for ckpt.npz, log.json, loss.png, alignment.png")

    def __post_init__(self) -> None:
        check_ranges(self)

    def model_config(self) -> Seq2SeqConfig:
        return Seq2SeqConfig(
            len(DateTask.SOURCE), len(DateTask.TARGET), max_len=DateTask.MAX_SOURCE,
            n_encoder_layers=self.n_encoder_layers, n_decoder_layers=self.n_decoder_layers,
            n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff, dropout=self.dropout,
            positions=self.positions, norm=self.norm,
        )  # fmt: skip
