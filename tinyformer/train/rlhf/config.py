"""The settings of `tinyformer train rlhf`: a leaf that the command's helpers annotate with."""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.train.args import (
    COUNT,
    EXAMPLES,
    FRACTION,
    NONNEGATIVE,
    POSITIVE,
    PROPER_FRACTION,
    Range,
    RunFlags,
    check_ranges,
    flag,
)

__all__ = ["TrainRLHFConfig"]


@dataclass
class TrainRLHFConfig(RunFlags):
    data: str = flag("pydoc", "corpus of the demonstrations and prompts (and of pretraining)")
    init: str = flag("out/rlhf-base", "GPT run folder to start from; pretrained there if absent")
    base_iters: int = flag(600, "pretraining steps when --init holds no run", valid=COUNT)
    method: str = flag("both", "what learns from the preferences", ["ppo", "dpo", "both"])
    prompt_len: int = flag(16, "prompt characters", valid=COUNT)
    completion_len: int = flag(24, "completion characters", valid=COUNT)
    demos: int = flag(512, "SFT demonstrations", valid=EXAMPLES)
    sft_iters: int = flag(150, "SFT steps", valid=COUNT)
    prompts: int = flag(256, "prompts sampled for preference pairs", valid=EXAMPLES)
    samples_per_prompt: int = flag(4, "completions per prompt, all pairs ranked", valid=Range(2))
    rm_iters: int = flag(150, "reward-model steps", valid=COUNT)
    ppo_iters: int = flag(40, "PPO iterations (rollout + update)", valid=COUNT)
    rollout: int = flag(64, "completions sampled per PPO iteration", valid=COUNT)
    ppo_epochs: int = flag(4, "passes over each rollout", valid=COUNT)
    minibatch: int = flag(32, "completions per PPO gradient step", valid=COUNT)
    kl_coef: float = flag(0.1, "per-token KL penalty to the SFT policy (0: none)",
                          valid=NONNEGATIVE)  # fmt: skip
    clip_eps: float = flag(0.2, "PPO ratio clip", valid=PROPER_FRACTION)
    vf_coef: float = flag(0.5, "weight of the value loss", valid=NONNEGATIVE)
    lam: float = flag(0.95, "GAE lambda", valid=FRACTION)
    ppo_lr: float = flag(3e-4, "PPO learning rate", valid=POSITIVE)
    dpo_iters: int = flag(100, "DPO steps", valid=COUNT)
    dpo_beta: float = flag(0.1, "DPO's beta (strength of the implicit KL)", valid=POSITIVE)
    dpo_lr: float = flag(3e-4, "DPO learning rate", valid=POSITIVE)
    lr: float = flag(1e-3, "learning rate of SFT and the reward model", valid=POSITIVE)
    batch_size: int = flag(32, "sequences (SFT) or pairs (reward model, DPO) per step",
                           valid=COUNT)  # fmt: skip
    eval_prompts: int = flag(128, "held-out prompts every policy is measured on", valid=COUNT)
    seed: int = flag(0, "seed for data, initialisation and sampling", valid=NONNEGATIVE)
    out_dir: str = flag("out/rlhf", "folder for the runs, the table and the plots")
    resume: bool = flag(False, "continue the interrupted run in --out-dir, skipping finished steps")
    progress: bool = flag(True, "show progress bars")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.seed >= 2**64 - 8:  # the steps seed tinyformer's generator with seed + 1 ... 8
            raise ValueError(f"--seed must be below 2**64 - 8, got {self.seed}")

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.completion_len
