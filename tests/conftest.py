"""Shared test configuration: hypothesis profiles, the planted-bug summary line, and the small
text corpus the training tests share."""

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import mutation_log

# Examples per hypothesis test; no deadline anywhere (a first JIT compile takes seconds).
# quick: `make check`, while editing; ci: `make test` and CI; dev: a longer hunt for bugs.
# The planted-bug check sets its own example count, so its kill rate is the same in all three.
for _name, _examples in {"quick": 8, "ci": 25, "dev": 60}.items():
    settings.register_profile(
        _name,
        max_examples=_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_configure(config):
    # The suite runs several processes side by side (pytest-xdist, notebooks, the commands the
    # tests start), each with Numba's threads. An OpenMP worker that spins before it sleeps
    # holds a core another process's kernel is waiting for, so every parallel kernel waits a
    # scheduler tick: small kernels ran ~50x slower. Workers that sleep at once cost a wake-up.
    os.environ.setdefault("GOMP_SPINCOUNT", "0")
    # The kernels use the whole pool whatever the suite's other processes do, so that what a
    # test sees does not depend on the load (tests/test_cores.py tests the sharing itself).
    os.environ.setdefault("TINYFORMER_THREADS", "all")
    # CI runs as root, where `tinyformer grade` refuses to run a submission without --user;
    # the suite grades its own trees and replays attacks with the grader's other walls.
    # (tests/test_grader_security.py unsets it where it tests the refusal.)
    os.environ.setdefault("TINYFORMER_GRADE_AS_ROOT", "1")


TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(300))


@pytest.fixture
def corpus(tmp_path):
    """A text file for the GPT trainer: small, and with a vocabulary of a few dozen chars."""
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


# pytest-xdist (`make test`: -n auto --dist loadscope) hands tests to its workers one at a
# time, except that the tests of a file defining a module- or class-scoped fixture (a built
# site, a released assignment, a trained tokenizer) all go to one worker, which then computes it
# once. (Its loadgroup would do this from marks, but cannot rename node ids under pytest 9.)
SHARED_FIXTURE = re.compile(r"@pytest\.fixture\([^)]*scope=[\"'](module|class)[\"']")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which may not be installed
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    tests = Path(__file__).parent
    shared = {
        path.relative_to(tests.parent).as_posix()
        for path in tests.rglob("test_*.py")
        if SHARED_FIXTURE.search(path.read_text(encoding="utf-8"))
    }

    class FileWhenItSharesFixtures(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            return path if path in shared else nodeid

    return FileWhenItSharesFixtures(config, log)


# The planted-bug outcomes travel with each test's report, so that the summary also counts the
# tests that ran in pytest-xdist's worker processes.
PLANTED: dict[str, bool] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if call.when == "call" and mutation_log.RESULTS:
        report.user_properties.append(("planted_bugs", sorted(mutation_log.RESULTS.items())))
        mutation_log.RESULTS.clear()


def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == "planted_bugs":
            PLANTED.update(dict(value))


# What the planted-bug summary calls each kind of mutant, by the end of its key in mutation_log
MUTANT_KINDS = {":drift": "drifting kernels", ":dedicated": "bugs for dedicated tests"}


def _mutant_kind(key: str) -> str:
    return next((v for k, v in MUTANT_KINDS.items() if key.endswith(k)), "backward bugs")


def pytest_terminal_summary(terminalreporter):
    if PLANTED:
        parts = []
        for label in ("backward bugs", *MUTANT_KINDS.values()):
            outcomes = [v for k, v in PLANTED.items() if _mutant_kind(k) == label]
            if outcomes:
                parts.append(f"{sum(outcomes)} of {len(outcomes)} {label}")
        caught, planted = sum(PLANTED.values()), len(PLANTED)
        listed = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 2 else parts)
        terminalreporter.write_line(
            f"planted-bug check: caught {listed} ({100.0 * caught / planted:.1f}% kill rate)"
        )
