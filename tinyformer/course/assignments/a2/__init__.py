"""A2: softmax, log-softmax + cross-entropy, layer norm: the checks (the code is the ops').

Imports none of its modules: each is imported where it is needed."""
