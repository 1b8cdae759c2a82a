"""Sharing the cores (tinyformer/cores.py): the kernels run on the cores other processes leave
idle, measured from /proc/stat; a sum's parts do not depend on the threads a call ran on."""

from __future__ import annotations

import functools

import numba
import numpy as np
import pytest

from tinyformer import cores, registry

STAT = """cpu  900 10 200 5000 30 0 5 70 0 0
cpu0 400 5 100 2500 10 0 2 35 0 0
cpu1 300 5 50 2500 20 0 3 35 0 0
cpu2 200 0 50 0 0 0 0 0 0 0
intr 12345 0 0
ctxt 999
"""
SELF_STAT = "4242 (python3 (a name) x) R 1 2 3 4 5 6 7 8 9 10 120 30 0 0 20 0 3 0 77\n"


def test_busy_ticks_count_only_usable_cpus_and_not_idle_or_steal():
    # user + nice + system + irq + softirq of cpu0 and cpu1; cpu2 is not ours, the "cpu" line
    # is their sum, idle, iowait and steal are not busy
    assert cores._cpu_ticks(STAT, {0, 1}) == (400 + 5 + 100 + 2) + (300 + 5 + 50 + 3)
    assert cores._cpu_ticks(STAT, {2}) == 250


def test_own_ticks_read_after_a_name_with_spaces_and_parentheses():
    assert cores._own_ticks(SELF_STAT) == 120 + 30


@pytest.mark.parametrize(
    ("cpus", "others", "pool", "want"),
    [
        (2, 0.0, 2, 2),  # alone: every core
        (2, 0.3, 2, 2),  # a little background work leaves the core ours
        (2, 0.34, 2, 1),  # a third of a core or more is theirs
        (2, 1.0, 2, 1),  # one busy neighbour
        (2, 5.0, 2, 1),  # never fewer than one
        (8, 1.0, 8, 7),
        (8, 2.5, 8, 5),
        (8, 0.0, 4, 4),  # never more than the pool
    ],
)
def test_threads_for(cpus, others, pool, want):
    assert cores.threads_for(cpus, others, pool) == want


def test_others_busy_is_what_this_process_did_not_use():
    # 100 ticks a second; over 0.5 s the CPUs were busy 80 ticks, 30 of them this process's
    assert cores.others_busy(80, 30, 0.5, 100.0) == pytest.approx(1.0)
    assert cores.others_busy(30, 40, 0.5, 100.0) == 0.0  # tick rounding never goes negative
    assert cores.others_busy(10, 0, 0.0, 100.0) == 0.0


@pytest.fixture
def scripted(monkeypatch):
    """cores with a clock and samples the test sets: (cpus, busy ticks, own ticks)."""
    clock, samples = [100.0], []
    monkeypatch.setattr(cores, "_clock", lambda: clock[0])
    monkeypatch.setattr(cores, "measure", lambda: samples.pop(0))
    monkeypatch.setattr(cores, "_hz", lambda: 100.0)
    monkeypatch.setattr(cores, "_state", dict(cores._state))
    cores.enable(True)
    return clock, samples


def _calls(clock, seconds):
    """Kernel calls every 0.1 s for `seconds` (none of them due to measure)."""
    for _ in range(round(seconds / 0.1)):
        clock[0] += 0.1
        cores.threads()


def test_threads_follow_the_load_at_most_every_interval(scripted):
    clock, samples = scripted
    samples.append((2, 0, 0))
    assert cores.threads() == 0  # the first sample: nothing to compare with yet, all threads
    _calls(clock, 0.4)  # not due: no sample taken (the list is empty)
    clock[0] += 0.2
    samples.append((2, 0 + 90, 30))  # others: 60 ticks in 0.6 s = 1 core
    assert cores.threads() == 1
    _calls(clock, 0.4)
    clock[0] += 0.15
    samples.append((2, 90 + 110, 30 + 105))  # others gone: this process used both cores
    assert cores.threads() == 0


def test_a_quiet_spell_starts_a_fresh_window_with_every_thread(scripted):
    clock, samples = scripted
    samples.append((2, 0, 0))
    cores.threads()
    _calls(clock, 0.4)
    clock[0] += 0.15
    samples.append((2, 55, 0))  # a neighbour on one core: 1 thread
    assert cores.threads() == 1
    clock[0] += 3.0  # no kernel call while another process ran on both cores
    samples.append((2, 55 + 600, 0))
    assert cores.threads() == 0  # not held against the next half second
    _calls(clock, 0.4)
    clock[0] += 0.15
    samples.append((2, 655 + 95, 0 + 90))  # and this process alone since
    assert cores.threads() == 0


def test_sharing_off_never_measures(scripted):
    cores.enable(False)
    assert cores.threads() == 0  # `measure` would fail: no samples were set


def test_a_platform_without_proc_stat_uses_every_thread(monkeypatch):
    monkeypatch.setattr(cores, "_state", dict(cores._state))
    monkeypatch.setattr(cores, "measure", lambda: None)
    cores.enable(True)
    assert cores.threads() == 0 and cores._state["next"] is None


def test_measure_reads_this_machine():
    sample = cores.measure()
    if sample is not None:  # Linux
        cpus, busy, mine = sample
        assert cpus >= 1 and busy >= 0 and mine >= 0


def test_the_registry_runs_a_kernel_on_the_threads_cores_grants(monkeypatch):
    registry.primitives()
    name = "softmax.forward"
    monkeypatch.setitem(registry._table, name, dict(registry._table[name]))
    monkeypatch.setitem(registry._state["one_thread_below"], name, 100)
    seen: list[int] = []

    def softmax_forward(x):
        seen.append(numba.get_num_threads())
        return x

    registry.kernel(name, backend="numba", dtypes=("float32",))(softmax_forward)
    registry._cache.clear()
    try:
        pool = numba.get_num_threads()
        big = np.ones((64, 64), np.float32)  # above the one-thread threshold
        monkeypatch.setattr(cores, "threads", lambda: 1)
        registry.call(name, big)
        with registry.prefer("numba", force=True):  # forced blocks use the pool
            registry.call(name, big)
        monkeypatch.setattr(cores, "threads", lambda: 0)
        registry.call(name, big)
        assert seen == [1, pool, pool] and numba.get_num_threads() == pool
    finally:
        monkeypatch.undo()
        registry._cache.clear()


def _on(threads, fn, *args):
    previous = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        return fn(*args)
    finally:
        numba.set_num_threads(previous)


@pytest.mark.parametrize("rows", [64, 301])
def test_linear_and_layer_norm_gradients_are_the_same_bits_on_one_thread(rows):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 48)).astype(np.float32)
    w = rng.standard_normal((40, 48)).astype(np.float32)
    gy = rng.standard_normal((rows, 40)).astype(np.float32)
    gn = rng.standard_normal((rows, 48)).astype(np.float32)
    mu, rstd = x.mean(1), (1 / x.std(1)).astype(np.float32)
    pool = numba.config.NUMBA_NUM_THREADS
    calls = [
        lambda: registry.call("linear.forward", x, w, w[0]),
        lambda: registry.call("linear.backward", gy, x, w, True, True, True),
        lambda: registry.call("layer_norm.backward", gn, x, x[0], mu, rstd),
    ]
    with registry.prefer("numba", force=True):
        for call in calls:
            whole, alone = _on(pool, call), _on(1, call)
            whole, alone = (r if isinstance(r, tuple) else (r,) for r in (whole, alone))
            for a, b in zip(whole, alone, strict=True):
                np.testing.assert_array_equal(a, b)


def test_explain_says_when_the_pool_runs_on_fewer_threads(monkeypatch):
    monkeypatch.setattr(cores, "threads", lambda: 1)
    assert "other processes keep cores busy: the pool runs on 1 now" in registry.explain(
        "softmax.forward", size=10**6
    )
    monkeypatch.setattr(cores, "threads", lambda: 0)
    assert "other processes" not in registry.explain("softmax.forward", size=10**6)


def test_a_forked_child_does_not_compare_with_its_parents_sample(scripted, monkeypatch):
    clock, samples = scripted
    samples.append((2, 0, 5000))  # the parent's: its own ticks are far above the child's
    cores.threads()
    _calls(clock, 0.4)
    clock[0] += 0.15
    monkeypatch.setattr(cores, "_pid", lambda: -1)  # now in the child
    samples.append((2, 10, 0))
    assert cores.threads() == 0  # not "others used 5010 ticks": a fresh window


@pytest.mark.parametrize("batch", [1, 3, 4])
def test_convolution_gradients_are_the_same_bits_on_one_thread(batch):
    # The path (per image or on one grid; stamps or phases) and the weight gradient's partial
    # sums follow the pool's size, not the threads a call gets while other processes are busy:
    # a U-Net trains to the same numbers on a busy machine as on an idle one.
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((batch, 5, 8, 8)).astype(np.float32)
    wt = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)  # upsampling: kernel = stride
    gt = rng.standard_normal((batch, 4, 16, 16)).astype(np.float32)
    w3 = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)  # stride 3, 3x3 taps: phases
    g3 = rng.standard_normal((batch, 4, 24, 24)).astype(np.float32)
    pool = numba.config.NUMBA_NUM_THREADS
    calls = [
        lambda: registry.call("conv2d.backward", gy, x, w, (1, 1), (1, 1), (1, 1), 1),
        lambda: registry.call(
            "conv_transpose2d.backward", gt, x, wt, (2, 2), (0, 0), (0, 0), (1, 1), 1
        ),
        lambda: registry.call(
            "conv_transpose2d.backward", g3, x, w3, (3, 3), (0, 0), (0, 0), (1, 1), 1
        ),
    ]
    with registry.prefer("numba", force=True):
        for call in calls:
            for a, b in zip(_on(pool, call), _on(1, call), strict=True):
                np.testing.assert_array_equal(a, b)


def _benchmark_calls():
    """(label, primitive, args, kwargs) of the benchmarks' kernel cases at small sizes: the GPT
    primitives (benchmarks/kernels.py), linear's products and the vision ones."""
    from benchmarks.kernels import _cases
    from benchmarks.vision import vision_cases

    cases = _cases(dict(B=4, T=16, C=32, nh=2, V=11, layers=1)) + vision_cases(quick=True)
    calls = [
        (f"{c.primitive} {c.label}", c.primitive.split("[")[0], c.args, c.kwargs) for c in cases
    ]
    rng = np.random.default_rng(0)
    x, w, gy = (rng.standard_normal(s).astype(np.float32) for s in ((70, 24), (40, 24), (70, 40)))
    calls.append(("linear.forward", "linear.forward", (x, w, w[0]), {}))
    calls.append(("linear.backward", "linear.backward", (gy, x, w, True, True, True), {}))
    return calls


def test_every_benchmarked_numba_kernel_gives_the_same_bits_on_one_thread():
    # Whatever the threads a call gets (tinyformer.cores gives fewer while other processes are
    # busy), a kernel must round the same: the training's numbers may not follow the load.
    pool = numba.config.NUMBA_NUM_THREADS
    checked = set()
    for label, name, args, kwargs in _benchmark_calls():
        if "numba" not in registry.backends(name):
            continue
        call = functools.partial(registry.call, name, *args, **kwargs)
        with registry.prefer("numba", force=True):
            whole, alone = _on(pool, call), _on(1, call)
        whole, alone = (r if isinstance(r, tuple) else (r,) for r in (whole, alone))
        for a, b in zip(whole, alone, strict=True):
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b, err_msg=label)
        checked.add(name)
    numba_primitives = {p for p in registry.primitives() if "numba" in registry.backends(p)}
    assert checked == numba_primitives - {"adamw.step_many"}, sorted(numba_primitives - checked)
