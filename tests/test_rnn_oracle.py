"""GRU and LSTM against PyTorch with everything switched on at once: an initial state (h0, and
c0 for the LSTM), two layers, both directions, both layouts (`batch_first`), and sequences of
their full length or of their own lengths (PyTorch's packed). Outputs, the final states h_n
(and c_n) and the gradients of all of them, with PyTorch's weights copied in by name.

`check_recurrent(module)` takes the module that defines GRU and LSTM, so that
tests/test_mutation_dedicated.py can run it on a copy with a planted bug.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import autograd
from tinyformer.nn import rnn

T, B, I, H, LAYERS = 5, 3, 4, 6, 2  # time, batch, input size, hidden size, layers
LENGTHS = (3, 5, 1)  # unsorted, one full, one of a single step


def check_one(module: ModuleType, name: str, batch_first: bool, packed: bool = False) -> None:
    """`module.<name>` (GRU or LSTM) equals torch.nn.<name> with the same weights; `packed`:
    sequences of LENGTHS, ours through `lengths=`, PyTorch's packed."""
    torch = pytest.importorskip("torch")
    kw = dict(num_layers=LAYERS, batch_first=batch_first, bidirectional=True)
    tf.manual_seed(0)
    ours = getattr(module, name)(I, H, **kw).to(np.float64)
    theirs = getattr(torch.nn, name)(I, H, **kw).double()
    state = {k: torch.from_numpy(np.array(v)) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)  # strict: every name and shape as PyTorch's
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, I) if batch_first else (T, B, I))
    states = [rng.standard_normal((2 * LAYERS, B, H)) for _ in range(2 if name == "LSTM" else 1)]
    x_ours = tf.Tensor(x, requires_grad=True)
    s_ours = [tf.Tensor(s, requires_grad=True) for s in states]
    x_theirs = torch.tensor(x, requires_grad=True)
    s_theirs = [torch.tensor(s, requires_grad=True) for s in states]
    lengths = np.array(LENGTHS) if packed else None
    x_in = x_theirs
    if packed:
        pack = torch.nn.utils.rnn.pack_padded_sequence
        x_in = pack(x_theirs, torch.tensor(LENGTHS), batch_first=batch_first, enforce_sorted=False)
    if name == "LSTM":
        y, (h_n, c_n) = ours(x_ours, tuple(s_ours), lengths=lengths)
        y_t, (h_t, c_t) = theirs(x_in, tuple(s_theirs))
        outs, outs_t = [y, h_n, c_n], [y_t, h_t, c_t]
    else:
        y, h_n = ours(x_ours, s_ours[0], lengths=lengths)
        y_t, h_t = theirs(x_in, s_theirs[0])
        outs, outs_t = [y, h_n], [y_t, h_t]
    if packed:  # back to a padded tensor, zeros past each sequence's end as ours
        unpack = torch.nn.utils.rnn.pad_packed_sequence
        outs_t[0] = unpack(y_t, batch_first=batch_first, total_length=T)[0]
    for what, a, b in zip(["output", "h_n", "c_n"], outs, outs_t):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} {what}")  # fmt: skip
    # the gradients of a random projection of every output, w.r.t. x and the initial states
    gys = [rng.standard_normal(a.shape) for a in outs]
    got = autograd.grad(outs, [x_ours, *s_ours], gys)
    want = torch.autograd.grad(outs_t, [x_theirs, *s_theirs], [torch.tensor(g) for g in gys])
    for what, a, b in zip(["x", "h0", "c0"], got, want):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} gradient of {what}")  # fmt: skip


def check_recurrent(module: ModuleType = rnn) -> None:
    for name in ("GRU", "LSTM"):
        for batch_first in (False, True):
            for packed in (False, True):
                check_one(module, name, batch_first, packed)


@pytest.mark.torch
@pytest.mark.parametrize("packed", [False, True], ids=["full", "lengths"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["time-first", "batch-first"])
@pytest.mark.parametrize("name", ["GRU", "LSTM"])
def test_recurrent_layer_matches_pytorch_with_initial_state(name, batch_first, packed):
    check_one(rnn, name, batch_first, packed)
