"""benchmarks/gpu_check.py, the one script a session with a GPU runs, runs here on the fake
device (so it is known to work before a GPU is lent) and writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
