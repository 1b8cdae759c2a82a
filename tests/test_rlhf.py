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
    # the score is read at the last token: the only position that has seen it
    changed = idx.copy()
    changed[:, -1] = (changed[:, -1] + 1) % 7
    assert (rm(changed).data != r.data).all()
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
    from tinyformer.train.rlhf.data import accuracy

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
    out = str(tmp_path / "out")
    assert cli.main(["train", "rlhf", "--samples-per-prompt", "1", "--out-dir", out]) == 2
    assert "--samples-per-prompt must be at least 2, got 1" in capsys.readouterr().err
    assert cli.main(["train", "rlhf", "--kl-coef", "-0.1", "--out-dir", out]) == 2
    assert "--kl-coef must be at least 0, got -0.1" in capsys.readouterr().err


# PPO's rollout and update, DPO and SFT, as `train rlhf` calls them: properties that hold
# whatever the weights, each failing on a realistic slip of the code that calls the losses.

P, T = 4, 10  # prompt and whole-sequence lengths of the tiny rollouts: L = 6 completion tokens


def _ppo_models(score: float = 2.0):
    """A policy whose value head reads the trunk, a reference GPT with other weights, and a
    reward model that scores every sequence `score` (its head is the bias alone)."""
    from tinyformer.models.gpt import GPT

    tf.manual_seed(1)
    model = PolicyWithValue(HeadConfig(TINY, head_std=0.5)).to(np.float64)
    ref = GPT(TINY).to(np.float64)
    rm = RewardModel(HeadConfig(TINY)).to(np.float64)
    rm.score.bias.data[...] = score
    seqs = np.random.default_rng(8).integers(0, 7, (5, T))
    return model, ref, rm, seqs


def _rlhf_config(**changes):
    from tinyformer.train.rlhf import TrainRLHFConfig

    return TrainRLHFConfig(prompt_len=P, completion_len=T - P, **changes)


def test_ppo_rewards_end_with_the_score_and_gae_takes_lambda_not_gamma():
    from tinyformer.train.rlhf.ppo import _rollout

    model, ref, rm, seqs = _ppo_models(score=2.0)
    # lambda 0 and no KL penalty: each return is the one-step target r_t + V(next state), so
    # the score (at the last token only) is the last return and the others are the next values
    roll = _rollout(_rlhf_config(kl_coef=0.0, lam=0.0), model, ref, rm, seqs)
    values = roll["values"]
    assert np.abs(values).min() > 0  # a value head that reads the trunk
    np.testing.assert_allclose(roll["returns"][:, -1], 2.0, rtol=1e-12)
    np.testing.assert_allclose(roll["returns"][:, :-1], values[:, 1:], rtol=1e-12)
    # lambda 1, gamma 1: every return is the reward to go, the score, whatever the values
    roll = _rollout(_rlhf_config(kl_coef=0.0, lam=1.0), model, ref, rm, seqs)
    np.testing.assert_allclose(roll["returns"], 2.0, rtol=1e-12)


def test_ppo_kl_penalty_lowers_the_reward_of_tokens_the_policy_likes_more_than_the_reference():
    from tinyformer.train.rlhf.ppo import _rollout

    model, ref, rm, seqs = _ppo_models(score=2.0)
    roll = _rollout(_rlhf_config(kl_coef=0.5, lam=1.0), model, ref, rm, seqs)
    with tf.no_grad():
        logp = completion_logprobs(model(seqs)[0], seqs, P).data
        ref_logp = completion_logprobs(ref(seqs)[0], seqs, P).data
    log_ratio = (logp - ref_logp).sum(axis=1)  # (B,)
    assert np.abs(log_ratio).min() > 0.01
    # the return of the first token is the whole completion's reward: score - coef * log ratio
    np.testing.assert_allclose(roll["returns"][:, 0], 2.0 - 0.5 * log_ratio, rtol=1e-10)
    assert roll["kl"] == pytest.approx(log_ratio.mean(), rel=1e-10)
    assert roll["reward"] == pytest.approx(2.0)


def test_ppo_values_are_read_at_the_state_each_token_is_drawn_in():
    from tinyformer.train.rlhf.ppo import _rollout

    model, ref, rm, seqs = _ppo_models()
    cfg = _rlhf_config(kl_coef=0.1, lam=0.95)
    before = _rollout(cfg, model, ref, rm, seqs)["values"]
    for j in range(T - P):  # change the j-th completion token
        changed = seqs.copy()
        changed[:, P + j] = (changed[:, P + j] + 1) % 7
        after = _rollout(cfg, model, ref, rm, changed)["values"]
        # the value of the state token j is drawn in has not seen token j ...
        np.testing.assert_array_equal(after[:, : j + 1], before[:, : j + 1])
        # ... and every later state has (the last token itself is never a state)
        assert (np.abs(after[:, j + 1 :] - before[:, j + 1 :]) > 0).all()


def test_ppo_update_regresses_the_value_head_on_the_returns():
    from tinyformer.optim import AdamW
    from tinyformer.train.rlhf.ppo import _update

    model, _, _, seqs = _ppo_models()
    cfg = _rlhf_config(ppo_epochs=1, minibatch=len(seqs), rollout=len(seqs), vf_coef=1.0)
    with tf.no_grad():
        logits, values = model(seqs)
    logp = completion_logprobs(logits, seqs, P).data
    old = values.data[:, P - 1 : T - 1]  # the value of each completion token's state
    advantages = np.random.default_rng(9).standard_normal(old.shape)

    def moved(returns: np.ndarray) -> bool:
        """Whether one update moves the value head (a fresh copy of the model each time)."""
        copy = PolicyWithValue(HeadConfig(TINY, head_std=0.5)).to(np.float64)
        copy.load_state_dict(model.state_dict())
        head = [p.data.copy() for p in copy.v_head.parameters()]
        optimizer = AdamW(copy.parameters(), lr=1e-2, weight_decay=0.0)
        roll = {"logp": logp, "values": old, "advantages": advantages, "returns": returns}
        _update(cfg, copy, optimizer, seqs, roll, np.random.default_rng(0), 0)
        return any((p.data != h).any() for p, h in zip(copy.v_head.parameters(), head))

    # returns equal to the values: no value error, no gradient for the head, whatever the
    # advantages (which train the policy only)
    assert not moved(old.copy())
    assert moved(old + 1.0)  # and a value error moves it


def test_dpo_starts_at_log_2_the_policy_being_its_reference(tmp_path):
    from tinyformer.data import CharTokenizer
    from tinyformer.models.gpt import GPT
    from tinyformer.train.rlhf.data import Pairs
    from tinyformer.train.rlhf.dpo import dpo
    from tinyformer.train.rlhf.run import Stage

    tf.manual_seed(2)
    sft_model = GPT(TINY).eval()
    rng = np.random.default_rng(10)
    pairs = [Pairs(rng.integers(0, 7, (6, T)), rng.integers(0, 7, (6, T)), np.arange(6))
             for _ in range(2)]  # fmt: skip
    cfg = _rlhf_config(dpo_iters=1, batch_size=6, dpo_beta=1.0, eval_prompts=2,
                       out_dir=str(tmp_path), progress=False)  # fmt: skip
    _, log = dpo(cfg, sft_model, CharTokenizer("abcdefg"), pairs[0], pairs[1],
                 rng.integers(0, 7, (2, P)), Stage(tmp_path / "dpo", {}))  # fmt: skip
    # at the start the implicit reward beta log(pi / pi_ref) is 0 for every completion, so
    # the loss is log 2 whatever the pairs: the chosen completion's reference log-probability
    # set against the rejected one's would make it 2 beta (log pi_c - log pi_r) instead
    assert log["loss"][0] == pytest.approx(np.log(2), abs=1e-5)
    assert log["evals"][0]["iter"] == 0
    assert log["evals"][0]["test"] == pytest.approx(np.log(2), abs=1e-5)


def test_sft_learns_every_completion_token_and_no_prompt_token(tmp_path):
    from tinyformer.data import CharTokenizer
    from tinyformer.models.gpt import GPT
    from tinyformer.train.rlhf import sft
    from tinyformer.train.rlhf.run import Stage

    text = " ".join(np.random.default_rng(0).choice(["list", "code", "xx"], 300))
    tokenizer = CharTokenizer(text)
    config = GPTConfig(block_size=12, vocab_size=len(tokenizer.chars), n_layer=1, n_head=2,
                       n_embd=8)  # fmt: skip
    base = GPT(config)
    seen = []
    forward = base.forward

    def recording(idx, targets=None):
        if targets is not None:
            seen.append((np.array(idx), np.array(targets)))
        return forward(idx, targets)

    base.forward = recording
    cfg = _rlhf_config(demos=8, sft_iters=1, batch_size=4, out_dir=str(tmp_path), progress=False)
    sft(cfg, base, tokenizer, text, Stage(tmp_path / "sft", {}))
    assert len(seen) >= 2  # the evaluation's batch and the training step's
    for x, y in seen:
        learned = y != -100
        # the targets are the next tokens, learned from the position that predicts the first
        # completion token (P - 1) to the end: the L completion tokens, no prompt token
        assert (~learned[:, : P - 1]).all() and learned[:, P - 1 :].all()
        assert learned.sum(axis=1).tolist() == [T - P] * len(y)
        np.testing.assert_array_equal(y[:, :-1][learned[:, :-1]], x[:, 1:][learned[:, :-1]])
