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

The commands that run models are defined in `tinyformer/train/cli.py`, the course's in
`tinyformer/course/cli.py` and `launch` in `tinyformer/distributed/launch.py`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

import numpy as np

from tinyformer import __version__
from tinyformer.flags import COUNT, NONNEGATIVE, add_device_flag, ranged
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


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser (`launch` reads the command it starts with it, to check its
    flags once, before any rank starts)."""
    parser = argparse.ArgumentParser(prog="tinyformer", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"tinyformer {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="autograd on an attention layer, then gradcheck every op")
    add_device_flag(demo)
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
    hunt.add_argument(
        "--seed", type=ranged(int, NONNEGATIVE), default=0, help="which bug (default: 0)"
    )
    hunt.add_argument("--kind", default=None, help="one kind of mistake (default: any)")
    hunt.add_argument("--out", default=".", help="folder for the file (default: here)")
    hunt.add_argument("--reveal", action="store_true", help="print the planted change")
    hunt.add_argument("--force", action="store_true", help="replace an edited file")
    explain = sub.add_parser("explain", help="which implementation runs for each primitive")
    explain.add_argument(
        "primitive", nargs="?", default=None,
        help="a primitive (softmax.forward) or an op (softmax); default: all",
    )  # fmt: skip
    add_device_flag(explain)
    explain.add_argument(
        "--size", type=int, default=None,
        help="the elements of a call's first array: say whether it runs on one thread or the pool",
    )  # fmt: skip
    sub.add_parser("doctor", help="what this Python runs tinyformer with, OK or WARN per line")
    from tinyformer.distributed.launch import add_launch_command
    from tinyformer.train.cli import add_training_commands

    add_launch_command(sub)
    add_training_commands(sub)
    from tinyformer.course.cli import add_course_commands

    add_course_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from tinyformer.console import quiet_when_closed

    # A closed stdout (`tinyformer train gpt | head -1`) must not stop a run before it saves,
    # nor turn `tinyformer explain | head -1` into a traceback.
    with quiet_when_closed():
        try:
            return _dispatch(args, argv)
        except KeyboardInterrupt:  # Ctrl-C: as the shell reports it, without a traceback
            print(f"tinyformer {args.command}: interrupted", file=sys.stderr)
            return 128 + signal.SIGINT


def _dispatch(args: argparse.Namespace, argv: list[str] | None) -> int:

    if args.command in ("train", "sample", "params", "eval", "embed"):
        if argv is None and args.command not in ("params", "embed"):
            # Only as a program: never replaces a caller's process. The settings (BLAS and
            # malloc) and what they are worth are in docs/cli.md.
            restart_with_runtime_env("tinyformer.cli")
        from tinyformer.train.cli import run_training_command

        return run_training_command(args)
    if args.command == "launch":
        from tinyformer.distributed.launch import run_launch_command

        return run_launch_command(args.nproc, args.args, args.oversubscribe)
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
                print(registry.explain(name, dtype, device, args.size))
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
