"""A floor under the memory of one training step, to refuse a `--batch-size` that cannot fit
before anything is allocated: `--batch-size 100000000` otherwise spends minutes allocating, or
pushes the machine into swap, before it fails.

The floor counts only activations that backward must keep, in float32, per example: for a
Transformer block, its input and the outputs of LayerNorm, the QKV projection, attention, the
output projection, the second LayerNorm and both sides of the MLP's nonlinearity (8 C + 2 d_ff
numbers per token; Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", section 4.1, count the same tensors, plus dropout masks and the T x T
attention matrices, which a fused attention need not keep). Everything else (weights, optimizer
moments, gradients, temporaries) is left out, so a batch the floor refuses could never run;
one it accepts may still be too big.
"""

from __future__ import annotations

import os

__all__ = [
    "check_batch_fits", "check_data_fits", "conv_floor", "physical_memory", "sequence_floor",
    "transformer_floor", "weights_floor",
]  # fmt: skip

FLOAT32 = 4  # bytes


def physical_memory() -> int | None:
    """The machine's memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not POSIX, or no such name
        return None


def sequence_floor(tokens: int, per_token: int) -> int:
    """Bytes one example keeps when each of its `tokens` positions keeps `per_token` numbers."""
    return FLOAT32 * tokens * per_token


def transformer_floor(tokens: int, n_layer: int, width: int, d_ff: int, vocab: int = 0) -> int:
    """Bytes one example keeps through `n_layer` blocks of width `width` over `tokens`
    positions, and `vocab` logits per position (0: no language-model head counted)."""
    return sequence_floor(tokens, n_layer * (8 * width + 2 * d_ff) + vocab)


def conv_floor(pixels: int, in_channels: int, width: int) -> int:
    """Bytes one image keeps: itself and a first convolution of `width` filters at full
    resolution, before and after its nonlinearity."""
    return FLOAT32 * pixels * (in_channels + 2 * width)


def check_batch_fits(
    batch_size: int,
    per_example: int,
    what: str,
    device: str = "cpu",
    flag: str = "--batch-size",
    sizes: str = "the model's sizes",
) -> None:
    """ValueError naming `flag` when `batch_size` examples of `per_example` bytes (a floor,
    from the functions above) exceed the machine's memory; `what` says whose floor. When one
    example alone cannot fit, no batch size can: the error names `sizes` (the flags that set
    the model's and the sequence's sizes) instead. Only on the CPU: a GPU's own memory is the
    limit there, and this does not read it."""
    total = physical_memory()
    if device != "cpu" or total is None or batch_size * per_example <= total:
        return
    gib = 2**30
    if per_example > total:
        raise ValueError(
            f"{sizes}: one example alone would keep at least {per_example / gib:,.1f} GiB of "
            f"activations for {what}, more than this machine's {total / gib:.1f} GiB of "
            f"memory, whatever {flag}; make the model or its inputs smaller"
        )
    raise ValueError(
        f"{flag} {batch_size}: one training step would keep at least "
        f"{batch_size * per_example / gib:,.1f} GiB of activations ({per_example / 2**20:.3g} "
        f"MiB per example for {what}), more than this machine's {total / gib:.1f} GiB of "
        f"memory; at most {max(1, total // per_example):,} could fit, fewer in practice"
    )


def weights_floor(n_layer: int, width: int, d_ff: int, vocab: int = 0) -> int:
    """Bytes of a Transformer's weights alone: per block the four attention projections and
    the MLP's two matrices, and a `vocab` x `width` embedding (float32)."""
    return FLOAT32 * (n_layer * (4 * width * width + 2 * width * d_ff) + vocab * width)


def check_data_fits(flags: str, nbytes: float, what: str) -> None:
    """ValueError naming `flags` (as given, e.g. "--prompts 8") when `what` they ask for
    would hold at least `nbytes` (a floor), more than the machine's memory: a count of
    examples so large that building them fails after minutes, or the machine starts to swap."""
    total = physical_memory()
    if total is None or nbytes <= total:
        return
    gib = 2**30
    raise ValueError(
        f"{flags}: {what} would hold at least {nbytes / gib:,.1f} GiB, more than this "
        f"machine's {total / gib:.1f} GiB of memory"
    )
