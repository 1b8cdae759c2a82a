"""A1: a scalar autograd engine (`autograd.py`), its checks and their drivers.

Imports none of its modules: each is imported where it is needed."""
