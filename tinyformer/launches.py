"""Count the GPU launches a piece of code would issue, on a machine without a GPU.

At baby sizes a GPU step waits on the host: each kernel launch, each CuPy elementwise or
reduction call and each cuBLAS call costs the host microseconds, whatever the arrays' size. So
the number of launches per step is the first figure to watch, and the fake device
(`tinyformer.fake_device`) can count them: every array-making operation on a fake-device array
is one launch of CuPy on a real GPU, and every CUDA kernel run on the emulator is one launch.

    from tinyformer.launches import counting

    with counting() as launches:
        step()                        # on device "fake"
    launches.total                    # e.g. 812
    launches.table()                  # by op and direction: "Softmax.forward  elementwise  3"

What counts as one launch, as CuPy issues them:

- `kernel`: a CUDA kernel of `kernels/cuda/` (one `Module.launch`);
- `matmul`: a cuBLAS call (`@`, `xp.matmul`, `xp.dot`, `xp.einsum`, `xp.tensordot`);
- `elementwise`: any other array-making call (ufuncs, operators, reductions, copies, fills,
  gathers and scatters). A few CuPy calls launch two kernels (a reduction over several axes
  may); they count once here, so the count is a floor.

Views make no launch: basic slicing, `reshape` of a contiguous array, `transpose`, `squeeze`,
`xp.asarray` of a device array. Host-device copies are not launches (they are counted apart as
`transfer`, since each is a sync or a copy engine's work).

Attribution: a launch is charged to the innermost method of tinyformer named `forward`,
`backward` or `step` on the call stack (`Softmax.forward`, `GELU.backward`, `AdamW.step`) or
public function of `tinyformer.optim` (`clip_grad_norm_`); `Tensor.backward` is the engine's
own work (gradient accumulation), and "other" the rest (a model's own arithmetic). The stack
walk costs microseconds, paid only while counting: outside `counting()` each hook is one global
read.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["KINDS", "LaunchCount", "active", "counting", "record"]

KINDS = ("kernel", "matmul", "elementwise", "transfer")
DIRECTIONS = ("forward", "backward", "step")

#: The open counts, innermost last. Hooks test it (one global read) before calling `record`.
active: list[LaunchCount] = []


@dataclass(eq=False)  # nested blocks are told apart by identity, not by their counts
class LaunchCount:
    """Launches seen inside one `counting()` block, by (label, kind)."""

    counts: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """Every launch, transfers left out."""
        return sum(n for (_, kind), n in self.counts.items() if kind != "transfer")

    def by_kind(self) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for (_, kind), n in self.counts.items():
            out[kind] += n
        return out

    def by_label(self) -> dict[str, int]:
        """Launches (transfers left out) per op and direction, most first."""
        out: Counter = Counter()
        for (label, kind), n in self.counts.items():
            if kind != "transfer":
                out[label] += n
        return dict(out.most_common())

    def table(self, top: int = 25) -> str:
        rows = list(self.by_label().items())
        lines = [f"{'op and direction':40s} {'launches':>8s}"]
        lines += [f"{label:40s} {n:8d}" for label, n in rows[:top]]
        if rows[top:]:
            lines.append(f"{f'({len(rows) - top} more)':40s} {sum(n for _, n in rows[top:]):8d}")
        kinds = self.by_kind()
        lines.append(f"{'total':40s} {self.total:8d}  " + ", ".join(
            f"{k} {kinds[k]}" for k in KINDS
        ))  # fmt: skip
        return "\n".join(lines)


def _label() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "")
        if code.co_name in DIRECTIONS and "." in code.co_qualname:
            if module.startswith("tinyformer."):
                return code.co_qualname.split(".<")[0]
        if module.startswith("tinyformer.optim") and not code.co_name.startswith("_"):
            return code.co_qualname.split(".<")[0]  # clip_grad_norm_, ...
        frame = frame.f_back
    return "other"


def record(kind: str) -> None:
    """One launch of `kind` (one of KINDS): the fake device and the CUDA runtime call this."""
    if active:
        label = _label()
        for count in active:
            count.counts[label, kind] += 1


@contextlib.contextmanager
def counting() -> Iterator[LaunchCount]:
    """Count launches until the block ends; blocks nest (each counts what runs inside it)."""
    count = LaunchCount()
    active.append(count)
    try:
        yield count
    finally:
        active.remove(count)
