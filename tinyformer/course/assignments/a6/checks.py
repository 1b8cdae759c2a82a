"""A6's property tests (shipped to students) and hidden tests (removed by every release).

The grader runs each test itself with a `tf` whose `tf.course.assignments.a6.drivers` calls the
student's schedules in the task's child and returns arrays; the expected values are computed
here, from first principles (sums, byte counts, the dependencies of a pipeline), never by the
library's own answers. The ring's traffic is the transport's record (`drivers.ring` passes
`ring_all_reduce` a `send` that logs every message), never the count the student returns, and
every message must be the chunk a ring sends; inputs come from `tf.rng` (the grading secret's
generator when grading). `PROPERTIES` and `HIDDEN` map a task id to its tests.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

__all__ = ["PROPERTIES"]


def _ring_messages(xs: np.ndarray) -> list[list[np.ndarray]]:
    """What each rank of a ring sends, in order (first principles, float64): reduce-scatter
    step s, rank r sends its running sum of chunk (r - s) mod N; all-gather step s, the whole
    sum of chunk (r + 1 - s) mod N."""
    n = len(xs)
    chunks = [np.array_split(np.asarray(x, np.float64), n) for x in xs]
    out: list[list[np.ndarray]] = [[] for _ in range(n)]
    for phase in ("reduce", "gather"):
        for step in range(n - 1):
            shift = -step if phase == "reduce" else 1 - step
            msgs = [(r, (r + shift) % n, chunks[r][(r + shift) % n].copy()) for r in range(n)]
            for r, c, data in msgs:
                out[r].append(data)
                nxt = chunks[(r + 1) % n]
                nxt[c] = nxt[c] + data if phase == "reduce" else data
    return out


def _ring_case(tf: ModuleType, n: int, length: int, rng: np.random.Generator) -> None:
    """The ring's results, and its traffic as the grader's transport saw it: rank r sends only
    to r + 1, the ring's messages in the ring's order, 2 (N - 1) chunks of bytes each."""
    xs = rng.standard_normal((n, length))
    where = f"ring_all_reduce: {n} ranks of {length}"
    outs, sent, src, dst, nbytes, values = tf.course.assignments.a6.drivers.ring(xs)
    assert outs.shape == xs.shape, f"{where}: returned shape {outs.shape}"
    for r in range(n):
        err = float(np.abs(outs[r] - xs.sum(axis=0)).max())
        assert err < 1e-12, f"{where}: rank {r} is off the sum by {err:.2e}"
    want = _ring_messages(xs)
    assert len(src) == len(dst) == len(nbytes) and int(np.sum(nbytes)) == 8 * len(values), (
        f"{where}: the transport's record is inconsistent"
    )
    ends = np.cumsum(np.asarray(nbytes) // 8)
    got: list[list[np.ndarray]] = [[] for _ in range(n)]
    for k, (s, d) in enumerate(zip(src, dst)):
        assert 0 <= s < n and d == (s + 1) % n, f"{where}: rank {s} sent to rank {d}, not s + 1"
        got[int(s)].append(values[ends[k] - nbytes[k] // 8 : ends[k]])
    for r in range(n):
        assert len(got[r]) == len(want[r]), (
            f"{where}: rank {r} sent {len(got[r])} messages through `send`, a ring sends "
            f"{len(want[r])}"
        )
        for k, (g, w) in enumerate(zip(got[r], want[r])):
            assert g.shape == w.shape and np.allclose(g, w, rtol=1e-12, atol=1e-12), (
                f"{where}: rank {r}'s message {k} is not the chunk a ring sends at that step"
            )
    measured = int(np.sum(np.asarray(nbytes)[np.asarray(src) == 0]))
    chunk = 8 * (length // n)  # bytes of one chunk (float64), for n dividing the length
    assert measured == 2 * (n - 1) * chunk, (
        f"{where}: rank 0 sent {measured} bytes through `send`, a ring sends {2 * (n - 1) * chunk}"
    )
    assert int(sent) == measured, (
        f"{where}: returns {int(sent)} bytes for rank 0, which sent {measured} through `send`"
    )


def ring_sums_and_sends_two_n_minus_one_chunks(tf: ModuleType) -> None:
    for n in (2, 3, 4):
        _ring_case(tf, n, n * int(tf.rng.integers(1, 4)), tf.rng)


def _expected_buckets(nbytes: list[int], cap: int) -> np.ndarray:
    out, b, size = np.full(len(nbytes), -1), -1, 0
    for i in reversed(range(len(nbytes))):
        if b < 0 or size + nbytes[i] > cap:
            b, size = b + 1, 0
        out[i], size = b, size + nbytes[i]
    return out


def _bucket_case(tf: ModuleType, nbytes: list[int], cap: int) -> None:
    got = tf.course.assignments.a6.drivers.buckets(np.asarray(nbytes), cap)
    want = _expected_buckets(nbytes, cap)
    assert (got != -2).all(), f"assign_buckets({nbytes}, {cap}): a parameter is in two buckets"
    assert (got != -1).all(), f"assign_buckets({nbytes}, {cap}): a parameter is in no bucket"
    assert (got == want).all(), (
        f"assign_buckets({nbytes}, {cap}): the bucket of each parameter is {got.tolist()}, "
        f"want {want.tolist()}"
    )


def buckets_fill_from_the_last_parameter(tf: ModuleType) -> None:
    _bucket_case(tf, [4, 4, 8, 2], 8)
    _bucket_case(tf, [16, 1, 1], 8)  # one too large: a bucket of its own
    _bucket_case(tf, [3, 3, 3], 100)


def _gpipe_case(tf: ModuleType, stages: int, micro: int) -> None:
    table = tf.course.assignments.a6.drivers.gpipe(stages, micro)
    where = f"gpipe_schedule({stages}, {micro})"
    assert table.shape == (2 * (micro + stages - 1), stages), f"{where}: {table.shape[0]} ticks"
    when = {}
    for t, row in enumerate(table):
        for s, cell in enumerate(row):
            if cell >= 0:
                assert (cell, s) not in when, f"{where}: stage {s} runs piece {cell} twice"
                when[(int(cell), s)] = t
    for s in range(stages):
        for m in range(micro):
            fwd, bwd = when.get((m, s)), when.get((micro + m, s))
            assert fwd is not None and bwd is not None, f"{where}: stage {s} misses micro-batch {m}"
            if s:
                assert fwd == when[(m, s - 1)] + 1, (
                    f"{where}: forward {m} on stage {s} late or early"
                )
            if s < stages - 1:
                assert bwd == when[(micro + m, s + 1)] + 1, (
                    f"{where}: backward {m} on stage {s} late or early"
                )
        assert when[(0, s)] == s, f"{where}: stage {s} does not start as soon as it can"
    last = when[(micro - 1, stages - 1)]
    assert when[(2 * micro - 1, stages - 1)] == last + 1, (
        f"{where}: backward does not start at once"
    )


def gpipe_follows_the_dependencies(tf: ModuleType) -> None:
    for stages, micro in ((2, 4), (3, 2), (1, 3)):
        _gpipe_case(tf, stages, micro)


PROPERTIES = {
    "A6.1": [ring_sums_and_sends_two_n_minus_one_chunks],
    "A6.2": [buckets_fill_from_the_last_parameter],
    "A6.3": [gpipe_follows_the_dependencies],
}


### BEGIN HIDDEN TESTS A6
def hidden_ring_of_many(tf: ModuleType) -> None:
    n = int(tf.rng.integers(5, 9))
    _ring_case(tf, n, n * int(tf.rng.integers(2, 5)), tf.rng)


def hidden_buckets_of_one(tf: ModuleType) -> None:
    size = int(tf.rng.integers(1, 64))  # every parameter exactly the cap: one bucket each
    _bucket_case(tf, [size] * int(tf.rng.integers(3, 8)), size)
    _bucket_case(tf, [size], size)


def hidden_gpipe_deep(tf: ModuleType) -> None:
    _gpipe_case(tf, int(tf.rng.integers(4, 7)), int(tf.rng.integers(5, 9)))


HIDDEN = {
    "A6.1": [hidden_ring_of_many],
    "A6.2": [hidden_buckets_of_one],
    "A6.3": [hidden_gpipe_deep],
}
### END HIDDEN TESTS
