"""Small truths in the lectures, checked against the code they describe.

A sentence of a tutorial or a page that says what the code does (which side of a translation
pair TLM masks; that a run repeats with the same seed) is tested here against the code, so
that the two cannot drift apart silently.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from tinyformer.train.xlm import TrainXLMConfig, pretrain
from tinyformer.train.xlm.data import prepare, pretrain_batch

ROOT = Path(__file__).resolve().parent.parent


def _words(text: str) -> str:
    """`text` with jupytext's `# ` prefixes dropped and every whitespace run one space."""
    return " ".join(re.sub(r"^# ?", "", text, flags=re.M).split())


def _tiny(tmp_path: Path, **kw) -> TrainXLMConfig:
    sizes = dict(
        pretrain_iters=6, finetune_iters=2, finetune_seeds=1, eval_interval=6, batch_size=8,
        n_layer=1, d_model=16, d_ff=32, train_pairs=40, test_pairs=30, seed=7,
    )  # fmt: skip
    return TrainXLMConfig(**{**sizes, **kw}, out_dir=str(tmp_path), progress=False)


@pytest.fixture(scope="module")
def xlm(tmp_path_factory):
    cfg = _tiny(tmp_path_factory.mktemp("xlm"))
    return cfg, prepare(cfg)


def test_tutorial_21_says_which_side_of_a_translation_pair_tlm_masks(xlm):
    cfg, data = xlm
    (ids, positions, _, mask), labels = pretrain_batch(data, cfg, True, np.random.default_rng(0))
    first_side = second_side = 0
    for row in range(len(ids)):
        seps = np.flatnonzero(ids[row] == data.sep_id)
        if len(seps) < 2:  # a monolingual row: [CLS] sentence [SEP]
            continue
        asked = labels[row] != -100
        first_side += int(asked[: seps[0]].sum())
        second_side += int(asked[seps[0] + 1 :].sum())
    assert first_side > 0, "no translation pair in the batch, or none masked"
    intro = _words((ROOT / "tutorials/21_cross_lingual_mlm.py").read_text("utf-8").split("# %%")[1])
    says_one_side = "here only the first sentence is masked" in intro
    assert says_one_side == (second_side == 0), (intro[:400], first_side, second_side)
    assert "masked on both sides" not in intro or second_side > 0


def test_an_xlm_pretraining_repeats_with_the_same_seed_and_thread_count(xlm, tmp_path):
    # docs/xlm.md: the same code, seed and thread count give the same weights, to the bit.
    cfg, data = xlm

    def weights(run: str, seed: int) -> dict:
        again = dataclasses.replace(cfg, out_dir=str(tmp_path / run), seed=seed)
        return pretrain(again, data, tlm=True)[0].state_dict()

    first, second, other = weights("a", 7), weights("b", 7), weights("c", 8)
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    assert any(not np.array_equal(first[n], other[n]) for n in first)  # the seed counts


def test_the_xlm_page_says_what_a_rerun_reproduces():
    page = _words((ROOT / "docs/xlm.md").read_text("utf-8"))
    assert "reproduced its rows exactly" not in page
    assert "NUMBA_NUM_THREADS=1" in page and "thread count" in page
