"""The `tinyformer` commands that run models: `train NAME`, `eval`, `sample`, `params`, `embed`.

`tinyformer.cli` builds the parser and hands these commands here; `run_training_command` turns
what bad input, a bad file or the machine causes into one line on stderr and an exit status.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tinyformer.train.args import (
    NONNEGATIVE,
    POSITIVE,
    Range,
    add_dataclass_flags,
    add_device_flag,
    dataclass_from_args,
    ranged,
)
from tinyformer.train.bahdanau import TrainBahdanauConfig, train_bahdanau
from tinyformer.train.bert import TrainBertConfig, train_bert
from tinyformer.train.gpt import TrainGPTConfig, train_gpt
from tinyformer.train.mae import TrainMAEConfig, train_mae
from tinyformer.train.rlhf import TrainRLHFConfig, train_rlhf
from tinyformer.train.seq2seq import TrainSeq2SeqConfig, train_seq2seq
from tinyformer.train.siren import TrainSirenConfig, train_siren
from tinyformer.train.vilbert import TrainViLBERTConfig, train_vilbert
from tinyformer.train.vision import MODELS, TrainVisionConfig, eval_vision, train_vision
from tinyformer.train.xlm import TrainXLMConfig, train_xlm

__all__ = ["TRAINERS", "Command", "add_training_commands", "run_training_command"]


class Command(NamedTuple):
    """`tinyformer train NAME` for a model trained by one function of one config dataclass."""

    config: type  # the dataclass whose fields are the command's flags
    train: Callable[[Any], Any]  # config -> what the run returns
    help: str  # one line in `tinyformer train --help`
    description: str  # the command's own --help


# NAME -> Command. (GPT comes first and the image models share one config: they are added on
# their own below.)
TRAINERS = {
    "bert": Command(
        TrainBertConfig, train_bert,
        "pretrain a tiny BERT, fine-tune it, compare with training from scratch",
        "Masked-LM pretraining on the corpus, then two fine-tuning runs on a sentence task "
        "(pretrained vs random weights); about 4 minutes on 2 cores.",
    ),
    "xlm": Command(
        TrainXLMConfig, train_xlm,
        "cross-lingual pretraining (MLM + TLM vs MLM only), zero-shot transfer to a 2nd language",
        "Numbers in two made-up languages with a shared BPE vocabulary: pretrain with masked LM "
        "plus translation LM, and with masked LM only; fine-tune a classifier in language A "
        "and test it in B, against random weights.",
    ),
    "seq2seq": Command(
        TrainSeq2SeqConfig, train_seq2seq,
        "train an encoder-decoder Transformer on date translation",
        "Dates in ten human formats -> ISO 8601, with held-out dates; reports greedy and "
        "beam-search exact match and plots cross-attention.",
    ),
    "bahdanau": Command(
        TrainBahdanauConfig, train_bahdanau,
        "train an RNN encoder-decoder with additive (Bahdanau) attention on date translation",
        "The dates task of `train seq2seq` with a bidirectional GRU encoder and a GRU decoder "
        "that attends to it; reports greedy exact match, ms/step, and plots the alignment.",
    ),
    "mae": Command(
        TrainMAEConfig, train_mae,
        "pretrain a ViT as a masked autoencoder, fine-tune it, compare with scratch",
        "Hide 75% of each image's patches and reconstruct them (digits by default, or "
        "--data mnist), plot reconstructions, then train the pretrained encoder and a "
        "random one as classifiers with the same budget (--probe: linear probe).",
    ),
    "siren": Command(
        TrainSirenConfig, train_siren,
        "fit an image with SIREN, a ReLU MLP and Fourier features; compare PSNR and gradients",
        "Coordinate MLPs (x, y) -> gray value, full-batch, the same depth, width and steps; "
        "reports PSNR and ms/step and plots the fits and their autograd gradients.",
    ),
    "rlhf": Command(
        TrainRLHFConfig, train_rlhf,
        "RLHF on a baby GPT: SFT, a reward model, PPO (and/or DPO) against a readable labeler",
        "Start from a pretrained char-level GPT (--init; a small one is pretrained there if "
        "absent), fine-tune it on demonstrations, fit a reward model to the labeler's pairwise "
        "preferences, then PPO with a KL penalty to the SFT policy and/or DPO on the same "
        "pairs; a table of the labeler's true score and the KL of every policy.",
    ),
    "vilbert": Command(
        TrainViLBERTConfig, train_vilbert,
        "pretrain a two-stream ViLBERT on captioned digit scenes, fine-tune it vs scratch",
        "Co-attention between image regions and words, pretrained with masked words, masked "
        "regions and image-text alignment on generated scenes of two digits, then fine-tuned "
        "to answer 'what is left of the two ?' from few labelled scenes, beside the same "
        "fine-tuning from random weights; plots a co-attention map. About 3 minutes on 2 cores.",
    ),
}  # fmt: skip


def add_training_commands(sub: argparse._SubParsersAction) -> None:
    """Add `train NAME` (one subcommand per model), `eval`, `sample`, `params` and `embed`."""
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
    for name, command in TRAINERS.items():
        flags = train.add_parser(name, help=command.help, description=command.description)
        add_dataclass_flags(flags, command.config)
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
    add_device_flag(evaluate)
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
    sample.add_argument(
        "--seed", type=ranged(int, NONNEGATIVE), default=0, help="seed of the sampling (default: 0)"
    )
    add_device_flag(sample)
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
    add_device_flag(embed)


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


def run_training_command(args: argparse.Namespace) -> int:
    """Run the command parsed into `args`; its exit status: 2 (and one line on stderr) for what
    bad input, a bad file or the machine causes, 1 for a loss that is not finite, 128 + the
    signal for a run stopped by one."""
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
    """The command named by `args`, for `run_training_command` to report its failures."""
    if args.command == "params":
        return _params(args.model, args.config)
    if args.command == "embed":
        return _embed(args.model, args.sentences, args.out, args.device)
    if args.command == "sample":
        from tinyformer.train.gpt import sample  # (the parser above names a variable `sample`)

        top_k = args.top_k or None
        print(sample(args.ckpt, args.prompt, args.tokens, args.temperature, top_k, args.top_p,
                     args.seed, args.device))  # fmt: skip
        return 0
    if args.command == "eval":
        result = eval_vision(args.ckpt, args.device)
        plots = result.pop("plots")
        print(", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in result.items()))  # fmt: skip
        print("plots: " + ", ".join(str(p) for p in plots))
        return 0
    if args.model == "gpt":
        train_gpt(dataclass_from_args(TrainGPTConfig, args))
    elif args.model in TRAINERS:
        command = TRAINERS[args.model]
        command.train(dataclass_from_args(command.config, args))
    else:
        train_vision(dataclass_from_args(TrainVisionConfig, args))
    return 0
