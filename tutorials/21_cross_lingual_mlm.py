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
# # 21. Cross-lingual masked LM: pretrain in two languages, fine-tune in one
#
# XLM (Lample & Conneau, 2019) is BERT with two changes: one vocabulary and one encoder for
# every language, with a *language embedding* added to each token; and a second pretraining
# task, *translation language modelling* (TLM): a sentence and its translation side by side,
# masked on both sides, so a word hidden in one language can be read off the other. A
# classifier fine-tuned in one language is then tested, zero-shot, in another.
#
# This notebook covers four steps:
#
# 1. Two made-up languages that write the numbers 0-999, and a BPE vocabulary shared by both.
# 2. How a TLM row is packed: positions restart at the translation, language ids switch there.
# 3. Pretrain with MLM + TLM, and with MLM only.
# 4. Fine-tune a "less / same / greater" classifier in language A and test it in B.
#
# `tinyformer train xlm` runs the full comparison (docs/xlm.md); CI runs a short one here.

# %%
import os
import tempfile

import numpy as np

from tinyformer.data.mlm import mask_tokens
from tinyformer.data.numerals import count_sentence, write_number
from tinyformer.data.tlm import pack_translation_pairs
from tinyformer.train.xlm import TrainXLMConfig, finetune, prepare, pretrain, pretrain_batch

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
# The runs go into a temporary directory, removed when this kernel stops.
workdir = tempfile.TemporaryDirectory(prefix="tiny-xlm-")
cfg = TrainXLMConfig(
    pretrain_iters=10 if SMALL else 800,
    finetune_iters=5 if SMALL else 400,
    eval_interval=10 if SMALL else 200,
    batch_size=8 if SMALL else 32,
    d_model=32 if SMALL else 64,
    d_ff=64 if SMALL else 256,
    train_pairs=100 if SMALL else 2000,
    test_pairs=60 if SMALL else 600,
    out_dir=workdir.name,
    progress=False,
)
data = prepare(cfg)
tok = data.tokenizer
for n in (7, 47, 247, 999):
    print(f"{n:>4}   A: {write_number(n, 'a'):<22} B: {write_number(n, 'b')}")

# %% [markdown]
# A writes big-endian ("2 hundred, 40, 7"), B little-endian ("7, 40, 2 hundred"), and they
# spell with disjoint letters (a-m and n-z). The BPE vocabulary is trained on text in both;
# here is how it cuts a sentence of each, and which tokens the two have in common:

# %%
a, b = count_sentence(246, 3, "a"), count_sentence(246, 3, "b")
print([tok.decode([i]) for i in tok.encode(a)])
print([tok.decode([i]) for i in tok.encode(b)])
print("shared tokens:", [tok.decode([i]) for i in set(tok.encode(a)) & set(tok.encode(b))])

# %% [markdown]
# Only the comma. An MLM trained on each language alone has almost nothing to tie "kal" to
# "wor" (both 7), except that the two languages have the same structure: numbers count up,
# a digit word is followed by a tens word or a comma. TLM gives the tie directly.
#
# **Exercise.** A TLM row is `[CLS] a [SEP] b [SEP]`. Write `my_tlm_row(len_a, len_b,
# lang_a, lang_b)` returning the positions and language ids (each a list of
# `len_a + len_b + 3` ints) of such a row: positions count from 0 over `[CLS] a [SEP]` and
# restart at 0 for `b [SEP]`; language ids are `lang_a` over the first part and `lang_b`
# over the second.


# %%
def my_tlm_row(len_a: int, len_b: int, lang_a: int, lang_b: int) -> tuple[list, list]:
    ### BEGIN SOLUTION
    head, tail = len_a + 2, len_b + 1
    positions = list(range(head)) + list(range(tail))
    langs = [lang_a] * head + [lang_b] * tail
    return positions, langs
    ### END SOLUTION


ids, positions, langs, _ = pack_translation_pairs(
    [tok.encode(a)], [tok.encode(b)], [0], [1], **data.special()
)
mine = my_tlm_row(len(tok.encode(a)), len(tok.encode(b)), 0, 1)
assert mine == (positions[0].tolist(), langs[0].tolist()), mine
print("positions:", positions[0])
print("languages:", langs[0])

# %% [markdown]
# Masking is BERT's (15% of the real tokens, 80/10/10), over the whole row, so words are
# hidden on both sides:

# %%
rng = np.random.default_rng(0)
specials = (data.pad_id, data.cls_id, data.sep_id, data.mask_id)
inputs, labels = mask_tokens(ids, mask_id=data.mask_id, vocab_size=tok.vocab_size,
                             special_ids=specials, rng=rng, mlm_probability=0.3)  # fmt: skip
names = {data.cls_id: "[CLS]", data.sep_id: "[SEP]", data.mask_id: "[MASK]"}
print([names[i] if i in names else tok.decode([i]) for i in inputs[0].tolist()])

# %% [markdown]
# ## Pretraining, twice
#
# Both runs take the same steps from the same initial weights and see monolingual sentences
# of both languages; the MLM + TLM run gives half of each batch to translation pairs.

# %%
(inputs, positions, langs, mask), labels = pretrain_batch(data, cfg, True, rng)
print(f"one MLM + TLM batch: {inputs.shape} ids, {int((labels != -100).sum())} to predict")
tlm_model, tlm_log = pretrain(cfg, data, tlm=True)
mlm_model, mlm_log = pretrain(cfg, data, tlm=False)
for name, log in (("MLM + TLM", tlm_log), ("MLM only", mlm_log)):
    e = log["evals"][-1]
    print(f"{name:<10} masked accuracy: {e['mlm_acc']:.1%} on sentences, "
          f"{e['tlm_acc']:.1%} on translation pairs")  # fmt: skip

# %% [markdown]
# **Question:** both models are scored on masked translation pairs. Why can the MLM-only
# model not use the second sentence as well as the TLM model, even though it sees the whole
# row? What does it do with it instead?
#
# ## Fine-tune in A, test in B
#
# The task: for two numbers x, y, is x less than, the same as, or greater than y? Only pairs
# written in A are labelled. Each classifier is tested on the same held-out pairs written in
# A, and in B, which it never saw labelled.

# %%
rows = {}
for name, model in (("MLM + TLM", tlm_model), ("MLM only", mlm_model), ("scratch", None)):
    init = None if model is None else {
        k: v for k, v in model.state_dict().items() if k.startswith("xlm.")
    }  # fmt: skip
    log = finetune(cfg, data, init, f"finetune-{name.replace(' ', '').replace('+', '-')}")
    rows[name] = log["evals"][-1]
print(f"{'pretraining':<12} {'accuracy in A':>14} {'zero-shot in B':>15}")
for name, e in rows.items():
    print(f"{name:<12} {e['acc_a']:>14.1%} {e['acc_b']:>15.1%}")

# %% [markdown]
# At this notebook's CI size the numbers are noise; docs/xlm.md has a full run's table.
#
# **Question:** the scratch model's tokens in B were never trained at all during
# fine-tuning (no B token appears in an A example). What does its zero-shot accuracy in B
# measure, then?
#
# **Question:** our languages share no token but the comma. Real languages share many
# (digits, names, subwords), and XLM's MLM-only models still transfer. Which of those
# shared tokens would help most here, and how would you add one to the generator?
