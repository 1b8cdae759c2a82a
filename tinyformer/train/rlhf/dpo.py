"""`tinyformer train rlhf --method dpo`: Direct Preference Optimization on the same pairs.

DPO (Rafailov et al., 2023) skips the reward model and the sampling: the optimal policy of
the KL-penalised objective satisfies r(x, y) = beta log(pi(y|x) / pi_ref(y|x)) + const, so the
Bradley-Terry loss can be written on the policy's own log-probabilities. One step: the summed
log-probabilities of the chosen and rejected completions under the policy (one forward over
both), against the SFT policy's (computed once), through `dpo_loss`.

The evaluation reports the implicit reward's accuracy on held-out pairs, as the reward model's.
The run is the shared training loop's, so Ctrl-C and `--resume` work as for every step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import Tokenizer
from tinyformer.models.gpt import GPT
from tinyformer.models.rlhf import sequence_logprob
from tinyformer.nn.rlhf import dpo_loss
from tinyformer.train.loop import Phase, Run, start_run
from tinyformer.train.rlhf.config import TrainRLHFConfig
from tinyformer.train.rlhf.data import Pairs, accuracy, measure, optimizer_for
from tinyformer.train.rlhf.run import Stage

__all__ = ["dpo"]


@tf.no_grad()
def _seq_logprobs(model: GPT, seqs: np.ndarray, prompt_len: int, batch: int = 256) -> Any:
    """log pi(completion | prompt) of each sequence (N, T) -> (N,), on the model's device."""
    xp = backend.get_array_module(model.wte.weight.data)
    parts = [sequence_logprob(model(seqs[i : i + batch])[0], seqs[i : i + batch], prompt_len).data
             for i in range(0, len(seqs), batch)]  # fmt: skip
    return xp.concatenate(parts)


def dpo(cfg: TrainRLHFConfig, sft_model: GPT, tokenizer: Tokenizer, train: Pairs, test: Pairs,
        eval_prompts: np.ndarray, stage: Stage,
        on_step: Any = None) -> tuple[dict[str, Any] | None, dict[str, Any]]:  # fmt: skip
    """DPO from the SFT policy, or on from the checkpoint `stage` holds; returns (its row of
    the table, the run's log), the row None when `on_step` stopped the run (see train_loop)."""
    p = cfg.prompt_len
    sft_model.eval()
    ref = {name: (_seq_logprobs(sft_model, pairs.chosen, p),
                  _seq_logprobs(sft_model, pairs.rejected, p))
           for name, pairs in (("train", train), ("test", test))}  # fmt: skip
    policy = GPT(sft_model.config)
    policy.load_state_dict(sft_model.state_dict())
    policy.to(cfg.device)

    def loss(idx: np.ndarray, i: np.ndarray) -> Any:
        logp = sequence_logprob(policy(idx)[0], idx, p)  # (2B,): chosen then rejected
        b = len(i)
        return dpo_loss(logp[:b], logp[b:], ref["train"][0][i], ref["train"][1][i], cfg.dpo_beta)

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        policy.eval()
        chosen = _seq_logprobs(policy, test.chosen, p) - ref["test"][0]
        rejected = _seq_logprobs(policy, test.rejected, p) - ref["test"][1]
        margin = backend.to_host(cfg.dpo_beta * (chosen - rejected))
        policy.train()
        return {"test": float(np.logaddexp(0.0, -margin).mean()),
                "test_acc": accuracy(margin)}  # fmt: skip

    def get_batch(r: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        i = r.integers(0, len(train.chosen), cfg.batch_size)
        return np.concatenate([train.chosen[i], train.rejected[i]]), i

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        optimizer, scheduler = optimizer_for(policy, cfg.dpo_lr, cfg.dpo_iters)
        return Run(
            policy, optimizer, scheduler, np.random.default_rng([cfg.seed, 8]),
            get_batch=get_batch, evaluate=evaluate, config=phase, command="rlhf", loss=loss,
            title=f"DPO on the labeler's pairs (beta {cfg.dpo_beta})", loss_label="DPO loss",
            meta=lambda: {"model_config": dataclasses.asdict(policy.config),
                          "tokenizer": tokenizer.to_dict(), **stage.meta()},
            resume_hint=f"tinyformer train rlhf --resume --out-dir {cfg.out_dir}",
        )  # fmt: skip

    phase = Phase(cfg.dpo_iters, max(1, cfg.dpo_iters // 5), str(stage.folder), cfg.progress)
    # seeded for dropout, whatever ran before (PPO, or nothing when resumed)
    _, log = start_run(phase, build, on_step, seed=cfg.seed + 8, saved=stage.saved)
    if len(log["loss"]) < cfg.dpo_iters:
        return None, log
    minutes = stage.minutes
    policy.eval()  # train_loop saved it in its folder, as `tinyformer sample --ckpt` reads it
    return {**measure(cfg, policy, sft_model, tokenizer, eval_prompts), "minutes": minutes}, log
