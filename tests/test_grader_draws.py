"""The inputs of the grader's property and hidden tests: drawn from the grading secret when
grading, from public seeds in a self-check, never written in the checks modules."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tinyformer.course.definition import COURSE
from tinyformer.course.grader import _verdicts, data, secret


@pytest.mark.parametrize("name", sorted(COURSE))
def test_no_hidden_test_takes_its_inputs_from_a_fixed_seed(name):
    # a seed in the source is an input in the source: a table of answers beats it
    text = COURSE[name].checks_file().read_text(encoding="utf-8")
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


@pytest.mark.parametrize("task_id", ["A5.1", "A5.2"])
def test_a_right_float32_kernel_passes_the_kernel_check_on_every_salt(task_id):
    # The kernel check's inputs come from the salt, fresh on every clone: a right kernel must pass
    # on all of them. softmax.backward on an arbitrary y cancels in its float32 sum (a right kernel
    # failed one grade in three); its y is a softmax, as the backward always receives it.
    from tinyformer import registry
    from tinyformer.course.grader._compare import first_difference

    k = next(t.kernel for t in COURSE["A5"].tasks if t.id == task_id)
    for salt in range(60):
        rng = np.random.default_rng(secret.seed(bytes([salt]) * 32, "A5", task_id, "kernel"))
        for shape in k.shapes:
            for strided in (False, True):
                args = k.draw(rng, shape, "float32", strided)
                args = [a[..., ::2] for a in args] if strided else args
                with registry.prefer("numba", force=True):
                    got = registry.call(k.primitive, *args).astype(np.float64)
                with registry.prefer(registry.REFERENCE):
                    want = registry.call(k.primitive, *args).astype(np.float64)
                atol, rtol = k.tol["float32"]
                assert np.all(np.abs(got - want) <= atol + rtol * np.abs(want)), (
                    f"salt {salt}, {shape}, strided {strided}: "
                    f"{first_difference(got, want, atol, rtol)}"
                )


def test_kernel_check_inputs_are_known_kinds():
    from tinyformer.course.definition import KernelCheck

    y = KernelCheck("softmax.backward", "m", inputs=("normal", "softmax"))
    for strided in (False, True):
        gy, p = y.draw(np.random.default_rng(0), (3, 5, 7), "float64", strided)
        p = p[..., ::2] if strided else p
        assert p.shape == (3, 5, 7) and np.allclose(p.sum(axis=-1), 1) and (p > 0).all()
    with pytest.raises(ValueError, match="inputs must be"):
        KernelCheck("a.b", "m", inputs=("uniform",))
    with pytest.raises(ValueError, match="inputs must be"):
        KernelCheck("a.b", "m", inputs=())
