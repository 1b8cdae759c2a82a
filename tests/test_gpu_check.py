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
