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
# The same from the command line:
#
# ```
# tinyformer embed --model $TINYFORMER_BERT_DIR "A man is playing a guitar." "Someone plays music."
# ```
#
# With `transformers` installed, the test suite checks that this loader matches it
# (`tests/test_pretrained.py`). It also checks against a real checkpoint when
# `TINYFORMER_BERT_DIR` is set.
