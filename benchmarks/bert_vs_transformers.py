"""A full-size BERT loaded from a Hugging Face directory: tinyformer's NumPy loader and forward
against `transformers` on the same checkpoint. Prints a table and writes JSON.

    python benchmarks/bert_vs_transformers.py              # random bert-base, made on first run
    python benchmarks/bert_vs_transformers.py --model DIR  # a real checkpoint directory

Without --model, a randomly initialised `transformers.BertModel(BertConfig())` (bert-base:
109,482,240 parameters) is saved with `save_pretrained` into out/bench-bert/checkpoint, with a
30,522-line vocabulary (special tokens, characters, then words of CPython's docs). Random
weights give meaningless vectors, but the arithmetic, the loader and the timings are those of
a real bert-base.

torch and transformers are only the comparison here, never dependencies of tinyformer.
"""

from __future__ import annotations

import argparse
import string
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A class definition is an executable statement.",
    "Exceptions are raised when an error is detected.",
    "Strings are immutable sequences of characters.",
] * 2


def make_checkpoint(path: Path) -> None:
    import torch
    from transformers import BertConfig, BertModel

    from tinyformer.data.text import pydoc_topics

    torch.manual_seed(0)
    BertModel(BertConfig()).eval().save_pretrained(path)
    vocab = ["[PAD]", *(f"[unused{i}]" for i in range(99)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab += chars + [f"##{c}" for c in chars]
    seen = set(vocab)
    words = Counter(w.strip(string.punctuation) for w in pydoc_topics().lower().split())
    for word, _ in words.most_common():
        if len(vocab) == 30522:
            break
        if word and word not in seen:
            vocab.append(word)
            seen.add(word)
    vocab += [f"[extra{i}]" for i in range(30522 - len(vocab))]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")


def timed(fn, repeats: int = 5) -> tuple[float, list[float]]:
    """(first call ms, later calls ms)."""
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times[0], times[1:], out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="checkpoint directory")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench-bert")
    args = parser.parse_args()
    import torch
    from transformers import BertModel

    from tinyformer.autograd import no_grad
    from tinyformer.bench import machine, print_table, save_json
    from tinyformer.models.pretrained import load_bert

    torch.set_num_threads(2)
    path = args.model or args.out / "checkpoint"
    if args.model is None and not (path / "model.safetensors").is_file():
        print(f"writing a random bert-base checkpoint to {path} ...", flush=True)
        make_checkpoint(path)

    start = time.perf_counter()
    model, tok = load_bert(path)
    load_s = time.perf_counter() - start
    batch = tok(SENTENCES)
    with no_grad():
        first, later, hidden = timed(lambda: model(*batch.values()).data)
    start = time.perf_counter()
    reference = BertModel.from_pretrained(path).eval()
    ref_load_s = time.perf_counter() - start
    inputs = {k: torch.tensor(v) for k, v in batch.items()}
    with torch.no_grad():
        ref_first, ref_later, ref = timed(lambda: reference(**inputs).last_hidden_state.numpy())
    real = batch["attention_mask"] == 1
    diff = float(np.abs(hidden - ref)[real].max())
    shape = f"{len(SENTENCES)} x {batch['input_ids'].shape[1]} tokens"
    rows = [
        {"framework": "tinyformer", "load_s": round(load_s, 2), "first_ms": round(first),
         "forward_ms_median": round(float(np.median(later)), 1)},
        {"framework": "transformers", "load_s": round(ref_load_s, 2), "first_ms": round(ref_first),
         "forward_ms_median": round(float(np.median(ref_later)), 1)},
    ]  # fmt: skip
    print_table(f"{model.num_parameters():,}-parameter BERT, forward on {shape}", rows,
                ["framework", "load_s", "first_ms", "forward_ms_median"])  # fmt: skip
    print(f"\nlargest difference of the last hidden states: {diff:.2e}")
    save_json(args.out / "bert_vs_transformers.json", {
        "machine": machine(), "checkpoint": str(path), "batch": shape, "results": rows,
        "max_abs_diff": diff,
    })  # fmt: skip
    print(f"JSON: {args.out / 'bert_vs_transformers.json'}")


if __name__ == "__main__":
    main()
