"""`tinyformer train rlhf`: InstructGPT's three steps on a baby character-level GPT, and DPO.

0. A pretrained GPT from `--init` (a `tinyformer train gpt` run folder). If the folder holds
   none, a small one is pretrained there first (about a minute), and later runs reuse it.
1. SFT: fine-tune it on demonstrations the labeler accepts (corpus windows whose completion
   uses a word of `tinyformer.data.labeler.WORDS`), loss on the completion only. -> OUT/sft/
2. Preference pairs: K completions per prompt sampled from the SFT policy, every pair the
   labeler can tell apart (tinyformer.data.labeler). A reward model (the SFT trunk with a
   scalar head) fitted with the Bradley-Terry loss; accuracy on held-out prompts. -> OUT/reward/
3. PPO against the reward model with a per-token KL penalty to the SFT policy (ppo.py)
   -> OUT/ppo/, and/or DPO on the same pairs (dpo.py) -> OUT/dpo/.

The closing table (report.py) measures every policy on held-out prompts with the
labeler's true score and its KL divergence from the SFT policy.

Ctrl-C saves and stops in any step; `--resume` keeps the finished steps and continues the
interrupted one from its checkpoint, to the result of an uninterrupted run (run.py).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import Tokenizer, load_text
from tinyformer.data.labeler import demonstrations, labeler_score
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.models.rlhf import HeadConfig, RewardModel
from tinyformer.nn.rlhf import bradley_terry_loss
from tinyformer.train.gpt import TrainGPTConfig, load_model, train_gpt
from tinyformer.train.loop import Phase, Run, start_run
from tinyformer.train.rlhf.config import TrainRLHFConfig
from tinyformer.train.rlhf.data import (
    Pairs,
    accuracy,
    encode,
    measure,
    optimizer_for,
    prompt_ids,
    sample_completions,
)
from tinyformer.train.rlhf.dpo import dpo
from tinyformer.train.rlhf.ppo import ppo
from tinyformer.train.rlhf.report import report
from tinyformer.train.rlhf.run import (
    Stage,
    check_init_folder,
    check_sizes,
    run_settings,
    stage,
    stopped_at,
)
from tinyformer.train.rundir import claim_out_dir

__all__ = [
    "STEPS", "TrainRLHFConfig", "base_model", "make_pairs", "reward_model", "sft", "train_rlhf",
]  # fmt: skip

# the steps with iterations, each (but the first, in --init) in its folder of --out-dir
STEPS = ("base", "sft", "reward", "ppo", "dpo")


def base_model(cfg: TrainRLHFConfig, on_step: Any = None) -> tuple[GPT, Tokenizer] | None:
    """The pretrained GPT of --init, pretrained there first (small, fast) if it holds none, or
    (on --resume) its pretraining continued; None when `on_step` stopped that pretraining."""
    init = Path(cfg.init)
    stopped = stopped_at(init)
    if stopped is not None and not cfg.resume:
        raise ValueError(
            f"--init {cfg.init} holds a GPT run stopped at iteration {stopped[0]} of "
            f"{stopped[1]}: continue it with --resume (or `tinyformer train gpt --resume "
            f"--out-dir {cfg.init}`), or choose another --init"
        )
    gpt = None
    if stopped is not None:
        print(f"0/3 continuing the pretraining in {cfg.init}")
        gpt = TrainGPTConfig(out_dir=cfg.init, resume=True, progress=cfg.progress,
                             device=cfg.device)  # fmt: skip
    elif not (init / "ckpt.npz").exists() and not init.is_file():
        check_init_folder(cfg.init)
        sizes = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": max(64, cfg.seq_len)}
        check_sizes(cfg, GPTConfig(vocab_size=1, **sizes))  # floors for any vocabulary: now
        print(f"0/3 no GPT in {cfg.init}: pretraining a small one there")
        gpt = TrainGPTConfig(
            data=cfg.data, **sizes, iters=cfg.base_iters, batch_size=32, lr=3e-3, warmup=50,
            eval_interval=cfg.base_iters, eval_iters=5, seed=cfg.seed, out_dir=cfg.init,
            sample_tokens=0, progress=cfg.progress, device=cfg.device,
        )  # fmt: skip
    if gpt is not None:
        log = train_gpt(gpt, on_step)
        if len(log["loss"]) < (cfg.base_iters if stopped is None else stopped[1]):
            return None  # the loop printed how to continue
    model, tokenizer, _ = load_model(cfg.init)
    if model.config.block_size < cfg.seq_len:
        raise ValueError(
            f"--init {cfg.init}: its context ({model.config.block_size}) is shorter than "
            f"--prompt-len + --completion-len = {cfg.seq_len}"
        )
    return model.to(cfg.device), tokenizer


def sft(
    cfg: TrainRLHFConfig, base: GPT, tokenizer: Tokenizer, text: str, stage: Stage,
    on_step: Any = None,
) -> tuple[GPT, dict[str, Any]]:  # fmt: skip
    """Step 1: cross-entropy on the demonstrations' completion tokens (the prompt's ignored);
    returns the policy and the run's log (short of --sft-iters if `on_step` stopped it)."""
    rng = np.random.default_rng([cfg.seed, 1])
    demos = encode(tokenizer, demonstrations(text, cfg.prompt_len, cfg.completion_len,
                                              cfg.demos, rng))  # fmt: skip
    x, y = demos[:, :-1], demos[:, 1:].copy()  # (N, T - 1) each
    y[:, : cfg.prompt_len - 1] = -100  # positions that predict prompt tokens: not learned
    cut = len(x) * 9 // 10

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        base.eval()
        out = {"val": float(base(x[cut:], y[cut:])[1].item())}
        base.train()
        return out

    def get_batch(r: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        i = r.integers(0, cut, cfg.batch_size)
        return x[i], y[i]

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        optimizer, scheduler = optimizer_for(base, cfg.lr, cfg.sft_iters)
        return Run(
            base, optimizer, scheduler, np.random.default_rng([cfg.seed, 2]),
            get_batch=get_batch, evaluate=evaluate, config=phase, command="rlhf",
            title="SFT on demonstrations",
            meta=lambda: {"model_config": dataclasses.asdict(base.config),
                          "tokenizer": tokenizer.to_dict(), **stage.meta()},
            resume_hint=f"tinyformer train rlhf --resume --out-dir {cfg.out_dir}",
        )  # fmt: skip

    phase = Phase(cfg.sft_iters, max(1, cfg.sft_iters // 5), str(stage.folder), cfg.progress)
    _, log = start_run(phase, build, on_step, seed=cfg.seed + 1, saved=stage.saved)
    return base.eval(), log


def make_pairs(cfg: TrainRLHFConfig, policy: GPT, tokenizer: Tokenizer, text: str) -> Pairs:
    """K completions per prompt from the policy; every pair of them the labeler ranks."""
    k = cfg.samples_per_prompt
    prompts = np.repeat(prompt_ids(cfg, tokenizer, text, cfg.prompts, 3), k, axis=0)  # (N K, P)
    tf.manual_seed(cfg.seed + 3)
    seqs = sample_completions(policy, prompts, cfg.completion_len)  # (N K, T)
    scores = [labeler_score(tokenizer.decode(s[cfg.prompt_len :])) for s in seqs]
    chosen, rejected, source = [], [], []
    for p in range(cfg.prompts):
        for a in range(p * k, p * k + k):
            for b in range(a + 1, p * k + k):
                if scores[a] != scores[b]:
                    win, lose = (a, b) if scores[a] > scores[b] else (b, a)
                    chosen.append(seqs[win])
                    rejected.append(seqs[lose])
                    source.append(p)
    if len(chosen) < 2:
        raise ValueError(f"the labeler ranked {len(chosen)} pairs: raise --prompts")
    return Pairs(np.array(chosen), np.array(rejected), np.array(source))


def reward_model(
    cfg: TrainRLHFConfig, sft_model: GPT, train: Pairs, test: Pairs, stage: Stage,
    on_step: Any = None,
) -> tuple[RewardModel, dict[str, Any]]:  # fmt: skip
    """Step 2: the SFT trunk with a scalar head, Bradley-Terry on the pairs; returns the model
    and the run's log (short of --rm-iters if `on_step` stopped it)."""
    model = RewardModel(HeadConfig(sft_model.config))
    model.transformer.load_state_dict(sft_model.state_dict())
    model.to(cfg.device)

    def loss(idx: np.ndarray, _: Any) -> Any:
        r = model(idx)  # (2B,): chosen then rejected, one forward
        return bradley_terry_loss(r[: len(idx) // 2], r[len(idx) // 2 :])

    @tf.no_grad()
    def evaluate(it: int) -> dict[str, float]:
        model.eval()
        out = {}
        for name, p in (("train", train), ("test", test)):
            margin = backend.to_host(model(p.chosen).data - model(p.rejected).data)
            out[f"{name}_acc"] = accuracy(margin)
        out["test"] = float(np.logaddexp(0.0, -margin).mean())  # the BT loss, held out
        model.train()
        return out

    def get_batch(r: np.random.Generator) -> tuple[np.ndarray, None]:
        i = r.integers(0, len(train.chosen), cfg.batch_size)
        return np.concatenate([train.chosen[i], train.rejected[i]]), None

    def build(phase: Phase, state: dict | None, saved: dict | None) -> Run:
        optimizer, scheduler = optimizer_for(model, cfg.lr, cfg.rm_iters)
        return Run(
            model, optimizer, scheduler, np.random.default_rng([cfg.seed, 4]),
            get_batch=get_batch, evaluate=evaluate, config=phase, command="rlhf", loss=loss,
            title="reward model (Bradley-Terry on the labeler's pairs)",
            loss_label="-log sigmoid(r_chosen - r_rejected)",
            meta=lambda: {"model_config": dataclasses.asdict(model.config), **stage.meta()},
            resume_hint=f"tinyformer train rlhf --resume --out-dir {cfg.out_dir}",
        )  # fmt: skip

    phase = Phase(cfg.rm_iters, max(1, cfg.rm_iters // 5), str(stage.folder), cfg.progress)
    _, log = start_run(phase, build, on_step, seed=cfg.seed + 4, saved=stage.saved)
    return model.eval(), log


def train_rlhf(cfg: TrainRLHFConfig, on_step: Any = None) -> dict[str, Any]:
    """Every step; returns the results table's rows and the PPO / DPO logs. `on_step(step,
    it)` runs after every iteration of a step ("base", "sft", "reward", "ppo", "dpo");
    returning True stops the run there as Ctrl-C would, and returns {"stopped": step}."""
    # claimed before the data is read: a refusal comes before any work
    with claim_out_dir(cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite):
        return _train_rlhf(*run_settings(cfg), on_step or (lambda step, it: False))


def _train_rlhf(
    cfg: TrainRLHFConfig, record: dict[str, Any], on_step: Callable[[str, int], bool]
) -> dict[str, Any]:
    text = load_text(cfg.data)
    cut = len(text) * 9 // 10  # prompts to measure on come from the last tenth only
    hook = {name: functools.partial(on_step, name) for name in STEPS}
    loaded = base_model(cfg, hook["base"])
    if loaded is None:
        return {"stopped": "base"}
    base, tokenizer = loaded
    check_sizes(cfg, base.config)
    eval_prompts = prompt_ids(cfg, tokenizer, text[cut:], cfg.eval_prompts, 9)
    pretrained = GPT(base.config).to(cfg.device)
    pretrained.load_state_dict(base.state_dict())
    print("1/3 supervised fine-tuning on the labeler's demonstrations")
    step = stage(cfg, record, "sft")
    policy, log = sft(cfg, base, tokenizer, text[:cut], step, hook["sft"])
    if len(log["loss"]) < cfg.sft_iters:
        return {"stopped": "sft"}  # the loop printed how to continue
    # KL is measured from the SFT policy, the reference of PPO and DPO, for every row
    rows = {
        "pretrained": measure(cfg, pretrained.eval(), policy, tokenizer, eval_prompts),
        "SFT": {**measure(cfg, policy, policy, tokenizer, eval_prompts), "minutes": step.minutes},
    }
    print("2/3 preference pairs from the SFT policy, and a reward model")
    train_pairs, test_pairs = make_pairs(cfg, policy, tokenizer, text[:cut]).split(0.2, cfg.seed)
    print(f"{len(train_pairs.chosen)} training pairs, {len(test_pairs.chosen)} held out")
    results: dict[str, Any] = {"pairs": [len(train_pairs.chosen), len(test_pairs.chosen)]}
    if cfg.method in ("ppo", "both"):
        rm, log = reward_model(cfg, policy, train_pairs, test_pairs, stage(cfg, record, "reward"),
                               hook["reward"])  # fmt: skip
        if len(log["loss"]) < cfg.rm_iters:
            return {"stopped": "reward"}
        results["reward_model"] = log["evals"][-1]
        print(f"reward model: held-out accuracy {results['reward_model']['test_acc']:.3f}")
        print("3/3 PPO against the reward model")
        rows["PPO"], results["ppo_log"] = ppo(cfg, policy, rm, tokenizer, text[:cut], eval_prompts,
                                              stage(cfg, record, "ppo"), hook["ppo"])  # fmt: skip
        if rows["PPO"] is None:
            return {"stopped": "ppo"}
    if cfg.method in ("dpo", "both"):
        print(f"{'3/3' if cfg.method == 'dpo' else '+'} DPO on the same pairs")
        rows["DPO"], results["dpo_log"] = dpo(cfg, policy, tokenizer, train_pairs, test_pairs,
                                              eval_prompts, stage(cfg, record, "dpo"),
                                              hook["dpo"])  # fmt: skip
        if rows["DPO"] is None:
            return {"stopped": "dpo"}
    results["table"] = rows
    report(cfg, results)
    return results
