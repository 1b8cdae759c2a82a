"""Outcome of each planted bug, filled by test_mutation.py and summarised by conftest.py."""

RESULTS: dict[str, bool] = {}
