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


# What the planted-bug summary calls each kind of mutant, by the end of its key in mutation_log
MUTANT_KINDS = {":drift": "drifting kernels", ":dedicated": "bugs for dedicated tests"}


def _mutant_kind(key: str) -> str:
    return next((v for k, v in MUTANT_KINDS.items() if key.endswith(k)), "backward bugs")


def pytest_terminal_summary(terminalreporter):
    from tests import mutation_log

    if mutation_log.RESULTS:
        parts = []
        for label in ("backward bugs", *MUTANT_KINDS.values()):
            outcomes = [v for k, v in mutation_log.RESULTS.items() if _mutant_kind(k) == label]
            if outcomes:
                parts.append(f"{sum(outcomes)} of {len(outcomes)} {label}")
        caught, planted = sum(mutation_log.RESULTS.values()), len(mutation_log.RESULTS)
        listed = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 2 else parts)
        terminalreporter.write_line(
            f"planted-bug check: caught {listed} ({100.0 * caught / planted:.1f}% kill rate)"
        )
