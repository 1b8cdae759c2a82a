"""Shared test configuration: hypothesis profiles and the planted-bug summary line."""

import os

from hypothesis import HealthCheck, settings

# CI: modest example counts; no deadline anywhere (a first JIT compile takes seconds).
settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


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
