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

A checkpoint is written after every iteration (one costs seconds, a save milliseconds), in
the training loop's format: the policy as a GPT under `model/` (so `tinyformer sample --ckpt`
reads it), the value head under `value/`, AdamW's moments, both generators and the log.
`--resume` continues from it exactly where the run stood; Ctrl-C finishes the iteration,
saves and stops, as the loop does.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer.checkpoint import CheckpointError
from tinyformer.data import Tokenizer
from tinyformer.data.labeler import labeler_score
from tinyformer.fileio import save_json
from tinyformer.models.gpt import GPT
from tinyformer.models.rlhf import HeadConfig, PolicyWithValue, RewardModel, completion_logprobs
from tinyformer.nn.rlhf import gae, ppo_clip_loss, value_loss
from tinyformer.optim import AdamW, clip_grad_norm_
from tinyformer.optim.lr_scheduler import LambdaLR
from tinyformer.train.loop import NonFiniteLoss, RunStopped, StopFlag
from tinyformer.train.rlhf.config import TrainRLHFConfig
from tinyformer.train.rlhf.data import measure, prompt_ids, sample_completions
from tinyformer.train.rlhf.report import plot_ppo
from tinyformer.train.rlhf.run import Stage
from tinyformer.train.state import checkpoint_errors, extra_state, restore_run, save_run

__all__ = ["ppo"]

# one number per iteration each; "evals" stays empty, for the loop's checkpoint format
LOG_KEYS = ("reward", "kl", "score", "loss", "lr", "ms")


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
            roll: dict[str, Any], rng: np.random.Generator, it: int) -> float:  # fmt: skip
    """`ppo_epochs` passes of minibatch steps over one rollout; returns the mean loss. A loss
    or gradient norm that is not finite stops the run before the optimizer step."""
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
            norm = clip_grad_norm_(model.parameters(), 1.0)
            value = float(total.item())
            _check_finite(cfg, it, loss=value, gradient_norm=float(norm.item()))
            optimizer.step()
            losses.append(value)
    return float(np.mean(losses))


def _check_finite(cfg: TrainRLHFConfig, it: int, **numbers: float) -> None:
    """Stop before an optimizer step that would make the weights NaN (as train_loop does)."""
    for what, number in numbers.items():
        if not math.isfinite(number):
            path = Path(cfg.out_dir) / "ppo" / "ckpt.npz"
            saved = f"{path} holds the last checkpoint, from iteration {it}" if it else (
                "No PPO iteration was saved")  # fmt: skip
            raise NonFiniteLoss(
                f"PPO iteration {it + 1}: the {what.replace('_', ' ')} is {number}; the run "
                f"stopped before the optimizer step. {saved}. Try a lower --ppo-lr or "
                f"--kl-coef, in a new run (or with --overwrite)"
            )


def _resume(stage: Stage, model: PolicyWithValue, optimizer: AdamW, schedule: LambdaLR,
            rng: np.random.Generator) -> dict[str, Any]:  # fmt: skip
    """The log of the run saved in `stage`, its weights, optimizer and generators put back;
    a new log if there is none to continue."""
    if stage.saved is None:
        return {**{key: [] for key in LOG_KEYS}, "evals": []}
    state, meta = stage.saved
    log, it = meta["log"], meta["iteration"]  # load_run checked the loop's entries
    if not all(isinstance(log.get(k), list) and len(log[k]) == it for k in LOG_KEYS):
        raise CheckpointError(f"{meta['_path']}: its metadata's log is not PPO's")
    with checkpoint_errors(meta["_path"]):
        model.policy.load_state_dict(state)
        model.v_head.load_state_dict(extra_state(meta, "value"))
    restore_run(meta, optimizer, schedule, rng)
    return log


def ppo(cfg: TrainRLHFConfig, sft_model: GPT, rm: RewardModel, tokenizer: Tokenizer, text: str,
        eval_prompts: np.ndarray, stage: Stage,
        on_step: Any = None) -> tuple[dict[str, Any] | None, dict[str, Any]]:  # fmt: skip
    """PPO from the SFT policy, or on from the checkpoint `stage` holds; returns (its row of
    the table, the per-iteration log). `on_step(it)` runs after every iteration; returning
    True stops the run as Ctrl-C would (the row is then None)."""
    from tqdm import tqdm  # as train/loop.py: not loaded by `import tinyformer`

    tf.manual_seed(cfg.seed + 6)
    model = PolicyWithValue(HeadConfig(sft_model.config))
    model.policy.load_state_dict(sft_model.state_dict())
    model.to(cfg.device)
    optimizer = AdamW(model.parameters(), lr=cfg.ppo_lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedule = LambdaLR(optimizer, lambda step: 1.0)  # constant: a run checkpoint holds one
    rng = np.random.default_rng([cfg.seed, 6])
    log = _resume(stage, model, optimizer, schedule, rng)
    stage.folder.mkdir(parents=True, exist_ok=True)
    path = stage.folder / "ckpt.npz"
    meta = {"model_config": dataclasses.asdict(model.policy.config),
            "tokenizer": tokenizer.to_dict(),
            "train_config": {"iters": cfg.ppo_iters, "out_dir": str(stage.folder)}}  # fmt: skip
    bar = tqdm(total=cfg.ppo_iters, initial=len(log["loss"]), disable=not cfg.progress,
               unit="it", dynamic_ncols=True)  # fmt: skip
    with StopFlag() as stop:
        for it in range(len(log["loss"]), cfg.ppo_iters):
            _iteration(cfg, model, optimizer, sft_model, rm, tokenizer, text, rng, log, it)
            save_run(path, model.policy, optimizer, schedule, rng,
                     {**meta, **stage.meta(), "iteration": it + 1, "log": log},
                     extra={"value": model.v_head})  # fmt: skip
            save_json(stage.folder / "log.json", log)
            bar.update()
            bar.set_postfix(reward=f"{log['reward'][-1]:.2f}", kl=f"{log['kl'][-1]:.2f}",
                            score=f"{log['score'][-1]:.2f}")  # fmt: skip
            if (on_step is not None and on_step(it + 1)) or stop.requested:
                bar.close()
                print(f"stopped at PPO iteration {it + 1}; checkpoint in {path}. Continue with:")
                print(f"  tinyformer train rlhf --resume --out-dir {cfg.out_dir}")
                if stop.signum is not None:
                    raise RunStopped(stop.signum, it + 1, log)
                return None, log
    bar.close()
    minutes = stage.minutes
    model.eval()
    plot_ppo(log, stage.folder / "ppo.png", cfg.kl_coef)
    row = {**measure(cfg, model.policy, sft_model, tokenizer, eval_prompts), "minutes": minutes}
    print(f"PPO: {stage.folder / 'ppo.png'}, {stage.folder / 'log.json'}, {path}")
    return row, log


def _iteration(cfg: TrainRLHFConfig, model: PolicyWithValue, optimizer: AdamW, ref: GPT,
               rm: RewardModel, tokenizer: Tokenizer, text: str, rng: np.random.Generator,
               log: dict[str, Any], it: int) -> None:  # fmt: skip
    """Rollout, scoring and update of iteration `it`, its numbers appended to `log`."""
    tick = time.perf_counter()
    prompts = prompt_ids(cfg, tokenizer, text, cfg.rollout, 100 + it)
    seqs = sample_completions(model.policy, prompts, cfg.completion_len)  # (B, T)
    roll = _rollout(cfg, model, ref, rm, seqs)
    scores = [labeler_score(tokenizer.decode(s[cfg.prompt_len :])) for s in seqs]
    loss = _update(cfg, model, optimizer, seqs, roll, rng, it)
    for key, value in (("reward", roll["reward"]), ("kl", roll["kl"]), ("loss", loss),
                       ("score", float(np.mean(scores))), ("lr", cfg.ppo_lr),
                       ("ms", (time.perf_counter() - tick) * 1e3)):  # fmt: skip
        log[key].append(value)
