"""The small-models benchmark's script (benchmarks/small_models.py) runs in tinyformer: each
of makemore's six models trains from the same code PyTorch runs, on words made offline."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer as tf
from benchmarks import small_models as sm


def test_words_are_made_offline_the_same_every_time():
    words = sm.make_words(50, seed=3)
    assert words == sm.make_words(50, seed=3) and len(words) == 50
    assert all(w.isalpha() and w.islower() and 2 <= len(w) <= 15 for w in words)


def test_examples_are_makemores():
    xs, ys = sm.encode(["ab"], 4)
    np.testing.assert_array_equal(xs, [[0, 1, 2, 0]])  # start token, then the letters
    np.testing.assert_array_equal(ys, [[1, 2, 0, -1]])  # the letters, the end token, ignored


@pytest.mark.parametrize("kind", sm.MODELS)
def test_each_model_trains_in_tinyformer(kind, monkeypatch):
    monkeypatch.setattr(sm, "WARMUP", 0)
    xs, ys = sm.encode(sm.make_words(64), sm.CONFIG["block_size"])
    result = sm.train(tf, kind, xs, ys, steps=2)
    assert math.isfinite(result["loss"]) and result["ms"] > 0
