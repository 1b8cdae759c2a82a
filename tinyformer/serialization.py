"""`tf.save(obj, path)` and `tf.load(path)`, as `torch.save` and `torch.load`, without pickle.

What can be saved: tensors (with `requires_grad`, and Parameters as Parameters), NumPy arrays,
numbers, strings, None, and dicts, lists and tuples of them, nested: a `state_dict()` of a
model or of an optimizer, or a checkpoint dict such as {"model": ..., "optimizer": ...,
"epoch": 3}. The file is a tinyformer checkpoint (`tinyformer/checkpoint.py`): an .npz archive
of the arrays and a JSON document that describes the structure around them, written
atomically. Reading it cannot run code.

What is refused, with the reason: other objects (a whole Module, a function, an instance of
some class: PyTorch pickles them, and unpickling a file can run any code in it), and PyTorch's
own .pt files, which are pickles (convert them once with PyTorch, to safetensors). A
safetensors file loads as a dict of tensors.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from tinyformer.nn.module import Parameter
from tinyformer.safetensors import SafetensorsError, load_file, read_header
from tinyformer.tensor import Tensor

__all__ = ["load", "save"]

KIND = "tinyformer.save"  # the checkpoint's "kind": what wrote it
_KEYS = (str, int, float, bool, type(None))  # dict keys that JSON can carry, with their type


def save(obj: Any, f: str | os.PathLike) -> None:
    """Write `obj` (tensors, arrays, numbers, strings, None, and dicts, lists and tuples of
    them) to the file `f`, atomically. Tensors are copied to the host as they are now."""
    path = _path("save", f)
    arrays: dict[str, np.ndarray] = {}
    document = _encode(obj, arrays, "obj")
    save_checkpoint(path, arrays, {"kind": KIND, "object": document})


def load(
    f: str | os.PathLike,
    map_location: Any = None,
    weights_only: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Read what `save` wrote to `f` (or a safetensors file: a dict of tensors), onto
    `map_location` ("cpu", "cuda", a device) when given. `weights_only` is accepted for
    PyTorch code: nothing here ever runs code from the file, whatever its value."""
    path = _path("load", f)
    if map_location is not None and not backend.is_device_spec(map_location):
        raise TypeError(
            f"load: map_location must be a device such as 'cpu' or 'cuda', got {map_location!r}"
        )
    _refuse_pickles(path)
    if _is_safetensors(path):
        return {k: _tensor(a, map_location) for k, a in load_file(path).items()}
    try:
        arrays, meta = load_checkpoint(path)
    except CheckpointError as err:
        raise CheckpointError(f"load: {err}") from None
    if meta.get("kind") != KIND or "object" not in meta:
        raise CheckpointError(
            f"load: {path} is a tinyformer training checkpoint, not a file written by "
            "tinyformer.save; read it with tinyformer.checkpoint.load_checkpoint"
        )
    return _decode(meta["object"], arrays, map_location, path)


# -- the structure as JSON ---------------------------------------------------------------------


def _encode(obj: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    """`obj` as JSON data; its arrays go into `arrays` under names the JSON refers to."""
    if isinstance(obj, Tensor):
        name = f"t{len(arrays)}"
        arrays[name] = backend.to_host(obj.data)
        kind = "parameter" if isinstance(obj, Parameter) else "tensor"
        return {"__tensor__": name, "kind": kind, "requires_grad": obj.requires_grad}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"save: {where} is a NumPy array of dtype {obj.dtype}; tinyformer "
                            "saves arrays of numbers")  # fmt: skip
        name = f"t{len(arrays)}"
        arrays[name] = obj
        return {"__ndarray__": name}
    if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
        return items if type(obj) is list else {"__tuple__": items}
    if isinstance(obj, dict):
        for key in obj:
            if not isinstance(key, _KEYS) or isinstance(key, float) and not math.isfinite(key):
                raise TypeError(
                    f"save: {where} has the key {key!r} ({type(key).__name__}); tinyformer saves "
                    "dicts whose keys are strings, numbers, booleans or None"
                )
        pairs = [[k, _encode(v, arrays, f"{where}[{k!r}]")] for k, v in obj.items()]
        return {"__dict__": pairs}
    raise TypeError(_refusal(obj, where))


def _refusal(obj: Any, where: str) -> str:
    kind = type(obj).__name__
    if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        return (
            f"save: {where} is a {kind}; tinyformer saves its state, not the object (PyTorch "
            f"pickles whole objects, and loading a pickle can run any code): save "
            f"obj.state_dict(), and load it into a new {kind} with load_state_dict()"
        )
    return (
        f"save: cannot save {where}, a {kind}: tinyformer saves tensors, NumPy arrays, numbers, "
        "strings, None, and dicts, lists and tuples of them, without pickle (loading a pickle "
        "can run any code); save the data the object holds instead"
    )


def _decode(data: Any, arrays: dict[str, np.ndarray], device: Any, path: Path) -> Any:
    if isinstance(data, list):
        return [_decode(v, arrays, device, path) for v in data]
    if not isinstance(data, dict):
        return data
    if "__tensor__" in data or "__ndarray__" in data:
        name = data.get("__tensor__", data.get("__ndarray__"))
        if name not in arrays:
            raise CheckpointError(f"load: {path} refers to an array {name!r} it does not hold")
        if "__ndarray__" in data:
            return arrays[name]
        return _tensor(arrays[name], device, data.get("requires_grad"), data.get("kind"))
    if "__tuple__" in data:
        return tuple(_decode(v, arrays, device, path) for v in data["__tuple__"])
    if "__float__" in data:
        return float(data["__float__"])
    if "__dict__" in data:
        return {k: _decode(v, arrays, device, path) for k, v in data["__dict__"]}
    raise CheckpointError(f"load: {path} holds a structure this tinyformer does not know")


def _tensor(array: np.ndarray, device: Any, requires_grad: Any = False, kind: Any = None) -> Any:
    data = array if device is None else backend.to_device(array, device)
    if kind == "parameter":
        return Parameter(data, requires_grad=bool(requires_grad))
    return Tensor(data, requires_grad=bool(requires_grad) and array.dtype.kind == "f")


# -- what the file is --------------------------------------------------------------------------


def _path(op: str, f: Any) -> Path:
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(
            f"{op}: give a file path (a str or pathlib.Path), got {type(f).__name__}; file "
            "objects such as io.BytesIO are not supported"
        )
    return Path(f)


def _refuse_pickles(path: Path) -> None:
    """CheckpointError for PyTorch's files: a zip holding data.pkl, or a bare pickle."""
    if not path.is_file():
        raise FileNotFoundError(f"load: no file at {path}")
    with open(path, "rb") as file:
        head = file.read(2)
    torch_zip = False
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                torch_zip = any(n.endswith("data.pkl") for n in archive.namelist())
        except (zipfile.BadZipFile, OSError):
            torch_zip = False
    if torch_zip or head[:1] == b"\x80":
        raise CheckpointError(
            f"load: {path} is a PyTorch file (a pickle); tinyformer never unpickles, because "
            "loading a pickle can run any code in it. Convert it once where PyTorch is "
            "installed and you trust the file: `from safetensors.torch import save_file; "
            "save_file(torch.load(path, weights_only=True), 'model.safetensors')`, then "
            "tf.load('model.safetensors') gives its tensors"
        )


def _is_safetensors(path: Path) -> bool:
    with open(path, "rb") as file:
        head = file.read(9)
    if len(head) < 9 or head[8:9] != b"{":
        return False
    try:
        read_header(path)
    except SafetensorsError:
        return False
    return True
