"""A4: vision: the checks (the code is the ops').

Imports none of its modules: each is imported where it is needed."""
