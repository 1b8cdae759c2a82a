"""The settings of `tinyformer train siren`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.models.siren import MODELS, SirenConfig
from tinyformer.train.args import COUNT, NONNEGATIVE, POSITIVE, Range, RunFlags, check_ranges, flag
from tinyformer.train.memory import check_data_fits, sequence_floor

__all__ = ["DEFAULT_ITERS", "TrainSirenConfig"]

DEFAULT_ITERS = 300


@dataclass
class TrainSirenConfig(RunFlags):
    image: str | None = flag(None, "an image file to fit (PNG; colour is made gray) "
                             "(default: a crop of scikit-learn's china.jpg)")  # fmt: skip
    size: int = flag(128, "fit the image at size x size pixels", valid=Range(2))
    models: str = flag("siren,relu,fourier", "comma-separated networks to fit, in this order")
    hidden: int = flag(128, "width of every hidden layer (all three networks)", valid=COUNT)
    n_layers: int = flag(3, "hidden layers (all three networks)", valid=COUNT)
    w0: float = flag(30.0, "SIREN's frequency factor w0 in sin(w0 (W x + b))", valid=POSITIVE)
    sigma: float = flag(
        10.0, "std of the random Fourier frequencies B, in cycles per unit of x (the image "
        "spans 2 units)", valid=POSITIVE,
    )  # fmt: skip
    iters: int | None = flag(
        None, f"steps per network: {DEFAULT_ITERS}, or on --resume the saved run's", valid=COUNT
    )
    # The paper's 1e-4 is tuned for many thousand GPU steps; with a few hundred it reaches only
    # ~24 dB here (docs/siren.md has the sweep).
    lr: float = flag(1e-3, "Adam learning rate of SIREN (the paper: 1e-4)", valid=POSITIVE)
    baseline_lr: float = flag(
        1e-3, "Adam learning rate of the ReLU and Fourier-feature MLPs", valid=POSITIVE
    )
    grad_clip: float = flag(
        0.0, "clip the global gradient norm to this (0: off)", valid=NONNEGATIVE
    )
    eval_interval: int = flag(100, "checkpoint every this many steps", valid=COUNT)
    seed: int = flag(0, "seed of the initialisations (the same for every network)",
                     valid=NONNEGATIVE)  # fmt: skip
    out_dir: str = flag("out/siren", "folder for the three runs, psnr.png, fits.png, results.json")
    resume: bool = flag(False, "continue the runs saved in --out-dir")
    progress: bool = flag(True, "show progress bars")

    def __post_init__(self) -> None:
        check_ranges(self)
        names = self.model_names()
        unknown = [n for n in names if n not in MODELS]
        if unknown or not names or len(set(names)) != len(names):
            raise ValueError(f"--models must name each of {', '.join(MODELS)} at most once, "
                             f"got {self.models!r}")  # fmt: skip
        # full batch: every pixel through every layer at once (each layer's input and output
        # kept for backward), before any step can run
        floor = sequence_floor(self.size**2, 2 * self.n_layers * self.hidden + 3)
        check_data_fits(f"--size {self.size} --hidden {self.hidden} --n-layers {self.n_layers}",
                        floor, "one full-batch step's activations")  # fmt: skip

    def model_names(self) -> list[str]:
        return [n.strip() for n in self.models.split(",") if n.strip()]

    def model_config(self) -> SirenConfig:
        return SirenConfig(hidden=self.hidden, n_layers=self.n_layers, w0=self.w0,
                           sigma=self.sigma)  # fmt: skip
