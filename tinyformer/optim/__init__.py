"""Optimizers and learning-rate schedules with PyTorch's names and update rules."""

from tinyformer.nn.utils.clip import clip_grad_norm_
from tinyformer.optim.adagrad import Adagrad
from tinyformer.optim.adam import Adam, AdamW
from tinyformer.optim.groups import weight_decay_groups
from tinyformer.optim.lr_scheduler import (
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
    WarmupCosineLR,
    warmup_cosine,
)
from tinyformer.optim.optimizer import Optimizer
from tinyformer.optim.rmsprop import RMSprop
from tinyformer.optim.sgd import SGD

__all__ = [
    "Adagrad", "Adam", "AdamW", "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR",
    "LinearLR", "MultiStepLR", "OneCycleLR", "Optimizer", "RMSprop", "ReduceLROnPlateau", "SGD",
    "SequentialLR", "StepLR", "WarmupCosineLR", "clip_grad_norm_", "warmup_cosine",
    "weight_decay_groups",
]  # fmt: skip
