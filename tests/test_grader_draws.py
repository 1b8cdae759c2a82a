"""The inputs of the grader's property and hidden tests: drawn from the grading secret when
grading, from public seeds in a self-check, never written in the checks modules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tinyformer.course as course
from tinyformer.course import _verdicts, data, secret
from tinyformer.course.definition import COURSE

CHECKS = Path(course.__file__).parent


@pytest.mark.parametrize("name", sorted(COURSE))
def test_no_hidden_test_takes_its_inputs_from_a_fixed_seed(name):
    # a seed in the source is an input in the source: a table of answers beats it
    text = (CHECKS / COURSE[name].checks).read_text(encoding="utf-8")
    hidden = text[text.index("### BEGIN HIDDEN TESTS") : text.index("### END HIDDEN TESTS")]
    fixed = re.findall(r"default_rng\(|_rand\(\d|seed=\d", hidden)
    assert not fixed, f"{name}'s hidden tests use fixed seeds: {fixed}"


def test_each_test_gets_a_seed_of_the_salt_and_its_name():
    a2 = COURSE["A2"]
    task = next(t for t in a2.tasks if t.id == "A2.1")
    names = data._test_names(a2, task)
    assert {"softmax_rows_sum_to_one", "softmax_huge_logits"} <= set(names)
    draws = {}
    for salt in (b"s" * 32, b"t" * 32, None):
        seeds = None if salt is None else {n: secret.seed(salt, "A2", "A2.1", n) for n in names}
        draws[salt] = _verdicts.inputs_rng(task, "softmax_huge_logits", seeds).random(4).tolist()
    assert len({tuple(v) for v in draws.values()}) == 3  # two salts and the public draw differ
    again = _verdicts.inputs_rng(task, "softmax_huge_logits", None).random(4).tolist()
    assert again == draws[None]  # a self-check's inputs are fixed and public
