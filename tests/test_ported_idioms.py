"""The idioms of PyTorch code people port (nanoGPT's model.py, lucidrains' vit.py and
simple_vit.py), written here in the same style, run on tinyformer as written. The real files run
through benchmarks/port_check.py, which changes only their import lines (its rewriting is tested
here too)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import tinyformer as torch  # as ported code imports it
from tinyformer import nn
from tinyformer.nn import functional as F

ROOT = Path(__file__).resolve().parents[1]


def _port_check():
    spec = importlib.util.spec_from_file_location("port_check", ROOT / "benchmarks/port_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_import_lines_are_rewritten():
    source = (
        "import math\nimport torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n"
        "from torch import nn\nfrom torch.nn import Module, ModuleList\n"
        "from einops import rearrange, repeat\nfrom einops.layers.torch import Rearrange\n"
        "x = torch.zeros(3)  # import torch stays torch here\n"
    )
    rewritten, changed = _port_check().rewrite_imports(source)
    assert rewritten.splitlines() == [
        "import math", "import tinyformer as torch", "import tinyformer.nn as nn",
        "from tinyformer.nn import functional as F", "from tinyformer import nn",
        "from tinyformer.nn import Module, ModuleList", "from einops import rearrange, repeat",
        "from tinyformer.nn import Rearrange",
        "x = torch.zeros(3)  # import torch stays torch here",
    ]  # fmt: skip
    assert len(changed) == 6


@torch.no_grad()
def top_k_sample(logits, top_k):
    """nanoGPT's sampling step: mask all but the k likeliest logits in place, then sample."""
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    logits[logits < v[:, [-1]]] = -float("Inf")
    probs = F.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1), probs


def test_top_k_sampling_writes_the_logits_in_place():
    torch.manual_seed(0)
    logits = torch.randn(4, 10)
    idx, probs = top_k_sample(logits, 3)
    assert idx.shape == (4, 1) and ((probs.numpy() > 0).sum(-1) == 3).all()
    kept = np.take_along_axis(probs.numpy(), idx.numpy(), -1)
    assert (kept > 0).all()  # only the top 3 are ever drawn


def posemb_sincos_2d(h, w, dim, temperature: int = 10000, dtype=torch.float32):
    """simple_vit's 2-D sine-cosine positions, in its style: meshgrid, integer arange divided
    by an int, an int raised to a tensor, sin and cos, .type()."""
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature**omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    pe = torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)
    return pe.type(dtype)


def test_sincos_positions_as_simple_vit_writes_them():
    pe = posemb_sincos_2d(3, 4, 8)
    assert pe.shape == (12, 8) and pe.dtype == np.float32
    omega = 1.0 / 10000 ** (np.arange(2) / 1)
    ys, xs = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    x, y = xs.reshape(-1, 1) * omega, ys.reshape(-1, 1) * omega
    expected = np.concatenate([np.sin(x), np.cos(x), np.sin(y), np.cos(y)], axis=1)
    np.testing.assert_allclose(pe.numpy(), expected, rtol=1e-6, atol=1e-6)


class TinyViTPatches(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(4, dim)
        self.pos_embedding = posemb_sincos_2d(2, 2, dim)

    def forward(self, img):
        device = img.device
        x = self.proj(img.reshape(img.shape[0], 4, 4).transpose(1, 2))
        x += self.pos_embedding.to(device, dtype=x.dtype)  # a non-leaf: a new tensor, as x = x + p
        return x.mean(dim=1)


def test_augmented_assignment_follows_pytorch():
    model = TinyViTPatches()
    img = torch.randn(2, 1, 4, 4, requires_grad=True)
    model(img).sum().backward()
    assert img.grad is not None and model.proj.weight.grad is not None
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w = model.proj.weight
        w += 1.0  # a parameter, with grad mode on: refused, as in PyTorch


def test_weights_load_through_state_dict_values_as_from_pretrained_does():
    model = nn.Linear(3, 2)
    sd = model.state_dict()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    with torch.no_grad():
        sd["weight"].copy_(torch.tensor(w.T).t())  # nanoGPT transposes Conv1D weights this way
    np.testing.assert_array_equal(model.weight.numpy(), w)
    assert math.isclose(
        float(model(torch.ones(1, 3))[0, 1]), 12 + float(model.bias[1]), rel_tol=1e-6
    )


def test_augmented_assignment_writes_in_place_where_pytorch_does():
    buf = torch.zeros(3)
    alias = buf
    buf += 1.0  # no grad: in place, seen through every reference, version bumped
    assert alias is buf and alias.tolist() == [1.0, 1.0, 1.0] and buf._version == 1
    w = torch.ones(3, requires_grad=True)
    with torch.no_grad():
        w *= 2.0  # a parameter under no_grad: in place, as an optimizer writes
    assert w.tolist() == [2.0, 2.0, 2.0] and w.requires_grad and w.grad_fn is None
    acc = torch.zeros(3)
    acc += w  # a value that requires grad: the sum is recorded, not lost
    acc.sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0]
