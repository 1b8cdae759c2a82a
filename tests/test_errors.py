"""Bad input gets a clear error naming the op and the shapes or values involved."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F


@pytest.mark.parametrize(
    "call, pattern",
    [
        (
            lambda: tf.zeros(2, 3) @ tf.zeros(4, 5),
            r"matmul: inner dimensions .*\(2, 3\) @ \(4, 5\)",
        ),
        (
            lambda: tf.zeros(2, 3, 4) @ tf.zeros(5, 4, 2),
            r"matmul: batch .*\(2, 3, 4\).*\(5, 4, 2\)",
        ),
        (lambda: tf.zeros(2, 3) + tf.zeros(4), r"Add: .*\(2, 3\), \(4,\)"),
        (
            lambda: tf.einsum("ij,jk", tf.zeros(2, 3), tf.zeros(4, 2)),
            r"einsum: 'ij,jk': axis 'j' has lengths 3 and 4 .*\(2, 3\), \(4, 2\)",
        ),
        (lambda: tf.einsum("ij", tf.zeros(3)), r"einsum: operand 0 has subscripts 'ij' for 1 dim"),
        (lambda: tf.einsum("i,j", tf.zeros(3)), r"einsum: 'i,j' has 2 operand\(s\), got 1"),
        (lambda: tf.einsum("ii->i", tf.zeros(2, 2)), r"einsum: 'ii->i': a letter repeated in 'ii'"),
        (lambda: tf.einsum("ij->ik", tf.zeros(2, 2)), r"einsum: 'ij->ik': output letter.*'k'"),
        (lambda: tf.einsum("i.j", tf.zeros(2, 2)), r"einsum: 'i.j': subscripts are letters"),
        (
            lambda: tf.zeros(3, 4).gather(1, np.array([[4]])),
            r"gather: index 4 is out of range for axis 1 of length 4",
        ),
        (
            lambda: tf.zeros(3, 4).gather(0, np.zeros((1, 5), int)),
            r"gather: index \(1, 5\) is longer than x \(3, 4\) along an axis other than 0",
        ),
        (lambda: tf.zeros(3, 4).gather(1, np.zeros(2, int)), r"gather: index must be .* 2 axes"),
        (lambda: tf.zeros(3, 4).cumsum(2), r"cumsum: axis 2 is out of range .*\(3, 4\)"),
        # axes out of range: were an IndexError (transpose) and NumPy's AxisError (permute,
        # whose check took 5 % 2 == 1 for axis 1)
        (lambda: tf.zeros(2, 3).transpose(0, 5), r"transpose: axis 5 is out of range .* 2 dim"),
        (lambda: tf.zeros(2, 3).permute(0, 5), r"permute: axis 5 is out of range .* 2 dim"),
        (lambda: tf.zeros(2, 3).permute(1, 1), r"permute: repeated axis in \(1, 1\)"),
        (lambda: tf.stack([tf.zeros(2)] * 2, axis=2), r"stack: axis 2 is out of range .* 2 dim"),
        (lambda: tf.zeros(2, 3).chunk(2, axis=2), r"chunk: axis 2 is out of range for shape"),
        (lambda: tf.zeros(2, 3) * tf.zeros(2, 2), r"Mul: .*\(2, 3\), \(2, 2\)"),
        (lambda: F.linear(tf.zeros(2, 3), tf.zeros(4, 5)), r"linear: .*\(2, 3\).*\(4, 5\)"),
        (
            lambda: F.cross_entropy(tf.zeros(4, 3), np.zeros(5, int)),
            r"cross_entropy: target of shape \(5,\).*\(4, 3\)",
        ),
        (
            lambda: F.cross_entropy(tf.zeros(2, 3), np.array([0, 7])),
            r"cross_entropy: target 7 at position \(1,\) is out of range for 3 classes",
        ),
        (
            lambda: F.embedding(np.array([[0, 9]]), tf.zeros(5, 2)),
            r"embedding: index 9 at position \(0, 1\) is out of range for a table of 5 rows",
        ),
        (
            lambda: F.scaled_dot_product_attention(
                tf.zeros(2, 4, 8), tf.zeros(2, 4, 6), tf.zeros(2, 4, 8)
            ),
            r"scaled_dot_product_attention: q \(2, 4, 8\), k \(2, 4, 6\), v \(2, 4, 8\)",
        ),
        (
            lambda: F.scaled_dot_product_attention(
                tf.zeros(2, 4, 8),
                tf.zeros(2, 5, 8),
                tf.zeros(2, 5, 8),
                attn_mask=np.ones((4, 4), bool),
            ),
            r"mask \(4, 4\)",
        ),
        (
            lambda: F.layer_norm(tf.zeros(2, 3), 4),
            r"layer_norm: input of shape \(2, 3\) does not end in \(4,\)",
        ),
        (lambda: tf.zeros(2, 3).reshape(4, 2), r"Reshape: .*size 6.*\(2, 3\)"),
        (lambda: tf.zeros(2, 3).sum(axis=2), r"sum: axis 2 is out of range"),
        (
            lambda: tf.cat([tf.zeros(2, 3), tf.zeros(3, 2)]),
            r"cat: shapes \(2, 3\), \(3, 2\) differ",
        ),
        (
            lambda: tf.zeros(2, 3).masked_fill(np.ones(4, bool), 0.0),
            r"masked_fill: mask of shape \(4,\)",
        ),
        (lambda: F.softmax(tf.zeros(2, 3), axis=3), r"softmax: axis 3 is out of range"),
        (lambda: F.dropout(tf.zeros(3), p=1.5), r"dropout: p must be in \[0, 1\], got 1.5"),
        (lambda: tf.zeros(3).squeeze(0), r"squeeze: axis 0 of shape \(3,\) has size 3"),
        (lambda: tf.zeros(3)[5], r"GetItem: .*index 5 is out of bounds"),
    ],
)
def test_errors_name_the_op_and_the_shapes(call, pattern):
    with pytest.raises(tf.OpError, match=pattern):
        call()


def test_op_errors_are_value_errors():
    assert issubclass(tf.OpError, ValueError)


def test_item_assignment_into_a_parameter_is_refused_with_advice():
    tf.zeros(3)[0] = 1.0  # data that does not require grad: written, as in PyTorch
    w = tf.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"leaf Variable that requires grad.*tf.no_grad\(\)"):
        w[0] = 1.0
    y = w * 2
    y[0] = 1.0  # an op's output: recorded in the graph, as in PyTorch
    assert y.grad_fn.name == "IndexPut"
