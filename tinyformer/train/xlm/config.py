"""The settings of `tinyformer train xlm`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.models.xlm import XLMConfig
from tinyformer.train.args import (
    BELOW_ONE,
    COUNT,
    EXAMPLES,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    Range,
    RunFlags,
    check_ranges,
    flag,
)
from tinyformer.train.memory import check_data_fits, weights_floor

__all__ = ["TrainXLMConfig"]


@dataclass
class TrainXLMConfig(RunFlags):
    vocab_size: int = flag(360, "BPE vocabulary size (bytes + merges), trained on both languages",
                           valid=Range(256))  # fmt: skip
    sentence_len: int = flag(1, "random numbers per pretraining sentence", valid=COUNT)
    tlm_mask: float = flag(
        0.5, "chance that a token of a translation pair's first sentence is masked (the "
        "translation stays whole)", valid=Range(0, 1, open_low=True),
    )  # fmt: skip
    tlm_switch: float = flag(
        0.2, "share of a translation pair's blanks that hold the translation's word at their "
        "place instead of [MASK] (code-switching)", valid=FRACTION,
    )  # fmt: skip
    n_layer: int = flag(2, "encoder blocks")
    n_head: int = flag(4, "attention heads")
    d_model: int = flag(64, "width")
    d_ff: int = flag(256, "MLP hidden width")
    dropout: float = flag(0.0, "dropout in the encoder", valid=BELOW_ONE)
    pretrain_iters: int = flag(6000, "pretraining steps (each of the two runs)", valid=COUNT)
    finetune_iters: int = flag(600, "fine-tuning steps (each fine-tuning run)", valid=COUNT)
    finetune_seeds: int = flag(3, "fine-tuning runs per encoder, with different seeds",
                               valid=COUNT)  # fmt: skip
    batch_size: int = flag(32, "rows per batch", valid=Range(2))
    lr: float = flag(2e-3, "peak learning rate of pretraining", valid=POSITIVE)
    finetune_lr: float = flag(1e-3, "peak learning rate of fine-tuning", valid=POSITIVE)
    freeze_embeddings: bool = flag(
        True, "fine-tune with the token, position and language embeddings frozen"
    )
    pooling: str = flag("mean", "what the classifier reads: the mean of the last layer's "
                        "vectors, or [CLS]'s", choices=["mean", "cls"])  # fmt: skip
    centre: bool = flag(True, "centre the classifier's input on its language's mean (in "
                        "training the batch's, in testing that of unlabelled pairs)")  # fmt: skip
    warmup: int = flag(50, "linear warm-up steps of pretraining", valid=NONNEGATIVE)
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    train_pairs: int = flag(8000, "labelled number pairs in language A to fine-tune on",
                            valid=EXAMPLES)  # fmt: skip
    test_pairs: int = flag(600, "held-out pairs, tested in A and (zero-shot) in B",
                           valid=EXAMPLES)  # fmt: skip
    near: float = flag(0.25, "share of unequal task pairs that differ by less than 30",
                       valid=FRACTION)  # fmt: skip
    eval_interval: int = flag(500, "evaluate and checkpoint every this many steps", valid=COUNT)
    seed: int = flag(1337, "seed for initialisation, data and dropout", valid=NONNEGATIVE)
    out_dir: str = flag("out/xlm", "folder for the runs, compare.png and results.json")
    resume: bool = flag(False, "continue an interrupted pretraining in --out-dir")
    progress: bool = flag(True, "show progress bars")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.sentence_len > 16:
            raise ValueError(f"--sentence-len must be at most 16, got {self.sentence_len}")
        # the weights alone, before anything is allocated
        sizes = f"--n-layer {self.n_layer} --d-model {self.d_model} --d-ff {self.d_ff}"
        weights = weights_floor(self.n_layer, self.d_model, self.d_ff, self.vocab_size)
        check_data_fits(sizes, weights, "the encoder's weights")

    def model_config(self, vocab_size: int) -> XLMConfig:
        # the longest part of a row: [CLS], sentence_len numbers (at most 4 words each, a word
        # at most 5 BPE pieces, and the commas between), [SEP]; positions restart for the
        # second part
        return XLMConfig(
            vocab_size=vocab_size, n_langs=2, max_position=21 * self.sentence_len + 1,
            n_layer=self.n_layer, n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff,
            dropout=self.dropout,
        )  # fmt: skip
