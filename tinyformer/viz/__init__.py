"""See autograd at work, in a notebook or a script.

- `graph(loss, params=model)`: the graph backward walks; `print(g)`, inline SVG in Jupyter,
  `g.save("graph.svg")`, `g.collapse(depth=1)` for one box per module.
- `trace(model)`: a `with` block that records which module made each node.
- `BackwardStepper(loss)`: the backward pass one node at a time, with its gradients.
- `memory(loss)`: what each node saved for backward, in bytes, per op and per module.
"""

from tinyformer.viz.graph import Graph, Node, Saved, graph
from tinyformer.viz.memory import MemoryTable, memory
from tinyformer.viz.stepper import BackwardStepper, Step
from tinyformer.viz.trace import Trace, trace

__all__ = [
    "BackwardStepper",
    "Graph",
    "MemoryTable",
    "Node",
    "Saved",
    "Step",
    "Trace",
    "graph",
    "memory",
    "trace",
]
