"""`tinyformer.testing.specs`, the old home of the spec type: it now lives below the ops, in
`tinyformer.opspec`, and this name re-exports it so that existing imports keep working."""

from tinyformer.opspec import (
    Draw,
    OpSpec,
    RandomDraw,
    Sample,
    binary_sample,
    broadcast_pair,
    broadcastable,
    distinct,
    floats,
    reduction_sample,
    unary_sample,
)

__all__ = [
    "Draw",
    "OpSpec",
    "RandomDraw",
    "Sample",
    "binary_sample",
    "broadcast_pair",
    "broadcastable",
    "distinct",
    "floats",
    "reduction_sample",
    "unary_sample",
]
