"""The process group: who the ranks are, and the collectives between them.

MPI does the moving (`mpi4py`, with an MPI that installs from PyPI as a wheel: `pip install -e
".[mpi]"`); on GPUs NCCL does it through CuPy, with MPI only to start up. The names and the
semantics are PyTorch's: collectives write their result into the tensor they are given, and
`async_op=True` returns a `Work` whose `wait()` finishes it.

Every collective is started non-blocking and then polled against a deadline, so that a rank that
died or never called the collective ends the run with an error that says so, instead of a hang:

    all_reduce timed out after 60 s on rank 1 of 2 (a rank died, or did not call all_reduce)

A rank that exits with an error takes the others with it (MPI's launcher ends the job).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.tensor import Tensor

__all__ = [
    "DistributedError",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_reduce",
    "barrier",
    "broadcast",
    "destroy_process_group",
    "get_backend",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_initialized",
    "launched_by_mpi",
    "recv",
    "reduce_scatter",
    "send",
]

DEFAULT_TIMEOUT = 120.0
MPI_INSTALL_HINT = 'pip install -e ".[mpi]"  (mpi4py and an MPI that installs as a wheel)'
# Set by MPICH's and Open MPI's launchers in every rank they start.
_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


class DistributedError(RuntimeError):
    """A collective failed: a timeout, a bad argument, or no process group."""


class ReduceOp(Enum):
    SUM = "sum"
    AVG = "avg"
    MAX = "max"


@dataclass
class _Group:
    backend: str
    comm: Any  # an mpi4py communicator
    rank: int
    world_size: int
    timeout: float
    nccl: Any = None  # a cupy.cuda.nccl.NcclCommunicator for the "nccl" backend


_group: _Group | None = None


def launched_by_mpi() -> bool:
    """Whether this process was started by an MPI launcher (`mpiexec -n N ...`)."""
    return any(v in os.environ for v in _RANK_VARS)


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise DistributedError(f"the mpi backend needs mpi4py: {MPI_INSTALL_HINT}") from err
    except RuntimeError as err:  # mpi4py is there, but no MPI library loads
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DistributedError(
            f"mpi4py cannot load an MPI library ({first}): {MPI_INSTALL_HINT}"
        ) from None
    return MPI


def init_process_group(backend: str = "mpi", timeout: float | None = None) -> None:
    """Join the process group of every rank `mpiexec` started (a single process is a group of
    one). `backend`: "mpi" (host arrays; device arrays pass through host memory) or "nccl"
    (CuPy arrays, GPU to GPU). `timeout`: seconds a collective may wait for the other ranks
    (default 120, or $TINYFORMER_DIST_TIMEOUT)."""
    global _group
    if _group is not None:
        raise DistributedError("init_process_group: the process group is already initialised")
    if backend not in ("mpi", "nccl"):
        raise DistributedError(
            f"init_process_group: backend must be 'mpi' or 'nccl', not {backend!r}"
        )
    if timeout is None:
        timeout = float(os.environ.get("TINYFORMER_DIST_TIMEOUT", DEFAULT_TIMEOUT))
    if not 0 < timeout < float("inf"):
        raise DistributedError(f"init_process_group: timeout must be finite and > 0, got {timeout}")
    mpi = _mpi()
    comm = mpi.COMM_WORLD
    group = _Group(backend, comm, comm.Get_rank(), comm.Get_size(), timeout)
    if backend == "nccl":
        group.nccl = _nccl_communicator(group)
    _group = group


def _nccl_communicator(group: _Group) -> Any:
    """NCCL's communicator over the ranks' current GPUs; rank 0's unique id travels over MPI."""
    nccl = _nccl()
    uid = nccl.get_unique_id() if group.rank == 0 else None
    uid = group.comm.bcast(uid, root=0)
    return nccl.NcclCommunicator(group.world_size, uid, group.rank)


def _nccl() -> Any:
    """CuPy's NCCL module (the tests put a fake in its place)."""
    try:
        from cupy.cuda import nccl
    except ImportError as err:
        raise DistributedError(
            f"the nccl backend needs CuPy with NCCL: {backend.CUDA_INSTALL_HINT}"
        ) from err
    return nccl


def destroy_process_group() -> None:
    global _group
    _group = None


def is_initialized() -> bool:
    return _group is not None


def _require(op: str) -> _Group:
    if _group is None:
        raise DistributedError(
            f"{op}: no process group; call tinyformer.distributed.init_process_group() first"
        )
    return _group


def get_rank() -> int:
    return _require("get_rank").rank


def get_world_size() -> int:
    return _require("get_world_size").world_size


def get_backend() -> str:
    return _require("get_backend").backend


class Work:
    """A collective in flight: `wait()` blocks until it is done (or its deadline passes) and
    writes the result where the collective said it would."""

    def __init__(self, op: str, request: Any, finish: Any = None) -> None:
        self.op, self._request, self._finish, self._done = op, request, finish, False

    def is_completed(self) -> bool:
        if not self._done and (self._request is None or self._request.Test()):
            self._complete()
        return self._done

    def wait(self) -> None:
        if self._done:
            return
        group = _require(self.op)
        if self._request is not None:
            deadline = time.monotonic() + group.timeout
            pause = 1e-5
            while not self._request.Test():
                if time.monotonic() > deadline:
                    raise DistributedError(
                        f"{self.op} timed out after {group.timeout:g} s on rank {group.rank} of "
                        f"{group.world_size} (a rank died, or did not call {self.op})"
                    )
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)
        self._complete()

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            self._finish()


def _data(tensor: Any, op: str) -> Any:
    data = tensor.data if isinstance(tensor, Tensor) else tensor
    if not hasattr(data, "shape"):
        raise DistributedError(f"{op}: expected a Tensor or an array, got {type(tensor).__name__}")
    return data


def _host(data: Any) -> np.ndarray:
    """A C-contiguous host array MPI can read (a copy for device or strided arrays)."""
    return np.ascontiguousarray(backend.to_host(data))


def _write(data: Any, value: np.ndarray) -> None:
    data[...] = (
        backend.to_device(value, backend.device_of(data))
        if backend.is_device_array(data)
        else value
    )


def _run(work: Work, async_op: bool) -> Work | None:
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, async_op: bool = False) -> Work | None:
    """Replace `tensor` on every rank by the sum (or average, or maximum) over ranks."""
    group = _require("all_reduce")
    data = _data(tensor, "all_reduce")
    if not isinstance(op, ReduceOp):
        raise DistributedError(f"all_reduce: op must be a ReduceOp (SUM, AVG, MAX), got {op!r}")
    if group.nccl is not None and not isinstance(data, np.ndarray):
        return _run(_nccl_all_reduce(group, data, op), async_op)
    mpi = _mpi()
    mpi_op = mpi.MAX if op is ReduceOp.MAX else mpi.SUM
    if isinstance(data, np.ndarray) and data.flags.c_contiguous and data.flags.writeable:
        # In place: MPI reads and writes the array itself, no copy on either side.
        request = group.comm.Iallreduce(mpi.IN_PLACE, data, op=mpi_op)

        def finish() -> None:
            if op is ReduceOp.AVG:
                data[...] = data / data.dtype.type(group.world_size)

        return _run(Work("all_reduce", request, finish), async_op)
    send = _host(data)
    recv = np.empty_like(send)
    request = group.comm.Iallreduce(send, recv, op=mpi_op)

    def finish() -> None:
        if op is ReduceOp.AVG:
            recv[...] = recv / recv.dtype.type(group.world_size)
        _write(data, recv)

    return _run(Work("all_reduce", request, finish), async_op)


def _nccl_all_reduce(group: _Group, data: Any, op: ReduceOp) -> Work:
    nccl = _nccl()
    codes = {np.dtype("float32"): nccl.NCCL_FLOAT32, np.dtype("float64"): nccl.NCCL_FLOAT64}
    if data.dtype not in codes or not data.flags.c_contiguous:
        raise DistributedError(
            f"all_reduce (nccl): needs a contiguous float32/float64 array, got {data.dtype}"
        )
    nccl_op = nccl.NCCL_MAX if op is ReduceOp.MAX else nccl.NCCL_SUM
    ptr = _device_pointer(data)
    group.nccl.allReduce(ptr, ptr, data.size, codes[data.dtype], nccl_op, _current_stream(data))
    if op is ReduceOp.AVG:
        data /= group.world_size
    return Work("all_reduce", None)  # ordered on the stream: nothing to poll


# The two places the NCCL path touches CuPy's memory and streams, apart so that the tests can run
# that path on the fake device with a fake communicator (tests/test_distributed.py).
def _device_pointer(data: Any) -> int:
    return data.data.ptr


def _current_stream(data: Any) -> int:
    return backend.array_module(backend.device_of(data)).cuda.get_current_stream().ptr


def broadcast(tensor: Any, src: int = 0, async_op: bool = False) -> Work | None:
    """Replace `tensor` on every rank by rank `src`'s."""
    group = _require("broadcast")
    if not 0 <= src < group.world_size:
        raise DistributedError(
            f"broadcast: src must be a rank in [0, {group.world_size}), got {src}"
        )
    data = _data(tensor, "broadcast")
    buffer = _host(data).copy()
    request = group.comm.Ibcast(buffer, root=src)
    return _run(Work("broadcast", request, lambda: _write(data, buffer)), async_op)


def all_gather(tensor_list: list[Any], tensor: Any, async_op: bool = False) -> Work | None:
    """Fill `tensor_list[r]` on every rank with rank r's `tensor` (all of one shape)."""
    group = _require("all_gather")
    data = _data(tensor, "all_gather")
    if len(tensor_list) != group.world_size:
        raise DistributedError(
            f"all_gather: tensor_list needs {group.world_size} tensors (one per rank), "
            f"got {len(tensor_list)}"
        )
    outs = [_data(t, "all_gather") for t in tensor_list]
    for out in outs:
        if out.shape != data.shape:
            raise DistributedError(
                f"all_gather: every output must have the input's shape {data.shape}, got "
                f"{out.shape}"
            )
    send = _host(data)
    recv = np.empty((group.world_size, *send.shape), send.dtype)
    request = group.comm.Iallgather(send, recv)

    def finish() -> None:
        for out, part in zip(outs, recv):
            _write(out, part)

    return _run(Work("all_gather", request, finish), async_op)


def reduce_scatter(
    output: Any, input_list: list[Any], op: ReduceOp = ReduceOp.SUM, async_op: bool = False
) -> Work | None:
    """Rank r's `output` becomes the reduction over ranks of their `input_list[r]`."""
    group = _require("reduce_scatter")
    out = _data(output, "reduce_scatter")
    ins = [_data(t, "reduce_scatter") for t in input_list]
    if len(ins) != group.world_size or any(a.shape != out.shape for a in ins):
        raise DistributedError(
            f"reduce_scatter: input_list needs {group.world_size} tensors of the output's shape "
            f"{out.shape}, got {[a.shape for a in ins]}"
        )
    mpi = _mpi()
    send = np.ascontiguousarray(np.stack([_host(a) for a in ins]))
    recv = np.empty(out.shape, send.dtype)
    request = group.comm.Ireduce_scatter_block(
        send, recv, op=mpi.MAX if op is ReduceOp.MAX else mpi.SUM
    )

    def finish() -> None:
        if op is ReduceOp.AVG:
            recv[...] = recv / recv.dtype.type(group.world_size)
        _write(out, recv)

    return _run(Work("reduce_scatter", request, finish), async_op)


def send(tensor: Any, dst: int, async_op: bool = False) -> Work | None:
    """Send `tensor` to rank `dst` (which calls `recv` with a tensor of the same shape)."""
    group = _require("send")
    _check_peer(group, dst, "send", "dst")
    buffer = _host(_data(tensor, "send")).copy()
    return _run(Work("send", group.comm.Isend(buffer, dest=dst)), async_op)


def recv(tensor: Any, src: int, async_op: bool = False) -> Work | None:
    """Fill `tensor` with what rank `src` sends."""
    group = _require("recv")
    _check_peer(group, src, "recv", "src")
    data = _data(tensor, "recv")
    buffer = np.empty(data.shape, data.dtype)
    request = group.comm.Irecv(buffer, source=src)
    return _run(Work("recv", request, lambda: _write(data, buffer)), async_op)


def _check_peer(group: _Group, peer: int, op: str, name: str) -> None:
    if not 0 <= peer < group.world_size or peer == group.rank:
        raise DistributedError(
            f"{op}: {name} must be another rank in [0, {group.world_size}), got {peer} "
            f"(this is rank {group.rank})"
        )


def barrier() -> None:
    """Wait until every rank has reached this call."""
    group = _require("barrier")
    Work("barrier", group.comm.Ibarrier()).wait()
