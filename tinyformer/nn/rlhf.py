"""The losses of learning from human preferences, built from differentiable ops, and GAE.

References: Christiano et al., "Deep RL from Human Preferences" (2017) and Ouyang et al.,
"Training language models to follow instructions with human feedback" (InstructGPT, 2022) for
the reward model and PPO; Schulman et al., "Proximal Policy Optimization Algorithms" (2017) and
"High-Dimensional Continuous Control Using Generalized Advantage Estimation" (2016); Rafailov
et al., "Direct Preference Optimization" (2023).

Shapes: B pairs or sequences, L completion tokens. Every loss is a mean, so that its scale does
not depend on the batch size. No new op is needed: each loss is a few existing ops, whose
backwards autograd chains (tests/test_rlhf.py gradchecks every loss in float64 all the same).

    bradley_terry_loss  -mean log sigmoid(r_chosen - r_rejected)
    dpo_loss            -mean log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))
    ppo_clip_loss       -mean min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)
    value_loss          mean 0.5 * max((V - R)^2, (V_clipped - R)^2)
    gae                 A_t = sum_l (gamma lambda)^l delta_(t+l), on arrays (no gradient)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.ops import (
    binary_cross_entropy_with_logits,
    clip,
    exp,
    maximum,
    mean,
    minimum,
)
from tinyformer.tensor import Tensor

__all__ = ["bradley_terry_loss", "dpo_loss", "gae", "ppo_clip_loss", "value_loss"]


def _log_sigmoid_loss(logits: Tensor) -> Tensor:
    """-mean log sigmoid(logits), as the cross-entropy of label 1: stable for any logit
    (log sigmoid(-40) underflows to -inf when written as log(sigmoid(x)))."""
    ones = backend.get_array_module(logits.data).ones_like(logits.data)
    return binary_cross_entropy_with_logits(logits, ones)


def bradley_terry_loss(chosen: Tensor, rejected: Tensor) -> Tensor:
    """Reward-model loss on pairs: P(chosen preferred) = sigmoid(r_chosen - r_rejected)
    (Bradley & Terry, 1952); the loss is its mean negative log-likelihood.

    Shapes: chosen (B,), rejected (B,) scalar rewards -> loss ().
    Gradient: d/dr_chosen = -(1 - sigmoid(d)) / B with d = r_chosen - r_rejected, the negative
    of d/dr_rejected: only the difference of the rewards is learned, never their level.
    """
    return _log_sigmoid_loss(chosen - rejected)


def dpo_loss(
    policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Any, ref_rejected: Any, beta: float
) -> Tensor:
    """Direct Preference Optimization: the Bradley-Terry loss with the implicit reward
    r = beta * (log pi(y|x) - log pi_ref(y|x)), so that no reward model and no sampling is
    needed. The log-probabilities are of whole completions (summed over their tokens).

    Shapes: each argument (B,) -> loss (). The reference terms are data (no gradient).
    """
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)  # (B,)
    return _log_sigmoid_loss(margin * beta)


def ppo_clip_loss(logp: Tensor, old_logp: Any, advantages: Any, clip_eps: float = 0.2) -> Tensor:
    """PPO's clipped surrogate, negated to be minimised. The ratio pi/pi_old is clipped to
    [1 - eps, 1 + eps] and the smaller objective taken, so a step gains nothing from moving a
    token's probability further than eps from where the samples were drawn.

    Shapes: logp (B, L) log-probs of the sampled tokens under the policy being trained;
    old_logp, advantages (B, L) data from the rollout -> loss ().
    """
    ratio = exp(logp - old_logp)  # (B, L), 1 at the first epoch's first step
    unclipped = ratio * advantages
    clipped = clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    return -mean(minimum(unclipped, clipped))


def value_loss(
    values: Tensor, old_values: Any, returns: Any, clip_eps: float | None = 0.2
) -> Tensor:
    """The value head's squared error against the GAE returns; with clip_eps, PPO2's clipped
    form: the worse of the new value and the old value moved by at most eps.

    Shapes: values (B, L); old_values, returns (B, L) data from the rollout -> loss ().
    """
    error = (values - returns) ** 2  # (B, L)
    if clip_eps is not None:
        moved = old_values + clip(values - old_values, -clip_eps, clip_eps)
        error = maximum(error, (moved - returns) ** 2)
    return mean(error) * 0.5


def gae(
    rewards: np.ndarray, values: np.ndarray, gamma: float = 1.0, lam: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates and returns, by the backward recursion
    A_t = delta_t + gamma lambda A_(t+1), delta_t = r_t + gamma V_(t+1) - V_t, with V = 0 after
    the last token (the episode ends there).

    Shapes: rewards, values (B, L) -> advantages (B, L), returns = advantages + values (B, L).
    """
    xp = backend.get_array_module(rewards)
    advantages = xp.zeros_like(rewards)
    running = xp.zeros_like(rewards[:, 0])  # (B,) A_(t+1)
    steps = rewards.shape[1]
    for t in reversed(range(steps)):
        next_value = values[:, t + 1] if t + 1 < steps else 0.0
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = delta + gamma * lam * running
        advantages[:, t] = running
    return advantages, advantages + values
