"""einops on tinyformer tensors: values against einops on NumPy arrays, gradients by gradcheck,
the Rearrange / Reduce layers, a small lucidrains-style ViT that trains, and the error without
einops."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn

try:  # the model below is written as lucidrains writes his; its tests skip without einops
    from einops import rearrange, reduce, repeat
except ImportError:
    rearrange = reduce = repeat = None


@pytest.fixture
def einops():
    return pytest.importorskip("einops")


def _array(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


# (function, input shapes, pattern, extra arguments): rearrange's compositions, ellipsis and
# anonymous axes; repeat's new and tiled axes; every reduction, with a pooling pattern
CASES = [
    ("rearrange", [(2, 3, 8, 8)], "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", {"p1": 4, "p2": 4}),
    ("rearrange", [(2, 5, 12)], "b n (h d) -> b h n d", {"h": 3}),
    ("rearrange", [(2, 3, 5, 4)], "b h n d -> b n (h d)", {}),
    ("rearrange", [(2, 3, 4)], "b ... -> ... b", {}),
    ("rearrange", [(6, 1, 4)], "(a b) 1 c -> a c b", {"a": 2}),
    ("rearrange", [(3, 4), (3, 4)], "n a b -> a (n b)", {}),  # a list of tensors: stacked
    ("repeat", [(1, 1, 6)], "1 1 d -> b 1 d", {"b": 5}),
    ("repeat", [(3, 4)], "h w -> (r h) (w c)", {"r": 2, "c": 3}),
    ("repeat", [(3,)], "d -> b d k", {"b": 2, "k": 4}),
    ("reduce", [(2, 5, 6)], "b n d -> b d", {"reduction": "mean"}),
    ("reduce", [(2, 4, 6, 3)], "b (h 2) (w 2) c -> b h w c", {"reduction": "max"}),
    ("reduce", [(2, 3, 4, 5)], "b c h w -> c", {"reduction": "sum"}),
    ("reduce", [(2, 3, 4)], "a b c -> b", {"reduction": "min"}),
]


def _call(name: str, xs: list, pattern: str, kwargs: dict):
    import einops

    x = xs if len(xs) > 1 else xs[0]
    if name == "reduce":
        kwargs = dict(kwargs)
        return einops.reduce(x, pattern, kwargs.pop("reduction"), **kwargs)
    return getattr(einops, name)(x, pattern, **kwargs)


@pytest.mark.parametrize("name, shapes, pattern, kwargs", CASES)
def test_values_equal_einops_on_numpy(einops, name, shapes, pattern, kwargs):
    arrays = [_array(*shape, seed=i) for i, shape in enumerate(shapes)]
    got = _call(name, [tf.tensor(a) for a in arrays], pattern, kwargs)
    want = _call(name, arrays, pattern, kwargs)
    assert isinstance(got, tf.Tensor) and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name, shapes, pattern, kwargs", CASES)
def test_gradients_by_gradcheck(einops, name, shapes, pattern, kwargs):
    xs = [tf.tensor(_array(*shape, seed=i), requires_grad=True) for i, shape in enumerate(shapes)]
    assert tf.gradcheck(lambda *xs: _call(name, list(xs), pattern, kwargs), xs)


def test_repeat_sums_the_gradients_of_its_copies(einops):
    x = tf.tensor(_array(1, 1, 4), requires_grad=True)
    repeat(x, "1 1 d -> b n d", b=3, n=2).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full((1, 1, 4), 6.0))


def test_einsum_and_other_entry_points(einops):
    a, b = _array(2, 3), _array(3, 4, seed=1)
    got = einops.einsum(tf.tensor(a), tf.tensor(b), "i k, k j -> i j")
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-12)
    packed, ps = einops.pack([tf.tensor(a), tf.tensor(a[:, 0])], "i *")
    assert isinstance(packed, tf.Tensor) and packed.shape == (2, 4)
    assert einops.parse_shape(tf.zeros(2, 3), "b d") == {"b": 2, "d": 3}
    assert reduce(tf.tensor(a), "i k -> i", "any").dtype == np.bool_
    xs = [tf.tensor(a, requires_grad=True), tf.tensor(b, requires_grad=True)]
    assert tf.gradcheck(lambda a, b: einops.einsum(a, b, "i k, k j -> i j"), xs)
    assert tf.gradcheck(lambda a, b: einops.pack([a, b.T], "* k")[0], xs)


def test_prod_is_looked_up_when_called(einops, monkeypatch):
    x = tf.tensor(_array(2, 3, 4), requires_grad=True)
    monkeypatch.delattr(tf.ops, "prod", raising=False)
    with pytest.raises(NotImplementedError, match="needs tinyformer.ops.prod"):
        reduce(x, "a b c -> b", "prod")

    calls = []

    def prod(x, axes):  # a stand-in added after import: the backend must still find it
        calls.append(axes)
        return tf.ops.sum(x, axes)

    monkeypatch.setattr(tf.ops, "prod", prod, raising=False)
    out = reduce(x, "a b c -> b", "prod")
    assert len(calls) == 1 and len(calls[0]) == 2  # both axes in one op
    np.testing.assert_allclose(out.numpy(), x.numpy().sum(axis=(0, 2)))


def test_prod_values_and_gradients(einops):
    if not hasattr(tf.ops, "prod"):
        pytest.skip("this tinyformer has no ops.prod")
    a = _array(2, 4, 3)
    x = tf.tensor(a, requires_grad=True)
    np.testing.assert_allclose(
        reduce(x, "a (b 2) c -> b", "prod").numpy(), einops.reduce(a, "a (b 2) c -> b", "prod")
    )
    assert tf.gradcheck(lambda x: reduce(x, "a (b 2) c -> b", "prod"), x)


def test_layers_in_a_sequential_have_no_state(einops):
    patches = nn.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=2, p2=2)
    pool = nn.Reduce("b n d -> b d", "mean")
    model = nn.Sequential(patches, nn.Linear(12, 5), pool)
    x = tf.tensor(_array(2, 3, 4, 6))
    want = einops.reduce(
        model[1](tf.tensor(einops.rearrange(x.numpy(), patches.pattern, p1=2, p2=2))).numpy(),
        "b n d -> b d",
        "mean",
    )
    np.testing.assert_allclose(model(x).numpy(), want, rtol=1e-6)
    assert list(model.state_dict()) == ["1.weight", "1.bias"]
    assert not list(patches.parameters()) and not list(pool.parameters())
    assert repr(patches) == "Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=2, p2=2)"
    assert "(2): Reduce('b n d -> b d', 'mean')" in repr(model)
    model.eval()
    assert not model[0].training
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        np.testing.assert_allclose(clone(x).numpy(), model(x).numpy())


def test_layers_name_the_pattern_in_their_errors(einops):
    layer = nn.Rearrange("b c h w -> b (c h w)")
    with pytest.raises(einops.EinopsError, match=r"takes a tensor of 4 axes.*\(2, 3\)"):
        layer(tf.zeros(2, 3))
    with pytest.raises(einops.EinopsError, match="b n d -> b d"):
        nn.Reduce("b n d -> b d", "median")
    with pytest.raises(einops.EinopsError, match="takes a tensor of 1 to 8 axes"):
        nn.Rearrange("b ... -> ... b")(tf.zeros(()))


# -- a small ViT in lucidrains' idioms (vit-pytorch's vit.py), written for this test ----------


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x: tf.Tensor) -> tf.Tensor:
        qkv = self.to_qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in qkv)
        attn = (tf.matmul(q, k.transpose(-1, -2)) * self.scale).softmax(dim=-1)
        return self.to_out(rearrange(tf.matmul(attn, v), "b h n d -> b n (h d)"))


class TinyViT(nn.Module):
    def __init__(self, image: int = 8, patch: int = 4, channels: int = 3, dim: int = 16,
                 depth: int = 2, heads: int = 2, classes: int = 3) -> None:  # fmt: skip
        super().__init__()
        patch_dim, n = channels * patch * patch, (image // patch) ** 2
        self.to_patch_embedding = nn.Sequential(
            nn.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch, p2=patch),
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
        )
        self.cls_token = nn.Parameter(tf.randn(1, 1, dim))
        self.pos_embedding = nn.Parameter(tf.randn(1, n + 1, dim) * 0.02)
        mlp = [nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(),
                             nn.Linear(2 * dim, dim)) for _ in range(depth)]  # fmt: skip
        self.layers = nn.ModuleList(nn.ModuleList([Attention(dim, heads), ff]) for ff in mlp)
        self.pool = nn.Reduce("b n d -> b d", "mean")
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, classes))

    def forward(self, img: tf.Tensor) -> tf.Tensor:
        x = self.to_patch_embedding(img)
        cls_tokens = repeat(self.cls_token, "1 1 d -> b 1 d", b=x.shape[0])
        x = tf.cat((cls_tokens, x), dim=1) + self.pos_embedding
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.mlp_head(self.pool(x))


def test_a_lucidrains_style_vit_trains(einops):
    tf.manual_seed(0)
    model = TinyViT()
    images, labels = tf.randn(8, 3, 8, 8), tf.randint(0, 3, (8,))
    opt = tf.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = F.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert model.cls_token.grad is not None and np.abs(model.cls_token.grad).sum() > 0
    assert losses[-1] < 0.25 * losses[0], losses
    assert not any(k.startswith(("pool", "to_patch_embedding.0")) for k in model.state_dict())


def test_on_a_device_tensors_stay_there_and_match_the_host(einops):
    from tinyformer import registry
    from tinyformer.fake_device import FakeArray

    def run(device):
        tf.manual_seed(0)
        model = TinyViT().to(device)
        images, labels = tf.randn(2, 3, 8, 8).to(device), tf.tensor([0, 2]).to(device)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        return loss, model.cls_token.grad

    with registry.prefer(registry.REFERENCE):  # the fake device runs the references too
        host = run("cpu")
    fake = run("fake")
    assert isinstance(fake[0].data, FakeArray) and isinstance(fake[1], FakeArray)
    assert fake[0].item() == pytest.approx(host[0].item(), rel=1e-5)
    np.testing.assert_allclose(fake[1].get(), host[1], rtol=1e-4, atol=1e-6)


# -- registration, and einops missing ---------------------------------------------------------


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_tinyformer_is_enough_for_einops_to_take_its_tensors(einops):
    done = _run(
        "import tinyformer, einops\n"
        "print(einops.rearrange(tinyformer.zeros(2, 3), 'a b -> b a').shape)"
    )
    assert done.returncode == 0 and done.stdout.strip() == "(3, 2)", done.stderr


def test_without_einops_tinyformer_imports_and_the_layers_say_how_to_install_it():
    done = _run(
        "import sys\n"
        "sys.modules['einops'] = None  # as if einops were not installed\n"
        "import tinyformer, tinyformer.nn as nn\n"
        "assert 'tinyformer.einops_backend' not in sys.modules\n"
        "for build in (lambda: nn.Rearrange('a b -> b a'), lambda: nn.Reduce('a b -> a', 'sum')):\n"
        "    try:\n"
        "        build()\n"
        "    except ImportError as e:\n"
        "        print(e)\n"
        "try:\n"
        "    import tinyformer.einops_backend\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tinyformer.nn.Rearrange needs einops, which is not installed")
    assert lines[1].startswith("tinyformer.nn.Reduce needs einops")
    assert len(lines) == 3 and all("pip install einops" in line for line in lines)
    assert all("tinyformer[einops]" in line for line in lines)
