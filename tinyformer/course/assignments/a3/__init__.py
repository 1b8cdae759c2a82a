"""A3: attention: the checks and their drivers (the code is in `tinyformer/ops/attention.py`
and `tinyformer/nn/transformer.py`).

Imports none of its modules: each is imported where it is needed."""
