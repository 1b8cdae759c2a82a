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
# # 12. A real pretrained encoder on tinyformer
#
# Real BERT-family weights run on tinyformer's own ops with NumPy: no torch, and no
# `transformers`. This notebook:
#
# 1. Opens the safetensors format byte by byte.
# 2. Loads a Hugging Face checkpoint directory (`config.json`, `model.safetensors`,
#    `vocab.txt`).
# 3. Computes sentence embeddings and compares sentence similarities.
#
# Point `TINYFORMER_BERT_DIR` at a downloaded BERT-architecture checkpoint, for example
# `sentence-transformers/all-MiniLM-L6-v2` or `bert-base-uncased`, saved with its
# `model.safetensors`. Without one, the notebook says so and writes a tiny random checkpoint
# of the same format, so every step still runs; its similarities are meaningless.

# %%
import json
import os
import struct
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from tinyformer.autograd import no_grad
from tinyformer.data.wordpiece import SPECIAL_TOKENS
from tinyformer.models.pretrained import SentenceEncoder, load_bert
from tinyformer.safetensors import load_file, save_file

checkpoint = os.environ.get("TINYFORMER_BERT_DIR")
if checkpoint and Path(checkpoint, "model.safetensors").is_file():
    print(f"using the checkpoint in {checkpoint}")
    REAL = True
else:
    REAL = False
    print("No pretrained checkpoint found (set TINYFORMER_BERT_DIR to a directory with "
          "config.json, model.safetensors and vocab.txt).\nWriting a tiny random one instead: "
          "the code below runs the same, but its similarities mean nothing.")  # fmt: skip

# %% [markdown]
# ## Writing a checkpoint in Hugging Face's layout
#
# The stand-in checkpoint shows what the loader expects. Its tensor names are Hugging Face's:
#
# - `encoder.layer.0.attention.self.query.weight`, ...
# - Linear weights stored as (out, in).
# - A `config.json` with Hugging Face's field names.

# %%
if not REAL:
    rng = np.random.default_rng(0)
    words = "a man woman is playing guitar music someone plays the stock market fell today".split()
    vocab = [*SPECIAL_TOKENS, *words, "."]
    C, FF, L = 32, 64, 2

    def w(*shape):
        return (0.2 * rng.standard_normal(shape)).astype(np.float32)

    tensors = {"embeddings.word_embeddings.weight": w(len(vocab), C),
               "embeddings.position_embeddings.weight": w(64, C),
               "embeddings.token_type_embeddings.weight": w(2, C),
               "embeddings.LayerNorm.weight": np.ones(C, np.float32),
               "embeddings.LayerNorm.bias": np.zeros(C, np.float32)}  # fmt: skip
    for i in range(L):
        p = f"encoder.layer.{i}."
        shapes = {"attention.self.query": (C, C), "attention.self.key": (C, C),
                  "attention.self.value": (C, C), "attention.output.dense": (C, C),
                  "intermediate.dense": (FF, C), "output.dense": (C, FF)}  # fmt: skip
        for name, (o, n) in shapes.items():
            tensors[p + name + ".weight"], tensors[p + name + ".bias"] = w(o, n), w(o)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[p + ln + ".weight"] = np.ones(C, np.float32)
            tensors[p + ln + ".bias"] = np.zeros(C, np.float32)
    # A temporary directory, removed when this kernel stops.
    workdir = tempfile.TemporaryDirectory(prefix="tiny-bert-ckpt-")
    checkpoint = workdir.name
    save_file(tensors, Path(checkpoint, "model.safetensors"))
    Path(checkpoint, "vocab.txt").write_text("\n".join(vocab) + "\n")
    Path(checkpoint, "config.json").write_text(json.dumps({
        "model_type": "bert", "vocab_size": len(vocab), "hidden_size": C,
        "num_hidden_layers": L, "num_attention_heads": 4, "intermediate_size": FF,
        "max_position_embeddings": 64, "type_vocab_size": 2, "hidden_act": "gelu"}))  # fmt: skip

# %% [markdown]
# ## The safetensors format, by hand
#
# The format has three parts:
#
# 1. 8 bytes giving the header length N, little-endian.
# 2. N bytes of JSON saying where each tensor's bytes are.
# 3. The raw bytes.
#
# Nothing in it can execute, unlike a pickle.

# %%
path = Path(checkpoint, "model.safetensors")
with open(path, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
names = [k for k in header if k != "__metadata__"]  # optional free-form metadata
print(f"{path.stat().st_size:,} bytes; header {n:,} bytes; {len(names)} tensors")
for name in names[:5]:
    print(f"  {name:55} {header[name]}")
tensors = load_file(path)
print(sum(t.size for t in tensors.values()), "numbers in total")

# %% [markdown]
# ## Loading and tokenizing
#
# `load_bert` does three things:
#
# - renames the tensors: the query, key and value matrices become one stacked `c_attn`;
# - checks every shape against `config.json`;
# - builds the WordPiece tokenizer from `vocab.txt`.

# %%
model, tok = load_bert(checkpoint)
print(f"{model.config.n_layer} layers, width {model.config.d_model}, "
      f"{model.num_parameters():,} parameters; vocabulary {tok.vocab_size}")  # fmt: skip
print(tok.tokenize("A man is playing the guitar."))

# %% [markdown]
# ## Sentence embeddings and similarity
#
# sentence-transformers makes a sentence vector in two steps:
#
# 1. Average the encoder's token vectors over the real tokens.
# 2. Scale the average to unit length.
#
# Then the dot product of two vectors is their cosine similarity. With a real checkpoint,
# sentences about the same thing score high.

# %%
sentences = ["A man is playing a guitar.", "Someone plays music.", "A woman is playing music.",
             "The stock market fell today.", "Markets dropped sharply."]  # fmt: skip
encoder = SentenceEncoder(checkpoint)
vectors = encoder.embed(sentences)
similarity = vectors @ vectors.T
fig, ax = plt.subplots(figsize=(5.5, 4.5))
im = ax.imshow(similarity, vmin=-1 if not REAL else 0, vmax=1, cmap="viridis")
ax.set_xticks(range(len(sentences)), [s[:18] for s in sentences], rotation=45, ha="right")
ax.set_yticks(range(len(sentences)), [s[:18] for s in sentences])
fig.colorbar(im, label="cosine similarity")
ax.set_title("sentence similarity" + ("" if REAL else " (random weights: meaningless)"))
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Mean pooling, by hand
#
# The sentences above have different lengths, so the tokenizer pads them to the longest and
# returns an `attention_mask`, 1 at real tokens and 0 at padding. The encoder's vectors at the
# padded positions are not zero, and they must not count in the average.
#
# **Exercise 12.1** — write `my_mean_pool(hidden, attention_mask)`: hidden (B, T, C) floats,
# attention_mask (B, T) of 0/1 -> (B, C) float64 unit vectors, the mean of each sentence's
# vectors over its real tokens only, scaled to length 1. No loop over sentences is needed. The
# check cell compares your vectors with `encoder.embed`'s: the largest relative error should be
# below 1e-6, and every vector should have length 1.


# %%
def my_mean_pool(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    # Exercise 12.1: masked mean over T, then L2-normalise each row: (B, T, C) -> (B, C).
    ### BEGIN SOLUTION
    m = attention_mask.astype(np.float64)[:, :, None]  # (B, T, 1)
    mean = (hidden.astype(np.float64) * m).sum(axis=1) / m.sum(axis=1)  # (B, C)
    return mean / np.linalg.norm(mean, axis=1, keepdims=True)
    ### END SOLUTION


batch = encoder.tokenizer(sentences, max_length=encoder.max_length)
with no_grad():
    hidden = encoder.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
print("hidden:", hidden.shape, "attention_mask:", batch["attention_mask"].shape)
pooled = my_mean_pool(hidden.numpy(), batch["attention_mask"])

# %%
# Check Exercise 12.1: against SentenceEncoder.embed.
assert pooled.shape == vectors.shape, f"Exercise 12.1: want {vectors.shape}, got {pooled.shape}"
rel = np.max(np.abs(pooled - vectors) / np.maximum(1e-8, np.abs(pooled) + np.abs(vectors)))
print(f"relative error against encoder.embed: {rel:.1e}")
assert np.allclose(np.linalg.norm(pooled, axis=1), 1), "Exercise 12.1: vectors must have length 1"
assert rel < 1e-6, f"Exercise 12.1: the vectors differ from encoder.embed's (relative {rel:.1e})"

# %% [markdown]
# **Question:** how much padding did the shortest sentence get? What would its vector be
# pulled towards if the padded positions were averaged in too?
# <!-- ANSWER: it is padded to the longest sentence's length (count the zeros in its row of
# the mask); averaging them in would pull every short sentence towards the common "padding"
# vectors, making short sentences look alike whatever they say. -->
#
# **Question:** after normalising, the dot product is the cosine similarity. What would the
# dot product of unnormalised means favour?
# <!-- ANSWER: vectors of large norm: sentences whose token vectors happen to be long would
# score high with everything, whatever the angle. -->

# %% [markdown]
# The same from the command line:
#
# ```
# tinyformer embed --model $TINYFORMER_BERT_DIR "A man is playing a guitar." "Someone plays music."
# ```
#
# With `transformers` installed, the test suite checks that this loader matches it
# (`tests/test_pretrained.py`). It also checks against a real checkpoint when
# `TINYFORMER_BERT_DIR` is set.
