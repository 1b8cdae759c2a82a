"""Data for the training commands: corpora, tokenizers and batching."""

from tinyformer.data.batching import LMData
from tinyformer.data.text import DatasetUnavailable, cache_dir, load_text, pydoc_topics
from tinyformer.data.tokenizers import (
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    load_tokenizer,
    tokenizer_from_dict,
)

__all__ = [
    "BPETokenizer", "CharTokenizer", "DatasetUnavailable", "LMData", "Tokenizer", "cache_dir",
    "load_text", "load_tokenizer", "pydoc_topics", "tokenizer_from_dict",
]  # fmt: skip
