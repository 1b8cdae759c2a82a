"""Step 3 of `tinyformer train rlhf`: PPO against the reward model, and how policies are measured.

One iteration (Ouyang et al. 2022; Ziegler et al. 2019, "Fine-Tuning Language Models from
Human Preferences"):

1. Rollout: sample a completion for each of `--rollout` prompts from the policy.
2. Score, without gradients: the policy's log-probabilities and values of the sampled tokens,
   the SFT policy's log-probabilities, the reward model's score of each whole sequence.
3. Rewards per token: -kl_coef * (log pi - log pi_SFT) at every token, plus the score at the
   last one. GAE (gamma 1) turns them into advantages (whitened) and value targets.
4. `--ppo-epochs` passes over the rollout in minibatches: the clipped surrogate plus
   vf_coef times the value loss, one AdamW step per minibatch.

The log has, per iteration, the reward model's mean score, the mean KL from the SFT policy
(summed over a completion's tokens) and the labeler's true mean score of the rollout.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.checkpoint import save_checkpoint
from tinyformer.data import Tokenizer
from tinyformer.data.labeler import labeler_score
from tinyformer.fileio import save_json
from tinyformer.models.gpt import GPT
from tinyformer.models.rlhf import HeadConfig, PolicyWithValue, RewardModel, completion_logprobs
from tinyformer.nn.rlhf import gae, ppo_clip_loss, value_loss
from tinyformer.optim import AdamW, clip_grad_norm_
from tinyformer.train.rlhf_data import measure, prompt_ids, sample_completions
from tinyformer.train.rlhf_report import plot_ppo

if TYPE_CHECKING:  # for annotations only: train/rlhf.py imports this module
    from tinyformer.train.rlhf import TrainRLHFConfig

__all__ = ["ppo", "save_policy"]


def save_policy(folder: Path, model: GPT, tokenizer: Tokenizer, log: dict[str, Any]) -> None:
    """The policy as a GPT run checkpoint (so `tinyformer sample --ckpt` reads it) and its log."""
    arrays = {f"model/{k}": backend.host_copy(v.data) for k, v in model.state_dict().items()}
    meta = {"model_config": dataclasses.asdict(model.config), "tokenizer": tokenizer.to_dict()}
    save_checkpoint(folder / "ckpt.npz", arrays, meta)  # the log is in log.json
    save_json(folder / "log.json", log)


@tf.no_grad()
def _rollout(cfg: TrainRLHFConfig, model: PolicyWithValue, ref: GPT, rm: RewardModel,
             seqs: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """What one rollout's update needs, as arrays on the model's device: log-probs, values,
    advantages and returns (B, L), and the scores and KL for the log."""
    p, t = cfg.prompt_len, seqs.shape[1]
    model.eval()
    logits, values = model(seqs)
    logp = completion_logprobs(logits, seqs, p).data  # (B, L)
    old_values = values.data[:, p - 1 : t - 1]  # (B, L): V of the state each token is drawn in
    ref_logp = completion_logprobs(ref(seqs)[0], seqs, p).data  # (B, L)
    score = rm(seqs).data  # (B,)
    kl = logp - ref_logp  # (B, L): the per-token sample estimate of KL
    rewards = -cfg.kl_coef * kl
    rewards[:, -1] += score
    advantages, returns = gae(rewards, old_values, 1.0, cfg.lam)
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    model.train()
    return {"logp": logp, "values": old_values, "advantages": advantages, "returns": returns,
            "reward": float(score.mean()), "kl": float(kl.sum(axis=1).mean())}  # fmt: skip


def _update(cfg: TrainRLHFConfig, model: PolicyWithValue, optimizer: AdamW, seqs: np.ndarray,
            roll: dict[str, Any], rng: np.random.Generator) -> float:  # fmt: skip
    """`ppo_epochs` passes of minibatch steps over one rollout; returns the mean loss."""
    p, t = cfg.prompt_len, seqs.shape[1]
    losses = []
    for _ in range(cfg.ppo_epochs):
        order = rng.permutation(len(seqs))
        for start in range(0, len(seqs), cfg.minibatch):
            i = order[start : start + cfg.minibatch]
            logits, values = model(seqs[i])  # (b, T, V), (b, T)
            logp = completion_logprobs(logits, seqs[i], p)  # (b, L)
            loss = ppo_clip_loss(logp, roll["logp"][i], roll["advantages"][i], cfg.clip_eps)
            vloss = value_loss(values[:, p - 1 : t - 1], roll["values"][i], roll["returns"][i],
                               cfg.clip_eps)  # fmt: skip
            total = loss + vloss * cfg.vf_coef
            optimizer.zero_grad()
            total.backward()
            clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(total.item()))
    return float(np.mean(losses))


def ppo(cfg: TrainRLHFConfig, sft_model: GPT, rm: RewardModel, tokenizer: Tokenizer, text: str,
        eval_prompts: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
    """PPO from the SFT policy; returns (its row of the table, the per-iteration log)."""
    from tqdm import tqdm  # as train/loop.py: not loaded by `import tinyformer`

    tf.manual_seed(cfg.seed + 6)
    model = PolicyWithValue(HeadConfig(sft_model.config))
    model.policy.load_state_dict(sft_model.state_dict())
    model.to(cfg.device)
    optimizer = AdamW(model.parameters(), lr=cfg.ppo_lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng([cfg.seed, 6])
    folder = Path(cfg.out_dir) / "ppo"
    folder.mkdir(parents=True, exist_ok=True)
    log: dict[str, Any] = {"reward": [], "kl": [], "score": [], "loss": [], "lr": [], "ms": []}
    start = time.perf_counter()
    bar = tqdm(range(cfg.ppo_iters), disable=not cfg.progress, unit="it", dynamic_ncols=True)
    for it in bar:
        tick = time.perf_counter()
        prompts = prompt_ids(cfg, tokenizer, text, cfg.rollout, 100 + it)
        seqs = sample_completions(model.policy, prompts, cfg.completion_len)  # (B, T)
        roll = _rollout(cfg, model, sft_model, rm, seqs)
        scores = [labeler_score(tokenizer.decode(s[cfg.prompt_len :])) for s in seqs]
        log["loss"].append(_update(cfg, model, optimizer, seqs, roll, rng))
        for key, value in (("reward", roll["reward"]), ("kl", roll["kl"]),
                           ("score", float(np.mean(scores)))):  # fmt: skip
            log[key].append(value)
        log["lr"].append(cfg.ppo_lr)
        log["ms"].append((time.perf_counter() - tick) * 1e3)
        bar.set_postfix(reward=f"{log['reward'][-1]:.2f}", kl=f"{log['kl'][-1]:.2f}",
                        score=f"{log['score'][-1]:.2f}")  # fmt: skip
    bar.close()
    minutes = (time.perf_counter() - start) / 60
    model.eval()
    save_policy(folder, model.policy, tokenizer, log)
    plot_ppo(log, folder / "ppo.png", cfg.kl_coef)
    row = {**measure(cfg, model.policy, sft_model, tokenizer, eval_prompts), "minutes": minutes}
    print(f"PPO: {folder / 'ppo.png'}, {folder / 'log.json'}, {folder / 'ckpt.npz'}")
    return row, log
