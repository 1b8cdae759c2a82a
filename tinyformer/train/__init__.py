"""Training commands: the loops, checkpoints and reports behind `tinyformer train ...`."""

from tinyformer.train.gpt import TrainGPTConfig, load_model, sample, train_gpt

__all__ = ["TrainGPTConfig", "load_model", "sample", "train_gpt"]
