"""Run the two sides of a side-by-side benchmark in lockstep: each process trains a chunk of
steps while the other waits, so that a slow spell of a shared machine falls on both sides.

Why: run one after the other, the two sides see different minutes of the machine. On our
2-core virtual machine, where the host's other tenants come and go, the same tinyformer-vs-
PyTorch ratio measured that way moved by up to 8% between runs. In lockstep both sides
sample the same minutes, alternating every chunk.

Child (one framework's training loop):

    pace = Pacer(args.lockstep_chunk)  # the child's argparse takes FLAG; 0: no lockstep
    for step, batch in enumerate(batches):
        pace(step)                 # before the timer starts: waits here at each chunk's start
        ...

Parent: `run_children(names, commands, envs, steps, chunk)` starts every child, then lets each
run one chunk in turn, and returns the last line each child printed (its JSON result); with
chunk 0 (`--sequential`) it runs them one after the other instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

READY = "__lockstep_ready__"
FLAG = "--lockstep-chunk"


class Pacer:
    """In the child: at the start of every chunk of `chunk` steps, say so and wait for "go"."""

    def __init__(self, chunk: int) -> None:
        self.chunk = chunk

    def __call__(self, step: int) -> None:
        if self.chunk and step % self.chunk == 0:
            print(READY, flush=True)
            if sys.stdin.readline().strip() != "go":
                raise SystemExit("lockstep: the parent process went away")


def _next_line(child: subprocess.Popen) -> str:
    """The child's next line that is the ready signal or its result (other output passes)."""
    while True:
        line = child.stdout.readline()
        if not line:
            return ""
        line = line.strip()
        if line == READY or line.startswith("{"):
            return line
        print(line, file=sys.stderr)


def _take_turns(names: Sequence[str], children: list, steps: int, chunk: int) -> list[str]:
    """Let each started child run a chunk of `steps` in turn; the JSON line each printed last.
    Raises SystemExit if one stops early or fails."""
    lines = [_next_line(c) for c in children]  # each has loaded its data and built its model
    for _ in range(-(-steps // chunk)):
        for i, child in enumerate(children):
            if lines[i] != READY:
                raise SystemExit(f"lockstep: the {names[i]} run stopped early")
            child.stdin.write("go\n")
            child.stdin.flush()
            lines[i] = _next_line(child)  # blocks until its chunk is done
    for i, child in enumerate(children):
        if child.wait() or not lines[i].startswith("{"):
            raise SystemExit(f"lockstep: the {names[i]} run failed")
    return lines


def run_children(
    names: Sequence[str],
    commands: Sequence[list[str]],
    envs: Sequence[dict | None],
    steps: int,
    chunk: int,
) -> list[str]:
    """The children in lockstep (two or more, chunk > 0; each gets `FLAG chunk`), else one
    after the other: the JSON line each printed last."""
    if chunk and len(commands) > 1:
        print(f"{' and '.join(names)} in lockstep, {chunk} steps at a time each ...", flush=True)
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        children = [
            subprocess.Popen([*cmd, FLAG, str(chunk)], env=env, **pipes)
            for cmd, env in zip(commands, envs)
        ]
        try:
            return _take_turns(names, children, steps, chunk)
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
    lines = []
    for name, cmd, env in zip(names, commands, envs):
        print(f"{name} ...", flush=True)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the {name} run failed:\n{done.stderr}")
        lines.append(done.stdout.strip().splitlines()[-1])
    return lines
