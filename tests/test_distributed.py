"""Distributed training proven on 2 ranks: each case of tests/distributed_cases.py runs under
`mpiexec -n 2` and checks, on every rank, that N ranks with batch B/N equal one process with
batch B (float64, to rounding)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CASES = Path(__file__).with_name("distributed_cases.py")


def _mpiexec() -> str:
    try:
        from mpi4py import MPI  # noqa: F401
    except (ImportError, RuntimeError) as err:
        pytest.skip(f"no working mpi4py ({type(err).__name__}): pip install -e '.[mpi]'")
    from tinyformer.distributed.launch import find_mpiexec
    from tinyformer.distributed.process_group import DistributedError

    try:
        return find_mpiexec()
    except DistributedError as err:
        pytest.skip(str(err))


def _run(*cases: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_mpiexec(), "-n", "2", sys.executable, str(CASES), *cases],
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "NUMBA_NUM_THREADS": "1", **env},
    )  # fmt: skip


EQUIVALENCE = [
    "collectives",
    "ddp",
    "ddp_overlap",
    "ddp_no_sync",
    "ddp_unused",
    "ddp_no_sync_local",
    "ddp_one_parameter",
    "zero",
    "zero_uneven",
    "row_parallel_bias",
    "tensor_parallel",
    "pipeline",
]


def test_two_ranks_equal_one_process():
    result = _run(*EQUIVALENCE)  # one launch: starting the ranks costs more than the cases
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [w for case in EQUIVALENCE for w in (case, "ok")]


def test_a_collective_no_rank_joins_times_out_with_a_clear_error():
    result = _run("timeout", TINYFORMER_DIST_TIMEOUT="2")
    assert result.returncode != 0
    assert "all_reduce timed out after 2 s on rank 0 of 2" in result.stderr


def test_a_killed_rank_ends_the_job():
    result = _run("killed", timeout=60)
    assert result.returncode != 0
    assert "Killed" in result.stdout + result.stderr


def test_sampler_shards_are_disjoint_and_cover_the_data():
    from tinyformer.distributed import DistributedSampler

    shards = [DistributedSampler(10, num_replicas=3, rank=r, seed=1) for r in range(3)]
    got = [s.indices() for s in shards]
    assert all(len(g) == 4 for g in got)
    assert set(map(int, sum((list(g) for g in got), []))) == set(range(10))
    again = DistributedSampler(10, num_replicas=3, rank=0, seed=1)
    again.set_epoch(1)
    assert list(again.indices()) != list(got[0])


def _strided(order: list[int], n: int, ranks: int, rank: int, drop_last: bool) -> list[int]:
    """PyTorch's DistributedSampler on a dataset of n in `order`: padded by repeating its
    start to a multiple of the ranks (or cut to one, drop_last), rank r every N-th from r."""
    total = n // ranks * ranks if drop_last else -(-n // ranks) * ranks
    padded = (order * (total // n + 1))[:total]
    return padded[rank::ranks]


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_shards_are_pytorchs_strided_shards(drop_last):
    from tinyformer.distributed import DistributedSampler

    try:
        from torch.utils.data import DistributedSampler as TorchSampler
    except ImportError:
        TorchSampler = None
    for n in range(1, 12):
        for ranks in range(1, 5):
            for rank in range(ranks):
                ours = DistributedSampler(n, ranks, rank, shuffle=False, drop_last=drop_last)
                want = _strided(list(range(n)), n, ranks, rank, drop_last)
                assert list(ours) == want and len(ours) == len(want), (n, ranks, rank)
                if TorchSampler is not None:
                    theirs = TorchSampler(range(n), ranks, rank, shuffle=False, drop_last=drop_last)
                    assert list(ours) == list(theirs) and len(ours) == len(theirs)
                # shuffled: the same strides through the seeded permutation
                shuffled = DistributedSampler(n, ranks, rank, seed=5, drop_last=drop_last)
                shuffled.set_epoch(2)
                order = np.random.default_rng(7).permutation(n).tolist()
                assert list(shuffled) == _strided(order, n, ranks, rank, drop_last)


def test_collectives_need_a_process_group():
    import tinyformer as tf
    from tinyformer import distributed as dist

    with pytest.raises(dist.DistributedError, match="init_process_group"):
        dist.all_reduce(tf.ones(2))


TINY_RUN = [
    "train", "gpt", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
    "--batch-size", "4", "--eval-interval", "3", "--eval-iters", "1", "--sample-tokens", "0",
    "--no-progress",
]  # fmt: skip


def _log(out) -> dict:
    import json

    return json.loads((out / "log.json").read_text())


def test_train_gpt_on_two_ranks_takes_the_one_process_steps_and_resumes_across_counts(tmp_path):
    """`mpiexec -n 2 tinyformer train gpt` logs the losses one process logs (the whole batch's,
    to float32 rounding: the sums run in another order) and writes one run folder; a run saved
    by 2 ranks resumes in 1 process, and one saved by 1 process on 2 ranks, to the same end."""
    mpiexec = _mpiexec()
    cli = [sys.executable, "-m", "tinyformer.cli", *TINY_RUN]
    env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    one, two = tmp_path / "one", tmp_path / "two"

    def train(ranks: int, out, *flags: str) -> str:
        cmd = [*([mpiexec, "-n", str(ranks)] if ranks > 1 else []), *cli, "--out-dir", str(out)]
        done = subprocess.run([*cmd, *flags], capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    train(1, one, "--iters", "3")
    assert train(2, two, "--iters", "3").count("iter     3:") == 1  # rank 0 alone prints
    np.testing.assert_allclose(_log(two)["loss"], _log(one)["loss"], rtol=1e-5)
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())
    train(2, one, "--iters", "6", "--resume")
    train(1, two, "--iters", "6", "--resume")
    a, b = _log(one), _log(two)
    assert len(a["loss"]) == len(b["loss"]) == 6
    np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-5)
    np.testing.assert_allclose(b["evals"][-1]["val"], a["evals"][-1]["val"], rtol=1e-5)


def test_ring_all_reduce_sums_and_sends_2_n_minus_1_over_n():
    from tinyformer.distributed.schedules import ring_all_reduce

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5):
        xs = [rng.standard_normal(10 * n) for _ in range(n)]
        outs, sent = ring_all_reduce(xs)
        for out in outs:
            np.testing.assert_allclose(out, np.sum(xs, axis=0))
        assert sent == 2 * (n - 1) * xs[0].nbytes // n


def test_buckets_fill_from_the_last_parameter_up_to_the_cap():
    from tinyformer.distributed.schedules import assign_buckets

    assert assign_buckets([4, 4, 8, 2], cap=8) == [[3], [2], [1, 0]]
    assert assign_buckets([4, 4, 8, 2], cap=100) == [[3, 2, 1, 0]]
    assert assign_buckets([16, 1], cap=8) == [[1], [0]]  # too big for any bucket: its own
    assert assign_buckets([], cap=8) == []


def test_gpipe_schedule_orders_every_piece_and_has_its_bubble():
    from tinyformer.distributed.schedules import bubble_fraction, gpipe_schedule, stage_order

    for stages, micro in ((1, 1), (2, 4), (3, 2), (4, 8)):
        table = gpipe_schedule(stages, micro)
        when = {(cell, s): t for t, row in enumerate(table) for s, cell in enumerate(row) if cell}
        for s in range(stages):
            order = stage_order(table, s)
            assert sorted(order) == sorted(
                [("forward", m) for m in range(micro)] + [("backward", m) for m in range(micro)]
            )
            assert order.index(("backward", 0)) > order.index(("forward", micro - 1))
            for m in range(micro):
                if s:  # a stage needs the previous stage's activation, one tick earlier or more
                    assert when[(("forward", m), s)] > when[(("forward", m), s - 1)]
                if s < stages - 1:  # and the next stage's gradient
                    assert when[(("backward", m), s)] > when[(("backward", m), s + 1)]
        assert bubble_fraction(table) == pytest.approx((stages - 1) / (micro + stages - 1))


def test_each_launched_rank_runs_blas_on_one_thread_beside_numbas_pool(monkeypatch):
    """`tinyformer launch` once set OMP_NUM_THREADS for each rank: the runtime took it for the
    user's choice and left OpenBLAS's pool of that many threads running beside Numba's, and one
    rank under mpiexec took about twice `train gpt`'s step."""
    from tinyformer.distributed.launch import launch_command
    from tinyformer.runtime import BLAS_THREAD_VARS, THREADS_VAR

    for name in (*BLAS_THREAD_VARS, THREADS_VAR):
        monkeypatch.delenv(name, raising=False)
    for ranks in (1, 2):
        _, env = launch_command(ranks, ["train", "gpt"])
        assert not set(BLAS_THREAD_VARS) & set(env), ranks
        code = "from tinyformer import runtime; print(runtime.apply_settings()['blas'])"
        blas = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert "left as you set them" not in blas, blas


class _Done:
    """An MPI request that is already complete."""

    def Test(self) -> bool:  # noqa: N802 (mpi4py's name)
        return True


class _FakeWorld:
    """What init_process_group and DDP need of COMM_WORLD, seen from rank 0 of 2: rank 0's
    broadcasts are its own values."""

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def bcast(self, obj, root=0):
        return obj

    def Ibcast(self, buffer, root=0):  # noqa: N802
        return _Done()


class _FakeNcclComm:
    """cupy.cuda.nccl.NcclCommunicator for rank 0 of 2: the other rank's array is `other(a)`
    (the same as this rank's by default), summed or maxed in place as NCCL would."""

    def __init__(self, ndev, uid, rank, other=None) -> None:
        self.args, self.calls, self.arrays = (ndev, uid, rank), [], {}
        self.other = other or (lambda a: a.copy())

    def allReduce(self, send, recv, count, dtype, op, stream):  # noqa: N802
        self.calls.append((send, recv, count, dtype, op, stream))
        from tinyformer import backend

        a = self.arrays[recv]
        xp = backend.get_array_module(a)
        a[...] = a + self.other(a) if op == 0 else xp.maximum(a, self.other(a))


@pytest.fixture()
def fake_nccl(monkeypatch):
    """The nccl backend on the fake device, rank 0 of a fake world of 2: every call the NCCL
    path makes reaches a fake communicator instead of CuPy (no GPU needed)."""
    import types

    from tinyformer.distributed import process_group as pg

    nccl = types.SimpleNamespace(
        NCCL_FLOAT32=7, NCCL_FLOAT64=8, NCCL_SUM=0, NCCL_MAX=2,
        get_unique_id=lambda: "uid", NcclCommunicator=_FakeNcclComm,
    )  # fmt: skip
    mpi = types.SimpleNamespace(COMM_WORLD=_FakeWorld())
    monkeypatch.setattr(pg, "_nccl", lambda: nccl)
    monkeypatch.setattr(pg, "_mpi", lambda: mpi)
    monkeypatch.setattr(pg, "_current_stream", lambda data: 42)
    monkeypatch.setattr(pg, "_group", None)
    pg.init_process_group("nccl", timeout=5)
    comm = pg._group.nccl

    def pointer(data):
        comm.arrays[id(data)] = data
        return id(data)

    monkeypatch.setattr(pg, "_device_pointer", pointer)
    yield comm
    pg.destroy_process_group()


def test_nccl_all_reduce_sums_averages_and_maxes_in_place_on_the_stream(fake_nccl):
    import tinyformer as tf
    from tinyformer import distributed as dist

    assert fake_nccl.args == (2, "uid", 0) and dist.get_backend() == "nccl"
    fake_nccl.other = lambda a: a * 0 + 10.0
    for op, want, code in (
        (dist.ReduceOp.SUM, [11.0, 12.0, 13.0], 0),
        (dist.ReduceOp.AVG, [5.5, 6.0, 6.5], 0),
        (dist.ReduceOp.MAX, [10.0, 10.0, 10.0], 2),
    ):
        x = tf.tensor([1.0, 2.0, 3.0], dtype="float32", device="fake")
        assert dist.all_reduce(x, op, async_op=True).is_completed()
        np.testing.assert_array_equal(x.cpu().numpy(), want)
        send, recv, count, dtype, nccl_op, stream = fake_nccl.calls[-1]
        assert (send == recv, count, dtype, nccl_op, stream) == (True, 3, 7, code, 42)
    with pytest.raises(dist.DistributedError, match="contiguous float32/float64"):
        dist.all_reduce(tf.tensor([1, 2], dtype="int64", device="fake"))


def test_ddp_over_nccl_reduces_each_bucket_once_and_averages(fake_nccl):
    """DDP's bucket path on device arrays: one in-place allReduce per bucket, of the bucket's
    gradients and its used-flags; two equal ranks average to this rank's own gradients."""
    import tinyformer as tf
    from tinyformer import backend
    from tinyformer import distributed as dist
    from tinyformer.models.gpt import GPT, GPTConfig

    cfg = GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8)
    x = np.random.default_rng(0).integers(0, 11, (4, 8))
    grads = []
    for wrap in (False, True):
        tf.manual_seed(0)
        gpt = GPT(cfg).to("fake")
        model = dist.DistributedDataParallel(gpt, bucket_cap_mb=0.001) if wrap else gpt
        model(tf.tensor(x, device="fake"), tf.tensor(x, device="fake"))[1].backward()
        grads.append({n: backend.to_host(p.grad) for n, p in gpt.named_parameters()})
    assert len(model._buckets) > 3 and len(fake_nccl.calls) == len(model._buckets)
    params = list(gpt.parameters())
    assert sum(c[2] for c in fake_nccl.calls) == sum(p.size for p in params) + len(params)
    for name, g in grads[0].items():
        np.testing.assert_allclose(grads[1][name], g, rtol=1e-6, err_msg=name)


def test_ddp_first_bucket_is_small_so_the_first_all_reduce_starts_early():
    """As PyTorch's: the last parameters' bucket holds at most 1 MiB, the rest fill the cap."""
    import tinyformer as tf
    from tinyformer.distributed.ddp import DistributedDataParallel

    mib = 2**20 // 8  # float64 elements in 1 MiB
    params = [tf.nn.Parameter(tf.zeros(n, dtype="float64")) for n in (mib, mib, mib // 2, mib)]
    index = {id(p): i for i, p in enumerate(params)}

    def layout(cap: float) -> list[list[int]]:
        buckets = DistributedDataParallel._make_buckets(params, cap)
        return [[index[id(p)] for p in b.params] for b in buckets]

    assert layout(25 * 2**20) == [[3], [2, 1, 0]]
    assert layout(0.5 * 2**20) == [[3], [2], [1], [0]]
