"""The settings of `tinyformer train mae`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.models.mae import MAEConfig
from tinyformer.train.args import (
    COUNT,
    NONNEGATIVE,
    POSITIVE,
    PROPER_FRACTION,
    RunFlags,
    check_ranges,
    flag,
)

__all__ = ["TrainMAEConfig"]


@dataclass
class TrainMAEConfig(RunFlags):
    data: str = flag("digits", "images: digits (embedded, 8x8) or mnist (downloaded once)",
                     ["digits", "mnist"])  # fmt: skip
    data_dir: str | None = flag(None, "folder with the MNIST IDX files (else: download once)")
    patch_size: int | None = flag(None, "patch side in pixels (default: 2 for 8px, 4 for 28px)")
    mask_ratio: float = flag(
        0.75, "share of patches hidden from the encoder", valid=PROPER_FRACTION
    )
    n_layer: int = flag(4, "encoder blocks")
    n_head: int = flag(4, "encoder attention heads")
    n_embd: int = flag(64, "encoder width")
    decoder_n_layer: int = flag(2, "decoder blocks")
    decoder_n_head: int = flag(4, "decoder attention heads")
    decoder_n_embd: int = flag(32, "decoder width")
    norm_pix_loss: bool = flag(True, "targets: each patch normalised by its mean and variance")
    probe: bool = flag(False, "linear probe: train only the classifier, encoder frozen")
    pretrain_iters: int = flag(3000, "masked-autoencoder steps", valid=COUNT)
    finetune_iters: int = flag(500, "classifier steps (each of the two runs)", valid=COUNT)
    batch_size: int = flag(64, "images per batch", valid=COUNT)
    lr: float = flag(1.5e-3, "peak learning rate of pretraining", valid=POSITIVE)
    finetune_lr: float = flag(1e-3, "peak learning rate of the classifiers", valid=POSITIVE)
    warmup: int = flag(
        100, "linear warm-up steps (classifiers: a tenth of theirs)", valid=NONNEGATIVE
    )
    weight_decay: float = flag(0.05, "AdamW weight decay on weight matrices", valid=NONNEGATIVE)
    augment_shift: int = flag(
        1, "shift training images by up to this many pixels", valid=NONNEGATIVE
    )
    val_fraction: float = flag(0.2, "held-out share of digits (MNIST: its test split)",
                               valid=PROPER_FRACTION)  # fmt: skip
    eval_interval: int = flag(
        250, "evaluate and checkpoint every this many pretraining steps", valid=COUNT
    )
    seed: int = flag(0, "seed for the split, initialisation, masks and batches", valid=NONNEGATIVE)
    out_dir: str = flag("out/mae", "folder for the three runs and the figures")
    resume: bool = flag(False, "continue an interrupted pretraining in --out-dir")
    progress: bool = flag(True, "show progress bars")

    def __post_init__(self) -> None:
        check_ranges(self)

    def model_config(self, image_size: int, channels: int) -> MAEConfig:
        patch = (2 if image_size <= 16 else 4) if self.patch_size is None else self.patch_size
        return MAEConfig(
            image_size, patch, channels, self.mask_ratio, self.n_layer, self.n_head, self.n_embd,
            self.decoder_n_layer, self.decoder_n_head, self.decoder_n_embd,
            norm_pix_loss=self.norm_pix_loss,
        )  # fmt: skip
