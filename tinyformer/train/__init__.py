"""Training commands: the loops, checkpoints and reports behind `tinyformer train ...`."""

from tinyformer.train.gpt import TrainGPTConfig, load_model, sample, train_gpt
from tinyformer.train.loop import NonFiniteLoss, RunStopped
from tinyformer.train.rundir import RunFolderBusy

__all__ = [
    "NonFiniteLoss", "RunFolderBusy", "RunStopped", "TrainGPTConfig", "load_model", "sample",
    "train_gpt",
]  # fmt: skip
