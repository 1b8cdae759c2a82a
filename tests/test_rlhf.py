"""RLHF: the preference losses gradchecked in float64, GAE against its direct sum, the heads,
the labeler, and a tiny end-to-end run of `tinyformer train rlhf`."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import cli
from tinyformer.data.labeler import labeler_score, prefer
from tinyformer.models.gpt import GPTConfig
from tinyformer.models.rlhf import HeadConfig, PolicyWithValue, RewardModel, completion_logprobs
from tinyformer.nn.rlhf import bradley_terry_loss, dpo_loss, gae, ppo_clip_loss, value_loss

TINY = GPTConfig(block_size=12, vocab_size=7, n_layer=1, n_head=2, n_embd=8)


def _t(*shape, seed=0, scale=1.0):
    x = np.random.default_rng(seed).standard_normal(shape) * scale
    return tf.Tensor(x, requires_grad=True)


def test_bradley_terry_and_dpo_losses_are_the_log_sigmoid_of_the_margin_and_gradcheck():
    c, r = _t(6, seed=1, scale=3.0), _t(6, seed=2, scale=3.0)
    margin = c.data - r.data
    np.testing.assert_allclose(
        bradley_terry_loss(c, r).item(), np.mean(np.logaddexp(0, -margin)), rtol=1e-12
    )
    assert tf.gradcheck(bradley_terry_loss, [c, r])
    # only the difference is learned: shifting both rewards changes nothing
    assert bradley_terry_loss(c + 5.0, r + 5.0).item() == pytest.approx(
        bradley_terry_loss(c, r).item(), rel=1e-12
    )
    ref_c, ref_r = np.random.default_rng(3).standard_normal((2, 6))
    expected = np.mean(np.logaddexp(0, -0.5 * ((c.data - ref_c) - (r.data - ref_r))))
    np.testing.assert_allclose(dpo_loss(c, r, ref_c, ref_r, 0.5).item(), expected, rtol=1e-12)
    assert tf.gradcheck(lambda a, b: dpo_loss(a, b, ref_c, ref_r, 0.5), [c, r])
    # a far-apart pair costs ~0, not log(0): the loss is computed from logits
    assert bradley_terry_loss(tf.Tensor([60.0]), tf.Tensor([-60.0])).item() < 1e-40


def test_ppo_clip_loss_gradchecks_and_stops_pushing_past_the_clip():
    rng = np.random.default_rng(4)
    old = rng.standard_normal((3, 5))
    # ratios spread over (0.5, 1.6): inside and outside [0.8, 1.2], never on a kink
    offsets = rng.uniform(-0.7, 0.45, (3, 5))
    offsets[np.abs(np.abs(offsets) - np.log(1.2)) < 0.03] += 0.07
    logp = tf.Tensor(old + offsets, requires_grad=True)
    adv = rng.standard_normal((3, 5))
    assert tf.gradcheck(lambda lp: ppo_clip_loss(lp, old, adv, 0.2), [logp])
    ppo_clip_loss(logp, old, adv, 0.2).backward()
    ratio = np.exp(offsets)
    clipped = ((adv > 0) & (ratio > 1.2)) | ((adv < 0) & (ratio < 0.8))
    assert clipped.any() and (~clipped).any()
    assert (logp.grad[clipped] == 0).all()  # no gain from moving further away
    np.testing.assert_allclose(logp.grad[~clipped], -(ratio * adv)[~clipped] / adv.size)
    # at the rollout's own policy the loss is minus the mean advantage
    at_old = ppo_clip_loss(tf.Tensor(old), old, adv)
    assert at_old.item() == pytest.approx(-adv.mean(), rel=1e-12)


@pytest.mark.parametrize("clip_eps", [None, 0.2])
def test_value_loss_gradchecks_and_takes_the_worse_of_clipped_and_not(clip_eps):
    rng = np.random.default_rng(5)
    old, returns = rng.standard_normal((2, 3, 4))
    values = tf.Tensor(old + rng.uniform(-0.5, 0.5, (3, 4)), requires_grad=True)
    assert tf.gradcheck(lambda v: value_loss(v, old, returns, clip_eps), [values])
    v = values.data
    error = (v - returns) ** 2
    if clip_eps is not None:
        error = np.maximum(error, (old + np.clip(v - old, -0.2, 0.2) - returns) ** 2)
    assert value_loss(values, old, returns, clip_eps).item() == pytest.approx(0.5 * error.mean())


@pytest.mark.parametrize("gamma, lam", [(1.0, 0.95), (0.9, 0.5), (0.99, 1.0)])
def test_gae_is_the_discounted_sum_of_td_errors(gamma, lam):
    rng = np.random.default_rng(6)
    rewards, values = rng.standard_normal((2, 3, 7))
    adv, returns = gae(rewards, values, gamma, lam)
    nxt = np.concatenate([values[:, 1:], np.zeros((3, 1))], axis=1)
    delta = rewards + gamma * nxt - values
    direct = np.array([[sum((gamma * lam) ** k * delta[b, t + k] for k in range(7 - t))
                        for t in range(7)] for b in range(3)])  # fmt: skip
    np.testing.assert_allclose(adv, direct, rtol=1e-12)
    np.testing.assert_allclose(returns, adv + values)
    if lam == 1.0:  # returns are then the discounted rewards-to-go, whatever the values
        togo = [[sum(gamma**k * rewards[b, t + k] for k in range(7 - t)) for t in range(7)]
                for b in range(3)]  # fmt: skip
        np.testing.assert_allclose(returns, togo, rtol=1e-12)


def test_heads_read_the_trunk_and_logprobs_pick_the_next_tokens():
    tf.manual_seed(0)
    idx = np.random.default_rng(7).integers(0, 7, (3, 10))
    rm = RewardModel(HeadConfig(TINY, head_std=0.5)).to(np.float64)
    r = rm(idx)
    assert r.shape == (3,)
    changed = idx.copy()
    changed[:, 2] = (changed[:, 2] + 1) % 7  # an early token: the last position attends to it
    assert not np.allclose(rm(changed).data, r.data)
    assert tf.gradcheck(rm, [idx], fast_mode=True)  # the score head and the trunk
    model = PolicyWithValue(HeadConfig(TINY)).to(np.float64)
    logits, values = model(idx)
    assert logits.shape == (3, 10, 7) and values.shape == (3, 10)
    assert (values.data == 0).all()  # the zero-initialised head: no value before training
    logp = completion_logprobs(logits, idx, 4)
    full = F.log_softmax(logits, axis=-1).data
    expected = [[full[b, t - 1, idx[b, t]] for t in range(4, 10)] for b in range(3)]
    np.testing.assert_allclose(logp.data, expected, rtol=1e-12)


def test_the_labeler_counts_distinct_words_and_ranks_pairs():
    assert labeler_score("a list of list names") == 1  # "names" is not "name"; repeats once
    assert labeler_score("Return the Value; a (string)") == 3
    assert labeler_score("listing classy") == 0  # whole words only
    np.testing.assert_array_equal(prefer(["code type", "x", "list"], ["code", "value", "name"]),
                                  [1, -1, 0])  # fmt: skip


def test_accuracy_counts_ties_as_half():
    from tinyformer.train.rlhf_data import accuracy

    assert accuracy(np.zeros(4)) == 0.5  # an untrained head: a coin, not "always wrong"
    assert accuracy(np.array([1.0, -1.0, 2.0, 0.0])) == 0.625


def test_train_rlhf_end_to_end_tiny(tmp_path, capsys):
    from tinyformer.train.gpt import TrainGPTConfig, sample, train_gpt

    # a corpus a 40-step model learns to spell: two of the labeler's words and one other
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(np.random.default_rng(0).choice(["list", "code", "xx"], 3000)))
    base = tmp_path / "base"
    train_gpt(TrainGPTConfig(data=str(corpus), n_layer=1, n_head=2, n_embd=16, block_size=16,
                             iters=40, lr=1e-2, warmup=5, eval_interval=40, eval_iters=1,
                             batch_size=16, out_dir=str(base), sample_tokens=0,
                             progress=False))  # fmt: skip
    out = tmp_path / "rlhf"
    flags = ["--data", str(corpus), "--init", str(base), "--out-dir", str(out), "--prompt-len",
             "4", "--completion-len", "12", "--demos", "32", "--sft-iters", "3", "--prompts", "8",
             "--rm-iters", "3", "--ppo-iters", "2", "--rollout", "8", "--minibatch", "4",
             "--ppo-epochs", "1", "--dpo-iters", "3", "--batch-size", "4", "--eval-prompts", "8",
             "--no-progress"]  # fmt: skip
    assert cli.main(["train", "rlhf", *flags]) == 0
    text = capsys.readouterr().out
    assert "| PPO |" in text and "| DPO |" in text and "| SFT |" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["table"]) == {"pretrained", "SFT", "PPO", "DPO"}
    assert results["table"]["SFT"]["kl"] == 0.0  # measured against itself
    assert 0 <= results["reward_model"]["test_acc"] <= 1
    log = json.loads((out / "ppo" / "log.json").read_text())
    assert len(log["reward"]) == len(log["kl"]) == len(log["score"]) == 2
    for path in ("ppo/ppo.png", "ppo/ckpt.npz", "dpo/ckpt.npz", "reward/loss.png"):
        assert (out / path).stat().st_size > 0
    assert sample(str(out / "ppo"), "list ", 4).startswith("list ")  # a GPT checkpoint
    assert cli.main(["train", "rlhf", *flags]) == 2  # a finished run is not replaced silently


def test_bad_flags_exit_2_naming_the_flag(tmp_path, capsys):
    out = str(tmp_path / "out")  # refused when parsed, before any work
    for flag, value, message in [
        ("--samples-per-prompt", "1", "--samples-per-prompt: must be at least 2, got 1"),
        ("--kl-coef", "-0.1", "--kl-coef: must be at least 0, got -0.1"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            cli.main(["train", "rlhf", flag, value, "--out-dir", out])
        assert exit_.value.code == 2 and message in capsys.readouterr().err
