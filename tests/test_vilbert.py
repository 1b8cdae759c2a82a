"""ViLBERT: the co-attention layer and the pretraining losses against finite differences, the
streams' shapes and masks, the digit scenes' captions and questions against their pictures, and
the training command end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.data.scenes import (
    DIGIT_WORDS,
    VOCAB,
    caption_text,
    encode,
    make_scenes,
    mask_regions,
    questions,
)  # fmt: skip
from tinyformer.models.vilbert import (
    CoAttention,
    ViLBERT,
    ViLBERTConfig,
    ViLBERTForPreTraining,
    ViLBERTForQuestionAnswering,
    encoder_state,
)  # fmt: skip
from tinyformer.train.vilbert import TrainViLBERTConfig, pretrain_batch

TINY = ViLBERTConfig(vocab_size=len(VOCAB), region_dim=4, n_text_layer=1, n_co_layer=1,
                     n_head=2, d_text=8, d_image=4, dropout=0.0)  # fmt: skip


def _digits(n=20, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, n)


def _inputs(seed=0, b=2, r=2, f=4):
    """(ids with padding in row 1, mask, regions, boxes) for TINY."""
    rng = np.random.default_rng(seed)
    ids, mask = encode(["a two left of a five", "a one above a nine"][:b])
    regions = rng.random((b, r, f))
    boxes = rng.random((b, r, 5))
    return ids, mask, regions, boxes


def test_coattention_passes_gradcheck_with_padded_text():
    tf.manual_seed(0)
    layer = CoAttention(8, 4, 2).to(np.float64)
    rng = np.random.default_rng(1)
    text = tf.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
    image = tf.Tensor(rng.standard_normal((2, 2, 4)), requires_grad=True)
    pad = np.array([[False, False, True], [False, False, False]])
    params = [layer.text_attn.kv_proj.weight, layer.image_attn.kv_proj.weight]

    def fn(text, image, *_):
        t, i = layer(text, image, pad)
        return t, i

    assert tf.gradcheck(fn, [text, image, *params], fast_mode=True)


def test_pretraining_and_answer_losses_pass_gradcheck():
    tf.manual_seed(2)
    model = ViLBERTForPreTraining(TINY).to(np.float64)
    ids, mask, regions, boxes = _inputs()
    words = np.full(ids.shape, -100)
    words[0, 2], words[1, 3] = ids[0, 2], ids[1, 3]
    targets = (words, np.array([[3, -100], [-100, 7]]), np.array([0, 1]))
    v = model.vilbert
    params = [model.word_head.weight, model.region_head.weight, model.align_head.weight,
              v.text_pool.weight, v.image_pool.weight, v.region_proj.weight,
              v.co_layers[0].text_attn.kv_proj.weight]  # fmt: skip
    assert tf.gradcheck(
        lambda *_: model((ids, mask, regions, boxes), targets)[1], params, fast_mode=True
    )
    qa = ViLBERTForQuestionAnswering(TINY).to(np.float64)
    answers = np.array([4, 9])
    params = [qa.qa_out.weight, qa.qa_fc.weight, qa.vilbert.image_pool.weight]
    assert tf.gradcheck(
        lambda *_: qa((ids, mask, regions, boxes), answers)[1], params, fast_mode=True
    )


def test_streams_shapes_widths_and_heads():
    tf.manual_seed(0)
    model = ViLBERTForPreTraining(TINY)
    ids, mask, regions, boxes = _inputs(b=2, r=3)
    (words, classes, align), loss = model((ids, mask, regions, boxes))
    assert words.shape == (2, ids.shape[1], len(VOCAB)) and classes.shape == (2, 3, 10)
    assert align.shape == (2, 2) and loss is None
    text, image, maps = model.vilbert(ids, regions, boxes, mask, need_weights=True)
    assert text.shape == (2, ids.shape[1], 8) and image.shape == (2, 4, 4)  # [IMG] + 3 regions
    to_image, to_text = maps[0]
    assert to_image.shape == (2, 2, ids.shape[1], 4) and to_text.shape == (2, 2, 4, ids.shape[1])
    np.testing.assert_allclose(to_image.data.sum(-1), 1, rtol=1e-5)
    # the image's queries give padding words no weight
    assert (to_text.data[1][..., mask[1] == 0] == 0).all() and mask[1].min() == 0
    qa = ViLBERTForQuestionAnswering(TINY, num_answers=10)
    assert qa((ids, mask, regions, boxes))[0].shape == (2, 10)
    assert set(encoder_state(qa)) == {"vilbert." + k for k in ViLBERT(TINY).state_dict()}
    with pytest.raises(ValueError, match=r"regions must be \(B, R, 4\) and boxes \(B, R, 5\)"):
        model.vilbert(ids, regions[..., :3], boxes)
    with pytest.raises(ValueError, match="d_image 6 is not divisible by n_head 4"):
        ViLBERTConfig(d_image=6)


def test_heads_read_cls_img_and_the_region_rows():
    # the pooled vector is [CLS]'s and [IMG]'s, region j's logits are read at image row j + 1
    tf.manual_seed(3)
    model = ViLBERTForPreTraining(TINY).to(np.float64).eval()
    inputs = _inputs(b=2, r=3)
    ids, mask, regions, boxes = inputs
    text, image = model.vilbert(ids, regions, boxes, mask)
    (words, classes, align), _ = model(inputs)
    w, b = model.region_head.weight.data, model.region_head.bias.data
    np.testing.assert_allclose(classes.data, image.data[:, 1:] @ w.T + b, rtol=1e-12)
    pool = model.vilbert.pool
    pooled = pool(text, image).data
    w, b = model.align_head.weight.data, model.align_head.bias.data
    np.testing.assert_allclose(align.data, pooled @ w.T + b, rtol=1e-12)
    rng = np.random.default_rng(4)
    others = [a.data.copy() for a in (text, image)]
    for a in others:  # every row but the first changed: the pooled vector is the same
        a[:, 1:] = rng.standard_normal(a[:, 1:].shape)
    np.testing.assert_array_equal(pool(*(tf.Tensor(a) for a in others)).data, pooled)
    for i in range(2):  # the first row of either stream changed: it is not
        firsts = [a.data.copy() for a in (text, image)]
        firsts[i][:, 0] += 1.0
        assert (np.abs(pool(*(tf.Tensor(a) for a in firsts)).data - pooled) > 0).any(1).all()


def test_each_stream_reads_the_other_and_never_the_padding():
    tf.manual_seed(1)
    model = ViLBERT(TINY)
    ids, mask, regions, boxes = _inputs()
    text, image = (t.data for t in model(ids, regions, boxes, mask))
    text2, _ = (t.data for t in model(ids, regions + 1.0, boxes, mask))
    assert np.abs(text2 - text).max() > 1e-5  # words see the regions only through co-attention
    other = ids.copy()
    other[0, 1] = VOCAB.index("nine")
    _, image2 = (t.data for t in model(other, regions, boxes, mask))
    assert np.abs(image2[0] - image[0]).max() > 1e-5  # regions see the words
    np.testing.assert_array_equal(image2[1], image[1])
    padded = ids.copy()
    padded[mask == 0] = VOCAB.index("seven")  # what padding holds must not matter
    text3, image3 = (t.data for t in model(padded, regions, boxes, mask))
    np.testing.assert_allclose(image3, image, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(text3[mask == 1], text[mask == 1], rtol=1e-6, atol=1e-6)


def test_captions_and_answers_match_the_pictures():
    images, labels = _digits()
    scenes = make_scenes(images, labels, 40, np.random.default_rng(3))
    texts, answers = questions(scenes)
    index = {w: i for i, w in enumerate(DIGIT_WORDS)}
    assert scenes.stacked.any() and (~scenes.stacked).any() and scenes.swap.any()
    for i in range(len(scenes)):
        boxes, cells = scenes.boxes[i], []
        for r in range(2):  # the region's pixels are on the canvas at its box, and are its digit
            x, y = int(boxes[r, 0] * 16), int(boxes[r, 1] * 16)
            cells.append((x, y))
            patch = scenes.canvas[i, 0, y : y + 8, x : x + 8]
            np.testing.assert_array_equal(patch.reshape(-1), scenes.regions[i, r])
            assert any(np.array_equal(patch, im[0]) and lab == scenes.labels[i, r]
                       for im, lab in zip(images, labels))  # fmt: skip
        assert scenes.canvas[i].sum() == pytest.approx(scenes.regions[i].sum(), rel=1e-5)
        words = caption_text(scenes, i).split()
        a, b = index[words[1]], index[words[-1]]
        relation = words[2]
        # "a A left of a B": A's box is left of B's, in the same row; "above": same column
        ra, rb = (0, 1) if relation in ("left", "above") else (1, 0)
        assert (scenes.labels[i, ra], scenes.labels[i, rb]) == (a, b)
        (x0, y0), (x1, y1) = cells  # the first region is the left or the top one
        if relation in ("left", "right"):
            assert y0 == y1 and x0 < x1
        else:
            assert x0 == x1 and y0 < y1
        q = texts[i].split()  # "what is left of the B ?": the answer is the digit left of B
        asked = index[q[-2]]
        first = q[2] in ("left", "above")
        assert scenes.labels[i, 1 if first else 0] == asked
        assert answers[i] == scenes.labels[i, 0 if first else 1]
    with pytest.raises(ValueError, match=r"words not in the vocabulary: \['eleven'\]"):
        encode(["a eleven"])
    with pytest.raises(ValueError, match=r"images must be \(M, 1, 8, 8\)"):
        make_scenes(images[:, :, :4], labels, 2, np.random.default_rng(0))


def test_pretraining_batch_masks_and_mismatches_as_vilbert_does():
    images, labels = _digits()
    rng = np.random.default_rng(4)
    scenes = make_scenes(images, labels, 64, rng)
    cfg = TrainViLBERTConfig(region_mask=0.5, progress=False)
    (ids, mask, regions, boxes), (words, classes, align) = pretrain_batch(scenes, cfg, rng)
    own = encode([caption_text(scenes, i) for i in range(64)])[0]
    shown = np.where(words != -100, words, ids)  # masked words put back
    matched = (shown == own).all(axis=1)
    assert 10 < align.sum() < 54
    np.testing.assert_array_equal(align == 0, matched)  # alignment 0 exactly when it is its own
    assert (words[align == 1] == -100).all() and (classes[align == 1] == -100).all()
    assert ((words != -100).sum(axis=1)[align == 0] >= 1).all()  # a matched caption has a target
    zeroed = (regions == 0).all(-1)
    assert zeroed.any() and (classes[zeroed & (align[:, None] == 0)] != -100).all()
    r, c = mask_regions(scenes.regions, scenes.labels, np.random.default_rng(0), 0.0)
    np.testing.assert_array_equal(r, scenes.regions)
    assert (c == -100).all()


def test_train_vilbert_command_pretrains_plots_and_compares(tmp_path, capsys):
    out = tmp_path / "vilbert"
    flags = ["--pretrain-iters", "3", "--finetune-iters", "2", "--eval-interval", "2",
             "--batch-size", "8", "--finetune-examples", "8", "--test-scenes", "16",
             "--n-co-layer", "1", "--d-text", "16", "--d-image", "8", "--out-dir", str(out),
             "--no-progress"]  # fmt: skip
    assert cli.main(["train", "vilbert", *flags]) == 0
    text = capsys.readouterr().out
    assert "pretrained ViLBERT" in text and "random weights" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["finetune"]) == {"pretrained", "scratch"}
    assert 0 <= results["pretrain"]["align_acc"] <= 1
    for name in ("pretrain", "finetune-pretrained", "finetune-scratch"):
        assert (out / name / "ckpt.npz").is_file() and (out / name / "log.json").is_file()
    for figure in ("coattention.png", "compare.png", "pretrain/loss.png"):
        assert (out / figure).stat().st_size > 0
    log = json.loads((out / "pretrain" / "log.json").read_text())
    assert len(log["loss"]) == 3 and [e["iter"] for e in log["evals"]] == [0, 2, 3]
    assert cli.main(["train", "vilbert", *flags]) == 2  # a finished run is not replaced silently
    assert cli.main(["train", "vilbert", *flags, "--word-mask", "1.5"]) == 2
