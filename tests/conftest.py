"""Shared test configuration: hypothesis profiles, the planted-bug summary line, and the small
text corpus the training tests share."""

import os

import pytest
from hypothesis import HealthCheck, settings

# CI: modest example counts; no deadline anywhere (a first JIT compile takes seconds).
settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(300))


@pytest.fixture
def corpus(tmp_path):
    """A text file for the GPT trainer: small, and with a vocabulary of a few dozen chars."""
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return str(path)


def pytest_terminal_summary(terminalreporter):
    from tests import mutation_log

    if mutation_log.RESULTS:
        kinds = {"backward bugs": False, "drifting kernels": True}
        parts = []
        for label, is_drift in kinds.items():
            outcomes = [
                v for k, v in mutation_log.RESULTS.items() if k.endswith(":drift") == is_drift
            ]
            if outcomes:
                parts.append(f"{sum(outcomes)} of {len(outcomes)} {label}")
        caught, planted = sum(mutation_log.RESULTS.values()), len(mutation_log.RESULTS)
        terminalreporter.write_line(
            f"planted-bug check: caught {' and '.join(parts)} "
            f"({100.0 * caught / planted:.1f}% kill rate)"
        )
