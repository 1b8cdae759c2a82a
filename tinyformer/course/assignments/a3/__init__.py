"""A3: attention: the checks, their drivers and the grading's samples (the code is in
`tinyformer/ops/attention.py` and `tinyformer/nn/transformer.py`).

Imports none of its modules: each is imported where it is needed."""
