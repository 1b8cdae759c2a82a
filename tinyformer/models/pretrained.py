"""Load Hugging Face BERT-family checkpoints into tinyformer's encoder, with NumPy only.

A checkpoint directory holds `config.json` (sizes), `model.safetensors` (weights) and
`vocab.txt` (the WordPiece vocabulary); `tokenizer_config.json`, when present, says whether
the model is cased. `pytorch_model.bin` files are pickles and are refused: convert them to
safetensors first (a pickle can run code when loaded).

Hugging Face names -> tinyformer names (layer i):

    embeddings.word_embeddings / position_embeddings / token_type_embeddings / LayerNorm
        -> tok_emb / pos_emb / type_emb / emb_ln
    encoder.layer.i.attention.self.query, .key, .value   -> layers.i.attn.c_attn (stacked q;k;v)
    encoder.layer.i.attention.output.dense / .LayerNorm  -> layers.i.attn.c_proj / layers.i.ln_1
    encoder.layer.i.intermediate.dense                   -> layers.i.mlp.c_fc
    encoder.layer.i.output.dense / .LayerNorm            -> layers.i.mlp.c_proj / layers.i.ln_2
    pooler.dense                                         -> pooler
    cls.predictions.transform.dense / .LayerNorm, .bias  -> mlm_dense / mlm_ln, mlm_bias

Both store Linear weights as (out, in), so nothing is transposed (GPT-2's Conv1D weights, by
contrast, are (in, out)). Names may carry a "bert." prefix (pretraining checkpoints) or not
(bare encoders, sentence-transformers); old checkpoints say gamma/beta for LayerNorm.
DistilBERT is the same post-LN encoder under other names (`transformer.layer.i.attention.q_lin`,
`sa_layer_norm`, `ffn.lin1`, ...), without token types or pooler; its names are first rewritten
to BERT's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.backend import host_copy
from tinyformer.checkpoint import non_finite
from tinyformer.data.wordpiece import WordPieceTokenizer
from tinyformer.models.bert import (
    Bert,
    BertConfig,
    BertForMaskedLM,
    init_bert_weights,
    mean_pool,
)
from tinyformer.nn import init
from tinyformer.nn.module import StateDictError
from tinyformer.safetensors import load_file

__all__ = [
    "PretrainedError",
    "SentenceEncoder",
    "bert_config_from_hf",
    "convert_hf_bert",
    "load_bert",
]


class PretrainedError(ValueError):
    """A checkpoint directory that cannot be loaded, and why."""


def _size(hf: dict[str, Any], name: str) -> int:
    """config.json's whole number `name`, or a PretrainedError naming it."""
    if name not in hf:
        raise PretrainedError(f"config.json: no {name!r}, which this model type needs")
    value = hf[name]
    if not isinstance(value, int) or isinstance(value, bool):
        raise PretrainedError(f"config.json: {name} must be a whole number, got {value!r}")
    return value


def _setting(hf: dict[str, Any], name: str, default: Any, kind: type | tuple[type, ...]) -> Any:
    """config.json's optional `name` (null: the default), or a PretrainedError naming it."""
    value = hf.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or isinstance(value, bool) or value < 0:
        raise PretrainedError(f"config.json: {name} must be a number >= 0, got {value!r}")
    return value


def bert_config_from_hf(hf: dict[str, Any]) -> BertConfig:
    """A BertConfig from a Hugging Face config.json dict: BERT, or DistilBERT (a 6-layer BERT
    distilled from bert-base, with other names and no token types)."""
    kind = hf.get("model_type", "bert")
    if kind == "distilbert":
        if hf.get("activation", "gelu") != "gelu":
            raise PretrainedError(f"config.json: activation {hf['activation']!r}; only 'gelu'")
        return BertConfig(
            vocab_size=_size(hf, "vocab_size"),
            max_position=_size(hf, "max_position_embeddings"), type_vocab_size=1,
            n_layer=_size(hf, "n_layers"), n_head=_size(hf, "n_heads"), d_model=_size(hf, "dim"),
            d_ff=_size(hf, "hidden_dim"), dropout=0.0, norm="post", eps=1e-12,
            pad_id=_setting(hf, "pad_token_id", 0, int),
        )  # fmt: skip
    if kind != "bert":
        raise PretrainedError(
            f"config.json: model_type {kind!r} is not supported; this loader reads BERT-"
            "architecture checkpoints (bert-*, MiniLM, sentence-transformers' BERT models) and "
            "DistilBERT"
        )
    if hf.get("hidden_act", "gelu") != "gelu":
        raise PretrainedError(f"config.json: hidden_act {hf['hidden_act']!r}; only 'gelu' (erf)")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise PretrainedError("config.json: only absolute position embeddings are supported")
    return BertConfig(
        vocab_size=_size(hf, "vocab_size"), max_position=_size(hf, "max_position_embeddings"),
        type_vocab_size=_size(hf, "type_vocab_size") if "type_vocab_size" in hf else 2,
        n_layer=_size(hf, "num_hidden_layers"), n_head=_size(hf, "num_attention_heads"),
        d_model=_size(hf, "hidden_size"), d_ff=_size(hf, "intermediate_size"),
        dropout=0.0, norm="post",
        eps=_setting(hf, "layer_norm_eps", 1e-12, (int, float)),
        pad_id=_setting(hf, "pad_token_id", 0, int),
    )  # fmt: skip


_RULES = [  # (Hugging Face name pattern, tinyformer name)
    (r"embeddings\.word_embeddings\.weight", "tok_emb.weight"),
    (r"embeddings\.position_embeddings\.weight", "pos_emb.weight"),
    (r"embeddings\.token_type_embeddings\.weight", "type_emb.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"emb_ln.\1"),
    (
        r"encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)",
        r"layers.\1.attn.c_proj.\2",
    ),
    (r"encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)", r"layers.\1.ln_1.\2"),
    (r"encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)", r"layers.\1.mlp.c_fc.\2"),
    (r"encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)", r"layers.\1.mlp.c_proj.\2"),
    (r"encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)", r"layers.\1.ln_2.\2"),
    (r"pooler\.dense\.(weight|bias)", r"pooler.\1"),
    (r"cls\.predictions\.transform\.dense\.(weight|bias)", r"mlm_dense.\1"),
    (r"cls\.predictions\.transform\.LayerNorm\.(weight|bias)", r"mlm_ln.\1"),
    (r"cls\.predictions\.bias", "mlm_bias"),
]
_QKV = re.compile(r"encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.(weight|bias)")
_IGNORED = re.compile(r"embeddings\.position_ids|cls\.predictions\.decoder\.|cls\.seq_relationship")


# DistilBERT's names -> BERT's (after its "distilbert." prefix is dropped)
_DISTILBERT = [
    (r"transformer\.layer\.(\d+)\.attention\.q_lin", r"encoder.layer.\1.attention.self.query"),
    (r"transformer\.layer\.(\d+)\.attention\.k_lin", r"encoder.layer.\1.attention.self.key"),
    (r"transformer\.layer\.(\d+)\.attention\.v_lin", r"encoder.layer.\1.attention.self.value"),
    (r"transformer\.layer\.(\d+)\.attention\.out_lin", r"encoder.layer.\1.attention.output.dense"),
    (r"transformer\.layer\.(\d+)\.sa_layer_norm", r"encoder.layer.\1.attention.output.LayerNorm"),
    (r"transformer\.layer\.(\d+)\.ffn\.lin1", r"encoder.layer.\1.intermediate.dense"),
    (r"transformer\.layer\.(\d+)\.ffn\.lin2", r"encoder.layer.\1.output.dense"),
    (r"transformer\.layer\.(\d+)\.output_layer_norm", r"encoder.layer.\1.output.LayerNorm"),
    (r"vocab_transform", "cls.predictions.transform.dense"),
    (r"vocab_layer_norm", "cls.predictions.transform.LayerNorm"),
    (r"vocab_projector\.bias", "cls.predictions.bias"),
    (r"vocab_projector\.weight", "cls.predictions.decoder.weight"),  # tied: dropped
]


def _canonical(name: str) -> str:
    """Any supported checkpoint's tensor name -> Hugging Face BERT's, without prefix."""
    name = name.removeprefix("bert.").removeprefix("distilbert.")
    for pattern, target in _DISTILBERT:
        name = re.sub(f"^{pattern}", target, name)
    return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
        "LayerNorm.beta", "LayerNorm.bias"
    )


def convert_hf_bert(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Hugging Face BERT tensors -> a state dict for `Bert` (and `mlm_*` head entries when
    present). The decoder matrix of the MLM head is tied to the token embeddings and dropped."""
    out: dict[str, np.ndarray] = {}
    qkv: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    unknown = []
    for hf_name, array in tensors.items():
        name = _canonical(hf_name)
        if _IGNORED.match(name):
            continue
        if m := _QKV.fullmatch(name):
            qkv.setdefault((m[1], m[3]), {})[m[2]] = array
            continue
        for pattern, target in _RULES:
            if re.fullmatch(pattern, name):
                out[re.sub(pattern, target, name)] = array
                break
        else:
            unknown.append(hf_name)
    if unknown:
        raise PretrainedError(f"model.safetensors: tensors with no tinyformer place: {unknown[:8]}")
    for (layer, kind), parts in sorted(qkv.items()):
        if set(parts) != {"query", "key", "value"}:
            raise PretrainedError(f"layer {layer}: attention {kind} lacks one of query/key/value")
        # c_attn computes [q | k | v] = x W^T: stacking the (C, C) matrices along axis 0
        out[f"layers.{layer}.attn.c_attn.{kind}"] = np.concatenate(
            [parts["query"], parts["key"], parts["value"]], axis=0
        )  # 3 x (C, C) -> (3C, C), or 3 x (C,) -> (3C,)
    return out


def _read_dir(path: str | Path) -> tuple[Path, dict[str, Any]]:
    root = Path(path).expanduser()
    if not root.is_dir():
        raise PretrainedError(f"{root}: not a directory (expected config.json, "
                              "model.safetensors and vocab.txt)")  # fmt: skip
    if not (root / "model.safetensors").is_file():
        hint = ""
        if (root / "pytorch_model.bin").exists():
            hint = (" It has pytorch_model.bin, a pickle, which tinyformer does not load; "
                    "convert it to safetensors first.")  # fmt: skip
        raise PretrainedError(f"{root}: no model.safetensors.{hint}")
    for name in ("config.json", "vocab.txt"):
        if not (root / name).is_file():
            raise PretrainedError(f"{root}: no {name}")
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise PretrainedError(f"{root / 'config.json'} is not valid JSON: {err}") from None
    if not isinstance(config, dict):
        raise PretrainedError(f"{root / 'config.json'}: expected an object of settings")
    return root, config


def _check_shapes(
    root: Path, expected: dict[str, np.ndarray], state: dict[str, np.ndarray]
) -> None:
    for key, array in state.items():
        if key in expected and expected[key].shape != array.shape:
            raise PretrainedError(
                f"{root / 'model.safetensors'}: the tensor for {key} has shape {array.shape} but "
                f"config.json implies {expected[key].shape}; the config and the weights disagree"
            )


def _config(root: Path, hf: dict[str, Any], tensors: dict[str, np.ndarray]) -> BertConfig:
    """The BertConfig of config.json, refused when it describes more weights than the file
    holds: a damaged size would otherwise allocate that model before any shape is compared."""
    where = root / "config.json"
    try:
        config = bert_config_from_hf(hf)
    except ValueError as err:  # PretrainedError, and BertConfig's own checks
        raise PretrainedError(f"{where}: {str(err).removeprefix('config.json: ')}") from None
    # DistilBERT files have no token-type embeddings, and any file may lack the pooler
    needed = config.num_parameters(pooler=False) - config.type_vocab_size * config.d_model
    held = sum(a.size for a in tensors.values())
    if needed > held:
        raise PretrainedError(
            f"{where} describes an encoder of {needed:,} weights but model.safetensors holds "
            f"{held:,}; the config and the weights disagree"
        )
    return config


def _tokenizer(root: Path) -> WordPieceTokenizer:
    options, lowercase = root / "tokenizer_config.json", True
    if options.is_file():
        try:
            settings = json.loads(options.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise PretrainedError(f"{options} is not valid JSON: {err}") from None
        if not isinstance(settings, dict):
            raise PretrainedError(f"{options}: expected an object of settings")
        lowercase = settings.get("do_lower_case", True)
        if not isinstance(lowercase, bool):
            raise PretrainedError(f"{options}: do_lower_case must be true or false")
    try:
        return WordPieceTokenizer.from_file(root / "vocab.txt", lowercase)
    except ValueError as err:  # names the file: not UTF-8, repeated or missing tokens
        raise PretrainedError(str(err)) from None


def load_bert(
    path: str | Path, head: str | None = None, dtype: Any = np.float32
) -> tuple[Any, WordPieceTokenizer]:
    """(model, tokenizer) from a Hugging Face BERT directory. `head=None` gives the encoder
    (`Bert`); `head="mlm"` the encoder with its masked-LM head (`BertForMaskedLM`), which needs
    the checkpoint to have `cls.predictions.*`. The model is in eval mode."""
    root, hf = _read_dir(path)
    tensors = load_file(root / "model.safetensors")
    bad = non_finite(tensors)
    if bad:
        raise PretrainedError(f"{root / 'model.safetensors'}: {bad}")
    config = _config(root, hf, tensors)
    try:
        state = convert_hf_bert(tensors)
    except PretrainedError as err:
        raise PretrainedError(f"{root}: {err}") from None
    if head == "mlm":
        if "mlm_dense.weight" not in state:
            raise PretrainedError(f"{root}: this checkpoint has no masked-LM head (cls.*)")
        with init.skip_init():  # every weight is loaded below (bert-base: 4.5 s saved)
            model = BertForMaskedLM(config)
        state = {(k if k.startswith("mlm") else "bert." + k): v for k, v in state.items()}
    elif head is None:
        with init.skip_init():
            model = Bert(config)
        state = {k: v for k, v in state.items() if not k.startswith("mlm")}
    else:
        raise PretrainedError(f"load_bert: head must be None or 'mlm', got {head!r}")
    prefix = "bert." if head == "mlm" else ""
    if prefix + "type_emb.weight" not in state:  # DistilBERT: no segments, one zero row
        state[prefix + "type_emb.weight"] = np.zeros((1, config.d_model), np.float32)
    if prefix + "pooler.weight" not in state:
        # some encoders ship without the pooler, which embeddings never use: BERT's init
        pooler = model.bert.pooler if head == "mlm" else model.pooler
        init_bert_weights(pooler)
        state |= {f"{prefix}pooler.{k}": host_copy(v.data) for k, v in pooler.state_dict().items()}
    _check_shapes(root, {name: p.data for name, p in model.named_parameters()}, state)
    try:
        model.to(dtype).load_state_dict(state)  # copied into the model's arrays, cast to dtype
    except StateDictError as err:  # e.g. config.json has more layers than the file
        raise PretrainedError(f"{root / 'model.safetensors'}: {err}") from None
    tokenizer = _tokenizer(root)
    if tokenizer.vocab_size != config.vocab_size:
        raise PretrainedError(
            f"{root}: vocab.txt has {tokenizer.vocab_size} tokens but config.json says "
            f"vocab_size {config.vocab_size}"
        )
    return model.eval(), tokenizer


class SentenceEncoder:
    """Sentence embeddings from a pretrained encoder: mean of the token vectors over real
    tokens, L2-normalised, as sentence-transformers does. Cosine similarity of two sentences
    is then the dot product of their embeddings."""

    def __init__(self, path: str | Path, max_length: int = 256, batch_size: int = 32) -> None:
        self.model, self.tokenizer = load_bert(path)
        self.max_length = min(max_length, self.model.config.max_position)
        self.batch_size = batch_size

    def embed(self, sentences: list[str]) -> np.ndarray:
        """(N, C) unit vectors, float64."""
        from tinyformer.autograd import no_grad

        out = []
        with no_grad():
            for i in range(0, len(sentences), self.batch_size):
                batch = self.tokenizer(
                    sentences[i : i + self.batch_size], max_length=self.max_length
                )
                hidden = self.model(batch["input_ids"], batch["attention_mask"],
                                    batch["token_type_ids"])  # fmt: skip
                out.append(mean_pool(hidden, batch["attention_mask"]))
        return np.concatenate(out) if out else np.zeros((0, self.model.config.d_model))
