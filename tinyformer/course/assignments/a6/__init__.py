"""A6: distributed: the checks and their drivers (the code is in
`tinyformer/distributed/schedules.py`).

Imports none of its modules: each is imported where it is needed."""
