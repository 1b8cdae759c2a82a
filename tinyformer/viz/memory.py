"""What a graph keeps alive for backward: the arrays each node saved, per op and per module.

Every op saves what its backward needs (`ctx.save_for_backward`), and all of it stays in memory
from the forward until backward reaches that op: this is the activation memory of training,
and for a transformer it dwarfs the parameters at long sequence lengths. An array that is a
parameter's own data (a Linear saves its weight) costs nothing extra and is listed apart; an
array saved by two ops is counted once in the totals.

    table = viz.memory(loss, trace=tr)   # or viz.memory(graph)
    print(table)                          # one row per op
    print(table.by_module(depth=1))       # summed per module
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyformer.tensor import Tensor
from tinyformer.viz.graph import Graph, Params, _truncate, check_depth, graph
from tinyformer.viz.svg import format_bytes
from tinyformer.viz.trace import Trace

__all__ = ["MemoryTable", "memory"]


@dataclass
class MemoryTable:
    rows: list[tuple[str, str, str, int]]  # (op, module, saved arrays, activation bytes)
    activations: int  # bytes saved for backward that are not a leaf's data (unique arrays)
    parameters: int  # bytes of the graph's named leaves (the parameters)
    graph: Graph | None = None  # what the rows were read from (for by_module)
    title: str = "op"

    def __str__(self) -> str:
        if self.title == "op":
            head = ("op", "module", "saved", "activations")
            rows = [(a, b, c, format_bytes(n)) for a, b, c, n in self.rows]
        else:  # per module: (module, op count, activations)
            head = ("module", "ops", "activations")
            rows = [(a, b, format_bytes(n)) for a, b, _, n in self.rows]
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(f"{v:<{w}}" for v, w in zip(r, widths)).rstrip() for r in [head, *rows]]
        lines.append(f"saved for backward (activations): {format_bytes(self.activations)}")
        lines.append(f"parameters: {format_bytes(self.parameters)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def largest(self) -> tuple[str, str, str, int]:
        """The row that saves the most."""
        return max(self.rows, key=lambda r: r[3])

    def by_module(self, depth: int = 1) -> MemoryTable:
        """Activation bytes summed per module (first `depth` levels of its name)."""
        check_depth("by_module", depth)
        if self.graph is None:
            raise ValueError("by_module: this table is already per module")
        sums: dict[str, list[int]] = {}
        for node in self.graph.ops:
            name = _truncate(node.module, depth) if node.module else "(top level)"
            row = sums.setdefault(name, [0, 0])
            row[0] += 1
            row[1] += node.activation_bytes
        rows = [(name, str(n), "", b) for name, (n, b) in sums.items()]
        return MemoryTable(rows, self.activations, self.parameters, None, "module")


def memory(root: Tensor | Graph, params: Params = None, trace: Trace | None = None) -> MemoryTable:
    """The arrays each op of `root`'s graph saved for backward, with their bytes."""
    if not isinstance(root, (Tensor, Graph)):
        raise TypeError(f"memory: root must be a Tensor or a viz.graph, got {type(root).__name__}")
    g = root if isinstance(root, Graph) else graph(root, params, trace)
    rows, unique = [], {}
    for node in g.ops:
        parts = [
            (f"={s.leaf}" if s.leaf else f"{s.shape} {s.dtype}").replace(" float", " f")
            for s in node.saved
        ]
        rows.append((node.name, node.module, ", ".join(parts), node.activation_bytes))
        unique.update({s.key: s.nbytes for s in node.saved if not s.leaf})
    params_bytes = sum(n.saved_bytes for n in g.leaves if not n.name.startswith("input "))
    return MemoryTable(rows, sum(unique.values()), params_bytes, g)
