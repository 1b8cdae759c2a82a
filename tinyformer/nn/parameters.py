"""`nn.ParameterList` and `nn.ParameterDict`: parameters held in a list or a dict, registered
so that `parameters()`, `state_dict()` and the optimizers see them (a plain Python list of
Parameters would be invisible to all three). Keys in `state_dict` are "0", "1", ... or the
dict's names, as PyTorch's."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tinyformer.nn.module import Module, Parameter

__all__ = ["ParameterDict", "ParameterList"]


def _parameter(owner: str, name: str, value: Any) -> Parameter:
    """`value` as a Parameter: a tensor or array becomes one (as PyTorch's containers do)."""
    if isinstance(value, Parameter):
        return value
    try:
        return Parameter(value)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{owner}: {name!r} must be a Parameter or array data, got {value!r}"
        ) from e


class ParameterList(Module):
    """Parameters in order, indexed, counted and iterated as a list."""

    def __init__(self, values: Iterable[Any] = ()) -> None:
        super().__init__()
        for value in values:
            self.append(value)

    def append(self, value: Any) -> ParameterList:
        name = str(len(self._parameters))
        self.register_parameter(name, _parameter("ParameterList", name, value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def __getitem__(self, i: int) -> Parameter:
        return list(self._parameters.values())[i]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())


class ParameterDict(Module):
    """Parameters by name, used as a dict."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        for name, value in (values or {}).items():
            self[name] = value

    def __setitem__(self, name: str, value: Any) -> None:
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(
                f"ParameterDict: names must be non-empty strings without '.', got {name!r}"
            )
        self.register_parameter(name, _parameter("ParameterDict", name, value))

    def __getitem__(self, name: str) -> Parameter:
        return self._parameters[name]

    def __contains__(self, name: object) -> bool:
        return name in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()
