"""einsum: sums of products over named axes (`torch.einsum`, `numpy.einsum`).

    scores = einsum("bhqd,bhkd->bhqk", q, k)   # scores[b,h,q,k] = sum_d q[b,h,q,d] k[b,h,k,d]

Forward   y[out] = sum, over the letters missing from `out`, of  x_1[letters_1] ... x_n[letters_n].
          Each letter names an axis, and a letter shared by operands is one axis (of one length,
          or length 1, which broadcasts). `...` stands for the leading axes, which broadcast as
          in NumPy; left out of an explicit output, they are summed over (as in PyTorch). With
          no `->`, the output is `...` and then every letter that appears once, in ASCII order
          ("ij,jk" is "ij,jk->ik").
Backward  y is linear in each operand, so x_i's gradient is a sum of the same kind: gy times
          every other operand, summed over the letters x_i lacks,
              gx_i[letters_i] = sum over the rest of  gy[out] * prod_{j != i} x_j[letters_j],
          itself an einsum; for y = einsum("ik,kj->ij", a, b), ga = einsum("ij,kj->ik", gy, b),
          which is gy b^T. A letter of x_i in neither gy nor another operand was summed over x_i
          alone: each of those elements reached y with weight 1, so gx_i is gy's sum broadcast
          along it. An axis of length 1 that broadcast is summed back (`unbroadcast`).
Saved     the operands (each one's gradient needs all the others).

A letter repeated in one operand ("ii->i", a diagonal; "ii->", a trace) is refused.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import as_operand, unbroadcast
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["einsum"]


def parse(
    equation: str, shapes: Sequence[tuple[int, ...]]
) -> tuple[list[str], str, dict[str, int]]:
    """Each operand's letters and the output's, with `...` spelled out in letters the equation
    does not use; and every letter's length."""
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise OpError(
            f"einsum: {equation!r} has {len(terms)} operand(s), got {len(shapes)} tensor(s)"
        )
    for term in [*terms, output]:
        named = term.replace("...", "", 1)
        if not all(c in string.ascii_letters for c in named):
            raise OpError(f"einsum: {equation!r}: subscripts are letters and one '...' each")
    counts = [len(term.replace("...", "")) for term in terms]
    for i, (term, n, shape) in enumerate(zip(terms, counts, shapes)):
        if n > len(shape) or ("..." not in term and n != len(shape)):
            raise OpError(
                f"einsum: operand {i} has subscripts {term!r} for {len(shape)} dimension(s) "
                f"{tuple(shape)}"
            )
    # `...` stands for the same leading axes in every operand, right-aligned as in broadcasting.
    spare = [c for c in string.ascii_letters if c not in equation]
    width = max([len(s) - n for term, n, s in zip(terms, counts, shapes) if "..." in term] or [0])
    ellipsis = "".join(spare[:width])
    spelled = [
        t.replace("...", ellipsis[width - (len(s) - n) :]) for t, n, s in zip(terms, counts, shapes)
    ]
    if not arrow:  # implicit output: `...`, then the letters seen once, in ASCII order
        once = Counter("".join(t.replace("...", "") for t in terms))
        output = ("..." if "..." in inputs else "") + "".join(
            sorted(c for c in once if once[c] == 1)
        )
    out = output.replace("...", ellipsis)
    for term, letters in [*zip(terms, spelled), (output, out)]:
        if len(set(letters)) != len(letters):
            raise OpError(
                f"einsum: {equation!r}: a letter repeated in {term!r} (a diagonal or a trace) "
                "is not supported"
            )
    if unknown := set(out) - set("".join(spelled)):
        raise OpError(f"einsum: {equation!r}: output letter(s) {sorted(unknown)} in no operand")
    sizes: dict[str, int] = {}
    for i, (letters, shape) in enumerate(zip(spelled, shapes)):
        for c, n in zip(letters, shape):
            if sizes.get(c, 1) not in (1, n) and n != 1:
                where = ", ".join(str(tuple(s)) for s in shapes)
                raise OpError(
                    f"einsum: {equation!r}: axis {c!r} has lengths {sizes[c]} and {n} "
                    f"(operand {i}; shapes {where})"
                )
            sizes[c] = max(sizes.get(c, 1), n)
    return spelled, out, sizes


def _full(x: np.ndarray, letters: str, sizes: dict[str, int]) -> np.ndarray:
    """x broadcast (a view) along its length-1 axes to every letter's length."""
    xp = backend.get_array_module(x)
    return xp.broadcast_to(x, tuple(sizes[c] for c in letters))


class Einsum(Function):
    @staticmethod
    def forward(ctx, *xs, equation):
        xp = backend.get_array_module(*xs)
        spelled, out, sizes = parse(equation, [x.shape for x in xs])
        ctx.save_for_backward(*xs)
        ctx.letters = spelled, out, sizes
        full = [_full(x, s, sizes) for x, s in zip(xs, spelled)]
        return xp.einsum(f"{','.join(spelled)}->{out}", *full, optimize=len(xs) > 1)

    @staticmethod
    def backward(ctx, gy):
        xs = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        spelled, out, sizes = ctx.letters
        full = [_full(x, s, sizes) for x, s in zip(xs, spelled)]
        grads = []
        for i, (x, letters) in enumerate(zip(xs, spelled)):
            if not ctx.needs_input_grad[i]:
                grads.append(None)
                continue
            others = [s for j, s in enumerate(spelled) if j != i]
            seen = set(out).union(*others)
            kept = "".join(c for c in letters if c in seen)
            operands = [gy, *(f for j, f in enumerate(full) if j != i)]
            g = xp.einsum(f"{','.join([out, *others])}->{kept}", *operands, optimize=len(xs) > 1)
            # Letters x_i summed alone come back as length-1 axes, broadcast to their length.
            g = g.reshape([sizes[c] if c in seen else 1 for c in letters])
            g = xp.broadcast_to(g, tuple(sizes[c] for c in letters))
            grads.append(unbroadcast(g, x.shape))
        return tuple(grads)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Sum of products over the axes named in `equation` (`torch.einsum(equation, *operands)`;
    the operands may also come as one list, as PyTorch allows)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise OpError(f"einsum: {equation!r} needs at least one operand")
    like = next((x for x in operands if isinstance(x, Tensor)), None)
    return Einsum.apply(*(as_operand(x, like) for x in operands), equation=equation)


# Equations that reach every rule above: products of two and three operands, one operand alone
# (a transpose, a full sum, a letter summed by one operand only), the implicit output, `...`
# with broadcasting and a summed `...`, length-1 axes that broadcast, and a 0-d output.
_EQUATIONS = [
    ("ik,kj->ij", ["ik", "kj"]),
    ("bhqd,bhkd->bhqk", ["bhqd", "bhkd"]),
    ("ij,jk,kl->il", ["ij", "jk", "kl"]),
    ("i,ij,j->", ["i", "ij", "j"]),
    ("i,j->ij", ["i", "j"]),
    ("i,i->", ["i", "i"]),
    ("ij->ji", ["ij"]),
    ("ij->", ["ij"]),
    ("ij,k->ik", ["ij", "k"]),
    ("ij,jk", ["ij", "jk"]),
    ("Ba,aB", ["Ba", "aB"]),
    ("...ij,...jk->...ik", ["Xij", "jk"]),
    ("...ij,...jk", ["Xij", "Yjk"]),
    ("...ij,jk->ik", ["Xij", "jk"]),
    ("ij,ij->ij", ["ij", "ij"]),
]


def _sample(draw) -> Sample:
    # The operand count first: drawn from the whole list, the few three-operand products came
    # up so seldom that a run of the suite often never checked a third operand's gradient.
    operands = draw.choice((1, 2, 3))
    equation, terms = draw.choice([e for e in _EQUATIONS if len(e[1]) == operands])
    lengths = {c: draw.integers(1, 3) for c in "bhqdkijlBa"}
    lengths |= {"j": draw.integers(2, 3)}  # a real contraction in every product
    batch = tuple(draw.integers(1, 2) for _ in range(draw.integers(0, 2)))
    # In half the products, one operand's j at length 1: a summed letter that broadcasts, whose
    # gradient must be summed back over j (a backward that forgot it failed only on the rare
    # draws where `i`, summed in a few equations, came out at length 1).
    flat_j = draw.integers(0, 2 * operands - 1)  # >= operands: none
    xs = []
    for t, term in enumerate(terms):
        shape = []
        for c in term:
            if c == "X":  # `...`: batch axes, some of length 1 in one operand only
                shape.extend(n if draw.integers(0, 1) else 1 for n in batch)
            elif c == "Y":
                shape.extend(batch[draw.integers(0, len(batch)) :])  # fewer leading axes
            elif c == "j" and t == flat_j:
                shape.append(1)
            else:  # a length-1 axis now and then, to broadcast against the other operand's
                shape.append(1 if c == "i" and draw.integers(0, 3) == 0 else lengths[c])
        xs.append(floats(draw, tuple(shape)))
    return Sample(xs, {"equation": equation})


SPECS = [
    OpSpec("einsum", lambda *xs, equation: einsum(equation, *xs), _sample, functions=(Einsum,))
]
