"""tinyformer bughunt: a planted bug the checks catch, the same one for the same seed, every kind
of mistake it promises, and a file that passes again once the change is undone."""

from __future__ import annotations

import pytest

from tinyformer import cli
from tinyformer.bughunt import KINDS, _caught, _load, plant, standalone_source
from tinyformer.testing import RandomDraw
from tinyformer.testing.checks import check_backward


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "matmul", "cross_entropy"])
def test_the_standalone_op_passes_its_checks_without_the_registry(op):
    source = standalone_source(op)
    assert "registry.call(" not in source and "@registry.reference" not in source
    for spec in _load(source, f"standalone_{op}").SPECS:
        for seed in range(3):
            check_backward(spec, RandomDraw(seed))


def test_a_plant_is_caught_reproducible_and_undone_by_its_diff():
    planted = plant("softmax", seed=4)
    assert planted == plant("softmax", seed=4)
    assert _caught(planted.buggy, "softmax") and not _caught(planted.clean, "softmax")
    changed = [line for line in planted.diff().splitlines() if line.startswith(("-", "+"))]
    assert len(changed) == 4  # the two file names, then one line out and one line in


# Where each kind of mistake lands in the built-in ops.
WHERE = {
    "sign flip": "exp", "dropped term": "softmax", "missing factor": "gelu",
    "wrong axis": "log_softmax", "no unbroadcast": "mul", "lost transpose": "matmul",
}  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_mistake_can_be_planted(kind):
    planted = plant(WHERE[kind], seed=0, kind=kind)
    assert planted.kind == kind and _caught(planted.buggy, planted.op)


def test_the_command_writes_the_file_keeps_a_fix_in_progress_and_reveals(tmp_path, capsys):
    argv = ["bughunt", "--op", "mul", "--seed", "2", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    path = tmp_path / "bughunt_mul.py"
    assert "pytest --tinyformer-ops" in capsys.readouterr().out and path.exists()
    path.write_text(path.read_text() + "# the student's edit\n")
    assert cli.main(argv) == 2  # not overwritten
    assert "a fix in progress" in capsys.readouterr().err
    assert cli.main([*argv, "--reveal"]) == 0
    assert "The planted change in bughunt_mul.py (seed 2)" in capsys.readouterr().out
    assert cli.main(["bughunt", "--op", "nope"]) == 2
    assert "no op file tinyformer/ops/nope.py" in capsys.readouterr().err
