"""The launches a training step would issue on a GPU, counted on the fake device: a structure
test, not a timing test. A change that adds launches to a step fails here; one that removes
some should lower the ceilings (the failure message prints the new counts).

The models run one layer deep at tiny widths (counts depend on structure, not size);
`benchmarks/launches.py` prints the baby recipes' counts by op and direction."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tinyformer as tf
from tinyformer.fake_device import to_fake, xp
from tinyformer.launches import counting

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from launches import count, gpt_step, vit_step  # noqa: E402

# Launches per step at n_layer=1 (and the whole step at the baby depth is printed by the
# benchmark). Lower these when a change removes launches.
CEILINGS = {"gpt": 80, "vit": 82}


def test_the_counter_sees_launches_and_not_views():
    a = to_fake(np.ones((4, 6), np.float32))
    with counting() as c:
        b = a.reshape(6, 4)  # a view
        _ = a.T  # a view
        _ = a[1:3]  # basic slicing: a view
        _ = xp.empty((3, 2), np.float32), xp.empty_like(a)  # memory from the pool, no kernel
    assert c.total == 0
    with counting() as c:
        y = xp.exp(a) + 1.0  # two elementwise launches
        z = y @ b  # one cuBLAS call
        a[np.s_[0]] = 2.0  # a fill: one launch
        z.sum()  # a reduction: one launch
        float(z[0, 0])  # a read: a transfer, not a launch
    assert c.by_kind() == {"kernel": 0, "matmul": 1, "elementwise": 4, "transfer": 1}
    assert c.total == 5


def test_launches_are_charged_to_the_op_and_direction():
    x = tf.Tensor(to_fake(np.ones((2, 3), np.float32)), requires_grad=True)
    with counting() as c:
        y = tf.nn.functional.gelu(x)
        y.sum().backward()
    labels = c.by_label()
    assert labels.get("GELU.forward", 0) >= 1
    assert labels.get("GELU.backward", 0) >= 1


@pytest.mark.parametrize("name, build", [("gpt", gpt_step), ("vit", vit_step)])
def test_a_training_step_does_not_gain_launches(name, build):
    launches = count(build, n_layer=1)
    assert launches.by_kind()["kernel"] > 0, "the CUDA kernels did not run on the emulator"
    assert launches.total <= CEILINGS[name], (
        f"{name} step: {launches.total} launches, more than the ceiling {CEILINGS[name]}\n"
        + launches.table(40)
    )


@pytest.mark.parametrize("name, build", [("gpt", gpt_step), ("vit", vit_step)])
def test_a_steps_count_does_not_depend_on_what_ran_before(name, build):
    # In CI the ViT step once counted 83 where a fresh process counts 82: an earlier test had
    # left the head's ones vector (gb = 1^T gy) first in a full cache, the blocks' new vector
    # pushed it out, and the counted step paid a fill. Queued device checks likewise put
    # their read in whichever step reaches 64.
    from tinyformer import device_checks, registry

    linear = sys.modules["tinyformer.ops.linear"]  # the package's `linear` is the function
    linear._ONES.clear()
    device_checks.run()
    clean = count(build, n_layer=1).counts
    first = next(iter(linear._ONES.items()))  # the first vector the step made
    device_checks.run()
    with registry.prefer("cuda"):
        build(n_layer=1)()
    per_step = device_checks.pending()  # the GPT's embedding queues one; the ViT none

    linear._ONES.clear()
    linear._ONES[first[0]] = first[1]
    like = to_fake(np.ones(1, np.float32))
    for n in range(1000, 999 + linear.MOST_ONES):  # the cache full behind it
        linear._ones(xp, n, np.dtype(np.float32), like)
    for _ in range(device_checks.LIMIT - 1 - 2 * per_step if per_step else 0):
        # the read falls due in the counted step
        device_checks.check(to_fake(np.zeros(1, bool)), lambda: AssertionError("unreachable"))
    assert count(build, n_layer=1).counts == clean
