"""The `tinyformer` command line.

tinyformer train gpt [flags]      train a GPT (default: baby config on the embedded corpus)
tinyformer train vit|swin|cnn|fcn|segnet|unet   train an image model (digits / generated shapes)
tinyformer train bert             pretrain a tiny BERT (masked LM), then fine-tune it vs scratch
tinyformer train xlm              cross-lingual MLM + TLM vs MLM only: zero-shot transfer
tinyformer train seq2seq          train an encoder-decoder Transformer to translate dates
tinyformer train bahdanau         the same with an RNN encoder-decoder and additive attention
tinyformer train mae              pretrain a ViT as a masked autoencoder, fine-tune it vs scratch
tinyformer train siren            SIREN vs ReLU MLP vs Fourier features fitting one image (PSNR)
tinyformer train rlhf             SFT, reward model, PPO and DPO on a baby GPT vs a readable labeler
tinyformer train vilbert          pretrain a two-stream ViLBERT on captioned digits, QA vs scratch
tinyformer embed --model DIR S..  sentence embeddings and similarities with a pretrained BERT
tinyformer eval --ckpt DIR        accuracy or mIoU of a trained image model, and its plots
tinyformer sample --ckpt DIR      sample text from a trained GPT
tinyformer params gpt|bert|vit|swin   parameter counts of the named configurations, without building
tinyformer demo                   autograd on a small attention layer, then gradcheck every op
tinyformer gradcheck [--samples]  gradcheck every op (or --op NAME) and print a table
tinyformer bughunt --op NAME      plant a bug in an op's backward for a student to find
tinyformer explain [NAME]         which kernel runs for each primitive (or one, or an op's), and why
tinyformer doctor                 what this Python runs tinyformer with (install, threads, tools)
tinyformer assignment list|release   course assignments; release NAME --out DIR: a student version
tinyformer grade NAME [DIR]       grade an assignment in a tree, offline (--json: Gradescope)
tinyformer launch -n N -- ARGS    run `tinyformer ARGS` on N processes (data parallel, MPI)
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import time

import numpy as np

from tinyformer import __version__
from tinyformer.runtime import restart_with_runtime_env


def _attention_demo(device: str = "cpu") -> None:
    import tinyformer as tf
    import tinyformer.nn.functional as F

    tf.manual_seed(0)
    B, T, C, nh = 2, 5, 8, 2  # batch, time, channels, heads

    def layer(x, w_qkv, return_weights=False):
        qkv = F.linear(x, w_qkv)  # (B, T, 3C)
        q, k, v = (  # each (B, T, C) -> (B, nh, T, hs)
            t.reshape(B, T, nh, C // nh).transpose(1, 2) for t in qkv.split(C, axis=2)
        )
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=True, return_weights=return_weights
        )

    x = tf.randn(B, T, C, dtype=np.float64, requires_grad=True)
    w = tf.randn(3 * C, C, dtype=np.float64).numpy() / np.sqrt(C)  # keeps the scores O(1)
    w_qkv = tf.Tensor(w, requires_grad=True)
    print(f"A causal self-attention layer on x of shape {x.shape} (B, T, C), {nh} heads:")
    y, weights = layer(x, w_qkv, return_weights=True)
    loss = (y * y).mean()
    loss.backward()
    print(f"  loss = {loss.item():.6f}, computed by {loss.grad_fn!r}")
    print(f"  x.grad: shape {x.grad.shape}, w_qkv.grad: shape {w_qkv.grad.shape}")
    print("  attention weights of batch 0, head 0 (rows: queries; causal, so zeros above):")
    for row in weights.data[0, 0]:
        print("   ", " ".join(f"{p:.2f}" for p in row))
    ok = tf.gradcheck(lambda x, w: (layer(x, w) ** 2).mean(), [x, w_qkv])
    print(f"  gradcheck of the whole layer (full Jacobian): {'passed' if ok else 'FAILED'}")
    if device != "cpu":  # the same layer on the device: the same numbers, up to rounding
        on = [t.detach().to(device).requires_grad_() for t in (x, w_qkv)]
        (layer(*on) ** 2).mean().backward()
        diff = max(float(np.abs(t.grad.get() - h.grad).max()) for t, h in zip(on, (x, w_qkv)))
        print(f"  on {on[0].device}: the same gradients (largest difference {diff:.1e})")
    print()


def _gradcheck_all(samples: int, only: str | None) -> int:
    from tqdm import tqdm

    from tinyformer.testing import RandomDraw, all_specs
    from tinyformer.testing.checks import OpCheckError, check_backward

    specs = [s for s in all_specs() if only is None or s.name == only]
    if not specs:
        names = ", ".join(s.name for s in all_specs())
        print(f"tinyformer gradcheck: error: --op: no op named {only!r}; ops: {names}",
              file=sys.stderr)  # fmt: skip
        return 2
    rows, failures = [], 0
    for spec in tqdm(specs, desc="gradcheck", unit="op", leave=False):
        start, status = time.perf_counter(), "passed"
        for seed in range(samples):
            try:  # the test suite's gradcheck: random memory layouts, the spec's tolerances
                check_backward(spec, RandomDraw(seed))
            except OpCheckError as error:
                status, failures = f"FAILED (sample {seed})\n{error}", failures + 1
                break
        rows.append((spec.name, samples, (time.perf_counter() - start) * 1e3, status))
    width = max(len(r[0]) for r in rows)
    print(f"{'op'.ljust(width)}  samples  ms      result")
    for name, n, ms, status in rows:
        print(f"{name.ljust(width)}  {n:<7}  {ms:<6.1f}  {status}")
    print(f"\n{len(rows) - failures} of {len(rows)} ops match finite differences (float64).")
    return 1 if failures else 0


def _add_device_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda (an NVIDIA GPU, through CuPy) (default: cpu)"
    )


# `tinyformer train NAME` for the models trained by one function of one config dataclass:
# NAME -> (module, config class, train function, help, description). (GPT comes first and the
# image models share one config: they are added on their own below.)
TRAINERS = {
    "bert": (
        "tinyformer.train.bert", "TrainBertConfig", "train_bert",
        "pretrain a tiny BERT, fine-tune it, compare with training from scratch",
        "Masked-LM pretraining on the corpus, then two fine-tuning runs on a sentence task "
        "(pretrained vs random weights); about 4 minutes on 2 cores.",
    ),
    "xlm": (
        "tinyformer.train.xlm", "TrainXLMConfig", "train_xlm",
        "cross-lingual pretraining (MLM + TLM vs MLM only), zero-shot transfer to a 2nd language",
        "Numbers in two made-up languages with a shared BPE vocabulary: pretrain with masked LM "
        "plus translation LM, and with masked LM only; fine-tune a classifier in language A "
        "and test it in B, against random weights.",
    ),
    "seq2seq": (
        "tinyformer.train.seq2seq", "TrainSeq2SeqConfig", "train_seq2seq",
        "train an encoder-decoder Transformer on date translation",
        "Dates in ten human formats -> ISO 8601, with held-out dates; reports greedy and "
        "beam-search exact match and plots cross-attention.",
    ),
    "bahdanau": (
        "tinyformer.train.bahdanau", "TrainBahdanauConfig", "train_bahdanau",
        "train an RNN encoder-decoder with additive (Bahdanau) attention on date translation",
        "The dates task of `train seq2seq` with a bidirectional GRU encoder and a GRU decoder "
        "that attends to it; reports greedy exact match, ms/step, and plots the alignment.",
    ),
    "mae": (
        "tinyformer.train.mae", "TrainMAEConfig", "train_mae",
        "pretrain a ViT as a masked autoencoder, fine-tune it, compare with scratch",
        "Hide 75% of each image's patches and reconstruct them (digits by default, or "
        "--data mnist), plot reconstructions, then train the pretrained encoder and a "
        "random one as classifiers with the same budget (--probe: linear probe).",
    ),
    "siren": (
        "tinyformer.train.siren", "TrainSirenConfig", "train_siren",
        "fit an image with SIREN, a ReLU MLP and Fourier features; compare PSNR and gradients",
        "Coordinate MLPs (x, y) -> gray value, full-batch, the same depth, width and steps; "
        "reports PSNR and ms/step and plots the fits and their autograd gradients.",
    ),
    "rlhf": (
        "tinyformer.train.rlhf", "TrainRLHFConfig", "train_rlhf",
        "RLHF on a baby GPT: SFT, a reward model, PPO (and/or DPO) against a readable labeler",
        "Start from a pretrained char-level GPT (--init; a small one is pretrained there if "
        "absent), fine-tune it on demonstrations, fit a reward model to the labeler's pairwise "
        "preferences, then PPO with a KL penalty to the SFT policy and/or DPO on the same "
        "pairs; a table of the labeler's true score and the KL of every policy.",
    ),
    "vilbert": (
        "tinyformer.train.vilbert", "TrainViLBERTConfig", "train_vilbert",
        "pretrain a two-stream ViLBERT on captioned digit scenes, fine-tune it vs scratch",
        "Co-attention between image regions and words, pretrained with masked words, masked "
        "regions and image-text alignment on generated scenes of two digits, then fine-tuned "
        "to answer 'what is left of the two ?' from few labelled scenes, beside the same "
        "fine-tuning from random weights; plots a co-attention map. About 3 minutes on 2 cores.",
    ),
}  # fmt: skip


def _add_training_commands(sub: argparse._SubParsersAction) -> None:
    from tinyformer.train.args import NONNEGATIVE, POSITIVE, Range, add_dataclass_flags, ranged
    from tinyformer.train.gpt import TrainGPTConfig

    train = sub.add_parser("train", help="train a model").add_subparsers(
        dest="model", required=True
    )
    gpt = train.add_parser(
        "gpt",
        help="train a GPT language model",
        description="Train a GPT. With no flags: the baby config (4 layers, 4 heads, width 128, "
        "context 64) on CPython's bundled docs, about 3 minutes on 2 cores.",
    )
    add_dataclass_flags(gpt, TrainGPTConfig)
    for name, (module, config, _, help_text, description) in TRAINERS.items():
        command = train.add_parser(name, help=help_text, description=description)
        add_dataclass_flags(command, getattr(importlib.import_module(module), config))
    from tinyformer.train.vision import MODELS, TrainVisionConfig

    # the names as papers write them, and what each learns by default
    image_help = {
        "vit": "train a ViT classifier (digits by default)",
        "swin": "train a Swin Transformer classifier (shifted windows; digits by default)",
        "cnn": "train a CNN classifier, the ViT's baseline (digits by default)",
        "fcn": "train an FCN segmenter on generated shapes",
        "segnet": "train a SegNet segmenter (max-unpooling) on generated shapes",
        "unet": "train a U-Net segmenter (transposed convs, skips) on generated shapes",
    }
    for name in MODELS:
        image = train.add_parser(name, help=image_help.get(name, f"train {name} on images"))
        add_dataclass_flags(image, TrainVisionConfig, skip=("model",))
        image.set_defaults(model=name)
    evaluate = sub.add_parser("eval", help="evaluate a trained image model and plot it")
    evaluate.add_argument("--ckpt", required=True, help="run folder (with ckpt.npz) or .npz file")
    _add_device_flag(evaluate)
    sample = sub.add_parser("sample", help="sample text from a trained GPT")
    sample.add_argument("--ckpt", required=True, help="run folder (with ckpt.npz) or .npz file")
    sample.add_argument("--prompt", default=None, help="text to continue (default: a newline)")
    sample.add_argument(
        "--tokens", type=ranged(int, NONNEGATIVE), default=300,
        help="tokens to generate (default: 300)",
    )  # fmt: skip
    sample.add_argument(
        "--temperature", type=ranged(float, POSITIVE), default=0.8,
        help="below 1: surer, above 1: more varied (default: 0.8)",
    )  # fmt: skip
    sample.add_argument(
        "--top-k", type=ranged(int, NONNEGATIVE), default=40,
        help="keep the k likeliest tokens (default: 40; 0: all)",
    )  # fmt: skip
    sample.add_argument(
        "--top-p", type=ranged(float, Range(0, 1, open_low=True)), default=None,
        help="nucleus sampling: keep the likeliest tokens up to this mass (default: off)",
    )  # fmt: skip
    sample.add_argument("--seed", type=int, default=0, help="seed of the sampling (default: 0)")
    _add_device_flag(sample)
    params = sub.add_parser("params", help="parameter count of a named configuration")
    params.add_argument("model", choices=["gpt", "bert", "vit", "swin"])
    params.add_argument("--config", default=None, help="a configuration name (default: all)")
    embed = sub.add_parser(
        "embed",
        help="sentence embeddings with a pretrained BERT-family encoder",
        description="Mean-pooled, L2-normalised sentence embeddings (as sentence-transformers "
        "computes them) from a Hugging Face directory with config.json, model.safetensors "
        "and vocab.txt; prints the cosine similarity of every pair.",
    )
    embed.add_argument("--model", required=True, help="checkpoint directory")
    embed.add_argument("sentences", nargs="+", help="sentences to embed")
    embed.add_argument("--out", default=None, help="also save the embeddings (.npy)")
    _add_device_flag(embed)


def _params(model: str, only: str | None) -> int:
    if model == "gpt":
        from tinyformer.models.gpt import CONFIGS
    elif model == "vit":
        from tinyformer.models.vit import VIT_CONFIGS as CONFIGS
    elif model == "swin":
        from tinyformer.models.swin import SWIN_CONFIGS as CONFIGS
    else:
        from tinyformer.models.bert import BERT_CONFIGS as CONFIGS
    if only is not None and only not in CONFIGS:
        raise ValueError(f"no {model} configuration {only!r}; choose from {sorted(CONFIGS)}")
    names = [only] if only else sorted(CONFIGS)
    width = max(map(len, names))
    for name in names:
        config = CONFIGS[name]
        print(f"{name:{width}s} {config.num_parameters():>13,} parameters  {config}")
    return 0


def _embed(model: str, sentences: list[str], out: str | None, device: str = "cpu") -> int:
    from tinyformer.backend import device as parse_device
    from tinyformer.models.pretrained import SentenceEncoder

    parse_device(device)  # a missing GPU is said before the weights are read
    encoder = SentenceEncoder(model)
    encoder.model.to(device)
    vectors = encoder.embed(sentences)
    print(f"{len(sentences)} sentences -> embeddings of size {vectors.shape[1]} (unit length)")
    similarity = vectors @ vectors.T  # cosine similarity: the vectors have unit length
    width = 8
    print(" " * 4 + "".join(f"{j:>{width}}" for j in range(len(sentences))))
    for i, row in enumerate(similarity):
        print(f"{i:>3} " + "".join(f"{v:>{width}.3f}" for v in row) + f"   {sentences[i][:50]}")
    if out:
        from tinyformer.fileio import atomic_write

        atomic_write(out, lambda f: np.save(f, vectors), mode="wb")
        print(f"embeddings saved to {out}")
    return 0


def _error_line(err: BaseException) -> str:
    """One line for stderr: the message with its line breaks folded, or the error's type when
    it has none."""
    text = " ".join(str(err).split())
    if isinstance(err, MemoryError):
        return f"out of memory{': ' + text if text else ''}"
    return text or type(err).__name__


def _run_training_command(args: argparse.Namespace) -> int:
    from tinyformer.backend import DeviceUnavailable
    from tinyformer.checkpoint import CheckpointError
    from tinyformer.data import DatasetUnavailable
    from tinyformer.distributed import DistributedError
    from tinyformer.distributed.training import init_from_launcher
    from tinyformer.nn.module import StateDictError
    from tinyformer.train.loop import NonFiniteLoss, RunStopped

    try:
        init_from_launcher()  # under `mpiexec -n N`: N ranks train one model on shards
        return _run_command(args)
    # What bad input, a bad file or the machine causes; anything else is a bug in tinyformer
    # and keeps its traceback.
    except (
        CheckpointError, DatasetUnavailable, DeviceUnavailable, StateDictError, ValueError,
        OSError, MemoryError, DistributedError,
    ) as err:  # fmt: skip
        print(f"tinyformer {args.command}: error: {_error_line(err)}", file=sys.stderr)
        return 2
    except NonFiniteLoss as err:
        print(f"tinyformer {args.command}: error: {err}", file=sys.stderr)
        return 1
    except RunStopped as stop:  # saved; the loop printed how to continue
        return 128 + stop.signum
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once, as the shell reports it
        print(f"tinyformer {args.command}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT


def _run_command(args: argparse.Namespace) -> int:
    """The command named by `args`, for `_run_training_command` to report its failures."""
    if args.command == "params":
        return _params(args.model, args.config)
    if args.command == "embed":
        return _embed(args.model, args.sentences, args.out, args.device)
    if args.command == "sample":
        from tinyformer.train.gpt import sample

        top_k = args.top_k or None
        print(sample(args.ckpt, args.prompt, args.tokens, args.temperature, top_k, args.top_p,
                     args.seed, args.device))  # fmt: skip
        return 0
    if args.command == "eval":
        from tinyformer.train.vision import eval_vision

        result = eval_vision(args.ckpt, args.device)
        plots = result.pop("plots")
        print(", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in result.items()))  # fmt: skip
        print("plots: " + ", ".join(str(p) for p in plots))
        return 0
    from tinyformer.train.args import dataclass_from_args

    if args.model == "gpt":
        from tinyformer.train.gpt import TrainGPTConfig, train_gpt

        train_gpt(dataclass_from_args(TrainGPTConfig, args))
    elif args.model in TRAINERS:
        module, config, train, _, _ = TRAINERS[args.model]
        module = importlib.import_module(module)
        getattr(module, train)(dataclass_from_args(getattr(module, config), args))
    else:
        from tinyformer.train.vision import TrainVisionConfig, train_vision

        train_vision(dataclass_from_args(TrainVisionConfig, args))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tinyformer", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"tinyformer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="autograd on an attention layer, then gradcheck every op")
    _add_device_flag(demo)
    from tinyformer.train.args import COUNT, ranged  # (the training commands load it anyway)

    check = sub.add_parser("gradcheck", help="gradcheck every op against finite differences")
    check.add_argument(
        "--samples", type=ranged(int, COUNT), default=5, help="random inputs per op (default 5)"
    )
    check.add_argument("--op", default=None, help="check only this op")
    hunt = sub.add_parser(
        "bughunt",
        help="plant a bug in one op's backward, for a student to find with the checks",
        description="Writes bughunt_<op>.py: the op's source with one student-like mistake in "
        "its backward (sign, dropped term, factor, axis, unbroadcast, transpose). Find it with "
        "`pytest --tinyformer-ops bughunt_<op>.py`; --reveal shows the change.",
    )
    hunt.add_argument("--op", required=True, help="an op file's name: softmax, layer_norm, ...")
    hunt.add_argument("--seed", type=int, default=0, help="which bug (default: 0)")
    hunt.add_argument("--kind", default=None, help="one kind of mistake (default: any)")
    hunt.add_argument("--out", default=".", help="folder for the file (default: here)")
    hunt.add_argument("--reveal", action="store_true", help="print the planted change")
    hunt.add_argument("--force", action="store_true", help="replace an edited file")
    explain = sub.add_parser("explain", help="which implementation runs for each primitive")
    explain.add_argument(
        "primitive", nargs="?", default=None,
        help="a primitive (softmax.forward) or an op (softmax); default: all",
    )  # fmt: skip
    _add_device_flag(explain)
    sub.add_parser("doctor", help="what this Python runs tinyformer with, OK or WARN per line")
    from tinyformer.distributed.launch import add_launch_command

    add_launch_command(sub)
    _add_training_commands(sub)
    from tinyformer.course.cli import add_course_commands

    add_course_commands(sub)
    args = parser.parse_args(argv)
    from tinyformer.console import quiet_when_closed

    # A closed stdout (`tinyformer train gpt | head -1`) must not stop a run before it saves,
    # nor turn `tinyformer explain | head -1` into a traceback.
    with quiet_when_closed():
        return _dispatch(args, argv)


def _dispatch(args: argparse.Namespace, argv: list[str] | None) -> int:

    if args.command in ("train", "sample", "params", "eval", "embed"):
        if argv is None and args.command not in ("params", "embed"):
            # Only as a program: never replaces a caller's process. The settings (BLAS and
            # malloc) and what they are worth are in docs/cli.md.
            restart_with_runtime_env("tinyformer.cli")
        return _run_training_command(args)
    if args.command == "launch":
        from tinyformer.distributed.launch import run_launch_command

        return run_launch_command(args.nproc, args.args)
    if args.command == "demo":
        from tinyformer.backend import DeviceUnavailable, device

        try:
            device(args.device)  # a missing GPU is said before anything runs
        except (DeviceUnavailable, ValueError) as err:
            print(f"tinyformer demo: error: {err}", file=sys.stderr)
            return 2
        _attention_demo(args.device)
        return _gradcheck_all(samples=3, only=None)
    if args.command == "gradcheck":
        return _gradcheck_all(args.samples, args.op)
    if args.command in ("assignment", "grade"):
        from tinyformer.course.cli import run_course_command

        return run_course_command(args)
    if args.command == "doctor":
        from tinyformer.doctor import run

        return run()
    if args.command == "bughunt":
        from tinyformer.bughunt import run_command

        return run_command(args.op, args.seed, args.kind, args.out, args.reveal, args.force)
    from tinyformer import registry

    names = registry.primitives()
    if args.primitive:  # a primitive, or an op for all of its primitives ("softmax")
        names = [n for n in names if args.primitive in (n, n.split(".")[0])]
        if not names:
            known = ", ".join(registry.primitives())
            print(f"tinyformer explain: error: no primitive or op named {args.primitive!r}; "
                  f"primitives: {known}", file=sys.stderr)  # fmt: skip
            return 2
    from tinyformer.backend import DeviceUnavailable

    device = None if args.device == "cpu" else args.device
    try:
        for dtype in ("float32", "float64"):
            for name in names:
                print(registry.explain(name, dtype, device))
    except (DeviceUnavailable, ValueError) as err:
        print(f"tinyformer explain: error: {err}", file=sys.stderr)
        return 2
    from tinyformer.runtime import describe

    print("process settings (tinyformer doctor says more):")
    for line in describe():
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
