"""What the grader does with an array the student's code returned: check that it is one (a
number dtype, the expected shape), compare it with the reference's, and say what the mistake
looks like (a transpose, a constant factor, zeros, NaN) in words a student can act on.

Nothing here trusts the reply: a string, a structured dtype, an object or the wrong shape is
a `StudentError` with a message, never a NumPy exception in the grader.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.course.grader._remote import StudentError

__all__ = ["bad", "describe", "diagnose", "first_difference", "index", "number", "numeric", "short"]


def number(x: Any) -> str:
    """A plain number for a report: 0.5, not np.float64(0.5)."""
    x = np.asarray(x).item()
    return f"{x:.10g}" if isinstance(x, float) else str(x)


def numeric(x: Any, what: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """`x` as a float64 array if it is an array of numbers (of `shape`, if given); else a
    StudentError naming `what` and what it was."""
    if not isinstance(x, np.ndarray):
        raise StudentError(f"{what} is a {type(x).__name__}, not an array")
    if x.dtype.kind not in "biuf":
        raise StudentError(f"{what} has dtype {x.dtype}, not a number type")
    if shape is not None and x.shape != tuple(shape):
        raise StudentError(
            f"{what} has shape {x.shape}, expected {tuple(shape)}{_swapped(x, shape)}"
        )
    return x.astype(np.float64)


def _swapped(x: np.ndarray, shape: tuple[int, ...]) -> str:
    shape = tuple(shape)
    if len(shape) >= 2 and x.shape == (*shape[:-2], shape[-1], shape[-2]):
        return " (its last two axes swapped: a transposed intermediate?)"
    if len(shape) > 2 and x.shape == shape[::-1]:
        return " (its axes reversed: a .T where the last two axes were meant?)"
    return ""


def bad(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Where |got - want| > atol + rtol |want| (want is the reference). NaN or inf where the
    reference is finite is always out of tolerance; NaN matches NaN, inf the same inf."""
    with np.errstate(invalid="ignore", over="ignore"):
        # inf <= atol + rtol inf would pass any value where the reference is infinite
        ok = np.isfinite(want) & (np.abs(got - want) <= atol + rtol * np.abs(want))
        ok |= got == want  # infinities of one sign
    ok |= np.isnan(got) & np.isnan(want)
    return ~ok


def index(i: tuple) -> str:
    return "[" + ", ".join(str(int(j)) for j in i) + "]"


def worst(got: np.ndarray, want: np.ndarray, out: np.ndarray) -> tuple:
    """The index of the largest error among those out of tolerance (NaN counts as largest)."""
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got - want)
    err = np.where(np.isnan(err) | np.isinf(err), np.inf, err)
    return np.unravel_index(int(np.argmax(np.where(out, err, -1.0))), got.shape) if got.ndim else ()


def first_difference(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> str:
    out = bad(got, want, atol, rtol)
    j = worst(got, want, out)
    return (
        f"at index {index(j)}, got {number(got[j])}, expected {number(want[j])}; "
        f"{int(out.sum())} of {out.size} values out of tolerance (atol {atol:g}, rtol {rtol:g})"
    )


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-6, atol=1e-9 * (1 + float(np.abs(b).max(initial=0)))))


def _swaps(want: np.ndarray) -> list[tuple[str, np.ndarray]]:
    out = []
    if want.ndim >= 2:
        out.append(("with its last two axes swapped (a transposed intermediate?)",
                    np.swapaxes(want, -1, -2)))  # fmt: skip
    if want.ndim > 2:
        out.append(("with all its axes reversed (a .T where a transpose of the last two "
                    "axes was meant?)", want.T))  # fmt: skip
    return out


def diagnose(got: np.ndarray, want: np.ndarray) -> str:
    """What `got` looks like next to the reference's `want`: "" if nothing recognisable."""
    if got.shape != want.shape:
        for how, w in _swaps(want):
            if got.shape == w.shape and np.isfinite(got).all() and _close(got, w):
                return f"yours equals the expected value {how}"
        return ""
    if not np.isfinite(got).all() and np.isfinite(want).all():
        kind = "NaN" if np.isnan(got).any() else "inf"
        return f"yours holds {kind} where the expected values are finite (an overflow?)"
    finite = np.isfinite(got) & np.isfinite(want)
    g, w = got[finite], want[finite]
    if not g.size or not np.abs(w).max(initial=0) > 0:
        return ""
    if not np.abs(g).max(initial=0) > 0:
        return "yours is all zeros here"
    for how, s in _swaps(want):
        if s.shape == got.shape and not _close(want, s) and _close(got, s):
            return f"yours equals the expected value {how}"
    c = float(g @ w / (w @ w))
    if abs(c - 1) > 1e-6 and _close(g, c * w):
        if abs(c + 1) < 1e-6:
            return "yours is the expected value with the opposite sign"
        return f"yours is {c:.6g} times the expected value (a missing or extra factor of {c:.6g})"
    return ""


def short(v: Any) -> str:
    """A value for a report line: an array as its dtype, shape and a few values."""
    if isinstance(v, np.ndarray):
        flat = v.ravel()
        head = ", ".join(number(x) for x in flat[:4]) + (", ..." if flat.size > 4 else "")
        return f"{v.dtype} {v.shape} [{head}]"
    text = repr(v.item() if isinstance(v, np.generic) else v)
    return text if len(text) <= 60 else text[:57] + "..."


def describe(names: list[str], args: list[Any], kwargs: dict, layouts: list[str] | None = None):
    """The inputs and kwargs of a sample, for the report."""
    parts = []
    for i, (n, a) in enumerate(zip(names, args)):
        layout = f" {layouts[i]}" if layouts and isinstance(a, np.ndarray) and a.ndim else ""
        parts.append(f"{n} {a.dtype} {a.shape}{layout}" if isinstance(a, np.ndarray)
                     else f"{n} {short(a)}")  # fmt: skip
    keywords = ", ".join(f"{k}={short(v)}" for k, v in kwargs.items()) or "none"
    return f"  inputs: {'; '.join(parts) or 'none'}\n  kwargs: {keywords}"
