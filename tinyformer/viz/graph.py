"""The autograd graph of a result, as data: nodes, leaves, edges, what each node saves.

`graph(loss)` walks `loss.grad_fn` back to the leaves. Op nodes are named as PyTorch prints
a `grad_fn` (`MulBackward`, `LinearBackward`), with their outputs' shapes and dtypes and the
bytes of the arrays they saved for backward; leaves by their parameter names when `params=`
(or a `trace`) gives them, else `input 0`, `input 1`, ... Edges run the way data flows
(input -> op), listed in the order the backward pass visits them: ops from the result towards
the leaves, each op's inputs in argument order.

`Graph.collapse(depth)` merges the ops and parameters of each module (as a `viz.trace`
recorded them, or, without one, by the parameters an op reads) into one box per module;
`expand=` keeps some modules op by op. A Graph renders itself: `print(g)` as a text tree,
inline SVG in Jupyter, `g.save("graph.svg")` from a script (tinyformer/viz/svg.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tinyformer.engine import Context, _toposort
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor
from tinyformer.viz import svg
from tinyformer.viz.trace import Trace

__all__ = [
    "Graph", "Node", "Saved", "check_depth", "graph", "leaf_names", "op_name", "saved_arrays",
]  # fmt: skip

Params = Module | Mapping[str, Tensor] | Iterable[tuple[str, Tensor]] | None


class Saved(NamedTuple):
    """One array an op saved for backward."""

    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    key: int  # id of the array: the same array saved by two ops is stored once
    leaf: str  # the leaf whose data it is (a parameter, kept anyway), or ""


@dataclass
class Node:
    """One box of the graph: an op (`kind="op"`), a leaf tensor, or a collapsed module."""

    key: int
    kind: str  # "op", "leaf" or "module"
    name: str  # "MulBackward", "h.0.attn.c_attn.weight", "input 0", or a module's name
    shapes: list[tuple[tuple[int, ...], str]]  # (shape, dtype) of each output
    module: str  # dotted name of the module that made it ("" when unknown)
    saved_bytes: int = 0  # arrays kept for backward (ops), the tensor's own bytes (leaves)
    ops: int = 1  # how many op nodes a collapsed module holds
    saved: list[Saved] = field(default_factory=list)  # what an op saved for backward

    @property
    def activation_bytes(self) -> int:
        """Saved bytes that are not a leaf's own data (a parameter is in memory anyway)."""
        if self.kind == "module":
            return self.saved_bytes
        return sum(s.nbytes for s in self.saved if not s.leaf)

    @property
    def shape_text(self) -> str:
        return ", ".join(f"{tuple(s)} {d}" for s, d in self.shapes[:2]) + (
            " ..." if len(self.shapes) > 2 else ""
        )


class Graph:
    """Nodes (in backward order, each leaf after the first op that reads it) and edges."""

    def __init__(
        self,
        nodes: list[Node],
        edges: list[tuple[int, int]],
        root: int,
        tensors: dict[int, Tensor] | None = None,
    ) -> None:
        self.nodes = nodes
        self.edges = edges
        self.root = root
        self.tensors = tensors or {}  # the leaf tensors, by their node's key
        self._by_key = {n.key: n for n in nodes}
        self._inputs: dict[int, list[Node]] | None = None

    def __getitem__(self, key: int) -> Node:
        return self._by_key[key]

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def ops(self) -> list[Node]:
        return [n for n in self.nodes if n.kind != "leaf"]

    @property
    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "leaf"]

    def inputs_of(self, key: int) -> list[Node]:
        """The nodes with an edge into `key`, in argument order (a repeated input repeats)."""
        if self._inputs is None:
            self._inputs = {}
            for a, b in self.edges:
                self._inputs.setdefault(b, []).append(self[a])
        return self._inputs.get(key, [])

    def collapse(self, depth: int = 1, expand: Iterable[str] = ()) -> Graph:
        """One box per module, named by its first `depth` levels (list indices do not count a
        level: depth 1 gives `h.0`, `h.1`, `ln_f`); ops of modules in `expand` stay as ops."""
        check_depth("collapse", depth)
        if isinstance(expand, str):  # one module's name, not its letters
            expand = (expand,)
        expand = tuple(expand)
        for name in expand:
            if not isinstance(name, str):
                raise TypeError(
                    f"collapse: expand must hold module names (str), got {type(name).__name__} "
                    f"{name!r}"
                )
        groups: dict[str, Node] = {}
        target: dict[int, int] = {}
        for node in self.nodes:
            owner = node.module  # a parameter's module is its name's prefix
            if not owner or any(owner == e or owner.startswith(e + ".") for e in expand):
                target[node.key] = node.key
                continue
            name = _truncate(owner, depth)
            group = groups.get(name)
            if group is None:
                group = groups[name] = Node(-(len(groups) + 1), "module", name, [], name, 0, 0)
            if node.kind != "leaf":  # a module's box sums the activations its ops saved
                group.ops += node.ops
                group.saved_bytes += node.activation_bytes
            target[node.key] = group.key
        by_key = {g.key: g for g in groups.values()}
        nodes, placed = [], set()
        for node in self.nodes:
            key = target[node.key]
            if key not in placed:
                placed.add(key)
                nodes.append(node if key == node.key else by_key[key])
        edges, seen = [], set()
        for a, b in self.edges:
            edge = (target[a], target[b])
            if edge[0] != edge[1] and edge not in seen:
                seen.add(edge)
                edges.append(edge)
        for group in groups.values():  # what a module hands on: its latest output that leaves it
            leaving = [
                self[a]
                for a, b in self.edges
                if target[a] == group.key != target[b] and self[a].kind != "leaf"
            ]
            group.shapes = leaving[0].shapes if leaving else []
        return Graph(nodes, edges, target[self.root], self.tensors)

    def __str__(self) -> str:
        return svg.text_tree(self)

    def __repr__(self) -> str:
        return f"<Graph: {len(self.ops)} ops, {len(self.leaves)} leaves, {len(self.edges)} edges>"

    def to_svg(self, direction: str = "TB") -> str:
        """SVG, data flowing top to bottom ("TB") or left to right ("LR")."""
        return svg.to_svg(self, direction)

    def _repr_svg_(self) -> str:
        return self.to_svg()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's text view
        printer.text(str(self))

    def save(self, path: str | os.PathLike, direction: str = "TB") -> None:
        """Write the graph as SVG (`.svg`; `direction` as for `to_svg`), or as the text tree
        (`.txt`)."""
        svg.save(self, path, direction)


def check_depth(where: str, depth: Any) -> None:
    """TypeError unless `depth` is an int (not a bool), ValueError unless it is >= 1."""
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise TypeError(f"{where}: depth must be an int >= 1, got {type(depth).__name__} {depth!r}")
    if depth < 1:
        raise ValueError(f"{where}: depth must be >= 1, got {depth}")


def _truncate(module: str, depth: int) -> str:
    parts, kept, level = module.split("."), [], 0
    for part in parts:
        if not part.isdigit():
            level += 1
            if level > depth:
                break
        kept.append(part)
    return ".".join(kept)


def op_name(node: Context) -> str:
    """The node's name as PyTorch prints a grad_fn: the Function's name + "Backward"."""
    return f"{node.name}Backward"


def saved_arrays(node: Context) -> list[Any]:
    """The arrays `node` keeps for backward: those of `save_for_backward`, and arrays that
    `forward` stored as attributes of its ctx (`ctx.mask = ...`). Empty once freed."""
    arrays = [a for a in node._saved if hasattr(a, "nbytes") and hasattr(a, "shape")]
    arrays += [
        v
        for k, v in node.__dict__.items()
        if not k.startswith("_") and hasattr(v, "nbytes") and hasattr(v, "shape")
    ]
    unique = {id(a): a for a in arrays}
    return list(unique.values())


def leaf_names(params: Params) -> dict[int, str]:
    """id(tensor) -> name, from a Module, a {name: tensor} mapping or (name, tensor) pairs."""
    if params is None:
        return {}
    if isinstance(params, Module):
        pairs = params.named_parameters()
    elif isinstance(params, Mapping):
        pairs = params.items()
    elif isinstance(params, (Tensor, str, bytes)) or not isinstance(params, Iterable):
        raise TypeError(_PARAMS + f", got {type(params).__name__}")
    else:
        pairs = params
    names: dict[int, str] = {}
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            what = type(pair).__name__ + (
                f" of length {len(pair)}" if isinstance(pair, tuple) else ""
            )
            raise TypeError(_PARAMS + f"; an item is a {what}, not a (name, tensor) pair")
        name, tensor = pair
        if not isinstance(name, str):
            raise TypeError(f"params: names must be str, got {type(name).__name__} {name!r}")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"params: {name!r} is a {type(tensor).__name__}, not a Tensor")
        names.setdefault(id(tensor), name)
    return names


_PARAMS = "params must be a Module, a {name: tensor} dict or (name, tensor) pairs"


def graph(root: Tensor, params: Params = None, trace: Trace | None = None) -> Graph:
    """The autograd graph that `root.backward()` would walk.

    Args:
        root: a tensor with a `grad_fn` (a loss, or any result).
        params: names for leaves: a Module (its `named_parameters()`), a {name: tensor} dict or
            (name, tensor) pairs. Unnamed leaves are `input 0`, `input 1`, ...
        trace: a `viz.trace` that recorded the forward: each op gets the module that made it,
            and the traced model names the parameters when `params` is not given.
    """
    if not isinstance(root, Tensor):
        raise TypeError(f"graph: root must be a Tensor, got {type(root).__name__}")
    if root.grad_fn is None:
        raise ValueError("graph: root has no grad_fn (a leaf, or made without gradients)")
    if trace is not None and not isinstance(trace, Trace):
        raise TypeError(
            f"graph: trace must be what `with viz.trace(model) as tr:` gives (tr), got "
            f"{type(trace).__name__}"
        )
    if params is None and trace is not None:
        params = trace.model
    names = leaf_names(params)
    modules = trace.modules if trace is not None else {}
    nodes: list[Node] = []
    edges: list[tuple[int, int]] = []
    leaves: dict[int, Node] = {}
    tensors: dict[int, Tensor] = {}
    for ctx in reversed(_toposort([root.grad_fn])):
        saved = saved_arrays(ctx)
        node = Node(
            id(ctx),
            "op",
            op_name(ctx),
            [(tuple(s), str(d)) for s, d in ctx.outputs],
            modules.get(ctx, ""),
            sum(int(a.nbytes) for a in saved),
            saved=[Saved(tuple(a.shape), str(a.dtype), int(a.nbytes), id(a), "") for a in saved],
        )
        nodes.append(node)
        for parent in ctx.parents:
            if parent is None:
                continue
            if type(parent) is not Context and id(parent) not in leaves:
                leaves[id(parent)] = leaf = _leaf(parent, names, len(leaves))
                tensors[id(parent)] = parent
                nodes.append(leaf)
            edges.append((id(parent), id(ctx)))
    _attribute_by_params(nodes, edges)
    data_of = {id(t.data): leaves[key].name for key, t in tensors.items()}
    for node in nodes:  # a saved array that is a leaf's own data costs nothing extra
        node.saved = [s._replace(leaf=data_of.get(s.key, "")) for s in node.saved]
    return Graph(nodes, edges, id(root.grad_fn), tensors)


def _leaf(t: Tensor, names: dict[int, str], index: int) -> Node:
    name = names.get(id(t))
    module = name.rpartition(".")[0] if name else ""
    label = name if name else f"input {index}"
    return Node(id(t), "leaf", label, [(t.shape, str(t.dtype))], module, int(t.data.nbytes))


def _attribute_by_params(nodes: list[Node], edges: list[tuple[int, int]]) -> None:
    """Without a trace, an op that reads a named parameter belongs to that parameter's module."""
    by_key = {n.key: n for n in nodes}
    for a, b in edges:
        leaf, op = by_key[a], by_key[b]
        if leaf.kind == "leaf" and leaf.module and not op.module:
            op.module = leaf.module
