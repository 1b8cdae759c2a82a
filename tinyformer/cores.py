"""How many threads the kernels may use now: the cores that other processes leave idle.

Why: a parallel kernel waits for its slowest worker. Alone on the machine, the workers should
busy-wait between kernels (`runtime` lets libgomp spin long), so that the next kernel of a step
finds them awake instead of paying a wake-up. Beside a process that keeps a core busy (a second
notebook, a test run, a browser), a spinning worker holds that core, the worker that still has
rows to do waits for a turn, and every kernel waits a scheduler tick: on two cores the baby GPT
then ran 4x slower (docs/benchmarks.md, "OpenMP spin"). Running on the cores the others leave
idle, one thread there, takes the pool's workers out of that contest; they spin only when no one
else wants their core.

How: every half second (at the next kernel call after it), the CPU time that processes other
than this one spent on the CPUs this process may use, from /proc/stat and /proc/self/stat, in
cores; after more than half a second without a kernel call, a fresh half second starts with
every thread. A core others use a third of the time or more is theirs:

    threads = usable CPUs - floor(others + 2/3),  at least 1, at most Numba's count

Linux only; elsewhere, or with `TINYFORMER_THREADS=keep` or `all`, the kernels always use every
thread. The kernels split their sums by the pool's size, not by the threads running them, so a
gradient is the same to the bit whichever count a call ran with.
"""

from __future__ import annotations

import math
import os
import time

__all__ = ["INTERVAL", "enable", "measure", "others_busy", "threads", "threads_for"]

INTERVAL = 0.5  # seconds between measurements
THEIRS = 1 / 3  # a core others use this share of the time or more is theirs
_BUSY_FIELDS = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq (not idle, iowait, steal)

# "next": when to measure again (None: never); "sample", "at", "pid": the last sample, its time
# and process; "seen": the last call's time; "threads": the last answer (0: all of them)
_state: dict = {"next": 0.0, "threads": 0, "sample": None, "at": 0.0, "pid": None, "seen": 0.0}
_clock, _pid = time.monotonic, os.getpid


def _cpu_ticks(stat: str, cpus: set[int]) -> int:
    """Busy clock ticks of the CPUs in `cpus`, from the text of /proc/stat."""
    total = 0
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            fields = rest.split()
            total += sum(int(fields[i]) for i in _BUSY_FIELDS)
    return total


def _own_ticks(self_stat: str) -> int:
    """utime + stime of this process (all its threads), from the text of /proc/self/stat."""
    fields = self_stat[self_stat.rindex(")") + 2 :].split()  # the name may hold spaces
    return int(fields[11]) + int(fields[12])


def others_busy(ticks: int, mine: int, seconds: float, hz: float) -> float:
    """Cores other processes kept busy over `seconds`, from the busy ticks of the CPUs and of
    this process over that time."""
    return max(0.0, (ticks - mine) / hz / seconds) if seconds > 0 else 0.0


def threads_for(cpus: int, others: float, pool: int) -> int:
    """The threads to use on `cpus` usable CPUs while others keep `others` cores busy."""
    return max(1, min(pool, cpus - math.floor(others + 1 - THEIRS)))


def measure() -> tuple[int, int, int] | None:
    """(usable CPUs, their busy ticks, this process's ticks) now; None off Linux."""
    try:
        cpus = os.sched_getaffinity(0)
        with open("/proc/stat") as f:
            stat = f.read()
        with open("/proc/self/stat") as f:
            own = f.read()
        return len(cpus), _cpu_ticks(stat, cpus), _own_ticks(own)
    except (AttributeError, OSError, ValueError, IndexError):
        return None


def _hz() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


def enable(on: bool) -> None:
    """Measure and share the cores (`on`, the default on Linux), or always use every thread."""
    _state.update(next=0.0 if on else None, threads=0, sample=None, at=0.0, pid=None, seen=0.0)


def threads() -> int:
    """The threads a kernel call may use now; 0: as many as it likes. Cheap: it measures again
    at most every INTERVAL seconds."""
    due = _state["next"]
    if due is None:
        return 0
    now = _clock()
    quiet, _state["seen"] = now - _state["seen"], now  # since this process's last kernel call
    if now < due:
        return _state["threads"]
    sample = measure()
    if sample is None:  # not Linux: never try again
        enable(False)
        return 0
    last, last_at, pid = _state["sample"], _state["at"], _state["pid"]
    _state.update(sample=sample, at=now, next=now + INTERVAL, pid=_pid())
    if quiet > INTERVAL or pid != _state["pid"]:
        # This process ran no kernel for a while (a notebook between cells, the other side of
        # a benchmark taking its turn), or it is a forked child holding its parent's sample:
        # the last sample says little about now. Start a new window with every thread.
        _state["threads"] = 0
    elif last is not None and now > last_at:
        cpus, ticks, mine = sample
        others = others_busy(ticks - last[1], mine - last[2], now - last_at, _hz())
        share = threads_for(cpus, others, cpus)
        _state["threads"] = 0 if share >= cpus else share
    return _state["threads"]
