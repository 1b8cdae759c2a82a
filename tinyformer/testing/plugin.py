"""pytest plugin: `pytest --tinyformer-ops my_ops.py` checks every op spec in a file.

Installing tinyformer registers this module through the `pytest11` entry point; it does nothing
unless `--tinyformer-ops` is given (it only adds its options to `pytest --help`). With it:

    pytest --tinyformer-ops my_ops.py                 # a file, or a dotted module: pkg.my_ops
    pytest --tinyformer-ops a.py --tinyformer-ops b.py -k swiglu -x

imports each file (as pytest imports a test module), reads its `SPECS` list of `OpSpec`s and runs
`tinyformer.testing.checks` as one test per op and check, with ids such as
`my_ops.py::swiglu::gradcheck[float64]`, `::float32`, `::no_grad`, `::backend[numba]`. Kernels
the file registers for the primitives a spec lists are compared with the references.

Examples come from hypothesis when it is installed (failures shrink; the loaded profile's
settings apply, except the deadline: the first call of a kernel compiles it), else from
`RandomDraw(seed)`, `RandomDraw(seed + 1)`, ... Only the op files are collected, unless test
paths are also given on the command line.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

__all__ = ["pytest_addoption", "pytest_configure"]

DEFAULT_EXAMPLES = 10  # per check, without hypothesis


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tinyformer", "tinyformer: check your own ops")
    group.addoption(
        "--tinyformer-ops",
        action="append",
        default=[],
        metavar="FILE_OR_MODULE",
        dest="tinyformer_ops",
        help="run tinyformer's op checks on every OpSpec in the SPECS list of this file or "
        "dotted module (repeatable)",
    )
    group.addoption(
        "--tinyformer-examples",
        type=int,
        default=None,
        metavar="N",
        dest="tinyformer_examples",
        help="examples per check (default: the hypothesis profile's max_examples; "
        f"{DEFAULT_EXAMPLES} without hypothesis)",
    )
    group.addoption(
        "--tinyformer-seed",
        type=int,
        default=0,
        metavar="S",
        dest="tinyformer_seed",
        help="seed of the first random draw, without hypothesis (default: 0)",
    )
    group.addoption(
        "--tinyformer-draw",
        choices=("auto", "hypothesis", "random"),
        default="auto",
        dest="tinyformer_draw",
        help="where examples come from: hypothesis (shrinks failures), random (seeded, no "
        "hypothesis needed), or auto: hypothesis if installed (default)",
    )


def pytest_configure(config: pytest.Config) -> None:
    targets = config.getoption("tinyformer_ops", default=None)
    if not targets:
        return  # not asked for: no hooks beyond the options, no imports, no cost
    config.pluginmanager.register(OpsPlugin(config, targets), "tinyformer-ops")


def _resolve(target: str, cwd: Path) -> Path:
    """The file of `target`, a path or a dotted module name."""
    path = cwd / target
    if target.endswith(".py") or path.exists():
        if not path.is_file():
            raise pytest.UsageError(f"--tinyformer-ops {target}: no such file")
        if path.suffix != ".py":
            raise pytest.UsageError(f"--tinyformer-ops {target}: not a Python file (.py)")
        return path.resolve()
    try:
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise pytest.UsageError(
            f"--tinyformer-ops {target}: neither a file nor an importable module "
            "(a dotted name must be importable from sys.path; a file path always works)"
        )
    return Path(spec.origin).resolve()


class OpsPlugin:
    """The hooks that run only when --tinyformer-ops is given."""

    def __init__(self, config: pytest.Config, targets: list[str]) -> None:
        cwd = config.invocation_params.dir
        self.paths = [_resolve(t, cwd) for t in targets]
        self.examples = config.getoption("tinyformer_examples")
        self.seed = config.getoption("tinyformer_seed")
        if self.examples is not None and self.examples < 1:
            raise pytest.UsageError(
                f"--tinyformer-examples must be at least 1, got {self.examples}"
            )
        draw = config.getoption("tinyformer_draw")
        found = importlib.util.find_spec("hypothesis") is not None
        if draw == "hypothesis" and not found:
            raise pytest.UsageError("--tinyformer-draw hypothesis: hypothesis is not installed")
        self.hypothesis = found if draw == "auto" else draw == "hypothesis"
        self._collect_only_ops_unless_paths_given(config, cwd)

    def _collect_only_ops_unless_paths_given(self, config: pytest.Config, cwd: Path) -> None:
        # Without paths, pytest would collect `testpaths` or the whole current folder too.
        ops = [str(p) for p in self.paths]
        if not config.getoption("file_or_dir"):  # the positional arguments
            config.args[:] = list(dict.fromkeys(ops))
            return
        given = {(cwd / a.split("::")[0]).resolve() for a in config.args}
        config.args += [p for p in dict.fromkeys(ops) if Path(p) not in given]

    def pytest_report_header(self, config: pytest.Config) -> str:
        if self.hypothesis:
            from hypothesis import settings

            n = self.examples or settings.default.max_examples
            how = f"hypothesis, up to {n} examples per check"
        else:
            n = self.examples or DEFAULT_EXAMPLES
            how = f"RandomDraw({self.seed})..RandomDraw({self.seed + n - 1}) per check"
        return f"tinyformer ops: {', '.join(p.name for p in self.paths)} ({how})"

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makemodule(self, module_path: Path, parent: Any) -> Any:
        if module_path.resolve() in self.paths:
            return OpsModule.from_parent(parent, path=module_path)
        return None

    def run(self, check: Any, nodeid: str) -> None:
        if self.hypothesis:
            from hypothesis import settings

            from tinyformer.testing.hypothesis_draw import run_with_hypothesis

            overrides: dict[str, Any] = {"deadline": None}  # a kernel's first call compiles it
            if self.examples is not None:
                overrides["max_examples"] = self.examples
            with_settings = settings(settings.default, **overrides)
            run_with_hypothesis(
                check.run, with_settings=with_settings, database_key=nodeid.encode()
            )
        else:
            from tinyformer.opspec import RandomDraw

            for i in range(self.examples or DEFAULT_EXAMPLES):
                check.run(RandomDraw(self.seed + i))


class OpsModule(pytest.Module):
    """An ops file: its usual tests, if any, and one collector per op spec."""

    def collect(self) -> list[Any]:
        from tinyformer import registry
        from tinyformer.opspec import OpSpec

        # tinyformer's own kernels load on first use, replacing whatever was registered under
        # their names; loading them first lets a kernel in this file replace theirs instead.
        registry.primitives()
        collected = list(super().collect())
        specs = getattr(self.obj, "SPECS", None)
        if not isinstance(specs, (list, tuple)) or not specs:
            raise self.CollectError(
                f"{self.path.name} has no SPECS: a non-empty list of tinyformer.testing.OpSpec"
            )
        seen: set[str] = set()
        for spec in specs:
            if not isinstance(spec, OpSpec):
                raise self.CollectError(f"{self.path.name}: SPECS holds {spec!r}, not an OpSpec")
            if spec.name in seen:
                raise self.CollectError(f"{self.path.name}: two specs are named {spec.name!r}")
            seen.add(spec.name)
            collected.append(SpecCollector.from_parent(self, name=spec.name, spec=spec))
        return collected


class SpecCollector(pytest.Collector):
    """One op: one test per check that applies to it."""

    def __init__(self, *, spec: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def collect(self) -> list[Any]:
        from tinyformer.testing.checks import spec_checks

        try:
            checks = spec_checks(self.spec)
        except ValueError as error:  # e.g. a listed primitive with no reference
            raise self.CollectError(str(error)) from None
        # The node id is given as a string, which pytest parses as it parses the ids it saved:
        # a name built from "gradcheck[float64]" would not match them, and --lf would miss it.
        return [
            CheckItem.from_parent(self, name=c.name, nodeid=f"{self.nodeid}::{c.name}", check=c)
            for c in checks
        ]


class CheckItem(pytest.Item):
    """One check of one op."""

    def __init__(self, *, check: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def runtest(self) -> None:
        self.config.pluginmanager.get_plugin("tinyformer-ops").run(self.check, self.nodeid)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.parent.name}::{self.name}"

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        from tinyformer.testing.checks import OpCheckError

        # hypothesis raises a group when it finds several distinct failures
        errors = getattr(excinfo.value, "exceptions", None) or [excinfo.value]
        if all(isinstance(e, OpCheckError) for e in errors):
            # The report says what failed; a traceback through the checks would not add to it.
            return "\n\n".join("\n".join([str(e), *getattr(e, "__notes__", ())]) for e in errors)
        return super().repr_failure(excinfo, style=style)
