"""PyTorch's everyday API, run as tutorials write it: each piece of code runs once with `torch`
and once with `tinyformer` passed in as the library, and the outputs (and gradients, where
there are any) agree. Then the errors a PyTorch user meets, each naming what to do. Skipped
when torch is not installed (the error tests at the end run without it)."""

from __future__ import annotations

import io
import math
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import tinyformer

try:
    import torch
except ImportError:  # the oracle tests skip; the error tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the oracle")
LIBRARIES = ["torch", "tinyformer"]


def _lib(name):
    return torch if name == "torch" else tinyformer


def _np(value):
    """A result as NumPy data, for comparing the two libraries' results."""
    if isinstance(value, (list, tuple)):
        return [_np(v) for v in value]
    if isinstance(value, dict):
        return {k: _np(v) for k, v in value.items()}
    if hasattr(value, "detach"):
        return np.asarray(value.detach())
    return value


def _same(ours, theirs, exact=True):
    """Equal values of the same dtype (the NumPy dtype of torch's), recursively."""
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            _same(a, b, exact)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), (ours, theirs)
        for k in theirs:
            _same(ours[k], theirs[k], exact)
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), ours
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours, theirs)
        if exact:
            np.testing.assert_array_equal(ours, theirs)
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    else:
        assert type(ours) is type(theirs) and ours == theirs, (ours, theirs)


def both(code, exact=True):
    """Run `code(lib)` with torch and with tinyformer; their results agree."""
    results = {name: _np(code(_lib(name))) for name in LIBRARIES}
    _same(results["tinyformer"], results["torch"], exact)
    return results["tinyformer"]


# -- creation and dtypes ---------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize(
    "args", [(0, 1, 5), (-3.3, 7.1, 13), (0.1, 0.9, 100), (5, -2, 33), (2.0, 5.0, 1), (0, 1, 0)]
)
def test_linspace_gives_pytorchs_values_to_the_bit(args):
    both(lambda lib: lib.linspace(*args))
    both(lambda lib: lib.linspace(*args, dtype=lib.float64))
    both(lambda lib: lib.linspace(args[0], args[1], steps=args[2], dtype=lib.long))


@needs_torch
def test_dtype_names_make_the_same_dtypes():
    names = ["uint8", "int8", "int16", "int32", "int64", "long", "int", "short", "float16",
             "half", "float32", "float", "float64", "double", "bool"]  # fmt: skip
    for name in names:
        both(lambda lib, name=name: lib.zeros(2, 3, dtype=getattr(lib, name)))
        both(lambda lib, name=name: lib.tensor([1, 0, 3], dtype=getattr(lib, name)))
        both(lambda lib, name=name: lib.ones(2).to(getattr(lib, name)))
    assert tinyformer.tensor([1]).dtype == tinyformer.long
    assert tinyformer.zeros(2, dtype=tinyformer.uint8).type() == "tinyformer.ByteTensor"


@needs_torch
def test_empty_has_the_shape_and_dtype():
    both(lambda lib: lib.empty(2, 3).shape == (2, 3))
    both(lambda lib: lib.empty((4,), dtype=lib.long).dtype == lib.int64)
    x = tinyformer.empty(3, requires_grad=True)
    assert x.requires_grad and x.shape == (3,)


@needs_torch
def test_legacy_constructors():
    both(lambda lib: lib.FloatTensor([1, 2, 3]))
    both(lambda lib: lib.LongTensor([1.7, 2, -3.2]))
    both(lambda lib: lib.DoubleTensor([[1, 2]]))
    both(lambda lib: lib.IntTensor([1, 2]))
    both(lambda lib: lib.BoolTensor([1, 0]))
    both(lambda lib: lib.FloatTensor(np.array([1, 2], np.int64)))
    both(lambda lib: lib.FloatTensor(2, 3).shape)
    both(lambda lib: lib.LongTensor(4).dtype == lib.long)
    both(lambda lib: lib.FloatTensor().shape)
    both(lambda lib: [isinstance(lib.zeros(2), lib.FloatTensor),
                      isinstance(lib.zeros(2), lib.LongTensor),
                      isinstance(lib.zeros(2, dtype=lib.long), lib.LongTensor)])  # fmt: skip
    x = tinyformer.zeros(2)
    assert tinyformer.FloatTensor(x) is x


def test_legacy_constructor_refuses_another_dtype():
    with pytest.raises(TypeError, match=r"FloatTensor: expected a tensor of dtype float32"):
        tinyformer.FloatTensor(tinyformer.zeros(2, dtype=tinyformer.float64))


def test_bfloat16_is_a_clear_error():
    with pytest.raises(AttributeError, match="tinyformer.bfloat16: NumPy.* has no bfloat16"):
        tinyformer.bfloat16  # noqa: B018


def test_randperm_is_a_permutation_from_the_seeded_generator():
    tinyformer.manual_seed(0)
    first = tinyformer.randperm(10)
    tinyformer.manual_seed(0)
    again = tinyformer.randperm(10)
    assert first.dtype == np.int64 and sorted(first.tolist()) == list(range(10))
    assert first.tolist() == again.tolist()
    g = tinyformer.Generator().manual_seed(3)
    tinyformer.manual_seed(0)
    own = tinyformer.randperm(10, generator=g).tolist()
    assert tinyformer.randperm(10).tolist() == first.tolist()  # the global one did not move
    assert tinyformer.randperm(10, generator=tinyformer.Generator().manual_seed(3)).tolist() == own
    assert tinyformer.randperm(0).shape == (0,)
    with pytest.raises(TypeError, match="expected a tinyformer.Generator"):
        tinyformer.randperm(3, generator=np.random.default_rng(0))


# -- 0-d tensors as Python numbers -------------------------------------------------------------


@needs_torch
def test_zero_d_tensors_are_used_as_numbers():
    def code(lib):
        words = ["a", "b", "c", "d", "e"]
        x = lib.arange(10)
        n = lib.tensor(3)
        i = x.argmax() - 7  # a 0-d int64 tensor, as argmax gives
        loss = lib.tensor(0.123456)
        return [
            words[i], words[:n], list(range(n)), x[:n], x[n:], x[lib.tensor([2])],
            f"{loss:.4f}", f"{loss.item():.2e}", f"step {n:4d}", f"{lib.tensor(True)}",
            format(lib.tensor(2.5)), int(lib.tensor(3.9)), float(lib.tensor([[2]])),
            bool(lib.tensor([0.0])), bool(lib.tensor(1)), int(lib.tensor(-2.5)),
            [10, 20, 30][lib.tensor([1])],
        ]  # fmt: skip

    both(code)


def test_index_refuses_floats_and_many_elements_naming_the_tensor():
    with pytest.raises(TypeError, match=r"Tensor.__index__: only integer 0-d tensors can be "
                       r"used as an index; got float32"):  # fmt: skip
        [1, 2, 3][tinyformer.tensor(1.0)]
    with pytest.raises(TypeError, match=r"Tensor.__index__: .*; got float32"):
        tinyformer.arange(5)[: tinyformer.tensor(2.0)]
    with pytest.raises(TypeError, match=r"Tensor.__index__: .*; got shape \(2,\)"):
        range(tinyformer.tensor([1, 2]))


def test_format_spec_and_truth_of_many_elements():
    x = tinyformer.tensor([1.0, 2.0])
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match=r"Tensor.__format__: the format spec '.2f' .* \(2,\)"):
        f"{x:.2f}"
    with pytest.raises(RuntimeError, match=r"Tensor.__bool__: .* shape \(2,\) is ambiguous"):
        bool(x)
    with pytest.raises(ValueError, match=r"Tensor.__float__: only one-element tensors"):
        float(x)


# -- boolean tensors -------------------------------------------------------------------------


@needs_torch
def test_masks_combine_with_logical_operators():
    def code(lib):
        lengths = lib.tensor([3, 5])
        T = 5
        causal = lib.tril(lib.ones(T, T)).bool()  # (T, T)
        padding = lib.arange(T)[None, :] < lengths[:, None]  # (B, T)
        mask = causal[None] & padding[:, None, :]  # (B, T, T)
        scores = lib.arange(2 * T * T, dtype=lib.float32).reshape(2, T, T)
        filled = scores.masked_fill(~mask, float("-inf"))
        either = (scores > 40) | (scores < 3)
        one = (scores > 10) ^ mask
        flags = lib.tensor([True, False])
        ints = lib.tensor([6, 3], dtype=lib.int32)
        return [mask, filled, either, one, True & flags, flags | False, 1 ^ flags,
                ints & 5, ints | lib.tensor([1, 8], dtype=lib.int32), ints ^ 2, ~ints,
                3 & lib.tensor([1, 2]), flags & lib.tensor([1, 1], dtype=lib.uint8),
                mask.logical_not(), lib.tensor([0.0, 2.0]).logical_not(), ~lengths]  # fmt: skip

    both(code)


def test_logical_operators_refuse_float_tensors():
    x = tinyformer.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"Tensor.__and__: & is logical on boolean .* float32"):
        x & (x > 1)
    with pytest.raises(RuntimeError, match=r"Tensor.__ror__: \| .* float"):
        0.5 | (x > 1)
    with pytest.raises(RuntimeError, match=r"Tensor.__invert__: ~ .* as in ~\(x > 0\)"):
        ~x  # noqa: B018
    m = x > 1
    assert not (m & m).requires_grad


def both_with_grads(code, *shapes, seed=0):
    """`code(lib, *leaves)` on float64 leaves drawn from `shapes`: the same output and the same
    gradients of sum(y * y) in both libraries."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    results = {}
    for name in LIBRARIES:
        lib = _lib(name)
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = code(lib, *leaves)
        (y * y).sum().backward()
        results[name] = [np.asarray(y.detach())] + [
            np.zeros(a.shape) if t.grad is None else np.asarray(t.grad)
            for a, t in zip(arrays, leaves)
        ]
    for ours, theirs in zip(results["tinyformer"], results["torch"]):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


# -- tensor methods: div with rounding, scatter, index_fill, nonzero ---------------------------


@needs_torch
def test_div_rounding_modes_and_floor_division():
    def code(lib):
        a = lib.tensor([7, -7, 6, -1, 0, 9])
        b = lib.tensor([2, 2, -4, 3, 5, -2])
        x = lib.tensor([7.5, -7.5, 1.0, -0.25, 3.0, -3.0])
        return [a.div(b, rounding_mode="trunc"), a.div(b, rounding_mode="floor"),
                lib.div(a, b, rounding_mode="floor"), a // b, a // 3, 17 // b, a.div(b), a / 4,
                x.div(2, rounding_mode="trunc"), x.div(-2.0, rounding_mode="floor"), x // 0.5,
                lib.div(x, lib.tensor(0.0), rounding_mode="floor"),
                (lib.arange(12) // 4), lib.arange(12).div(5, rounding_mode="floor"),
                x.add(a, alpha=2), x.sub(1.5), x.mul(a), x.div(b), x.divide(4),
                ]  # fmt: skip

    both(code)


@needs_torch
def test_rounded_division_passes_no_gradient_through_the_rounding():
    def code(lib, x, w):
        # the rounded term adds nothing to x's gradient (PyTorch's is zeros there)
        return x * w + x.div(0.3, rounding_mode="floor") + x.div(w, rounding_mode="trunc")

    both_with_grads(code, (3, 4), (4,))


@needs_torch
def test_scatter_one_hot_and_scatter_of_values_with_gradients():
    def one_hot(lib):
        labels = lib.tensor([2, 0, 3])
        target = lib.zeros(3, 5).scatter(1, labels.unsqueeze(1), 1.0)
        also = lib.zeros(3, 5).scatter_(dim=1, index=labels[:, None], value=2.0)
        ints = lib.zeros(3, 5, dtype=lib.long).scatter_(1, labels.view(-1, 1), 1)
        return [target, also, ints]

    both(one_hot)

    def code(lib, x, src):
        index = lib.tensor([[0, 1, 2, 0], [2, 0, 0, 1]])  # no position written twice
        y = x.scatter(0, index, src)  # src (2, 4): one row of x per index row
        z = lib.scatter(x * 2, dim=1, index=lib.tensor([[3], [0], [1]]), src=src.T[:3, :1])
        return y + z

    both_with_grads(code, (3, 4), (2, 4))

    def in_place(lib, x, src):
        h = x * 1.0  # an op's output: the write is recorded in the graph
        h.scatter_(1, lib.tensor([[1, 0], [2, 3], [0, 1]]), src)
        return h * x

    both_with_grads(in_place, (3, 4), (3, 2))


@needs_torch
def test_index_fill_and_nonzero():
    def values(lib):
        x = lib.arange(12, dtype=lib.float32).view(3, 4)
        picked = x.index_fill(1, lib.tensor([0, 2]), -1.0)
        rows = x.clone().index_fill_(0, lib.tensor([1]), 0.0)
        m = (x.long() // 3) * 3 == x.long()  # multiples of 3
        return [picked, rows, m.nonzero(), m.nonzero(as_tuple=True), x[m.nonzero(as_tuple=True)],
                lib.tensor([0, 3, 0, 1]).nonzero(), lib.tensor(5).nonzero(),
                lib.tensor(0.0).nonzero(as_tuple=True), (x > 5).argwhere(),
                lib.tensor([[1, 0]]).nonzero()[:, 1]]  # fmt: skip

    both(values)

    def code(lib, x, v):
        y = (x * 2).index_fill(0, lib.tensor([1, 2]), 3.0) * v
        h = x + 0
        h.index_fill_(1, lib.tensor([0]), -2.0)
        return y + h

    both_with_grads(code, (4, 3), (3,))


def test_scatter_and_index_fill_errors_name_the_op():
    x = tinyformer.zeros(3, 4)
    with pytest.raises(ValueError, match=r"scatter: reduce='add' is not supported"):
        x.scatter(1, tinyformer.tensor([[0]] * 3), 1.0, reduce="add")
    with pytest.raises(ValueError, match=r"scatter: index 4 is out of range for axis 1"):
        x.scatter(1, tinyformer.tensor([[4]]), 1.0)
    with pytest.raises(ValueError, match=r"scatter: index must be an integer array with x's 2"):
        x.scatter(1, tinyformer.tensor([1, 2]), 1.0)
    with pytest.raises(IndexError, match=r"index_fill: an index in \[5\] is out of range"):
        x.index_fill(0, tinyformer.tensor([5]), 1.0)
    with pytest.raises(ValueError, match=r"div: rounding_mode must be None, 'trunc' or 'floor'"):
        x.div(2, rounding_mode="round")
    with pytest.raises(ZeroDivisionError, match=r"div: integer division by zero"):
        tinyformer.tensor([1, 2]) // 0


# -- buffers are tensors ---------------------------------------------------------------------


def _positional_encoding(lib):
    """The positional encoding of PyTorch's transformer tutorial and the annotated transformer,
    its table a buffer, and nanoGPT's causal mask, a buffer too."""
    import math

    nn = lib.nn

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=16):
            super().__init__()
            position = lib.arange(max_len).unsqueeze(1)
            div_term = lib.exp(lib.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = lib.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = lib.sin(position * div_term)
            pe[:, 0, 1::2] = lib.cos(position * div_term)
            self.register_buffer("pe", pe)
            T = 6
            self.register_buffer("bias", lib.tril(lib.ones(T, T)).view(1, 1, T, T))
            self.register_buffer("scratch", lib.zeros(2), persistent=False)
            self.proj = nn.Linear(d_model, d_model)

        def forward(self, x):
            x = x + self.pe[: x.size(0)].requires_grad_(False)
            T = x.size(0)
            att = self.proj(x).transpose(0, 1) @ x.transpose(0, 1).transpose(1, 2)
            return att.masked_fill(self.bias[0, 0, :T, :T] == 0, 0.0)

    return PositionalEncoding


@needs_torch
def test_buffers_read_back_as_tensors_and_are_saved_and_moved():
    def code(lib):
        lib.manual_seed(0)
        model = _positional_encoding(lib)(8)
        with lib.no_grad():
            for p in model.parameters():
                p.copy_(lib.ones(p.shape) * 0.1)
        x = lib.ones(5, 2, 8)
        y = model(x)
        state = model.state_dict()
        bufs = dict(model.named_buffers())
        moved = model.to(lib.float64)
        return [y, list(state), state["pe"], sorted(bufs), isinstance(model.pe, lib.Tensor),
                model.pe.requires_grad, moved is model, model.pe.dtype == lib.float64,
                model.scratch.dtype == lib.float64, model.bias.dtype == lib.float64,
                model(lib.ones(3, 2, 8, dtype=lib.float64))]  # fmt: skip

    both(code, exact=False)


def test_a_buffer_is_the_tensor_registered_and_load_state_dict_writes_into_it():
    model = _positional_encoding(tinyformer)(4)
    table = tinyformer.zeros(16, 1, 4)
    model.register_buffer("pe", table)
    assert model.pe is table and model.pe.requires_grad_(False) is table
    state = {k: v.numpy() + 1 for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    np.testing.assert_array_equal(table.numpy(), np.ones((16, 1, 4)))
    model.pe = model.pe[:4]  # reassigned: still a buffer, a Tensor
    assert isinstance(model.pe, tinyformer.Tensor) and model.state_dict()["pe"].shape == (4, 1, 4)
    model.register_buffer("plain", np.arange(3))  # an array becomes a Tensor
    assert isinstance(model.plain, tinyformer.Tensor) and model.plain.dtype == np.int64


# -- state_dict of shared submodules; slices of containers -------------------------------------


def _shared_model(lib):
    nn = lib.nn

    class Tied(nn.Module):
        """An encoder reused as the decoder, and a Sequential that holds it again."""

        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(4, 4)
            self.decoder = self.encoder
            self.head = nn.Sequential(self.encoder, nn.ReLU(), nn.Linear(4, 3))
            self.norm = nn.LayerNorm(4)

        def forward(self, x):
            return self.head(self.norm(self.decoder(self.encoder(x))))

    return Tied()


@needs_torch
def test_a_shared_submodule_is_in_state_dict_under_every_name_and_loads_strictly():
    def keys(lib):
        model = _shared_model(lib)
        modules = [n for n, _ in model.named_modules()]
        params = [n for n, _ in model.named_parameters()]
        return [list(model.state_dict()), len(list(model.parameters())), modules, params]

    both(keys)
    torch.manual_seed(0)
    theirs = _shared_model(torch)
    ours = _shared_model(tinyformer)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    want = theirs(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(tinyformer.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


@needs_torch
def test_slices_of_sequential_and_module_list_are_containers():
    def code(lib):
        nn = lib.nn
        lib.manual_seed(0)
        layers = [nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2), nn.Tanh()]
        seq = nn.Sequential(*layers)
        with lib.no_grad():
            for i, p in enumerate(seq.parameters()):
                p.copy_(lib.ones(p.shape) * (0.1 * i - 0.2))
        tail, head = seq[2:], seq[:-2]
        blocks = nn.ModuleList(layers)[1::2]
        named = nn.Sequential(OrderedDict(fc=nn.Linear(2, 2), act=nn.ReLU()))
        x = lib.ones(1, 3)
        return [type(tail).__name__, type(head).__name__, type(blocks).__name__,
                list(tail.state_dict()), len(blocks), blocks[1] is layers[3], tail(head(x)),
                seq(x), seq[-1] is layers[3], list(named.state_dict()), len(seq[5:])]  # fmt: skip

    both(code, exact=False)


# -- utils.data --------------------------------------------------------------------------------


def _squares(lib):
    """A map-style dataset as tutorials write one."""

    class Squares(lib.utils.data.Dataset):
        def __init__(self, n):
            self.x = lib.arange(n * 2, dtype=lib.float32).view(n, 2)
            self.y = lib.arange(n) // 3

        def __len__(self):
            return len(self.x)

        def __getitem__(self, idx):
            return self.x[idx] ** 2, self.y[idx]

    return Squares(10)


@needs_torch
def test_data_loader_batches_in_order_with_drop_last_and_samplers():
    def code(lib):
        data = lib.utils.data
        ds = _squares(lib)
        pairs = data.TensorDataset(lib.arange(6.0), lib.arange(6) * 10)
        out = [len(ds), [[x, y] for x, y in data.DataLoader(ds, batch_size=4)]]
        out += [[b for b in data.DataLoader(ds, batch_size=3, drop_last=True)]]
        out += [len(data.DataLoader(ds, batch_size=3)), len(data.DataLoader(ds, 3, drop_last=True))]
        out += [[b for b in data.DataLoader(pairs, batch_size=4, shuffle=False)]]
        unbatched = list(data.DataLoader(pairs, batch_size=None))
        out += [unbatched, type(unbatched[0]).__name__]
        seq = data.SequentialSampler(pairs)
        out += [list(seq), list(data.BatchSampler(seq, 4, drop_last=False))]
        out += [list(data.BatchSampler(range(7), 3, True)), len(data.BatchSampler(seq, 4, False))]
        by_sampler = data.DataLoader(pairs, batch_size=2, sampler=[5, 0, 3])
        by_batches = data.DataLoader(pairs, batch_sampler=[[1, 2], [4], [0, 5, 3]])
        out += [list(by_sampler), list(by_batches), len(by_batches)]
        subset = data.Subset(pairs, [4, 1])
        out += [len(subset), subset[1], list(data.DataLoader(subset, batch_size=2))]
        return out

    both(code)


@needs_torch
def test_default_collate_joins_numbers_arrays_tuples_and_dicts():
    from collections import namedtuple

    Point = namedtuple("Point", "x y")

    def code(lib):
        collate = lib.utils.data.default_collate
        samples = [
            {"image": np.full((2, 2), i, np.float32), "label": i, "weight": 0.5 * i,
             "name": f"s{i}", "pair": (lib.tensor([i, i + 1]), i % 2 == 0),
             "point": Point(float(i), np.int32(i)), "tokens": [i, 2 * i]}
            for i in range(3)
        ]  # fmt: skip
        batch = collate(samples)
        loader = lib.utils.data.DataLoader(samples, batch_size=2)
        return [batch, list(loader), type(batch["point"]).__name__,
                collate([np.float64(1.5), np.float64(2.0)]), collate([True, False])]  # fmt: skip

    both(code)


@needs_torch
def test_a_training_loop_over_a_data_loader_gives_pytorchs_gradients():
    def run(lib):
        nn, data = lib.nn, lib.utils.data
        rng = np.random.default_rng(0)
        x = lib.tensor(rng.standard_normal((10, 3)), dtype=lib.float64)
        y = lib.tensor(rng.integers(0, 2, 10))
        model = nn.Linear(3, 2).double()
        with lib.no_grad():
            model.weight.copy_(lib.tensor(rng.standard_normal((2, 3))))
            model.bias.zero_()
        total = []
        for xb, yb in data.DataLoader(data.TensorDataset(x, y), batch_size=4, collate_fn=None):
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            total.append(loss.detach())
        return [total, model.weight.grad, model.bias.grad]

    both(run, exact=False)


def test_shuffling_draws_a_permutation_from_the_seeded_generator():
    data = tinyformer.utils.data
    ds = data.TensorDataset(tinyformer.arange(10))

    def epoch(loader):
        return [i for (batch,) in loader for i in batch.tolist()]

    tinyformer.manual_seed(0)
    loader = data.DataLoader(ds, batch_size=3, shuffle=True)
    first, second = epoch(loader), epoch(loader)
    assert sorted(first) == sorted(second) == list(range(10)) and first != second
    tinyformer.manual_seed(0)
    assert epoch(loader) == first  # the same seed, the same order
    g = tinyformer.Generator().manual_seed(7)
    own = epoch(data.DataLoader(ds, batch_size=3, shuffle=True, generator=g))
    again = data.DataLoader(ds, 4, shuffle=True, generator=tinyformer.Generator().manual_seed(7))
    assert epoch(again) == own and sorted(own) == list(range(10))
    sampler = data.RandomSampler(ds, replacement=True, num_samples=25, generator=g)
    assert len(list(sampler)) == 25 == len(sampler) and set(sampler) <= set(range(10))
    assert len(list(data.RandomSampler(ds, num_samples=25))) == 25
    parts = data.random_split(ds, [7, 3], generator=tinyformer.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [7, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    assert [len(p) for p in data.random_split(ds, [0.5, 0.3, 0.2])] == [5, 3, 2]
    assert sorted(data.SubsetRandomSampler([3, 5, 8], generator=g)) == [3, 5, 8]


def test_data_loader_errors_say_what_to_do():
    data = tinyformer.utils.data
    ds = data.TensorDataset(tinyformer.arange(4))
    with pytest.warns(UserWarning, match=r"DataLoader: num_workers=2 runs as 0 here"):
        workers = data.DataLoader(ds, batch_size=2, num_workers=2, pin_memory=True)
    plain = data.DataLoader(ds, batch_size=2)
    assert all(np.array_equal(a.data, b.data) for x, y in zip(workers, plain) for a, b in zip(x, y))
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        data.DataLoader(ds, batch_size=2, num_workers=-1)
    with pytest.raises(ValueError, match=r"sampler option is mutually exclusive with shuffle"):
        data.DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match=r"batch_sampler option is mutually exclusive"):
        data.DataLoader(ds, batch_size=2, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match=r"TensorDataset: needs tensors of one length"):
        data.TensorDataset(tinyformer.zeros(3), tinyformer.zeros(4))
    with pytest.raises(ValueError, match=r"random_split: the lengths \[3, 3\] sum to 6"):
        data.random_split(ds, [3, 3])
    with pytest.raises(TypeError, match=r"default_collate: batch must contain tensors"):
        data.default_collate([object(), object()])
    with pytest.raises(RuntimeError, match=r"each element in list of batch should be of equal"):
        data.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match=r"expected a tinyformer.Generator"):
        data.RandomSampler(ds, generator=np.random.default_rng(0))


def test_an_iterable_dataset_is_batched_as_it_streams():
    data = tinyformer.utils.data

    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    batches = [b.tolist() for b in data.DataLoader(Stream(), batch_size=3)]
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in data.DataLoader(Stream(), 3, drop_last=True)] == batches[:2]
    assert list(data.DataLoader(Stream(), batch_size=None)) == list(range(7))
    with pytest.raises(ValueError, match=r"an IterableDataset yields its own order"):
        data.DataLoader(Stream(), shuffle=True)


# -- inference_mode, save and load ---------------------------------------------------------------


@needs_torch
def test_inference_mode_as_context_manager_and_decorator():
    def code(lib):
        w = lib.ones(3, requires_grad=True)

        @lib.inference_mode()
        def predict(x):
            return x * w

        @lib.inference_mode
        def bare(x):
            return x * w

        with lib.inference_mode():
            inside = [(w * 2).requires_grad, lib.is_inference_mode_enabled(), lib.is_grad_enabled()]
        with lib.inference_mode(False):
            off = (w * 2).requires_grad
        return [inside, off, predict(lib.ones(3)).requires_grad, bare(lib.ones(3)),
                (w * 2).requires_grad, lib.is_inference_mode_enabled()]  # fmt: skip

    both(code)


def _fixed_model(lib, seed):
    nn = lib.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model.register_buffer("scale", lib.ones(2) * 0.5)
    rng = np.random.default_rng(seed)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)), dtype=lib.float32))
    return model


@needs_torch
def test_save_and_load_a_state_dict_and_a_training_checkpoint(tmp_path):
    def code(lib):
        model = _fixed_model(lib, 0)
        optimizer = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss = model(lib.ones(1, 3)).sum()
        loss.backward()
        optimizer.step()
        path = tmp_path / f"{lib.__name__}_model.pth"
        lib.save(model.state_dict(), path)
        lib.save({"epoch": 5, "model_state_dict": model.state_dict(), "loss": loss.detach(),
                  "history": [1.5, 2.5], "pair": (3, "x")}, tmp_path / "ckpt.tar")  # fmt: skip
        fresh = _fixed_model(lib, 1)
        fresh.load_state_dict(lib.load(path, weights_only=True))
        fresh.eval()
        checkpoint = lib.load(tmp_path / "ckpt.tar", map_location="cpu")
        again = _fixed_model(lib, 2)
        again.load_state_dict(checkpoint["model_state_dict"])
        x = lib.ones(2, 3)
        loss = checkpoint["loss"]
        return [fresh(x), again(x), list(checkpoint), checkpoint["epoch"], loss,
                checkpoint["history"], checkpoint["pair"], isinstance(loss, lib.Tensor),
                list(lib.load(path))]  # fmt: skip

    both(code, exact=False)


def test_save_keeps_types_and_parameters_and_writes_no_pickle(tmp_path):
    model = _fixed_model(tinyformer, 0)
    obj = {0: [np.arange(3)], "w": model[0].weight, "nan": float("nan"), None: True, 2.5: "x",
           "t": tinyformer.ones(2, requires_grad=True), "n": np.float32(1.5)}  # fmt: skip
    tinyformer.save(obj, tmp_path / "obj.pt")
    back = tinyformer.load(tmp_path / "obj.pt")
    assert list(back) == list(obj) and back[None] is True and back[2.5] == "x"
    assert type(back[0][0]) is np.ndarray and back[0][0].tolist() == [0, 1, 2]
    assert isinstance(back["w"], tinyformer.nn.Parameter) and back["w"].requires_grad
    assert back["t"].requires_grad and math.isnan(back["nan"]) and back["n"] == 1.5
    with zipfile.ZipFile(tmp_path / "obj.pt") as archive:
        assert not any(name.endswith(".pkl") for name in archive.namelist())
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "obj.pt"]
    assert leftovers == []  # written to a temporary file, then renamed


def test_save_and_load_refuse_what_cannot_be_stored_safely(tmp_path):
    model = _fixed_model(tinyformer, 0)
    with pytest.raises(TypeError, match=r"save: obj is a Sequential; .* save obj.state_dict\(\)"):
        tinyformer.save(model, tmp_path / "m.pt")
    with pytest.raises(TypeError, match=r"save: cannot save obj\['f'\]\[0\], a function"):
        tinyformer.save({"f": [lambda: 0]}, tmp_path / "m.pt")
    with pytest.raises(TypeError, match=r"save: obj has the key \(1, 2\) \(tuple\)"):
        tinyformer.save({(1, 2): 0}, tmp_path / "m.pt")
    with pytest.raises(TypeError, match=r"save: give a file path .* got BytesIO"):
        tinyformer.save({}, io.BytesIO())
    assert not (tmp_path / "m.pt").exists()
    with pytest.raises(FileNotFoundError, match=r"load: no file at"):
        tinyformer.load(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match=r"load: .* is not a tinyformer checkpoint"):
        (tmp_path / "text.pt").write_text("hello")
        tinyformer.load(tmp_path / "text.pt")
    pickled = tmp_path / "pickle.pt"
    pickled.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match=r"is a PyTorch file \(a pickle\); tinyformer never "
                       r"unpickles"):  # fmt: skip
        tinyformer.load(pickled)


@needs_torch
def test_a_pytorch_file_is_refused_and_its_safetensors_form_loads(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "torch.pt")
    with pytest.raises(ValueError, match=r"torch.pt is a PyTorch file .* save_file\(torch.load"):
        tinyformer.load(tmp_path / "torch.pt")
    tinyformer.safetensors.save_file({"w": np.arange(3.0)}, tmp_path / "w.safetensors")
    loaded = tinyformer.load(tmp_path / "w.safetensors")
    assert isinstance(loaded["w"], tinyformer.Tensor) and loaded["w"].tolist() == [0, 1, 2]


# -- makemore-style code: a seeded generator, an endless loader --------------------------------


@needs_torch
@pytest.mark.filterwarnings("ignore:'pin_memory' argument")  # torch's, on a machine without GPU
def test_makemore_style_sampling_and_endless_loader_run_with_either_library():
    def code(lib):
        lib.manual_seed(42)
        lib.cuda.manual_seed_all(42)
        g = lib.Generator().manual_seed(2147483647)
        W = lib.randn((27, 27), generator=g, requires_grad=True)
        xs = lib.tensor([0, 5, 13, 13, 1])
        xenc = lib.nn.functional.one_hot(xs, num_classes=27).float()
        probs = (xenc @ W).exp()
        probs = probs / probs.sum(1, keepdims=True)
        ix = lib.multinomial(probs[0], num_samples=1, replacement=True, generator=g).item()
        idx = lib.randint(0, 5, (32,), generator=g)
        words = lib.randperm(7).tolist()

        class Names(lib.utils.data.Dataset):
            def __len__(self):
                return 5

            def __getitem__(self, i):
                x = lib.zeros(4, dtype=lib.long)
                y = lib.zeros(4, dtype=lib.long)
                x[1:] = i
                y[:3] = i + 1
                y[3:] = -1
                return x, y

        ds = Names()
        sampler = lib.utils.data.RandomSampler(ds, replacement=True, num_samples=int(1e10))
        loader = lib.utils.data.DataLoader(ds, sampler=sampler, batch_size=8, pin_memory=True)
        batches = iter(loader)
        X, Y = next(batches)
        X, Y = [t.to("cpu") for t in next(batches)]
        return [probs.shape, 0 <= ix < 27, tuple(idx.shape), idx.dtype == lib.long,
                sorted(words), tuple(X.shape), tuple(Y.shape), bool((Y[:, 3] == -1).all()),
                bool((X[:, 1] + 1 == Y[:, 0]).all())]  # fmt: skip

    both(code)


@needs_torch
def test_narrow_index_select_and_sort_with_gradients():
    def code(lib, x, w):
        batched = x.narrow(0, 0, 4).view(2, -1).t().contiguous()  # the word-LM batchify
        rows = x.index_select(0, lib.tensor([2, 0, 2]))  # a repeated row sums its gradients
        values, indices = (x * w).sort(dim=1, descending=True)
        last = x.narrow(1, -2, 2)
        parts = [batched, rows, values, indices.double(), last, x.sort(0).values[0]]
        return lib.cat([p.reshape(-1) for p in parts])

    both_with_grads(code, (5, 3), (3,))


def test_narrow_and_index_select_errors_name_the_method():
    x = tinyformer.zeros(3, 4)
    # a NumPy index is data (its .data attribute is a buffer, not the array)
    assert x.index_select(1, np.array([2, 0])).shape == (3, 2)
    with pytest.raises(IndexError, match=r"narrow: start 2 and length 3 do not fit in dim 0"):
        x.narrow(0, 2, 3)
    with pytest.raises(IndexError, match=r"index_select: an index in \[4\] is out of range"):
        x.index_select(1, tinyformer.tensor([4]))
    with pytest.raises(IndexError, match=r"index_select: dim 2 is out of range"):
        x.index_select(2, tinyformer.tensor([0]))


@needs_torch
def test_function_forms_and_dtype_limits():
    def code(lib):
        x = lib.tensor([[3.0, 0.0, 1.0], [0.0, 2.0, 5.0]])
        big = lib.finfo(x.dtype).max
        masked = x.masked_fill(x == 0, -lib.finfo(lib.float32).max)
        return [lib.nonzero(x), lib.nonzero(x, as_tuple=True), lib.argwhere(x > 1),
                list(lib.unbind(x, 1)), lib.narrow(x, 1, 1, 2),
                lib.index_select(x, 1, lib.tensor([2, 0])),
                list(lib.sort(x, dim=1, descending=True)), lib.flip(x, [0]), lib.numel(x),
                float(big), float(lib.finfo().eps), float(lib.finfo(lib.float64).tiny),
                int(lib.iinfo(lib.int64).max), int(lib.iinfo(lib.uint8).min), masked]  # fmt: skip

    both(code)


# -- the lecture-video GPT, as written -------------------------------------------------------


def _lecture_gpt(torch_like, vocab_size=11, n_embd=16, n_head=2, n_layer=2, block_size=8):
    """The bigram-to-GPT lecture's model, its code as in the video (dropout 0 for the check)."""
    torch, nn, F = torch_like, torch_like.nn, torch_like.nn.functional
    dropout = 0.0

    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = F.softmax(wei, dim=-1)
            wei = self.dropout(wei)
            return wei @ self.value(x)

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, n_embd)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            out = torch.cat([h(x) for h in self.heads], dim=-1)
            return self.dropout(self.proj(out))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.sa = MultiHeadAttention(n_head, n_embd // n_head)
            self.ffwd = nn.Sequential(
                nn.Linear(n_embd, 4 * n_embd), nn.ReLU(), nn.Linear(4 * n_embd, n_embd),
                nn.Dropout(dropout),
            )  # fmt: skip
            self.ln1 = nn.LayerNorm(n_embd)
            self.ln2 = nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.sa(self.ln1(x))
            return x + self.ffwd(self.ln2(x))

    class GPTLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
            self.position_embedding_table = nn.Embedding(block_size, n_embd)
            self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size)
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(torch.arange(T, device=idx.device))
            x = self.ln_f(self.blocks(tok_emb + pos_emb))
            logits = self.lm_head(x)
            if targets is None:
                return logits, None
            B, T, C = logits.shape
            return logits, F.cross_entropy(logits.view(B * T, C), targets.view(B * T))

        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                logits, loss = self(idx[:, -block_size:])
                probs = F.softmax(logits[:, -1, :], dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPTLanguageModel()


@needs_torch
def test_the_lecture_gpt_loads_pytorchs_weights_and_gives_its_loss_and_gradients():
    torch.manual_seed(1337)
    theirs = _lecture_gpt(torch)
    ours = _lecture_gpt(tinyformer)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    data = torch.randint(11, (40,))
    ix = torch.randint(len(data) - 8, (4,))
    results = []
    for lib, model in ((torch, theirs), (tinyformer, ours)):
        d = lib.tensor(data.numpy())
        x = lib.stack([d[i : i + 8] for i in lib.tensor(ix.numpy())])  # 0-d tensors as bounds
        y = lib.stack([d[i + 1 : i + 9] for i in lib.tensor(ix.numpy())])
        logits, loss = model(x, y)
        loss.backward()
        grads = {n: np.asarray(p.grad) for n, p in model.named_parameters()}
        sampled = model.generate(lib.zeros((1, 1), dtype=lib.long), max_new_tokens=5)[0].tolist()
        results.append((np.asarray(logits.detach()), f"{loss:.4f}", grads, len(sampled)))
    (l1, s1, g1, n1), (l2, s2, g2, n2) = results
    np.testing.assert_allclose(l2, l1, rtol=1e-5, atol=1e-7)
    assert s1 == s2 and n1 == n2 == 6 and list(g1) == list(g2)
    for name in g1:
        np.testing.assert_allclose(g2[name], g1[name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_backends_switches_are_accepted_and_say_what_they_are():
    backends = tinyformer.backends
    backends.cudnn.benchmark = True  # as training scripts write before their loop
    backends.cudnn.deterministic = True
    assert backends.cudnn.benchmark and not backends.mps.is_available()
    assert not backends.cudnn.is_available() and "not used by tinyformer" in repr(backends.mps)
    backends.cudnn.benchmark = backends.cudnn.deterministic = False


@needs_torch
def test_remainder_as_python_and_pytorch_take_it():
    def values(lib):
        i = lib.arange(-5, 6)
        x = lib.tensor([5.5, -5.5, 2.0, -0.25])
        return [i % 3, i % -3, i.remainder(4), 7 % lib.tensor([2, -3, 5]), x % 2, x % -1.5,
                lib.remainder(x, lib.tensor([1.5, 2.0, 0.75, 3.0])),
                lib.arange(8) % 2 == 0]  # fmt: skip

    both(values)

    def code(lib, x, w):
        return (x * 3) % (w.abs() + 0.5) + x.remainder(0.7)

    both_with_grads(code, (3, 4), (4,))


def test_integer_remainder_by_zero_is_an_error():
    with pytest.raises(ZeroDivisionError, match=r"remainder: integer division by zero"):
        tinyformer.arange(3) % 0


def test_logical_operators_keep_a_device_tensor_on_its_device():
    from tinyformer import backend

    x = tinyformer.arange(6).to("fake")
    mask = (x > 1) & ~(x > 4) | (x == 0) ^ (x < 0)
    assert mask.device == backend.device("fake")
    assert backend.to_host(mask.data).tolist() == [True, False, True, True, True, False]
    both_on_device = mask & (x < 3).data  # a device array operand: read its dtype, not NumPy's
    assert backend.to_host(both_on_device.data).tolist() == [True, False, True, False, False, False]
    with pytest.raises(RuntimeError, match=r"Tensor.__and__: .* got float32"):
        x.float() & mask
