"""The settings of `tinyformer train vilbert`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.data.scenes import (
    VOCAB,
)
from tinyformer.models.vilbert import (
    ViLBERTConfig,
)
from tinyformer.train.args import (
    BELOW_ONE,
    COUNT,
    EXAMPLES,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    PROPER_FRACTION,
    RunFlags,
    check_ranges,
    flag,
)
from tinyformer.train.memory import check_data_fits, weights_floor

__all__ = ["TrainViLBERTConfig"]


@dataclass
class TrainViLBERTConfig(RunFlags):
    n_text_layer: int = flag(1, "text-only blocks before the co-attention", valid=NONNEGATIVE)
    n_co_layer: int = flag(2, "co-attention layers (each followed by a block per stream)")
    n_head: int = flag(4, "attention heads")
    d_text: int = flag(64, "width of the text stream")
    d_image: int = flag(64, "width of the image stream")
    dropout: float = flag(0.1, "dropout", valid=BELOW_ONE)
    word_mask: float = flag(0.15, "share of caption words masked (at least one)",
                            valid=PROPER_FRACTION)  # fmt: skip
    region_mask: float = flag(0.3, "chance that a region is masked", valid=FRACTION)
    pretrain_iters: int = flag(1500, "pretraining steps", valid=COUNT)
    finetune_iters: int = flag(300, "question-answering steps (each of the two runs)", valid=COUNT)
    finetune_examples: int = flag(
        100, "labelled question-answer scenes for fine-tuning", valid=EXAMPLES
    )
    test_scenes: int = flag(1000, "held-out scenes every evaluation reads", valid=EXAMPLES)
    batch_size: int = flag(32, "scenes per batch", valid=COUNT)
    lr: float = flag(1e-3, "peak learning rate of pretraining", valid=POSITIVE)
    finetune_lr: float = flag(5e-4, "peak learning rate of fine-tuning", valid=POSITIVE)
    warmup: int = flag(100, "linear warm-up steps (fine-tuning: a tenth of its steps)",
                       valid=NONNEGATIVE)  # fmt: skip
    weight_decay: float = flag(0.01, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    val_fraction: float = flag(0.2, "held-out share of the digits", valid=PROPER_FRACTION)
    eval_interval: int = flag(
        250, "evaluate and checkpoint every this many pretraining steps", valid=COUNT
    )
    seed: int = flag(0, "seed for the split, initialisation, scenes and batches", valid=NONNEGATIVE)
    out_dir: str = flag("out/vilbert", "folder for the three runs and the figures")
    resume: bool = flag(False, "continue an interrupted pretraining in --out-dir")
    progress: bool = flag(True, "show progress bars")

    def __post_init__(self) -> None:
        check_ranges(self)
        # the weights alone, before anything is allocated: each co-attention layer is followed
        # by a block per stream
        width, blocks = max(self.d_text, self.d_image), self.n_text_layer + 3 * self.n_co_layer
        sizes = f"--d-text {self.d_text} --d-image {self.d_image} --n-co-layer {self.n_co_layer}"
        check_data_fits(sizes, weights_floor(blocks, width, 4 * width), "the model's weights")
        self.model_config()  # its checks (widths divisible by heads, ...) before any work

    def model_config(self) -> ViLBERTConfig:
        return ViLBERTConfig(
            vocab_size=len(VOCAB), n_text_layer=self.n_text_layer, n_co_layer=self.n_co_layer,
            n_head=self.n_head, d_text=self.d_text, d_image=self.d_image, dropout=self.dropout,
        )  # fmt: skip
