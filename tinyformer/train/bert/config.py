"""The settings of `tinyformer train bert`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.models.bert import BertConfig
from tinyformer.train.args import (
    BELOW_ONE,
    COUNT,
    NONNEGATIVE,
    POSITIVE,
    Range,
    RunFlags,
    check_ranges,
    flag,
)

__all__ = ["TrainBertConfig"]


@dataclass
class TrainBertConfig(RunFlags):
    data: str = flag("pydoc", "corpus: pydoc (embedded), tinyshakespeare, or a text file path")
    vocab_size: int = flag(4000, "WordPiece vocabulary size (built from the corpus)")
    seq_len: int = flag(64, "tokens per sequence, [CLS] and [SEP] included", valid=Range(3))
    n_layer: int = flag(2, "encoder blocks")
    n_head: int = flag(4, "attention heads")
    d_model: int = flag(128, "width")
    d_ff: int = flag(512, "MLP hidden width")
    norm: str = flag("post", "LayerNorm placement: post (BERT) or pre", ["post", "pre"])
    dropout: float = flag(0.1, "dropout in the encoder", valid=BELOW_ONE)
    pretrain_iters: int = flag(2000, "masked-LM steps", valid=COUNT)
    finetune_iters: int = flag(300, "fine-tuning steps (each of the two runs)", valid=COUNT)
    batch_size: int = flag(32, "sequences per batch", valid=COUNT)
    lr: float = flag(1e-3, "peak learning rate of pretraining", valid=POSITIVE)
    finetune_lr: float = flag(3e-4, "peak learning rate of fine-tuning (both runs)", valid=POSITIVE)
    warmup: int = flag(
        100, "linear warm-up steps (fine-tuning: a tenth of its steps)", valid=NONNEGATIVE
    )
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    held_out: int = flag(
        400, "sentences kept out of pretraining and fine-tuning, for testing", valid=COUNT
    )
    eval_interval: int = flag(
        250, "evaluate and checkpoint every this many pretraining steps", valid=COUNT
    )
    nsp: bool = flag(
        False, "pretrain on sentence pairs with next-sentence prediction as well as masked LM"
    )
    seed: int = flag(1337, "seed for initialisation, data and dropout", valid=NONNEGATIVE)
    out_dir: str = flag("out/bert", "folder for the three runs, compare.png and results.json")
    resume: bool = flag(False, "continue an interrupted pretraining in --out-dir")
    progress: bool = flag(True, "show progress bars")

    def __post_init__(self) -> None:
        check_ranges(self)

    def model_config(self, vocab_size: int) -> BertConfig:
        return BertConfig(
            vocab_size=vocab_size, max_position=self.seq_len, n_layer=self.n_layer,
            n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff, dropout=self.dropout,
            norm=self.norm,
        )  # fmt: skip
