"""CUDA graphs, as `torch.cuda.CUDAGraph`: capture a training step once, replay it with one launch.

    import tinyformer.cuda

    x, y = static tensors on the device                 # the step's inputs live here
    def step(x, y):                                     # forward + backward (+ anything that
        _, loss = model(x, y)                           #   launches only: see the rules)
        loss.backward()
        return loss
    graph = tinyformer.cuda.graphs.capture(step, x, y, state=model)
    for xb, yb in batches:
        loss = graph.replay(xb, yb)   # copies xb, yb into x, y; one launch for the whole step
        optimizer.step()              # eager, outside the graph (see "What a step may not do")

At baby sizes a GPU step waits on the host: hundreds of launches of microseconds each, for
about a millisecond of GPU work (docs/cuda-kernels.md). A graph records the launches once and
replays them with one call. On a GPU, `capture` runs the step eagerly `warmup` times on a side
stream (kernels compile, the memory pool fills), then records it with CuPy's stream capture
(on a non-default stream, with the default memory pool: the stream-ordered async pool failed on
replay). While a graph is warmed up or captured, `graph_safe()` is true, and primitives choose
kernels that capture: the linear layers run the tiled GEMM of `kernels/cuda/gemm.cu`, because
CuPy refuses cuBLAS during capture.

What a step may not do, since a replay repeats the capture's launches with the capture's
arguments and addresses (checked; `GraphError` names what broke the rule):
- copy between host and device: a read back (`float(loss)`, `.item()`) is a sync that capture
  refuses, and a host-to-device copy would replay the capture's values (an optimizer that
  uploads its step count each step does: run it eagerly after `replay`);
- call cuBLAS (a matrix product the GEMM does not cover: run it outside, or add a kernel);
- give a tensor of `state` or an input a new array (`p.data = p.data - lr * g`): the graph
  keeps writing the old one. Update in place. Gradients may be rebound: the graph writes the
  arrays the capture left in `.grad`.
- launch different work on different calls (Python branches on values, counters on the host).

On the fake device (`device="fake"`, CI) there is no graph to record: `capture` runs the step
the same way (warm-up, then a recording run, with the CUDA kernels preferred, so the emulator
runs what the GPU would), and `replay` calls the step again on the same static inputs and
copies its outputs into the captured ones, as a graph writes them. Each run is counted
(`tinyformer.launches`) and checked against the rules above: no transfers, no cuBLAS, the same
launches by op and kind as the recording, the same arrays in `state` and the inputs. That is
the contract a GPU graph needs, tested without one.

Memory: PyTorch captures into a private pool, so that eager code never receives memory the
graph's temporaries use. CuPy's default pool keeps its free blocks per stream, so the side
stream, kept alive with the graph and used for nothing else, serves as that private pool: its
blocks are not handed to allocations on the stream the loop runs on. (To confirm on a GPU.)
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tinyformer import backend, launches

__all__ = ["CUDAGraph", "GraphError", "capture", "graph_safe", "is_current_stream_capturing"]

_state = {"graph_safe": 0, "capturing": False}


class GraphError(RuntimeError):
    """A step that a CUDA graph cannot replay faithfully; the message says which rule broke."""


def graph_safe() -> bool:
    """Whether a graph is being warmed up or captured: primitives then choose kernels that
    capture (the linear layers' GEMM instead of cuBLAS)."""
    return _state["graph_safe"] > 0


def is_current_stream_capturing() -> bool:
    """As `torch.cuda.is_current_stream_capturing`: true inside `capture`'s recording run."""
    return bool(_state["capturing"])


@contextlib.contextmanager
def _graph_safe(recording: bool) -> Iterator[None]:
    _state["graph_safe"] += 1
    _state["capturing"] = recording
    try:
        yield
    finally:
        _state["graph_safe"] -= 1
        _state["capturing"] = False


def _tensors(state: Any) -> list[tuple[str, Any]]:
    """(name, tensor) for a module (its named parameters), a tensor, or an iterable of them."""
    if hasattr(state, "named_parameters"):
        return list(state.named_parameters())
    if hasattr(state, "data") and hasattr(state, "grad"):
        return [("tensor", state)]
    found: list[tuple[str, Any]] = []
    for i, item in enumerate(state):
        named = _tensors(item)
        found += [(f"[{i}]" if n == "tensor" else n, t) for n, t in named]
    return found


def _arrays(outputs: Any) -> list[Any]:
    """The device arrays of a step's outputs (a tensor, an array, or a tuple/list of them)."""
    if outputs is None:
        return []
    if isinstance(outputs, (tuple, list)):
        return [a for o in outputs for a in _arrays(o)]
    return [getattr(outputs, "data", outputs)]


class CUDAGraph:
    """A captured step: `replay(*inputs)` copies the inputs into the static ones and runs the
    step's launches again; `outputs` are the static outputs it writes (as the step returned
    them at capture). `replays` counts the replays."""

    def __init__(self, step: Callable, inputs: tuple, watched: list[tuple[str, Any]],
                 device: backend.Device) -> None:  # fmt: skip
        self.step = step
        self.inputs = inputs
        self.device = device
        self.outputs: Any = None
        self.replays = 0
        self._watched = watched
        self._ids = _identities(watched)
        self._launches: Counter = Counter()
        self._graph: Any = None
        self._stream: Any = None  # the capture's stream: its pool blocks are the graph's

    def replay(self, *inputs: Any) -> Any:
        """Copy `inputs` (host or device arrays or tensors; none: keep the static ones) into
        the static inputs, replay, and return the static outputs. Asynchronous on a GPU, as
        PyTorch's: read the outputs when needed (a read is a sync)."""
        if inputs:
            if len(inputs) != len(self.inputs):
                raise GraphError(
                    f"replay: the graph was captured with {len(self.inputs)} inputs, got "
                    f"{len(inputs)}"
                )
            for i, (static, new) in enumerate(zip(self.inputs, inputs)):
                _copy_into(static, new, f"input {i}")
        self._check_identities("before replay")
        if self._graph is not None:
            self._graph.launch()
        else:
            self._fake_replay()
        self.replays += 1
        return self.outputs

    def _fake_replay(self) -> None:
        outputs, count = _run(self.step, self.inputs, self.device, recording=True)
        if count.counts != self._launches:
            raise GraphError(
                f"replay {self.replays + 1}: the step launched other work than at capture "
                f"(launches by op and kind now {_diff(count.counts, self._launches)}); a graph "
                "repeats the captured launches: make the step's work the same on every call"
            )
        self._check_identities(f"replay {self.replays + 1}")
        new, static = _arrays(outputs), _arrays(self.outputs)
        if len(new) != len(static):
            raise GraphError("replay: the step returned a different number of outputs")
        for s, a in zip(static, new):
            if a is not s:
                s[...] = a  # where a graph writes its outputs: the captured arrays

    def _check_identities(self, when: str) -> None:
        now = _identities(self._watched)
        for (name, _), was, got in zip(self._watched, self._ids, now):
            if was != got:
                raise GraphError(
                    f"{when}: {name} holds a new array; a graph keeps reading and writing the "
                    "array it was captured with. Update it in place (p.data[...] = ..., "
                    "xp.copyto) instead of assigning a new one"
                )


def _identities(watched: list[tuple[str, Any]]) -> list[int]:
    return [id(t.data) for _, t in watched]


def _copy_into(static: Any, new: Any, name: str) -> None:
    dst = static.data
    src = getattr(new, "data", new)
    if tuple(src.shape) != tuple(dst.shape):
        raise GraphError(f"replay: {name} has shape {tuple(src.shape)}, captured {dst.shape}")
    if backend.is_device_array(src):
        dst[...] = src
    elif hasattr(dst, "set"):  # CuPy: an upload into the array's own memory, no allocation
        dst.set(np.ascontiguousarray(backend.to_host(src), dtype=dst.dtype))
    else:  # the fake device: the same copy, through its explicit door
        dst[...] = backend.to_device(backend.to_host(src).astype(dst.dtype), "fake")


def _diff(now: Counter, then: Counter) -> str:
    keys = sorted(set(now) | set(then))
    changed = [f"{label} {kind}: {then[label, kind]} -> {now[label, kind]}"
               for label, kind in keys if now[label, kind] != then[label, kind]]  # fmt: skip
    return "; ".join(changed[:6])


def _run(step: Callable, inputs: tuple, device: backend.Device, recording: bool) -> tuple:
    """Run the step once as a graph would see it; raise GraphError on a transfer or cuBLAS."""
    from tinyformer import registry

    fake = device.type == "fake"
    with contextlib.ExitStack() as stack:
        stack.enter_context(_graph_safe(recording))
        if fake:  # run the CUDA kernels (emulated), as the GPU would
            stack.enter_context(registry.prefer("cuda"))
        count = stack.enter_context(launches.counting())
        outputs = step(*inputs)
    for kind, rule in (("transfer", "copies between host and device"), ("matmul", "calls cuBLAS")):
        where = {label: n for (label, k), n in count.counts.items() if k == kind}
        if where:
            raise GraphError(
                f"the step {rule} ({', '.join(f'{lb} {n}' for lb, n in where.items())}), "
                + ("which a graph would replay with the capture's values or refuse (a read "
                   "back is a sync): move it out of the step"
                   if kind == "transfer" else
                   "which stream capture refuses: run that product outside the step")
            )  # fmt: skip
    return outputs, count


def capture(step: Callable[..., Any], *inputs: Any, state: Any = (), warmup: int = 2) -> CUDAGraph:
    """Capture `step(*inputs)` into a graph (see the module docstring for the rules).

    Args:
        step: the work to capture; returns its outputs (tensors or arrays, or a tuple).
        inputs: the static input tensors, on the device (`cuda` or `fake`); `replay` copies
            new values into them.
        state: tensors the step reads and updates (a module: its parameters; or tensors, or
            an iterable of either): each must keep its array across calls.
        warmup: eager runs before the capture (at least 1: it compiles the kernels and fills
            the memory pool, neither of which may happen while capturing).
    """
    if warmup < 1:
        raise ValueError(f"capture: warmup must be at least 1, got {warmup}")
    arrays = [getattr(t, "data", None) for t in inputs]
    if not inputs or not all(backend.is_device_array(a) for a in arrays):
        raise GraphError("capture: the step's inputs must be tensors on a device (cuda or fake)")
    device = backend.device_of(arrays[0])
    watched = [(f"input {i}", t) for i, t in enumerate(inputs)] + _tensors(state)
    graph = CUDAGraph(step, tuple(inputs), watched, device)
    if device.type == "fake":
        for i in range(warmup):
            _run(step, graph.inputs, device, recording=False)
            graph._check_identities(f"warm-up run {i + 1}")
        graph.outputs, count = _run(step, graph.inputs, device, recording=True)
        graph._launches = count.counts
        graph._check_identities("the recording run")
        return graph
    _capture_on_gpu(graph, warmup)
    return graph


def _capture_on_gpu(graph: CUDAGraph, warmup: int) -> None:
    import cupy

    current = cupy.cuda.get_current_stream()
    side = cupy.cuda.Stream(non_blocking=True)
    side.wait_event(current.record())  # the inputs' uploads come first
    with side:
        for i in range(warmup):
            with _graph_safe(False):
                graph.step(*graph.inputs)
            graph._check_identities(f"warm-up run {i + 1}")
        side.begin_capture()
        try:
            with _graph_safe(True):
                graph.outputs = graph.step(*graph.inputs)
        except Exception as e:
            with contextlib.suppress(Exception):  # a broken capture may refuse to end, too
                side.end_capture()
            raise GraphError(f"capture: the step could not be captured: {e}") from e
        graph._graph = side.end_capture()
        graph._stream = side
    current.wait_event(side.record())
    graph._check_identities("the capture")
