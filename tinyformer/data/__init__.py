"""Data for the training commands: corpora, tokenizers and batching."""

from tinyformer.data.batching import LMData
from tinyformer.data.images import SHAPE_CLASSES, load_digits, load_mnist, make_shapes
from tinyformer.data.text import DatasetUnavailable, cache_dir, load_text, pydoc_topics
from tinyformer.data.tokenizers import (
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    load_tokenizer,
    tokenizer_from_dict,
)

__all__ = [
    "BPETokenizer", "CharTokenizer", "DatasetUnavailable", "LMData", "SHAPE_CLASSES",
    "Tokenizer", "cache_dir", "load_digits", "load_mnist", "load_text", "load_tokenizer",
    "make_shapes", "pydoc_topics", "tokenizer_from_dict",
]  # fmt: skip
