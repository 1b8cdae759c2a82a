"""The backward pass, one node at a time: `for step in viz.BackwardStepper(loss): print(step)`.

The stepper drives the engine's own generator of steps (`engine._backward_steps`, which
`backward()` itself consumes whole), so stepping to the end leaves exactly the `.grad` that
`loss.backward()` would. Each `Step` shows the node, the gradient that reached its output, what
it sent to each input, and the running `.grad` of every leaf after it. The steps are kept:
iterate again, index them (`stepper[3]`), or scrub through them with `stepper.widget()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.engine import _backward_steps, _root_grad
from tinyformer.tensor import Tensor
from tinyformer.viz.graph import Graph, Node, Params, graph
from tinyformer.viz.svg import format_bytes
from tinyformer.viz.trace import Trace

__all__ = ["BackwardStepper", "Step"]


@dataclass
class Step:
    """What one node of the backward pass did."""

    index: int  # 0 for the first node visited (the one that made the root)
    total: int  # op nodes in the graph (a node no gradient reaches is skipped)
    node: Node  # its box in the graph: name, module, output shapes, saved bytes
    grad_outputs: tuple  # dL/d(each output of the node), as its backward received them
    grad_inputs: list[tuple[str, Any]]  # (input's name, dL/d(input)) sent to each input
    leaf_grads: dict[str, Any]  # every leaf's .grad after this step (None: nothing yet)

    def __str__(self) -> str:
        n = self.node
        where = f"  [{n.module}]" if n.module else ""
        lines = [f"step {self.index + 1}/{self.total}: {n.name}{where}  -> {n.shape_text}"]
        if n.saved_bytes:
            lines.append(f"  saved for backward: {format_bytes(n.saved_bytes)}")
        for i, g in enumerate(self.grad_outputs):
            label = "grad in" if len(self.grad_outputs) == 1 else f"grad in {i}"
            lines.append(f"  {label:<9} {preview(g)}")
        for name, g in self.grad_inputs:
            lines.append(f"  sends    {name}: {preview(g)}")
        grads = self.leaf_grads
        if len(grads) > 6:  # a model's many parameters: those this step reached, and a count
            sent = {name for name, _ in self.grad_inputs}
            have = sum(g is not None for g in grads.values())
            grads = {k: v for k, v in grads.items() if k in sent}
            lines.append(f"  .grad    {have} of {len(self.leaf_grads)} leaves have one")
        if grads:
            lines.append("  .grad    " + "; ".join(f"{k}: {preview(v)}" for k, v in grads.items()))
        return "\n".join(lines)


def preview(a: Any) -> str:
    """A short view of an array: its values when it has few, else its shape and norm."""
    if a is None:
        return "None"
    a = backend.to_host(a)
    if a.size <= 6:
        values = np.array2string(np.asarray(a).ravel(), precision=4, suppress_small=True)
        return values if a.ndim <= 1 else f"{values} (shape {a.shape})"
    return f"shape {a.shape}, norm {np.linalg.norm(a.astype(np.float64)):.4g}"


class BackwardStepper:
    """Run `root.backward()` one node at a time.

    Args:
        root: the result to differentiate (a scalar loss, or pass `grad=`).
        params: names for the leaves (a Module, a {name: tensor} dict or (name, tensor) pairs).
        trace: a `viz.trace` of the forward, to show each node's module.
        grad: dL/d(root) when the root is not a single number.
        retain_graph: keep the saved arrays after each node, as `backward(retain_graph=True)`.
    """

    def __init__(
        self,
        root: Tensor,
        params: Params = None,
        trace: Trace | None = None,
        grad: Any = None,
        retain_graph: bool = False,
    ) -> None:
        self.graph: Graph = graph(root, params, trace)
        self._leaves = {n.key: n.name for n in self.graph.leaves}
        self._tensors = self.graph.tensors
        self._engine = _backward_steps([root], [_root_grad(root, grad)], retain_graph)
        self.steps: list[Step] = []

    def __iter__(self) -> Iterator[Step]:
        yield from self.steps
        total = len(self.graph.ops)
        for ctx, gys, input_grads in self._engine:
            sent = []
            for parent, g in zip(ctx.parents, input_grads):
                if parent is not None:
                    key = id(parent)
                    name = self._leaves.get(key) or self.graph[key].name
                    sent.append((name, g))
            leaf_grads = {name: self._tensors[key].grad for key, name in self._leaves.items()}
            step = Step(len(self.steps), total, self.graph[id(ctx)], gys, sent, leaf_grads)
            self.steps.append(step)
            yield step

    def run(self) -> list[Step]:
        """Step to the end; returns every step."""
        for _ in self:
            pass
        return self.steps

    def __getitem__(self, index: int | slice) -> Step | list[Step]:
        steps = self.run()
        if isinstance(index, slice):
            return steps[index]
        if isinstance(index, bool) or not hasattr(index, "__index__"):
            raise TypeError(
                f"BackwardStepper: steps are indexed by int, got {type(index).__name__}"
            )
        if not -len(steps) <= index < len(steps):
            raise IndexError(
                f"BackwardStepper: step {index} out of range: the backward has {len(steps)} "
                f"steps (0 to {len(steps) - 1}, or negative from the end)"
            )
        return steps[index]

    def __len__(self) -> int:
        return len(self.run())

    def widget(self) -> Any:
        """A slider over the steps in Jupyter (needs ipywidgets); without ipywidgets, every step
        as text, and a line saying how to get the slider."""
        steps = self.run()
        try:
            import ipywidgets as widgets
        except ImportError:
            note = "(install ipywidgets for a slider; every step follows)"
            return _Text("\n\n".join([note] + [str(s) for s in steps]))
        out = widgets.Output()
        slider = widgets.IntSlider(value=0, min=0, max=max(len(steps) - 1, 0), description="step")

        def show(change: Any = None) -> None:
            out.clear_output(wait=True)
            with out:
                print(steps[slider.value])

        slider.observe(show, names="value")
        show()
        return widgets.VBox([slider, out])


class _Text:
    """Text that Jupyter shows as text (a str would be shown quoted)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text
