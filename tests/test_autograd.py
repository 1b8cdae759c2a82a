"""The engine: topological order, accumulation, graph freeing, grad modes and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer.autograd import Function


def test_chain_of_10000_ops_does_not_hit_the_recursion_limit():
    x = tf.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [1.0001**10_000], rtol=1e-3)


def test_fan_out_accumulates():
    x = tf.tensor([2.0, 3.0], requires_grad=True)
    y = x * x + x * 3 + x  # three uses of x
    y.sum().backward()
    np.testing.assert_allclose(x.grad, 2 * x.data + 4)


def test_diamond_visits_each_node_once():
    calls = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, gy):
            calls.append(1)
            return gy * 2

    x = tf.tensor([1.0], requires_grad=True)
    h = Spy.apply(x)
    (h * 3 + h * 4).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(x.grad, [14.0])


def test_grads_accumulate_across_backward_calls_until_reset():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad, [6.0, 6.0])
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0, 3.0])


def test_leaf_grad_is_a_private_writable_copy():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = tf.tensor([1.0, 2.0], requires_grad=True)
    (x + y).sum().backward()  # add returns the same upstream array for both inputs
    x.grad *= 10
    np.testing.assert_allclose(y.grad, [1.0, 1.0])


def test_graph_is_freed_and_second_backward_says_so():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        loss.backward()


def test_retain_graph_allows_a_second_backward():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * x).sum()
    loss.backward(retain_graph=True)
    first = x.grad.copy()
    loss.backward()
    np.testing.assert_allclose(x.grad, 2 * first)


def test_saved_arrays_are_released_after_backward():
    x = tf.tensor(np.ones(3), requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    y.sum().backward()
    with pytest.raises(RuntimeError, match="freed"):
        _ = node.saved_tensors


def test_backward_on_non_scalar_needs_grad():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"shape \(2,\).*\.sum\(\)"):
        (x * 2).backward()
    (x * 2).backward(np.array([1.0, 10.0]))
    np.testing.assert_allclose(x.grad, [2.0, 20.0])


def test_backward_without_grad_tracking_is_a_clear_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        tf.tensor([1.0]).sum().backward()


def test_integer_and_boolean_tensors_cannot_require_grad():
    with pytest.raises(TypeError, match="floating-point.*int64"):
        tf.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="bool"):
        tf.Tensor(np.array([True]), requires_grad=True)


def test_no_grad_and_enable_grad():
    x = tf.tensor([1.0], requires_grad=True)
    with tf.no_grad():
        assert not tf.is_grad_enabled()
        y = x * 2
        with tf.enable_grad():
            z = x * 2
    assert y.grad_fn is None and z.grad_fn is not None and tf.is_grad_enabled()

    @tf.no_grad()
    def f(t):
        return t * 2

    assert f(x).grad_fn is None


def test_detach_cuts_the_graph():
    x = tf.tensor([3.0], requires_grad=True)
    y = x * x.detach()
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [3.0])


def test_retain_grad_fills_an_intermediate():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad, 2 * h.data)


def test_grad_returns_gradients_without_touching_dot_grad():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    w = tf.tensor([3.0, 4.0], requires_grad=True)
    gx, gw = tf.grad((x * w).sum(), [x, w])
    np.testing.assert_allclose(gx, w.data)
    np.testing.assert_allclose(gw, x.data)
    assert x.grad is None and w.grad is None


class _WrongShape(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, gy):
        return gy.sum(keepdims=True)


class _WrongCount(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, gy):
        return gy, gy


class _WrongDtype(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, gy):
        return gy.astype(np.float64)


@pytest.mark.parametrize(
    "function, message",
    [
        (_WrongShape, r"_WrongShape.backward returned a gradient of shape \(1,\).*shape \(3,\)"),
        (_WrongCount, r"_WrongCount.backward returned 2 gradients.*took 1 inputs"),
        (_WrongDtype, r"_WrongDtype.backward returned .* dtype float64 .* dtype float32"),
    ],
)
def test_engine_checks_what_backward_returns(function, message):
    x = tf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        function.apply(x).sum().backward()


class _ReturnsTensor(Function):
    @staticmethod
    def forward(ctx, x):
        return tf.tensor(x * 2)  # PyTorch's forward returns a tensor; here forward sees arrays

    @staticmethod
    def backward(ctx, gy):
        return gy * 2


class _ReturnsList(_ReturnsTensor):
    @staticmethod
    def forward(ctx, x):
        return list(x * 2)


@pytest.mark.parametrize(
    "function, message",
    [
        (_ReturnsTensor, "_ReturnsTensor.forward returned a Tensor; .*: return its .data"),
        (_ReturnsList, r"_ReturnsList.forward returned a list; .*: wrap it in np.asarray\(...\)"),
    ],
)
def test_engine_checks_what_forward_returns(function, message):
    # A Tensor came back wrapped in another Tensor and a list without a shape: both failed later,
    # elsewhere (printing the result, or the next op).
    with pytest.raises(TypeError, match=message):
        function.apply(tf.tensor([1.0, 2.0, 3.0], requires_grad=True))


def test_needs_input_grad_and_none_gradients():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b):
            seen["needs"] = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, gy):
            return gy, None

    a = tf.tensor([1.0], requires_grad=True)
    b = tf.tensor([2.0])
    Probe.apply(a, b).sum().backward()
    assert seen["needs"] == (True, False)
    np.testing.assert_allclose(a.grad, [1.0])


def test_detect_anomaly_names_the_first_op_in_forward():
    x = tf.tensor([-1.0, 4.0], requires_grad=True)
    with tf.detect_anomaly(), pytest.raises(FloatingPointError, match="Sqrt produced 1 NaN"):
        with np.errstate(invalid="ignore"):
            (x.sqrt() * 2).sum()


def test_detect_anomaly_names_the_op_in_backward():
    x = tf.tensor([0.0, 4.0], requires_grad=True)
    with tf.detect_anomaly():
        y = (x * 1.0).sqrt().sum()  # forward is finite: sqrt(0) = 0
        with np.errstate(divide="ignore"), pytest.raises(FloatingPointError, match="Sqrt"):
            y.backward()


def test_forward_errors_name_the_function_and_shapes():
    class Broken(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

    with pytest.raises(tf.OpError, match=r"Broken: .*input shapes: \(2, 3\), \(4,\)"):
        Broken.apply(tf.zeros(2, 3), tf.zeros(4))


class _SumAndProduct(Function):
    """Two outputs: (a + b, a * b), so each input's gradient mixes both upstream gradients."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a + b, a * b

    @staticmethod
    def backward(ctx, g_sum, g_product):
        a, b = ctx.saved_tensors
        return g_sum + g_product * b, g_sum + g_product * a


def test_a_function_with_two_outputs_gets_one_gradient_per_output():
    a = tf.tensor([1.0, 2.0], requires_grad=True)
    b = tf.tensor([3.0, 5.0], requires_grad=True)
    s, p = _SumAndProduct.apply(a, b)
    assert s.grad_fn is p.grad_fn
    (s * 2 + p * 3).sum().backward()
    np.testing.assert_allclose(a.grad, 2 + 3 * b.data)
    np.testing.assert_allclose(b.grad, 2 + 3 * a.data)


def test_an_output_that_misses_the_loss_gets_zeros_and_fan_out_adds_up():
    a = tf.tensor([1.0, 2.0], requires_grad=True)
    b = tf.tensor([3.0, 5.0], requires_grad=True)
    _, p = _SumAndProduct.apply(a, b)
    (p * p + p).sum().backward()  # the sum output never reaches the loss
    np.testing.assert_allclose(a.grad, (2 * p.data + 1) * b.data)


def test_two_output_function_passes_gradcheck():
    rng = np.random.default_rng(0)
    a, b = (tf.tensor(rng.standard_normal(3), requires_grad=True) for _ in range(2))

    def f(a, b):
        s, p = _SumAndProduct.apply(a, b)
        return s * p.exp()

    assert tf.gradcheck(f, (a, b))


def test_retain_grad_on_the_second_output():
    a = tf.tensor([1.0, 2.0], requires_grad=True)
    s, p = _SumAndProduct.apply(a, a)
    p.retain_grad()
    (s + p * 4).sum().backward()
    np.testing.assert_allclose(p.grad, [4.0, 4.0])
    assert s.grad is None


def test_a_wrong_gradient_for_an_input_from_a_two_output_node_names_that_output():
    a = tf.tensor([1.0, 2.0], requires_grad=True)
    _, p = _SumAndProduct.apply(a, a)
    with pytest.raises(RuntimeError, match=r"_WrongShape.*shape \(1,\).*shape \(2,\)"):
        _WrongShape.apply(p).sum().backward()


def test_split_backward_is_one_node_writing_each_element_once():
    x = tf.tensor(np.arange(12.0).reshape(2, 6), requires_grad=True)
    q, k, v = tf.ops.split(x, 2, axis=1)
    assert q.grad_fn is k.grad_fn is v.grad_fn
    (q * 1 + v * 3).sum().backward()  # k unused: its columns get zeros
    np.testing.assert_allclose(x.grad, np.tile([1, 1, 0, 0, 3, 3], (2, 1)))


def test_mixed_dtypes_give_each_leaf_a_gradient_of_its_own_dtype():
    """As in PyTorch: float64 data times float32 weights computes in float64, and the float32
    leaf gets a float32 gradient (the engine casts what Mul returns for it)."""
    x = tf.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)  # float64
    w = tf.tensor([0.5, -1.0, 2.0], requires_grad=True)  # float32
    y = (x * w).sum()
    assert y.dtype == np.float64
    y.backward()
    assert w.grad.dtype == np.float32 and x.grad.dtype == np.float64
    np.testing.assert_array_equal(w.grad, [1, 2, 3])
    np.testing.assert_array_equal(x.grad, [0.5, -1, 2])
    (gw,) = tf.grad((x * w).sum(), [w])
    assert gw.dtype == np.float32
    # a float32 output reached through float64 intermediates keeps float32 too
    h = tf.tensor([1.0, 2.0], requires_grad=True)
    (h.double() * tf.tensor(np.array([3.0, 4.0]))).float().sum().backward()
    assert h.grad.dtype == np.float32


@pytest.mark.torch
def test_mixed_dtype_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tw = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    (tx * tw).sum().backward()
    w = tf.tensor([0.5, -1.0, 2.0], requires_grad=True)
    (tf.tensor(np.array([1.0, 2.0, 3.0])) * w).sum().backward()
    assert str(tw.grad.dtype) == f"torch.{w.grad.dtype}"
    np.testing.assert_array_equal(w.grad, tw.grad.numpy())


def test_engine_checks_gradients_for_intermediate_nodes_too():
    # The wrong shape reaches a node's output (not a leaf): the check reads the node's outputs.
    x = tf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"_WrongShape.backward .* shape \(1,\).*shape \(3,\)"):
        _WrongShape.apply(x * 2).sum().backward()


def test_no_node_is_recorded_without_a_gradient_to_carry():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    with tf.no_grad():
        y = x * 2
    z = tf.tensor([1.0, 2.0]) * 3  # no input requires a gradient
    assert y.grad_fn is None and not y.requires_grad
    assert z.grad_fn is None and not z.requires_grad
    w = (x * 2).to(tf.int64)  # integer output: no node either, as in PyTorch
    assert w.grad_fn is None
