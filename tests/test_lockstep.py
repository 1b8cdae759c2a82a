"""benchmarks/lockstep.py, which the side-by-side benchmarks use: two processes take turns,
a chunk of steps at a time, and never run at once."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
from lockstep import run_children  # noqa: E402

CHILD = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, {benchmarks!r})
    from lockstep import FLAG, Pacer
    pace = Pacer(int(sys.argv[sys.argv.index(FLAG) + 1]) if FLAG in sys.argv else 0)
    spans = []
    for step in range({steps}):
        pace(step)
        start = time.monotonic()
        time.sleep(0.002)
        spans.append((start, time.monotonic()))
    print("other output passes through")
    print(json.dumps({{"spans": spans}}))
    """
)


def _child(tmp_path: Path, name: str, steps: int) -> list[str]:
    script = tmp_path / f"{name}.py"
    script.write_text(CHILD.format(benchmarks=str(BENCHMARKS), steps=steps))
    return [sys.executable, str(script)]


def test_children_take_turns_chunk_by_chunk(tmp_path):
    commands = [_child(tmp_path, "a", 10), _child(tmp_path, "b", 10)]
    lines = run_children(["a", "b"], commands, [None, None], steps=10, chunk=3)
    spans = [(s, e, name) for name, line in zip("ab", lines) for s, e in json.loads(line)["spans"]]
    spans.sort()
    assert "".join(name for _, _, name in spans) == "aaabbbaaabbbaaabbbab"  # chunks 3, 3, 3, 1
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        assert end <= start  # never both at once


def test_a_child_that_stops_early_is_an_error(tmp_path):
    commands = [_child(tmp_path, "a", 10), _child(tmp_path, "short", 4)]
    with pytest.raises(SystemExit, match="short run stopped early"):
        run_children(["a", "short"], commands, [None, None], steps=10, chunk=3)


def test_chunk_zero_runs_the_children_one_after_the_other(tmp_path):
    commands = [_child(tmp_path, "a", 4), _child(tmp_path, "b", 4)]
    lines = run_children(["a", "b"], commands, [None, None], steps=4, chunk=0)
    a, b = (json.loads(line)["spans"] for line in lines)
    assert a[-1][1] <= b[0][0]
