"""Where arrays live: the one module that knows array libraries (NumPy, CuPy, the fake device).

An op's reference takes its array module from its inputs and reads as its NumPy form does:

    xp = get_array_module(x)                       # numpy, cupy, or the fake device's xp
    y = xp.exp(x - x.max(axis=-1, keepdims=True))  # runs wherever x lives

Devices are named as PyTorch names them: "cpu", "cuda" (the current GPU), "cuda:1". "fake" is a
NumPy-backed stand-in for a GPU (tinyformer.fake_device) that lets CI catch host/device mixes
without one. CuPy is imported on the first question about CUDA, never when this module is.
This module never imports the fake device: it knows it as a `DeviceArrays` entry, which
`tinyformer.fake_device` registers when imported (and `import tinyformer` imports it), so that
the spine (engine, versions, registry, kernels) asks here and never needs that wing.

    device("cuda:0")           # Device(type='cuda', index=0), or DeviceUnavailable saying why
    to_device(a, "fake")       # a copy on the fake device; `a` itself if it is already there
    to_host(a)                 # a numpy.ndarray
    check_same_device("matmul", a, b)   # ValueError naming the op and both devices
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "CUDA_INSTALL_HINT",
    "Device",
    "DeviceSpec",
    "DeviceArrays",
    "DeviceUnavailable",
    "array_module",
    "check_same_device",
    "cuda_available",
    "device",
    "device_of",
    "get_array_module",
    "host_copy",
    "host_memory",
    "is_device_array",
    "is_emulated",
    "is_device_spec",
    "register_device_arrays",
    "to_device",
    "to_host",
]

CUDA_INSTALL_HINT = 'pip install -e ".[cuda13]"'
_FORMS = "'cpu', 'cuda', 'cuda:<index>', 'fake', 'fake:0', a Device or None"
DEVICE_TYPES = ("cpu", "cuda", "fake")
_SPEC = re.compile(r"(cpu|cuda|fake)(?::(\d+))?")
_SCALARS = (bool, int, float, complex, np.generic)  # usable with arrays on any device


class DeviceUnavailable(RuntimeError):
    """A CUDA device was asked for and this machine cannot provide it."""


@dataclass(frozen=True, eq=False)
class Device:
    """Where an array lives. Index None means the current device, as PyTorch's "cuda" does:
    `Device("cuda") == Device("cuda", 0)` while device 0 is current."""

    type: str  # "cpu", "cuda" or "fake"
    index: int | None = None

    def __post_init__(self) -> None:
        if self.type not in DEVICE_TYPES:
            raise ValueError(f"unknown device type {self.type!r}")
        index = self.index
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise ValueError(f"device index must be an int or None, got {index!r}")
        if index is not None and index < 0:
            raise ValueError(f"device index must be >= 0, got {index}")
        if self.type == "cpu" and index is not None:
            raise ValueError("cpu takes no index")
        if self.type == "fake" and index not in (None, 0):
            raise ValueError("there is one fake device, fake:0")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self._resolved() == other._resolved()

    def __hash__(self) -> int:
        return hash(self._resolved())

    def _resolved(self) -> tuple[str, int | None]:
        if self.index is not None or self.type == "cpu":
            return self.type, self.index
        return self.type, _current_cuda_index() if self.type == "cuda" else 0


DeviceSpec = Device | str | None


def is_device_spec(value: Any) -> bool:
    """Whether `value` names a device (a Device, "cpu", "cuda:1", ...) rather than, say, a
    dtype: how `Tensor.to` and `Module.to` tell their arguments apart, as PyTorch's do."""
    return isinstance(value, Device) or (
        isinstance(value, str) and value.split(":")[0] in DEVICE_TYPES
    )


def device(spec: DeviceSpec = None) -> Device:
    """Parse a device spec: None (the CPU), a Device, "cpu", "cuda", "cuda:1", "fake", "fake:0".

    A CUDA device is checked for here, so that a missing GPU is reported once, clearly, by
    DeviceUnavailable, rather than later by CuPy in the middle of an op.
    """
    if spec is None:
        return Device("cpu")
    if isinstance(spec, Device):
        d = spec
    elif isinstance(spec, str):
        match = _SPEC.fullmatch(spec)
        if match is None:
            raise ValueError(f"unknown device {spec!r}; expected {_FORMS}")
        kind, index = match.groups()
        try:
            d = Device(kind, None if index is None else int(index))
        except ValueError as e:
            raise ValueError(f"unknown device {spec!r}: {e}; expected {_FORMS}") from None
    else:
        raise TypeError(f"device: expected {_FORMS}, got {type(spec).__name__} {spec!r}")
    if d.type == "cuda":
        _require_cuda(d)
    return d


class _Cuda(NamedTuple):
    cupy: ModuleType | None  # None when CUDA cannot be used, and then `why_not` says why
    count: int
    why_not: str


@functools.cache
def _probe_cuda() -> _Cuda:
    """Import CuPy and count GPUs, once per process (tests clear the cache)."""
    try:
        import cupy
    except Exception as e:  # not installed, or installed without the CUDA libraries it needs
        missing = isinstance(e, ImportError) and e.name == "cupy"
        why = "CuPy is not installed" if missing else f"CuPy failed to import ({e})"
        return _Cuda(None, 0, why)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver, a driver older than CuPy's CUDA, no device visible
        return _Cuda(None, 0, f"the CUDA driver reported an error ({e})")
    if count == 0:
        return _Cuda(None, 0, "CuPy sees no CUDA device")
    return _Cuda(cupy, count, "")


def cuda_available() -> bool:
    """Whether CuPy imports and sees a GPU. Imports CuPy on the first call; never raises."""
    return _probe_cuda().cupy is not None


def _require_cuda(d: Device) -> ModuleType:
    cuda = _probe_cuda()
    if cuda.cupy is None:
        raise DeviceUnavailable(
            f"device '{d}' is not available: {cuda.why_not}. To run on an NVIDIA GPU, install "
            f"CuPy for CUDA 13 with {CUDA_INSTALL_HINT}; otherwise use 'cpu' ('fake' in tests)."
        )
    if d.index is not None and d.index >= cuda.count:
        raise DeviceUnavailable(
            f"device '{d}' is not available: CuPy sees {cuda.count} GPU(s), numbered from 0"
        )
    return cuda.cupy


def _current_cuda_index() -> int:
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return 0  # until CuPy is imported, nobody can have made another device current
    try:
        return cupy.cuda.runtime.getDevice()
    except Exception:
        return 0


def _is_cupy(array: Any) -> bool:
    # A CuPy array can exist only once CuPy is imported, so asking never imports it.
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(array, getattr(cupy, "ndarray", ()))


class DeviceArrays(NamedTuple):
    """A device emulated on the host by another module (the fake device): what this module needs
    to compute on its arrays and move arrays there. Its module registers it when imported."""

    type: str  # the device's name, as in "fake:0"
    array_type: type  # its arrays' class
    xp: ModuleType  # the array module that computes on them
    upload: Callable[[Any], Any]  # host data -> a copy on the device
    memory: Callable[[Any], np.ndarray]  # a device array -> the host array holding its memory


_EMULATED: dict[type, DeviceArrays] = {}  # by array class
_EMULATED_BY_NAME: dict[str, DeviceArrays] = {}


def register_device_arrays(arrays: DeviceArrays) -> None:
    """Make `arrays.type` a device whose arrays this module knows (called by its module)."""
    if arrays.type not in DEVICE_TYPES or arrays.type in ("cpu", "cuda"):
        raise ValueError(f"register_device_arrays: {arrays.type!r} is not an emulated device")
    _EMULATED[arrays.array_type] = arrays
    _EMULATED_BY_NAME[arrays.type] = arrays


def _emulated_device(name: str) -> DeviceArrays:
    registered = _EMULATED_BY_NAME.get(name)
    if registered is None:
        raise DeviceUnavailable(f"the {name!r} device: import tinyformer.{name}_device first")
    return registered


def is_emulated(array: Any) -> bool:
    """Whether `array` lives on a device emulated on the host (the fake device)."""
    return type(array) in _EMULATED


def host_memory(array: Any) -> Any:
    """The host array holding an emulated device array's memory (not a copy: for the engine's
    and the version counters' memory questions, and the CUDA emulator's pointers); any other
    array as it is."""
    registered = _EMULATED.get(type(array))
    return array if registered is None else registered.memory(array)


def is_device_array(array: Any) -> bool:
    """Whether `array` lives on a device (a CuPy or fake-device array)."""
    return type(array) in _EMULATED or _is_cupy(array)


def get_array_module(*arrays: Any) -> ModuleType:
    """numpy, cupy or the fake device's `xp`: the array module that computes on `arrays`.

    A device array decides (as in Chainer and CuPy): a host array mixed in then fails loudly in
    the device op that follows. Host arrays, Python scalars and None count as NumPy.
    """
    found = np
    for a in arrays:
        registered = _EMULATED.get(type(a))
        if registered is not None:
            xp = registered.xp
        elif _is_cupy(a):
            xp = sys.modules["cupy"]
        else:
            continue
        if found is not np and xp is not found:
            raise ValueError("get_array_module: got both CuPy and fake-device arrays")
        found = xp
    return found


def array_module(spec: DeviceSpec = None) -> ModuleType:
    """The module that makes arrays on a device, for creation functions (`zeros(3, device=)`).
    CuPy creates on the current GPU: for "cuda:1", call it under `with cupy.cuda.Device(1)`."""
    d = device(spec)
    if d.type == "cuda":
        return _require_cuda(d)
    return np if d.type == "cpu" else _emulated_device(d.type).xp


def device_of(array: Any) -> Device:
    """The device `array` lives on. NumPy scalars are on the CPU."""
    if isinstance(array, (np.ndarray, np.generic)):
        return Device("cpu")
    registered = _EMULATED.get(type(array))
    if registered is not None:
        return Device(registered.type, array.device.id)
    if _is_cupy(array):
        return Device("cuda", array.device.id)
    raise TypeError(f"device_of: expected a NumPy, CuPy or fake-device array, got {type(array)}")


def check_same_device(op_name: str, *arrays: Any) -> Device | None:
    """The one device all `arrays` live on (None if there are none); scalars and None are
    skipped. Raises ValueError naming the op and two of the devices found."""
    devices = [device_of(a) for a in arrays if a is not None and not isinstance(a, _SCALARS)]
    for d in devices[1:]:
        if d != devices[0]:
            raise ValueError(
                f"{op_name}: expected all arrays on one device, got {devices[0]} and {d}"
            )
    return devices[0] if devices else None


def to_host(array: Any) -> np.ndarray:
    """A numpy.ndarray: `array` itself if it is one, else a host copy (a sync from a GPU)."""
    if is_device_array(array):
        return array.get()
    return np.asarray(array)


def host_copy(value: Any) -> Any:
    """A new host ndarray holding an array's values (safe to keep while the array changes);
    values that are not arrays (numbers, strings) as they are."""
    if isinstance(value, np.ndarray):
        return value.copy()
    return value.get() if is_device_array(value) else value


def to_device(array: Any, spec: DeviceSpec) -> Any:
    """`array` on device `spec`: the same object if it is there already, else a copy.
    Host data that is not an ndarray (lists, scalars) is converted on the way."""
    target = device(spec)
    if (isinstance(array, np.ndarray) or is_device_array(array)) and device_of(array) == target:
        return array
    if target.type == "cpu":
        return to_host(array)
    if target.type != "cuda":
        return _emulated_device(target.type).upload(to_host(array))
    cupy = _require_cuda(target)
    with cupy.cuda.Device(target.index):  # index None: the current GPU
        # copy() of a CuPy array on another GPU lands on the current one; host data is uploaded.
        return array.copy() if _is_cupy(array) else cupy.asarray(to_host(array))
