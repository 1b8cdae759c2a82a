"""The backward engine: the graph's nodes, their topological order, and backward itself.

A node (`Context`) is what one call of a `Function` remembers: the Function, one edge per input
(the input's own node, or the leaf tensor itself), the shapes and dtypes of its outputs, and
whatever `forward` saved. This module walks those nodes; it never imports `Tensor` nor
`Function` (tensor.py and autograd.py import this module, not the other way round). What it
needs of them is written below as two protocols, as minitorch's `Variable`: a tensor
(`Variable`) is recognised by its `grad_fn` (None for a leaf), and the engine writes only its
`.grad` and reads its `.data`, `_output` and `_hooks` (and, for the tensors `backward()` starts
from, `requires_grad`, `shape`, `size`, `dtype` and `device`); of a Function
(`BackwardFunction`) it calls only `backward(ctx, *grads)` and reads its `__name__`.

`backward()` sorts the nodes reachable from the outputs topologically (iteratively: a chain of
10,000 ops must not hit Python's recursion limit), then visits them from the outputs towards the
leaves. Each node's backward runs once, on the sum of every gradient that reached its outputs
(fan-out accumulates), and leaves add what reaches them into `.grad`. The engine checks what
each backward returns (count, shape, dtype) and names the op in every error; a gradient always
has its tensor's dtype (one computed in a mixed op's promoted dtype is cast back). It refuses to
run a backward whose saved arrays an in-place op has changed since (`versions.py`). Afterwards
it frees each node's saved arrays unless `retain_graph=True`. Double backward (gradients of
gradients) is not supported: backward functions work on raw arrays and build no graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tinyformer import backend, grad_mode, versions
from tinyformer.grad_mode import check_finite
from tinyformer.hooks import run_grad_hooks
from tinyformer.inplace_array import with_inplace
from tinyformer.leaf_grads import accumulate_leaf, hold, owner

__all__ = ["BackwardFunction", "Context", "Variable", "backward", "grad", "queue_callback"]


@runtime_checkable
class Variable(Protocol):
    """What the engine needs of a tensor (`Tensor` is one): its node and its gradient."""

    grad_fn: Context | None  # the node of the op that made it; None for a leaf
    grad: Any  # an array or None: what backward accumulates into a leaf (and a retained tensor)
    data: Any  # its array: a leaf's gradient must match its shape and dtype
    _output: int  # which output of `grad_fn` it is (0 unless the op returned several)
    _hooks: list[Callable[[Any], None]] | None  # called with it after its .grad changes
    _grad_hooks: list[Callable[[Any], Any]] | None  # a leaf's, on each gradient before .grad

    @property
    def requires_grad(self) -> bool: ...

    # read of the tensors backward() starts from, to check or imply their gradient
    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def size(self) -> int: ...

    @property
    def dtype(self) -> Any: ...

    @property
    def device(self) -> Any: ...


@runtime_checkable
class BackwardFunction(Protocol):
    """What the engine needs of a `Function` class (`ctx.function`): its name, for every error,
    and its backward, one gradient (or None) per input from one gradient per output."""

    __name__: str

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> Any: ...


class Context:
    """What one call of a `Function` remembers for its backward pass: the node of the graph.

    `forward` may also store plain attributes on it (`ctx.axis = axis`); they are freed with the
    saved arrays after backward.
    """

    __slots__ = (
        "function",
        "needs_input_grad",
        "parents",
        "parent_outputs",
        "outputs",
        "_saved",
        "_freed",
        "_retained",
        "_grad_hooks",
        "_clock",
        "__dict__",
        "__weakref__",
    )

    def __init__(self, function: BackwardFunction, needs_input_grad: tuple[bool, ...]) -> None:
        self.function = function
        self.needs_input_grad = needs_input_grad
        self._saved: tuple = ()
        self._freed = False
        self._retained: dict | None = None  # output index -> weakref of a retain_grad() tensor
        self._grad_hooks: dict | None = None  # output index -> its tensor's register_hook()s

    @property
    def name(self) -> str:
        return self.function.__name__

    def save_for_backward(self, *arrays: Any) -> None:
        """Keep these arrays (or None) for `backward`; they are freed after it runs."""
        self._saved = arrays

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(_freed_message(self))
        return self._saved

    def _free(self) -> None:
        self._saved = ()
        self.__dict__.clear()
        self._freed = True

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def _freed_message(ctx: Context) -> str:
    return (
        f"backward through {ctx.name} a second time: its saved arrays were freed after the first "
        "backward. Pass retain_graph=True to the first .backward() if you need to go through the "
        "graph again."
    )


def _toposort(roots: Sequence[Context]) -> list[Context]:
    """Nodes reachable from `roots`, each after all of its inputs' nodes (iterative DFS)."""
    ### BEGIN SOLUTION A1.2 library: withheld from releases until A1 is due
    order: list[Context] = []
    visited: set[int] = set()
    stack = [(root, False) for root in roots]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for parent in node.parents:
            if type(parent) is Context and id(parent) not in visited:
                stack.append((parent, False))
    return order
    ### END SOLUTION


def _check_gradients(node: Context, grads: Any) -> tuple:
    """Validate what a backward returned: one gradient per input, of the input's shape and dtype.

    A gradient in the dtype of the node's output, for an input of another float dtype (float32
    weights times float64 data), is cast to the input's dtype, as PyTorch's engine casts it: a
    gradient has its tensor's dtype. Any other dtype is a bug of the backward."""
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != len(node.parents):
        raise RuntimeError(
            f"{node.name}.backward returned {len(grads)} gradients, but its forward took "
            f"{len(node.parents)} inputs: return one gradient (or None) per input."
        )
    checked = None  # a list, once a gradient is cast
    for i, g in enumerate(grads):
        parent = node.parents[i]
        if parent is None or g is None:
            continue
        if type(parent) is Context:
            shape, dtype = parent.outputs[node.parent_outputs[i]]
        else:  # a leaf tensor
            shape, dtype = parent.data.shape, parent.data.dtype
        if g.dtype != dtype and g.shape == shape and _promoted(node, g.dtype, dtype):
            checked = checked or list(grads)
            checked[i] = g = g.astype(dtype)
        if g.shape != shape or g.dtype != dtype:
            raise RuntimeError(
                f"{node.name}.backward returned a gradient of shape {g.shape} and dtype {g.dtype} "
                f"for input {i}, which has shape {shape} and dtype {dtype}."
            )
        if grad_mode._anomaly_enabled:
            check_finite(g, node.name, f"backward gradient for input {i}")
    return grads if checked is None else tuple(checked)


def _promoted(node: Context, got: np.dtype, want: np.dtype) -> bool:
    """Whether a gradient of dtype `got` for an input of dtype `want` is the op computing in
    its output's float dtype (mixed inputs promote), rather than a backward's dtype bug."""
    return got.kind == want.kind == "f" and any(got == dtype for _, dtype in node.outputs)


def _add_to_node(grads: dict[int, Any], node: Context, output: int, g: Any) -> None:
    """Add `g` to the gradient of output `output` of `node`: an array for a single-output node,
    a list with one slot per output otherwise."""
    key = id(node)
    if len(node.outputs) == 1:
        grads[key] = g if key not in grads else grads[key] + g
    else:
        slots = grads.setdefault(key, [None] * len(node.outputs))
        slots[output] = g if slots[output] is None else slots[output] + g


def _output_grads(node: Context, gy: Any) -> tuple:
    """What `backward` takes: the one gradient, or one per output with zeros for outputs that
    did not reach the roots (PyTorch also hands backward zeros there, not None)."""
    if len(node.outputs) == 1:
        return (gy,)
    xp = backend.get_array_module(*gy)  # on the device of the outputs that did get one
    return tuple(
        xp.zeros(shape, dtype) if g is None else g for g, (shape, dtype) in zip(gy, node.outputs)
    )


def _run_backward(
    roots: Sequence[Variable],
    root_grads: Sequence[Any],
    retain_graph: bool,
    captured: dict[int, Any] | None = None,
) -> None:
    for _ in _backward_steps(roots, root_grads, retain_graph, captured):
        pass
    callbacks, _callbacks[:] = list(_callbacks), []
    for callback in callbacks:
        callback()


def _backward_steps(
    roots: Sequence[Variable],
    root_grads: Sequence[Any],
    retain_graph: bool,
    captured: dict[int, Any] | None = None,
) -> Iterator[tuple[Context, tuple, tuple]]:
    """The backward pass, one node at a time: after each node's backward has run and its
    gradients have reached its inputs (leaves included), yields (node, the gradients of its
    outputs, the gradients it sent to its inputs), then frees the node. `backward()` consumes it
    whole; `tinyformer.viz.BackwardStepper` shows each step."""
    grads: dict[int, Any] = {}
    nodes = []
    taken = {id(o): o for o in map(owner, root_grads)}  # the caller's: never a leaf's .grad
    # Leaves with register_hook()s: their gradient summed over this backward, so that each
    # hook sees it once, whole, as in PyTorch (the others are accumulated edge by edge).
    hooked: dict[int, list] = {}
    for root, g in zip(roots, root_grads):
        if root.grad_fn is None:
            if root._grad_hooks:
                hold(hooked, root, g)
            else:
                accumulate_leaf(root, g, captured)
        else:
            _add_to_node(grads, root.grad_fn, root._output, g)
            nodes.append(root.grad_fn)
    for node in reversed(_toposort(nodes)):
        gy = grads.pop(id(node), None)
        if gy is None:  # every path to this node carried a None gradient
            continue
        if node._freed:
            raise RuntimeError(_freed_message(node))
        if node._clock != versions.clock:  # something was written in place since it ran
            versions.check(node)
        gys = (gy,) if len(node.outputs) == 1 else _output_grads(node, gy)
        if node._grad_hooks is not None:  # before retain_grad, which sees what they return
            gys = tuple(
                run_grad_hooks(node._grad_hooks[i], g) if node._grad_hooks.get(i) else g
                for i, g in enumerate(gys)
            )
        if node._retained is not None:
            for output, ref in node._retained.items():
                if (tensor := ref()) is not None:
                    g = gys[output]
                    tensor.grad = with_inplace(g.copy() if tensor.grad is None else tensor.grad + g)
        input_grads = _check_gradients(node, node.function.backward(node, *gys))
        for parent, output, g in zip(node.parents, node.parent_outputs, input_grads):
            if parent is None or g is None:
                continue
            if type(parent) is Context:
                key = id(parent)
                if key not in grads and len(parent.outputs) == 1:  # the first to reach it
                    grads[key] = g
                else:
                    _add_to_node(grads, parent, output, g)
            elif parent._grad_hooks:
                hold(hooked, parent, g)
            else:
                accumulate_leaf(parent, g, captured, taken)
        yield node, gys, input_grads  # before the free, so that a viewer can read what it saved
        if not retain_graph:
            node._free()
    for leaf, g in hooked.values():
        accumulate_leaf(leaf, run_grad_hooks(leaf._grad_hooks, g), captured, taken)


# Functions to call once the running backward has finished (`queue_callback`).
_callbacks: list[Callable[[], None]] = []


def queue_callback(callback: Callable[[], None]) -> None:
    """Call `callback()` when the backward now running ends: how DistributedDataParallel waits
    for its last gradient all-reduces before `backward()` returns."""
    _callbacks.append(callback)


def _root_grad(t: Variable, g: Any) -> Any:
    if not t.requires_grad:
        raise RuntimeError(
            "backward: this tensor does not require grad and has no grad_fn; create the inputs "
            "with requires_grad=True (and not under no_grad) to differentiate through them."
        )
    if g is None:
        if t.size != 1:
            raise RuntimeError(
                f"backward: a gradient can be implied only for a single-element output, but this "
                f"one has shape {t.shape}. Reduce it first (e.g. .sum()) or pass grad= of that "
                "shape."
            )
        return backend.get_array_module(t.data).ones_like(t.data)
    g = g.data if hasattr(g, "grad_fn") else g  # a Tensor's array
    g = backend.to_device(g if hasattr(g, "shape") else np.asarray(g), t.device)
    if g.shape != t.shape:
        raise RuntimeError(f"backward: grad has shape {g.shape} but the output has {t.shape}")
    return g.astype(t.dtype, copy=False)


def backward(
    tensors: Variable | Sequence[Variable],
    grad_tensors: Any | Sequence[Any] | None = None,
    retain_graph: bool = False,
) -> None:
    """Accumulate d(sum_i <grad_i, tensor_i>)/d(leaf) into the `.grad` of every leaf."""
    tensors = [tensors] if hasattr(tensors, "grad_fn") else list(tensors)
    if grad_tensors is None or hasattr(grad_tensors, "shape"):  # one Tensor or array
        grad_tensors = [grad_tensors] * len(tensors) if grad_tensors is None else [grad_tensors]
    try:
        root_grads = [_root_grad(t, g) for t, g in zip(tensors, grad_tensors)]
        _run_backward(tensors, root_grads, retain_graph)
    finally:
        _callbacks.clear()  # a backward that failed leaves none for the next one


def grad(
    outputs: Variable | Sequence[Variable],
    inputs: Variable | Sequence[Variable],
    grad_outputs: Any | Sequence[Any] | None = None,
    retain_graph: bool = False,
    create_graph: bool = False,
) -> list[Any]:
    """Gradients of the outputs with respect to leaf `inputs` (one tensor or several), returned
    as arrays (None where no path leads); `.grad` attributes are left untouched, as in
    `torch.autograd.grad`. Gradients of gradients (`create_graph=True`) are not supported."""
    if create_graph:
        raise NotImplementedError(
            "grad: create_graph=True (gradients of gradients) is not supported: backward "
            "functions compute on arrays, so a gradient has no graph of its own"
        )
    outputs = [outputs] if hasattr(outputs, "grad_fn") else list(outputs)
    inputs = [inputs] if hasattr(inputs, "grad_fn") else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif hasattr(grad_outputs, "shape"):  # one Tensor or array
        grad_outputs = [grad_outputs]
    for t in inputs:
        if t.grad_fn is not None:
            raise ValueError("grad: inputs must be leaf tensors (created by the user)")
    captured: dict[int, Any] = {id(t): None for t in inputs}
    root_grads = [_root_grad(t, g) for t, g in zip(outputs, grad_outputs)]
    _run_backward(outputs, root_grads, retain_graph, captured)
    return [captured[id(t)] for t in inputs]
