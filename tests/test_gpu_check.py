"""benchmarks/gpu_check.py, the one script a session with a GPU runs, runs here on the fake
device (so it is known to work before a GPU is lent) and writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def test_the_gpu_check_runs_on_the_fake_device(tmp_path):
    out = tmp_path / "gpu_check.json"
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "fake",
            "--steps", "2", "--seeds", "1", "--out", str(out)]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["device"] == "fake" and len(result["ops"]) > 100
    assert all(r["ok"] for r in result["ops"]), [r for r in result["ops"] if not r["ok"]]
    for row in result["models"]:
        assert abs(row["device_loss"] - row["host_loss"]) < 1e-4, row
    assert "pairs match the host" in run.stdout


def test_the_gpu_benchmarks_run_on_the_fake_device(tmp_path, corpus):
    """gpu_vs_torch.py and cuda_kernels_vs_torch.py, tinyformer's side, at toy sizes: the
    scripts a GPU session runs are known to work before it starts."""
    bench = ROOT / "benchmarks"
    argv = [sys.executable, str(bench / "gpu_vs_torch.py"), "--device", "fake", "--iters", "2",
            "--eval-batches", "1", "--configs", "baby", "vit", "--data", corpus,
            "--out", str(tmp_path / "models.json")]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=bench)
    assert run.returncode == 0, run.stderr
    rows = json.loads((tmp_path / "models.json").read_text())["results"]
    assert [(r["config"], r["framework"]) for r in rows] == [
        ("baby", "tinyformer"),
        ("vit", "tinyformer"),
    ]
    out = str(tmp_path / "kernels.json")
    argv = [sys.executable, str(bench / "cuda_kernels_vs_torch.py"), "--device", "fake",
            "--sizes", "tiny", "--repeats", "1", "--out", out]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    rows = json.loads((tmp_path / "kernels.json").read_text())["results"]
    assert {"softmax.forward", "attention.forward (causal)"} <= {r["primitive"] for r in rows}


def _gpu_check():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_float32_result_is_judged_against_the_float64_truth_where_the_host_is_off():
    """A layer norm over two features in float32: its input gradient is a small difference of
    large terms, so the host's own float32 reference is off from float64 by more than the
    tolerance. A device result as close to the truth passes; one further off fails."""
    verdict = _gpu_check().verdict
    truth = [np.array([1.0, -1.0]), np.array([2e-3, -2e-3])]
    host = [truth[0], np.array([2.01e-3, -2e-3])]  # 5e-3 off the truth
    assert verdict(host, host, truth, "float32")["ok"]
    near = [truth[0], np.array([2.0005e-3, -2e-3])]  # 4e-3 from the host, 2.5e-4 from the truth
    row = verdict(near, host, truth, "float32")
    assert row["ok"] and row["max_rel"] > 1e-4 and row["device_to_truth"] < 1e-3
    far = [truth[0], np.array([2.05e-3, -2e-3])]  # 2.5e-2 off the truth: 5x the host's error
    assert not verdict(far, host, truth, "float32")["ok"]
    exact = [truth[0], truth[1] + 1e-12]
    assert not verdict(exact, truth, None, "float64")["ok"]  # float64 has no truth above it


def test_the_gpu_profile_runs_on_the_fake_device(tmp_path):
    bench = ROOT / "benchmarks"
    out = tmp_path / "profile.json"
    argv = [sys.executable, str(bench / "gpu_profile.py"), "--device", "fake", "--steps", "2",
            "--top", "10", "--out", str(out)]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=bench)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["timing"]["issue_ms"] > 0 and len(result["profile"]["functions"]) == 10
    assert "engine.py" in result["profile"]["by_file_ms"]  # the graph walk's own time


def test_the_graphs_part_runs_on_the_fake_device(tmp_path):
    """benchmarks/graphs_vs_torch.py's tinyformer rows at a toy size on the emulator: the
    captured step passes capture's checks and ends at the eager step's loss."""
    out = tmp_path / "graphs.json"
    argv = [sys.executable, str(ROOT / "benchmarks" / "graphs_vs_torch.py"), "--device", "fake",
            "--warmup", "0", "--iters", "1", "--out", str(out)]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    rows = {r["mode"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"eager", "graph"} and not any("error" in r for r in rows.values()), rows
    assert abs(rows["graph"]["loss"] - rows["eager"]["loss"]) < 1e-4, rows
