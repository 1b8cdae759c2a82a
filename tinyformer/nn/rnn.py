"""Recurrent layers (`torch.nn` names): RNNCell, GRUCell and LSTMCell, one time step each, and
RNN, GRU and LSTM, which unroll a cell over a sequence.

Shapes: B batch, T time, I input size, H hidden size, D directions (2 if bidirectional).

RNN (Elman, 1990), one gate:
    h' = tanh(W_ih x + b_ih + W_hh h + b_hh)              (or relu with nonlinearity="relu")

GRU (Cho et al., 2014), gates in PyTorch's order r, z, n (rows of weight_ih and weight_hh):
    r  = sigmoid(W_ir x + b_ir + W_hr h + b_hr)           reset: how much of h the candidate sees
    z  = sigmoid(W_iz x + b_iz + W_hz h + b_hz)           update: how much of h is kept
    n  = tanh(W_in x + b_in + r * (W_hn h + b_hn))        the candidate state
    h' = (1 - z) * n + z * h
LSTM (Hochreiter & Schmidhuber, 1997), gates in PyTorch's order i, f, g, o:
    i, f, o = sigmoid(.), g = tanh(.)  (each W_i* x + b_i* + W_h* h + b_h*)
    c' = f * c + i * g,  h' = o * tanh(c')

Backpropagation through time is nothing new here: unrolling T steps builds one graph, and the
autograd engine walks it back. Its length is the point: the gradient from step T to step 1
passes through T cells (tutorial 13 measures it). The input projections W_i x of all steps do
not depend on h, so GRU and LSTM compute them as one matrix product before the loop.
Initialisation is PyTorch's: every weight and bias U(±1/sqrt(H)). With num_layers > 1,
`dropout` drops each layer's outputs on their way to the next layer in training, as PyTorch's
(not after the last layer).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend
from tinyformer.nn import init
from tinyformer.nn.module import Module, Parameter
from tinyformer.nn.utils.rnn import PackedSequence
from tinyformer.ops import cat, chunk, squeeze, stack, transpose, unsqueeze, where
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = [
    "GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "gru_step", "lstm_step",
    "rnn_step",
]  # fmt: skip


NONLINEARITIES = {"tanh": F.tanh, "relu": F.relu}


def rnn_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, nonlinearity: str) -> Tensor:
    """One Elman RNN step from gi = x W_ih^T + b_ih (B, H) and h (B, H)."""
    return NONLINEARITIES[nonlinearity](gi + F.linear(h, w_hh, b_hh))


def _check_nonlinearity(owner: str, nonlinearity: str) -> str:
    if nonlinearity not in NONLINEARITIES:
        raise ValueError(f"{owner}: unknown nonlinearity {nonlinearity!r}; choose 'tanh' or 'relu'")
    return nonlinearity


def gru_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """One GRU step from the input projection gi = x W_ih^T + b_ih (B, 3H) and h (B, H)."""
    gh = F.linear(h, w_hh, b_hh)  # (B, 3H)
    i_r, i_z, i_n = chunk(gi, 3, axis=-1)
    h_r, h_z, h_n = chunk(gh, 3, axis=-1)
    r, z = F.sigmoid(i_r + h_r), F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)  # r gates W_hn h + b_hn, as in PyTorch (and cuDNN)
    return n + z * (h - n)  # = (1 - z) n + z h, one op fewer


def lstm_step(
    gi: Tensor, h: Tensor, c: Tensor, w_hh: Tensor, b_hh: Tensor | None
) -> tuple[Tensor, Tensor]:
    """One LSTM step from gi = x W_ih^T + b_ih (B, 4H), h and c (B, H) -> (h', c')."""
    i, f, g, o = chunk(gi + F.linear(h, w_hh, b_hh), 4, axis=-1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    return F.sigmoid(o) * F.tanh(c), c


def _uniform(module: Module, name: str, shape: tuple[int, ...], bound: float, dtype: Any) -> None:
    module.register_parameter(name, init.uniform_(Parameter(np.zeros(shape, dtype)), -bound, bound))


def _check_sizes(owner: str, **sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


def _zeros_like_rows(x: Tensor, hidden: int) -> Tensor:
    xp = backend.get_array_module(x.data)
    return Tensor(xp.zeros((x.shape[0], hidden), x.dtype))


class _Cell(Module):
    gates = 0  # 3 for GRU, 4 for LSTM

    def __init__(self, input_size: int, hidden_size: int, bias: bool, dtype: Any) -> None:
        super().__init__()
        _check_sizes(type(self).__name__, input_size=input_size, hidden_size=hidden_size)
        self.input_size, self.hidden_size = input_size, hidden_size
        g, bound = self.gates * hidden_size, 1.0 / math.sqrt(hidden_size)
        _uniform(self, "weight_ih", (g, input_size), bound, dtype)
        _uniform(self, "weight_hh", (g, hidden_size), bound, dtype)
        for name in ("bias_ih", "bias_hh"):
            if bias:
                _uniform(self, name, (g,), bound, dtype)
            else:
                self.register_parameter(name, None)

    def _input(self, x: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != self.input_size:
            raise ValueError(
                f"{type(self).__name__}: input must be (B, {self.input_size}), got shape {x.shape}"
            )
        return F.linear(x, self.weight_ih, self.bias_ih)  # (B, gates * H)

    def _state(self, x: Tensor, h: Tensor | None, name: str) -> Tensor:
        if h is None:
            return _zeros_like_rows(x, self.hidden_size)
        if tuple(h.shape) != (x.shape[0], self.hidden_size):
            want = (x.shape[0], self.hidden_size)
            raise ValueError(
                f"{type(self).__name__}: {name} must be {want} for an input of shape "
                f"{x.shape}, got {h.shape}"
            )
        return h

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias_ih is not None}"


class RNNCell(_Cell):
    """One Elman RNN step: x (B, I), h (B, H) or None (zeros) -> h' (B, H). weight_ih (H, I),
    weight_hh (H, H), bias_ih and bias_hh (H,)."""

    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        dtype: Any = np.float32,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, dtype)
        self.nonlinearity = _check_nonlinearity("RNNCell", nonlinearity)

    def forward(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        gi = self._input(x)
        h = self._state(x, h, "h")
        return rnn_step(gi, h, self.weight_hh, self.bias_hh, self.nonlinearity)


class GRUCell(_Cell):
    """One GRU step: x (B, I), h (B, H) or None (zeros) -> h' (B, H). weight_ih (3H, I),
    weight_hh (3H, H), bias_ih and bias_hh (3H,), rows in gate order r, z, n."""

    gates = 3

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = np.float32
    ) -> None:
        super().__init__(input_size, hidden_size, bias, dtype)

    def forward(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        gi = self._input(x)
        return gru_step(gi, self._state(x, h, "h"), self.weight_hh, self.bias_hh)


class LSTMCell(_Cell):
    """One LSTM step: x (B, I), (h, c) each (B, H), or None (zeros) -> (h', c'). weight_ih
    (4H, I), weight_hh (4H, H), bias_ih and bias_hh (4H,), rows in gate order i, f, g, o."""

    gates = 4

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = np.float32
    ) -> None:
        super().__init__(input_size, hidden_size, bias, dtype)

    def forward(self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        gi = self._input(x)
        h, c = (None, None) if hx is None else hx
        h, c = self._state(x, h, "h"), self._state(x, c, "c")
        return lstm_step(gi, h, c, self.weight_hh, self.bias_hh)


class RNNBase(Module):
    """A stack of `num_layers` recurrent layers, each one or two directions; parameters named
    as PyTorch's: weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, and the same with
    `_reverse` for the backward direction."""

    gates = 0

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        _check_sizes(owner, input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        if (
            isinstance(dropout, bool)
            or not isinstance(dropout, (int, float))
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                f"{owner}: dropout should be a number in range [0, 1] representing the "
                f"probability of an element being zeroed, got {dropout!r}"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                f"{owner}: dropout acts between recurrent layers (after all but the last), so "
                f"with num_layers=1 dropout={dropout} does nothing",
                UserWarning,
                stacklevel=2,
            )
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.bidirectional = bias, batch_first, bidirectional
        self.dropout = float(dropout)
        self.suffixes = ("", "_reverse") if bidirectional else ("",)
        g, bound = self.gates * hidden_size, 1.0 / math.sqrt(hidden_size)
        for layer in range(num_layers):
            size = input_size if layer == 0 else len(self.suffixes) * hidden_size
            for s in self.suffixes:
                _uniform(self, f"weight_ih_l{layer}{s}", (g, size), bound, dtype)
                _uniform(self, f"weight_hh_l{layer}{s}", (g, hidden_size), bound, dtype)
                for name in (f"bias_ih_l{layer}{s}", f"bias_hh_l{layer}{s}"):
                    if bias:
                        _uniform(self, name, (g,), bound, dtype)
                    else:
                        self.register_parameter(name, None)

    def _step(self, gi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None) -> tuple:
        raise NotImplementedError

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch's packs the weights into one buffer for cuDNN; code written
        for it calls this before each forward."""

    def _keep(self, lengths: Any, b: int, t: int, like: Tensor) -> Any:
        """(B, T) boolean on like's device: True at real steps, or None (no lengths)."""
        if lengths is None:
            return None
        lengths = backend.to_host(array_of(lengths))
        ok = lengths.shape == (b,) and lengths.dtype.kind in "iu"
        if not (ok and ((lengths >= 0) & (lengths <= t)).all()):
            raise ValueError(
                f"{type(self).__name__}: lengths must be {b} integers in [0, {t}], got {lengths!r}"
            )
        keep = np.arange(t)[None, :] < lengths[:, None]
        return backend.to_device(keep, backend.device_of(like.data))

    def _direction(self, x: Tensor, state: tuple, names: list[str], reverse: bool, keep: Any):
        """Run one direction of one layer over x (B, T, I) -> outputs (B, T, H), last state."""
        w_ih, w_hh, b_ih, b_hh = (getattr(self, name) for name in names)
        gi = F.linear(x, w_ih, b_ih)  # (B, T, gates H): every step's input projection at once
        # one split node, so backward writes gi's gradient once rather than once per step
        steps = [p.squeeze(1) for p in gi.split(1, axis=1)]  # T x (B, gates H)
        ys: list[Any] = [None] * len(steps)
        for t in reversed(range(len(steps))) if reverse else range(len(steps)):
            new = self._step(steps[t], state, w_hh, b_hh)
            if keep is not None:  # past a sequence's end its state stays, its outputs are 0
                k = keep[:, t : t + 1]  # (B, 1)
                new = tuple(where(k, n, s) for n, s in zip(new, state, strict=True))
                ys[t] = where(k, new[0], 0.0)
            else:
                ys[t] = new[0]
            state = new
        return stack(ys, axis=1), state

    def _run(self, x: Any, hx: tuple, lengths: Any) -> tuple[Any, tuple]:
        if isinstance(x, PackedSequence):  # PyTorch's packed input: padded batch and lengths
            padded = x.padded if self.batch_first else transpose(x.padded, 0, 1)
            out, finals = self._run(padded, hx, x.lengths)
            out = out if self.batch_first else transpose(out, 0, 1)  # (B, T, D H)
            return PackedSequence(out, x.lengths), finals
        if x.ndim == 2 and lengths is None:  # one unbatched sequence (T, I), as PyTorch takes
            axis = 0 if self.batch_first else 1
            hx = tuple(None if h is None else unsqueeze(h, 1) for h in hx)
            out, finals = self._run(unsqueeze(x, axis), hx, None)
            return squeeze(out, axis), tuple(squeeze(f, 1) for f in finals)
        if x.ndim != 3 or x.shape[2] != self.input_size:
            i = self.input_size
            raise ValueError(
                f"{type(self).__name__}: input must be (B, T, {i}) (batch_first), "
                f"(T, B, {i}) or unbatched (T, {i}), got shape {x.shape}"
            )
        if not self.batch_first:
            x = x.transpose(0, 1)  # (T, B, I) -> (B, T, I)
        b, t = x.shape[:2]
        keep = self._keep(lengths, b, t, x)
        shape = (self.num_layers * len(self.suffixes), b, self.hidden_size)
        for h in hx:
            if h is not None and tuple(h.shape) != shape:
                raise ValueError(
                    f"{type(self).__name__}: initial states must be {shape}, got {h.shape}"
                )
        finals: list[tuple] = []
        for layer in range(self.num_layers):
            outs = []
            for d, s in enumerate(self.suffixes):
                k = layer * len(self.suffixes) + d
                zeros = _zeros_like_rows(x, self.hidden_size)
                state = tuple(zeros if h is None else h[k] for h in hx)
                names = [
                    f"{n}_l{layer}{s}" for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
                ]
                y, state = self._direction(x, state, names, reverse=d == 1, keep=keep)
                outs.append(y)
                finals.append(state)
            x = outs[0] if len(outs) == 1 else cat(outs, axis=-1)  # (B, T, D H)
            if self.dropout and layer < self.num_layers - 1:  # between layers only
                x = F.dropout(x, self.dropout, self.training)
        out = x if self.batch_first else x.transpose(0, 1)
        return out, tuple(stack([f[i] for f in finals], axis=0) for i in range(len(hx)))

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
            f"batch_first={self.batch_first}, dropout={self.dropout}, "
            f"bidirectional={self.bidirectional}"
        )


class RNN(RNNBase):
    """An Elman RNN over a sequence, as `torch.nn.RNN`: each layer h_t = tanh (or relu) of
    W_ih x_t + b_ih + W_hh h_{t-1} + b_hh. forward(x, h0=None, lengths=None) -> output, h_n;
    shapes and lengths as for GRU."""

    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype
        )
        self.nonlinearity = _check_nonlinearity("RNN", nonlinearity)

    def _step(self, gi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None) -> tuple:
        return (rnn_step(gi, state[0], w_hh, b_hh, self.nonlinearity),)

    def forward(
        self, x: Tensor, h0: Tensor | None = None, lengths: Any = None
    ) -> tuple[Tensor, Tensor]:
        out, (h_n,) = self._run(x, (h0,), lengths)
        return out, h_n

    def extra_repr(self) -> str:
        return super().extra_repr() + f", nonlinearity={self.nonlinearity!r}"


class GRU(RNNBase):
    """A GRU over a sequence, as `torch.nn.GRU`.

    forward(x, h0=None, lengths=None): x (B, T, I) if batch_first else (T, B, I), or a
    `nn.utils.rnn.PackedSequence` (then the output is one too); h0
    (num_layers * D, B, H) or None (zeros); lengths (B,) ints or None: sequence b is
    x[b, :lengths[b]] (padding after it), as after `pack_padded_sequence`: each direction
    reads only the real steps, and outputs at padding are 0.
    -> output (B, T, D H) (or (T, B, D H)), h_n (num_layers * D, B, H): each direction's last
    state (the backward direction's is at step 0).
    """

    gates = 3

    def _step(self, gi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None) -> tuple:
        return (gru_step(gi, state[0], w_hh, b_hh),)

    def forward(
        self, x: Tensor, h0: Tensor | None = None, lengths: Any = None
    ) -> tuple[Tensor, Tensor]:
        out, (h_n,) = self._run(x, (h0,), lengths)
        return out, h_n


class LSTM(RNNBase):
    """An LSTM over a sequence, as `torch.nn.LSTM` (no projection: proj_size is not taken).
    forward(x, hx=None, lengths=None) with hx = (h0, c0) -> output, (h_n, c_n); shapes and
    lengths as for GRU."""

    gates = 4

    def _step(self, gi: Tensor, state: tuple, w_hh: Tensor, b_hh: Tensor | None) -> tuple:
        return lstm_step(gi, state[0], state[1], w_hh, b_hh)

    def forward(
        self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None, lengths: Any = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        out, (h_n, c_n) = self._run(x, (None, None) if hx is None else hx, lengths)
        return out, (h_n, c_n)
