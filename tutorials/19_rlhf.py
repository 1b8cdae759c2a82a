# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 19. RLHF on a baby GPT: SFT, a reward model, PPO, and DPO
#
# A language model trained on text imitates the text. To make it do what people *prefer*,
# InstructGPT (Ouyang et al., 2022) added three steps: supervised fine-tuning on
# demonstrations (SFT), a reward model fitted to people's choices between two completions,
# and reinforcement learning (PPO) against that reward model, held near the SFT model by a KL
# penalty. DPO (Rafailov et al., 2023) later reached the same goal from the same pairs with
# one supervised loss.
#
# Our "people" are a rule you can read, so preference data costs nothing and every model can
# be measured by what the labeler really wants, not only by the reward model's imitation of
# it. This notebook writes the losses, checks them, and runs the whole pipeline
# (`tinyformer train rlhf`); with `TINYFORMER_SMALL=1` it runs a toy version in seconds.

# %%
import json
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.data.labeler import WORDS, labeler_score
from tinyformer.nn.rlhf import bradley_terry_loss, dpo_loss, gae, ppo_clip_loss
from tinyformer.train.rlhf import TrainRLHFConfig, train_rlhf

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))

# %% [markdown]
# ## The labeler
#
# It likes text about Python: a completion scores the number of *different* words of `WORDS`
# it uses as whole words. Between two completions it prefers the higher score, and it says
# nothing about ties.

# %%
print(sorted(WORDS))
for text in ("the value of a list", "a list list list list", "statement, this is"):
    print(f"{labeler_score(text)}  {text!r}")

# %% [markdown]
# ## Step 2's loss: Bradley-Terry
#
# The reward model r gives each sequence a number. Bradley and Terry's model of a choice:
# P(a preferred to b) = sigmoid(r(a) - r(b)). Fitting r is maximum likelihood on the pairs.
#
# **Exercise.** Write `my_bradley_terry(chosen, rejected)`: the mean of -log sigmoid(r_c - r_r)
# over the pairs, for (B,) tensors, as a tinyformer Tensor. Write it so that it does not
# overflow when the margin is -50 (hint: -log sigmoid(d) = log(1 + e^(-d)), and `tf.log1p`,
# `tf.exp`, `tf.maximum` exist; or use a loss you know whose logits are the margin).


# %%
def my_bradley_terry(chosen: tf.Tensor, rejected: tf.Tensor) -> tf.Tensor:
    ### BEGIN SOLUTION
    d = chosen - rejected  # (B,)
    # log(1 + e^-d) = max(-d, 0) + log(1 + e^-|d|): no overflow for either sign
    return (tf.maximum(-d, 0.0) + tf.log1p(tf.exp(-abs(d)))).mean()
    ### END SOLUTION


rng = np.random.default_rng(0)
c = tf.Tensor(rng.standard_normal(8) * 20, requires_grad=True)
r = tf.Tensor(rng.standard_normal(8) * 20, requires_grad=True)
mine, library = my_bradley_terry(c, r).item(), bradley_terry_loss(c, r).item()
print(f"yours {mine:.6f}, the library's {library:.6f}")
print("gradcheck:", bool(tf.gradcheck(my_bradley_terry, [c, r])))

# %% [markdown]
# **Question:** add 100 to every reward. What happens to the loss and its gradient? What does
# that tell you about what a reward model's numbers mean?
#
# ## Step 3's pieces: GAE and the clipped surrogate
#
# PPO gives each completion token t the reward r_t = -beta (log pi(token) - log pi_SFT(token)),
# and the reward model's score is added at the last token. A value head V estimates what is
# still to come. Generalised advantage estimation mixes the one-step TD errors
# delta_t = r_t + gamma V_(t+1) - V_t into A_t = sum_k (gamma lambda)^k delta_(t+k).
#
# **Exercise.** Write `my_gae(rewards, values, gamma, lam)` for (B, L) arrays, with V = 0 after
# the last token, by a loop *backwards* over t (one pass, not a double sum).


# %%
def my_gae(rewards: np.ndarray, values: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    ### BEGIN SOLUTION
    adv = np.zeros_like(rewards)
    running = np.zeros(len(rewards))
    for t in reversed(range(rewards.shape[1])):
        nxt = values[:, t + 1] if t + 1 < rewards.shape[1] else 0.0
        running = rewards[:, t] + gamma * nxt - values[:, t] + gamma * lam * running
        adv[:, t] = running
    return adv
    ### END SOLUTION


rewards, values = rng.standard_normal((2, 4, 6))
print("matches the library:", np.allclose(my_gae(rewards, values, 1.0, 0.95),
                                          gae(rewards, values, 1.0, 0.95)[0]))  # fmt: skip

# %% [markdown]
# The policy is then moved by the clipped surrogate: with ratio = pi / pi_old of each sampled
# token, maximise mean(min(ratio A, clip(ratio, 1 - eps, 1 + eps) A)).
#
# **Exercise.** Write `my_ppo_loss(logp, old_logp, adv, eps)`, the negated surrogate (a loss
# to minimise), from tinyformer ops (`tf.exp`, `tf.clip`, `tf.minimum`).


# %%
def my_ppo_loss(logp: tf.Tensor, old_logp: np.ndarray, adv: np.ndarray, eps: float) -> tf.Tensor:
    ### BEGIN SOLUTION
    ratio = tf.exp(logp - old_logp)
    return -tf.minimum(ratio * adv, tf.clip(ratio, 1 - eps, 1 + eps) * adv).mean()
    ### END SOLUTION


old = rng.standard_normal((4, 6))
logp = tf.Tensor(old + rng.uniform(-0.5, 0.5, (4, 6)), requires_grad=True)
adv = rng.standard_normal((4, 6))
print(f"yours {my_ppo_loss(logp, old, adv, 0.2).item():.6f}, "
      f"the library's {ppo_clip_loss(logp, old, adv, 0.2).item():.6f}")  # fmt: skip
my_ppo_loss(logp, old, adv, 0.2).backward()
print("tokens whose gradient is zero (clipped):", int((logp.grad == 0).sum()), "of", adv.size)

# %% [markdown]
# **Question:** a token with a positive advantage whose ratio is already 1.5 gets no
# gradient. Why is that the point of the clip? What would one big step on a single rollout do
# to a language model without it?
#
# ## DPO: the same pairs, no reward model, no sampling
#
# DPO's insight: the best policy for "reward minus beta KL to pi_ref" satisfies
# r = beta log(pi / pi_ref) + const. Put that r into Bradley-Terry and the policy is trained
# directly on the pairs, with log-probabilities of whole completions:

# %%
pc, pr, rc, rr = rng.standard_normal((4, 8))
pc_t, pr_t = tf.Tensor(pc, requires_grad=True), tf.Tensor(pr, requires_grad=True)
bt = bradley_terry_loss(tf.Tensor(0.1 * (pc - rc)), tf.Tensor(0.1 * (pr - rr)))
same = np.isclose(dpo_loss(pc_t, pr_t, rc, rr, 0.1).item(), bt.item())
print("DPO loss is Bradley-Terry on beta * log-ratio margins:", same)

# %% [markdown]
# ## The whole pipeline
#
# `train_rlhf` is `tinyformer train rlhf`: a pretrained char-level GPT (pretrained first when
# `--init` has none), SFT on corpus windows the labeler accepts, pairs sampled from the SFT
# policy and ranked by the labeler, a reward model, PPO, and DPO. Small mode: a toy corpus of
# three words and a tiny model, so that only the plumbing is shown; the full run's numbers are
# in docs/rlhf.md. The full run takes the better part of an hour: stopped (the kernel's stop
# button, or Ctrl-C in a terminal), `TrainRLHFConfig(..., resume=True)` or
# `tinyformer train rlhf --resume` keeps its finished steps and continues the stopped one.

# %%
workdir = tempfile.TemporaryDirectory(prefix="rlhf-")
if SMALL:
    from tinyformer.train.gpt import TrainGPTConfig, train_gpt

    corpus = os.path.join(workdir.name, "corpus.txt")
    with open(corpus, "w") as f:
        f.write(" ".join(np.random.default_rng(0).choice(["list", "code", "xx"], 3000)))
    init = os.path.join(workdir.name, "base")
    train_gpt(TrainGPTConfig(data=corpus, n_layer=1, n_head=2, n_embd=16, block_size=16, iters=40,
                             lr=1e-2, warmup=5, eval_interval=40, eval_iters=1, batch_size=16,
                             out_dir=init, sample_tokens=0, progress=False))  # fmt: skip
    cfg = TrainRLHFConfig(data=corpus, init=init, prompt_len=4, completion_len=12, demos=32,
                          sft_iters=3, prompts=8, rm_iters=3, ppo_iters=3, rollout=8, minibatch=4,
                          ppo_epochs=1, dpo_iters=3, batch_size=4, eval_prompts=8,
                          out_dir=os.path.join(workdir.name, "rlhf"), progress=False)  # fmt: skip
else:
    cfg = TrainRLHFConfig(out_dir=os.path.join(workdir.name, "rlhf"))
results = train_rlhf(cfg)

# %%
fig, ax = plt.subplots(figsize=(11, 3.4))
ax.imshow(plt.imread(os.path.join(cfg.out_dir, "ppo", "ppo.png")))
ax.axis("off")
plt.show()
print(json.dumps({k: {m: round(v, 3) for m, v in row.items() if m != "samples"}
                  for k, row in results["table"].items()}, indent=1))  # fmt: skip

# %% [markdown]
# **Question:** run it again with `kl_coef=0` (`tinyformer train rlhf --method ppo --kl-coef 0`).
# The reward model's score climbs higher. Does the labeler's score follow? Read the samples:
# what did the policy find, and why had the reward model never learned that it is worthless?
#
# **Question:** the table measures KL from the SFT policy on samples of each policy. DPO never
# samples during training. Which of PPO's knobs plays the role of DPO's beta, and why can the
# two methods end at different KL for a similar score?
