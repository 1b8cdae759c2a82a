"""The user-facing entry points run: the README's code, the command line, the bench harness."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import main as bench_main
from tinyformer import __version__, cli, nn
from tinyformer.runtime import RUNTIME_ENV

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_snippets_run():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 (our own README)


def test_readme_layout_lists_every_top_level_module_as_spine_or_wing():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout") : text.index("## Commands")]
    rows = [line for line in layout.splitlines() if line.startswith("| spine") or
            line.startswith("| wing")]  # fmt: skip
    listed = " ".join(rows)
    package = ROOT / "tinyformer"
    modules = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    modules += [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    missing = [m for m in modules if not re.search(rf"[`/ ]{re.escape(m)}(\.py|/)", listed)]
    assert not missing, f"README's layout table lacks {missing}: mark each spine or wing"


def test_subpackages_are_attributes_after_import_tinyformer():
    # PyTorch users write torch.optim.AdamW after `import torch`: the same must work here. A
    # fresh interpreter, since in this one the test modules have imported the subpackages.
    code = "import tinyformer as tf; print(tf.optim.AdamW.__name__, tf.nn.functional.gelu.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["AdamW", "gelu"]


def test_every_subpackage_is_packaged():
    # setup.py packages what find_packages finds: a folder of Python files without an
    # __init__.py would be left out of a plain install
    from setuptools import find_packages

    packaged = set(find_packages(str(ROOT), include=["tinyformer", "tinyformer.*"]))
    folders = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "tinyformer").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert folders - packaged == set(), "give these folders an __init__.py"


def test_every_model_imports_from_tinyformer_models():
    # `from tinyformer.models import UNet` was an ImportError: only GPT and ViT were exported
    models = importlib.import_module("tinyformer.models")
    for path in (ROOT / "tinyformer" / "models").glob("[!_]*.py"):
        module = importlib.import_module(f"tinyformer.models.{path.stem}")
        configs = [name for name in vars(module) if name.endswith("Config")]
        assert set(configs) <= set(models.__all__), path.name
    for name in ("Bert", "BertForMaskedLM", "CNN", "FCN", "GPT", "SegNet", "Transformer", "UNet"):
        assert name in models.__all__ and issubclass(getattr(models, name), nn.Module)


def test_version_and_the_train_commands_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"tinyformer {__version__}"
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    out = capsys.readouterr().out
    assert "train a ViT classifier" in out and "train a U-Net segmenter" in out  # not "a VIT"


def test_demo_runs_and_every_op_passes(capsys):
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "gradcheck of the whole layer (full Jacobian): passed" in out
    assert re.search(r"(\d+) of \1 ops match finite differences", out)


def test_gradcheck_command_for_one_op_and_an_unknown_op(capsys):
    assert cli.main(["gradcheck", "--op", "softmax", "--samples", "2"]) == 0
    assert cli.main(["gradcheck", "--op", "nope"]) == 2
    assert "no op named 'nope'" in capsys.readouterr().err
    for samples in ("0", "-2"):  # no samples would check nothing and still report "passed"
        with pytest.raises(SystemExit) as exit_:
            cli.main(["gradcheck", "--op", "softmax", "--samples", samples])
        assert exit_.value.code == 2
        assert f"--samples: must be at least 1, got {samples}" in capsys.readouterr().err


def test_explain_command(capsys):
    assert cli.main(["explain", "softmax.forward"]) == 0
    assert "softmax.forward [float32]: runs" in capsys.readouterr().out
    assert cli.main(["explain", "layer_norm"]) == 0  # an op: each of its primitives
    out = capsys.readouterr().out
    assert "layer_norm.forward [float64]" in out and "layer_norm.backward [float32]" in out
    assert cli.main(["explain", "nope"]) == 2
    assert "no primitive or op named 'nope'; primitives: adamw.step" in capsys.readouterr().err


def test_bench_quick_writes_json_and_png(tmp_path, capsys):
    assert bench_main(["--quick", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "bench.json").read_text())
    assert results["engine"]["total_us_per_op"] > 0
    assert {row["op"] for row in results["ops"]["rows"]} >= {"linear", "softmax", "attention"}
    kernels = results["kernels_quick"]["rows"]
    assert {row["primitive"] for row in kernels} >= {"attention.backward", "adamw.step"}
    assert all(row["numpy_ms"] > 0 for row in kernels)
    # The ceiling is the speedup at the GEMM rate: ceiling / speedup = GEMM rate / kernel rate.
    assert results["gemm_GFLOPs"] > 0
    ceilings = [row for row in kernels if "ceiling" in row]
    assert {row["primitive"] for row in ceilings} == {"attention.forward", "attention.backward"}
    for row in (row for row in ceilings if "speedup" in row):  # with numba
        rate = row["GFLOP/s"] * row["ceiling"] / row["speedup"]
        assert rate == pytest.approx(results["gemm_GFLOPs"], rel=1e-9)
    assert [row["T"] for row in results["attention_memory"]] == [64, 128]
    if importlib.util.find_spec("numba") is not None:
        for pulse in results["pulse"].values():  # before and after the tables
            # No core of today does 400 GFLOP/s in float32 (2 x 16-lane FMA units at 6 GHz
            # would do 384): more means the compiler folded the pulse's rounds away.
            assert 0 < pulse["one_core_GFLOPs"] < 400 and pulse["balance"] > 0
            assert 0 < pulse["region_us"] and 0 < pulse["region_after_idle_us"]
        assert "machine pulse before: one core" in capsys.readouterr().out
    for chart in ("ops.png", "speedup_quick.png"):
        assert (tmp_path / chart).read_bytes()[:4] == b"\x89PNG"
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporary files


def test_bench_combines_runs_into_medians_with_the_spread(tmp_path, capsys):
    assert bench_main(["--quick", "--runs", "3", "--only", "kernels", "--out", str(tmp_path)]) == 0
    table = json.loads((tmp_path / "bench.json").read_text())["kernels_quick"]
    assert len(table["runs"]) == 3 and "median of 3 runs" in capsys.readouterr().out
    for i, row in enumerate(table["rows"]):
        runs = [run[i] for run in table["runs"]]
        assert {r["primitive"] for r in runs} == {row["primitive"]}
        assert row["numpy_ms"] == sorted(r["numpy_ms"] for r in runs)[1]
        if "speedup" in row:  # with numba
            speedups = sorted(r["speedup"] for r in runs)
            assert (row["lowest"], row["speedup"], row["highest"]) == tuple(speedups)


def test_combine_runs_takes_each_number_s_median_and_keeps_one_run_as_it_is():
    from benchmarks.kernels import combine_runs

    def row(ref, kernel):
        return {"primitive": "p", "default": "numba", "numpy_ms": ref, "numba_ms": kernel,
                "speedup": ref / kernel}  # fmt: skip

    one = [row(4.0, 1.0)]
    assert combine_runs([one]) is one  # no spread columns for a single run
    (got,) = combine_runs([[row(4.0, 1.0)], [row(6.0, 1.0)], [row(4.0, 4.0)], [row(9.0, 2.0)]])
    # medians of each number (of an even count: the mean of the middle two), not ratios of them
    assert got["numpy_ms"] == 5.0 and got["numba_ms"] == 1.5
    assert got["speedup"] == 4.25 and (got["lowest"], got["highest"]) == (1.0, 6.0)
    assert got["primitive"] == "p" and got["default"] == "numba"


def test_bench_refuses_a_run_count_below_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_main(["--runs", "0", "--only", "kernels"])
    assert exit_.value.code == 2
    assert "--runs: must be 1 or more, got 0" in capsys.readouterr().err


def test_bench_refuses_an_output_folder_it_cannot_write_before_timing(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exit_:  # at once, not after the timings
        bench_main(["--only", "memory", "--out", str(blocker / "results")])
    assert exit_.value.code == 2
    err = capsys.readouterr()
    assert f"cannot write to --out {blocker / 'results'}" in err.err and not err.out


def test_train_command_as_a_program_restarts_with_its_settings(tmp_path):
    """The console script re-executes itself with RUNTIME_ENV; the child must see it."""
    import os
    import subprocess
    import sys

    corpus = tmp_path / "c.txt"
    corpus.write_text("abcdefgh " * 400, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (*RUNTIME_ENV, "TINYFORMER_RESTARTED")}
    flags = [
        "train", "gpt", "--data", str(corpus), "--n-layer", "1", "--n-embd", "8", "--n-head",
        "2", "--block-size", "8", "--iters", "2", "--eval-iters", "1", "--batch-size", "2",
        "--out-dir", str(tmp_path / "run"), "--sample-tokens", "0", "--no-progress",
    ]  # fmt: skip
    code = "import os, sys; from tinyformer import cli; sys.argv[0] = 'tinyformer'; cli.main()"
    done = subprocess.run(
        [sys.executable, "-c", code, *flags], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "done: 2 iterations" in done.stdout
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    assert log["runtime_env"] == RUNTIME_ENV
