"""Loading Hugging Face BERT checkpoints: a tiny checkpoint the test writes itself (random
weights, Hugging Face names, a small vocabulary) is loaded and compared with an independent
NumPy forward written here; sentence embeddings; clear errors. Optional: the same against
`transformers`, and against a real checkpoint named by TINYFORMER_BERT_DIR."""

import json
import math
import os

import numpy as np
import pytest

from tinyformer import cli
from tinyformer.data.wordpiece import SPECIAL_TOKENS
from tinyformer.models.pretrained import PretrainedError, SentenceEncoder, load_bert
from tinyformer.safetensors import save_file

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", ".", ",", "a", "##s"]
VOCAB = [*SPECIAL_TOKENS, *WORDS]
C, LAYERS, HEADS, FF, POS = 16, 2, 4, 32, 24


def _hf_tensors(rng, prefix=""):
    def w(*shape):
        return (0.3 * rng.standard_normal(shape)).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": w(len(VOCAB), C),
        "embeddings.position_embeddings.weight": w(POS, C),
        "embeddings.token_type_embeddings.weight": w(2, C),
        "embeddings.LayerNorm.weight": 1 + w(C), "embeddings.LayerNorm.bias": w(C),
        "pooler.dense.weight": w(C, C), "pooler.dense.bias": w(C),
    }  # fmt: skip
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):  # fmt: skip
            t[p + name + ".weight"], t[p + name + ".bias"] = w(C, C), w(C)
        t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = w(FF, C), w(FF)
        t[p + "output.dense.weight"], t[p + "output.dense.bias"] = w(C, FF), w(C)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"], t[p + ln + ".bias"] = 1 + w(C), w(C)
    return {prefix + k: v for k, v in t.items()}


def _write_checkpoint(path, tensors, **config):
    path.mkdir(exist_ok=True)
    hf = {"model_type": "bert", "vocab_size": len(VOCAB), "hidden_size": C,
          "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": FF,
          "max_position_embeddings": POS, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
          "hidden_act": "gelu", **config}  # fmt: skip
    (path / "config.json").write_text(json.dumps(hf))
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    save_file(tensors, path / "model.safetensors")
    return path


def _layer_norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_erf = np.vectorize(math.erf)


def _numpy_bert(t, ids, mask, types):
    """BERT's forward, written independently of tinyformer: float64 NumPy, per-head loops."""
    t = {k: v.astype(np.float64) for k, v in t.items()}
    b, n = ids.shape
    x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][
        np.arange(n)] + t["embeddings.token_type_embeddings.weight"][types])  # fmt: skip
    x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    bias = np.where(mask[:, None, :] == 1, 0.0, -1e9)  # (B, 1, T) over keys
    hs = C // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."

        def dense(h, name, p=p):
            return h @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        q, k, v = (dense(x, "attention.self." + s) for s in ("query", "key", "value"))
        heads = []
        for h in range(HEADS):
            cols = slice(h * hs, (h + 1) * hs)
            scores = q[..., cols] @ k[..., cols].transpose(0, 2, 1) / math.sqrt(hs) + bias
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            heads.append(probs @ v[..., cols])
        attn = dense(np.concatenate(heads, -1), "attention.output.dense")
        x = _layer_norm(x + attn, t[p + "attention.output.LayerNorm.weight"],
                        t[p + "attention.output.LayerNorm.bias"])  # fmt: skip
        h = dense(x, "intermediate.dense")
        h = h * 0.5 * (1 + _erf(h / math.sqrt(2)))
        x = _layer_norm(x + dense(h, "output.dense"), t[p + "output.LayerNorm.weight"],
                        t[p + "output.LayerNorm.bias"])  # fmt: skip
    return x


@pytest.fixture
def checkpoint(tmp_path):
    tensors = _hf_tensors(np.random.default_rng(0))
    return _write_checkpoint(tmp_path / "tiny-bert", tensors), tensors


def test_loaded_encoder_matches_an_independent_numpy_bert(checkpoint):
    path, tensors = checkpoint
    model, tok = load_bert(path, dtype=np.float64)
    batch = tok(["The cat sat on the mat.", "a dog ran", "cats"], ["the dog", "mat", "a"])
    hidden = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).data
    expected = _numpy_bert(tensors, batch["input_ids"], batch["attention_mask"],
                           batch["token_type_ids"])  # fmt: skip
    real = batch["attention_mask"] == 1  # padding rows are unconstrained
    np.testing.assert_allclose(hidden[real], expected[real], rtol=1e-9, atol=1e-9)
    pooled = np.tanh(expected[:, 0] @ tensors["pooler.dense.weight"].T.astype(np.float64)
                     + tensors["pooler.dense.bias"])  # fmt: skip
    hidden = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    np.testing.assert_allclose(model.pool(hidden).data, pooled, rtol=1e-9, atol=1e-9)


def test_prefixed_and_gamma_beta_names_load_the_same(checkpoint, tmp_path):
    path, tensors = checkpoint
    renamed = {"bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
        "LayerNorm.bias", "LayerNorm.beta"): v for k, v in tensors.items()}  # fmt: skip
    renamed["bert.embeddings.position_ids"] = np.arange(POS)[None]
    other = _write_checkpoint(tmp_path / "old-style", renamed)
    a, _ = load_bert(path)
    b, _ = load_bert(other)
    for name, value in a.state_dict().items():
        np.testing.assert_array_equal(value, b.state_dict()[name], err_msg=name)


def test_sentence_embeddings_are_unit_mean_pools_unaffected_by_padding(checkpoint, capsys):
    path, _ = checkpoint
    encoder = SentenceEncoder(path)
    alone = encoder.embed(["a cat"])
    batch = encoder.embed(["a cat", "the dog sat on the mat , the cat ran ."])
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(batch[0], alone[0], rtol=1e-5, atol=1e-6)
    assert cli.main(["embed", "--model", str(path), "a cat", "the cat", "a dog ran"]) == 0
    out = capsys.readouterr().out
    assert "3 sentences -> embeddings of size 16" in out and "1.000" in out


def test_bad_checkpoints_are_refused_clearly(checkpoint, tmp_path):
    path, tensors = checkpoint
    bad = dict(tensors)
    bad["encoder.layer.1.intermediate.dense.weight"] = np.zeros((FF + 1, C), np.float32)
    with pytest.raises(PretrainedError, match=r"layers.1.mlp.c_fc.weight has shape \(33, 16\)"):
        load_bert(_write_checkpoint(tmp_path / "shape", bad))
    with pytest.raises(PretrainedError, match="model_type 'roberta'"):
        load_bert(_write_checkpoint(tmp_path / "roberta", tensors, model_type="roberta"))
    with pytest.raises(PretrainedError, match="no tinyformer place"):
        load_bert(_write_checkpoint(tmp_path / "extra", {**tensors, "mystery": np.ones(2)}))
    with pytest.raises(PretrainedError, match="lacks one of query/key/value"):
        del bad["encoder.layer.0.attention.self.key.bias"]
        load_bert(_write_checkpoint(tmp_path / "qkv", bad))
    pickle_only = tmp_path / "pickle"
    pickle_only.mkdir()
    (pickle_only / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(PretrainedError, match="pickle"):
        load_bert(pickle_only)
    with pytest.raises(PretrainedError, match="no masked-LM head"):
        load_bert(path, head="mlm")
    assert cli.main(["embed", "--model", str(tmp_path / "missing"), "x"]) == 2
    # config.json that is not JSON, not an object, lacks a size or has one that is not a number
    # (were a JSONDecodeError, an AttributeError, a KeyError and a TypeError)
    damaged = _write_checkpoint(tmp_path / "config", tensors)
    config = json.loads((damaged / "config.json").read_text())
    for text, message in [
        ("{not json", "config.json is not valid JSON"),
        ("[1, 2]", "config.json: expected an object of settings"),
        (json.dumps({k: v for k, v in config.items() if k != "hidden_size"}), "no 'hidden_size'"),
        (
            json.dumps({**config, "hidden_size": "16"}),
            "hidden_size must be a whole number, got '16'",
        ),
    ]:
        (damaged / "config.json").write_text(text)
        with pytest.raises(PretrainedError, match=message):
            load_bert(damaged)


def _transformers_checkpoint(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=C,
                                     num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                     intermediate_size=FF, max_position_embeddings=POS)  # fmt: skip
    model = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():  # move the LayerNorms and biases off their 1 / 0 initial values
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return torch, model, tmp_path / "hf"


@pytest.mark.hf
def test_matches_transformers_bert_for_masked_lm(tmp_path):
    torch, reference, path = _transformers_checkpoint(tmp_path)
    model, tok = load_bert(path, head="mlm", dtype=np.float64)
    batch = tok(["the cat sat on the [MASK] .", "a dog ran"], ["the mat", "cats"])
    with torch.no_grad():
        out = reference(**{k: torch.tensor(v) for k, v in batch.items()},
                        output_hidden_states=True)  # fmt: skip
    logits, _ = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                      token_type_ids=batch["token_type_ids"])  # fmt: skip
    real = batch["attention_mask"] == 1
    np.testing.assert_allclose(logits.data[real], out.logits.numpy()[real], atol=2e-5)
    hidden = model.bert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    np.testing.assert_allclose(hidden.data[real], out.hidden_states[-1].numpy()[real], atol=2e-5)


@pytest.mark.hf
@pytest.mark.skipif(not os.environ.get("TINYFORMER_BERT_DIR"), reason="TINYFORMER_BERT_DIR unset")
def test_real_checkpoint_matches_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = os.environ["TINYFORMER_BERT_DIR"]
    model, tok = load_bert(path)
    reference = transformers.BertModel.from_pretrained(path).eval()
    ref_tok = transformers.BertTokenizer.from_pretrained(path)
    texts = ["The quick brown fox jumps over the lazy dog.", "Transformers read in parallel."]
    batch = tok(texts)
    assert batch["input_ids"].tolist() == ref_tok(texts, padding=True)["input_ids"]
    with torch.no_grad():
        out = reference(**{k: torch.tensor(v) for k, v in batch.items()}).last_hidden_state
    hidden = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).data
    real = batch["attention_mask"] == 1
    np.testing.assert_allclose(hidden[real], out.numpy()[real], atol=1e-4)


def test_a_checkpoint_without_pooler_gets_berts_init_and_skip_init_leaves_zeros(
    checkpoint, tmp_path
):
    from tinyformer.nn import Linear, init

    path, tensors = checkpoint
    bare = {k: v for k, v in tensors.items() if not k.startswith("pooler")}
    model, _ = load_bert(_write_checkpoint(tmp_path / "no-pooler", bare))
    w = model.pooler.weight.data
    assert 0.01 < w.std() < 0.03 and not model.pooler.bias.data.any()  # N(0, 0.02), zero bias
    with init.skip_init():
        layer = Linear(4, 3)
    assert not layer.weight.data.any() and Linear(4, 3).weight.data.any()


@pytest.mark.hf
def test_matches_transformers_distilbert(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(1)
    config = transformers.DistilBertConfig(vocab_size=len(VOCAB), dim=C, n_layers=LAYERS,
                                           n_heads=HEADS, hidden_dim=FF,
                                           max_position_embeddings=POS)  # fmt: skip
    reference = transformers.DistilBertForMaskedLM(config).eval()
    with torch.no_grad():
        for name, p in reference.named_parameters():
            if "layer_norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    reference.save_pretrained(tmp_path / "distil")
    (tmp_path / "distil" / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    model, tok = load_bert(tmp_path / "distil", head="mlm", dtype=np.float64)
    batch = tok(["the cat sat on the [MASK] .", "a dog ran"])
    with torch.no_grad():
        out = reference(input_ids=torch.tensor(batch["input_ids"]),
                        attention_mask=torch.tensor(batch["attention_mask"]))  # fmt: skip
    logits, _ = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    real = batch["attention_mask"] == 1
    np.testing.assert_allclose(logits.data[real], out.logits.numpy()[real], atol=2e-5)
    encoder, _ = load_bert(tmp_path / "distil")
    assert encoder.config.n_layer == LAYERS and encoder.config.type_vocab_size == 1
