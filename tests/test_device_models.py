"""Every model trains on the fake device with the host's numbers: one forward, backward and AdamW
step on the same host batch (ids, images, targets and masks as the data pipeline gives them, NumPy
arrays) gives the same loss and the same parameters after the step, and decoding gives the same
tokens. The host runs the NumPy references too (`registry.prefer(REFERENCE)`), so the two runs
do the same arithmetic and agree to float32 rounding."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend, registry
from tinyformer.fake_device import FakeArray
from tinyformer.models.bert import BertConfig, BertForMaskedLM, BertForSequenceClassification
from tinyformer.models.cnn import CNN, CNNConfig
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.models.segmentation import SEGMENTATION_MODELS, SegConfig
from tinyformer.models.seq2seq import Seq2SeqConfig, Transformer
from tinyformer.models.vit import ViT, ViTConfig
from tinyformer.optim import AdamW

FAKE = backend.device("fake")
GPT_TINY = GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=16, dropout=0.1)
BERT_TINY = BertConfig(vocab_size=40, max_position=16, n_layer=2, n_head=2, d_model=8, d_ff=16,
                       dropout=0.1)  # fmt: skip
SEQ2SEQ_TINY = Seq2SeqConfig(src_vocab_size=11, tgt_vocab_size=9, max_len=12, n_encoder_layers=2,
                             n_decoder_layers=2, n_head=2, d_model=8, d_ff=16,
                             dropout=0.1)  # fmt: skip


def _gpt_case(rng):
    idx = rng.integers(0, 11, (2, 8))
    targets = rng.integers(0, 11, (2, 8))
    targets[0, :3] = -100  # ignored positions
    return GPT(GPT_TINY), (idx, targets)


def _vit_case(rng):
    config = ViTConfig(image_size=4, patch_size=2, num_classes=3, n_layer=1, n_head=2, n_embd=8)
    return ViT(config), (rng.standard_normal((2, 1, 4, 4)).astype(np.float32), np.array([0, 2]))


def _cnn_case(rng):
    model = CNN(CNNConfig(image_size=4, num_classes=3, channels=(2, 3), dropout=0.1))
    return model, (rng.standard_normal((2, 1, 4, 4)).astype(np.float32), np.array([1, 2]))


def _segmentation_case(name):
    def case(rng):
        model = SEGMENTATION_MODELS[name](SegConfig(in_channels=2, num_classes=3, width=2))
        images = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
        return model, (images, rng.integers(0, 3, (2, 4, 4)))

    return case


def _bert_ids(rng):
    ids = rng.integers(5, 40, (2, 6))
    mask = np.ones((2, 6), np.int64)
    ids[1, 4:], mask[1, 4:] = 0, 0  # the second sequence is padded
    return ids, mask


def _bert_mlm_case(rng):
    ids, mask = _bert_ids(rng)
    labels = np.full((2, 6), -100)
    labels[0, 1], labels[1, 2], labels[1, 3] = 7, 9, 30  # three masked-out positions
    types = np.array([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0]])
    return BertForMaskedLM(BERT_TINY), (ids, labels, mask, types)


def _bert_classify_case(rng):
    ids, mask = _bert_ids(rng)
    return BertForSequenceClassification(BERT_TINY, num_labels=3), (ids, np.array([2, 0]), mask)


def _seq2seq_case(rng):
    src = rng.integers(3, 11, (2, 6))
    src[1, 4:] = SEQ2SEQ_TINY.pad_id
    tgt = rng.integers(3, 9, (2, 6))
    tgt[:, 0], tgt[1, 4:] = SEQ2SEQ_TINY.bos_id, SEQ2SEQ_TINY.pad_id
    tgt_out = np.concatenate([tgt[:, 1:], np.full((2, 1), SEQ2SEQ_TINY.eos_id)], axis=1)
    return Transformer(SEQ2SEQ_TINY), (src, tgt, tgt_out, 0.1)  # label smoothing 0.1


CASES = {
    "gpt": _gpt_case,
    "vit": _vit_case,
    "cnn": _cnn_case,
    "fcn": _segmentation_case("fcn"),
    "segnet": _segmentation_case("segnet"),
    "unet": _segmentation_case("unet"),
    "bert_mlm": _bert_mlm_case,
    "bert_classify": _bert_classify_case,
    "seq2seq": _seq2seq_case,
}


def _train_step(model, inputs):
    """One step from the same seed (dropout draws its masks on the host, from the seed): the
    loss, and the model's parameters after the step as host arrays."""
    optimizer = AdamW(model.parameters(), lr=1e-2)
    tf.manual_seed(1)
    _, loss = model(*inputs)
    loss.backward()
    optimizer.step()
    return loss, {k: backend.host_copy(v.data) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", CASES)
def test_a_training_step_on_the_fake_device_gives_the_hosts_numbers(name):
    tf.manual_seed(0)
    host_model, inputs = CASES[name](np.random.default_rng(0))
    fake_model = copy.deepcopy(host_model).to("fake")
    assert all(isinstance(p.data, FakeArray) for p in fake_model.parameters())

    fake_loss, fake_state = _train_step(fake_model, inputs)
    with registry.prefer(registry.REFERENCE):  # the arithmetic the fake device does
        host_loss, host_state = _train_step(host_model, inputs)

    assert fake_loss.device == FAKE  # it really ran there
    assert all(isinstance(p.data, FakeArray) for p in fake_model.parameters())
    assert fake_loss.item() == pytest.approx(host_loss.item(), rel=1e-6)
    assert fake_state.keys() == host_state.keys()
    for key, value in host_state.items():
        np.testing.assert_allclose(fake_state[key], value, rtol=1e-6, atol=1e-7, err_msg=key)


def _generate_on(device, idx, **kwargs):
    tf.manual_seed(0)
    model = GPT(GPT_TINY).to(device)
    tf.manual_seed(3)
    with registry.prefer(registry.REFERENCE):
        return model.generate(idx, 10, **kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"temperature": 0.7, "top_k": 4, "top_p": 0.9}])
def test_gpt_generates_the_hosts_tokens_on_the_fake_device(kwargs):
    idx = np.array([[1, 2, 3], [4, 5, 6]])
    host, fake = _generate_on("cpu", idx, **kwargs), _generate_on("fake", idx, **kwargs)
    assert type(fake) is np.ndarray and fake.shape == (2, 13)  # ids come back to the host
    np.testing.assert_array_equal(fake, host)
    np.testing.assert_array_equal(idx, [[1, 2, 3], [4, 5, 6]])  # the prompt is not changed


def test_seq2seq_decodes_the_hosts_tokens_on_the_fake_device():
    tf.manual_seed(0)
    host_model, (src, *_) = _seq2seq_case(np.random.default_rng(0))
    fake_model = copy.deepcopy(host_model).to("fake")
    with registry.prefer(registry.REFERENCE):
        for decode in (lambda m: m.greedy(src, 8), lambda m: m.beam_search(src, 8, beam=3)):
            host, fake = decode(host_model), decode(fake_model)
            assert type(fake) is np.ndarray
            np.testing.assert_array_equal(fake, host)
