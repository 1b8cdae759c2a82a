"""tinyformer.cuda.graphs on the fake device: a captured step replays as the eager step computes,
its matrix products run the GEMM (no cuBLAS), and every rule a GPU graph needs is checked and
refused by name: no host-device copies in the step, no cuBLAS, no new arrays for the state or
the inputs, the same launches on every call.

The model is a two-layer MLP: the emulator runs every launch, one OS thread per CUDA thread."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.cuda
from tinyformer import cuda_graphs, registry
from tinyformer.cuda_graphs import GraphError, capture
from tinyformer.fake_device import to_fake
from tinyformer.launches import counting

F = tf.nn.functional


def _mlp():
    tf.manual_seed(0)
    return tf.nn.Sequential(tf.nn.Linear(6, 8), tf.nn.GELU(approximate="tanh"), tf.nn.Linear(8, 3))


def _batch(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5)


def _static(x, y):
    return tf.Tensor(to_fake(x)), tf.Tensor(to_fake(y))


def _train_step(model):
    def step(x, y):
        model.zero_grad()  # set to None: the backward takes its first gradient, on every call
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    return step


def _eager(model, x, y):
    """Loss and gradients of the same step on the host, with the references."""
    with registry.prefer(registry.REFERENCE):
        model.zero_grad()
        loss = F.cross_entropy(model(tf.Tensor(x)), tf.Tensor(y))
        loss.backward()
    return float(loss.data), [p.grad.copy() for p in model.parameters()]


def test_graphs_is_reachable_as_torch_cuda_graphs():
    assert tinyformer.cuda.graphs is cuda_graphs
    assert not cuda_graphs.graph_safe() and not cuda_graphs.is_current_stream_capturing()


def test_replays_compute_what_the_eager_step_does():
    model = _mlp().to("fake")
    host = _mlp()  # the same initial weights, on the host
    x, y = _static(*_batch(0))
    graph = capture(_train_step(model), x, y, state=model, warmup=1)
    assert not cuda_graphs.graph_safe()  # the flag is down again after capture
    for seed in (1, 2):
        xb, yb = _batch(seed)
        loss = graph.replay(xb, yb)  # host batches: copied into the static inputs
        assert loss is graph.outputs  # the captured output, rewritten
        want_loss, want_grads = _eager(host, xb, yb)
        np.testing.assert_allclose(float(loss.data), want_loss, rtol=1e-5)
        for p, g in zip(model.parameters(), want_grads):
            np.testing.assert_allclose(p.grad.get(), g, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(x.data.get(), xb)  # the static input holds the last batch
    assert graph.replays == 2


def test_the_captured_step_runs_the_gemm_and_no_cublas():
    model = _mlp().to("fake")
    x, y = _static(*_batch(0))
    graph = capture(_train_step(model), x, y, state=model, warmup=1)
    kinds = graph._launches
    assert kinds["Linear.forward", "kernel"] == 2 and kinds["Linear.backward", "kernel"] == 3
    assert not any(kind in ("matmul", "transfer") for _, kind in kinds)
    with counting() as launches:  # replay copies outside the step: counted, not inside it
        graph.replay()
    assert launches.by_kind()["matmul"] == 0


def test_a_read_back_in_the_step_is_refused():
    model = _mlp().to("fake")
    step = _train_step(model)

    def logging_step(x, y):
        loss = step(x, y)
        print(float(loss.data))  # a sync: capture refuses it
        return loss

    with pytest.raises(GraphError, match="copies between host and device"):
        capture(logging_step, *_static(*_batch(0)), state=model, warmup=1)


def test_a_host_input_in_the_step_is_refused():
    model = _mlp().to("fake")
    x, y = _static(*_batch(0))
    host_y = y.data.get()

    def step(x, _):
        return F.cross_entropy(model(x), tf.Tensor(to_fake(host_y)))  # an upload each call

    with pytest.raises(GraphError, match=r"copies between host and device \(other 1\)"):
        capture(step, x, y, state=model, warmup=1)


def test_cublas_in_the_step_is_refused():
    w = tf.Tensor(to_fake(np.ones((6, 2), np.float32)))

    def step(x):
        return x @ w  # a plain matmul: no GEMM covers it, and capture refuses cuBLAS

    with pytest.raises(GraphError, match="calls cuBLAS"):
        capture(step, tf.Tensor(to_fake(np.ones((5, 6), np.float32))), warmup=1)


def test_a_parameter_given_a_new_array_is_refused():
    model = _mlp().to("fake")
    step = _train_step(model)
    first = model[0].weight

    def sgd_step(x, y):
        loss = step(x, y)
        first.data = first.data - 0.1 * first.grad  # a new array: the graph would keep the old
        return loss

    with pytest.raises(GraphError, match=r"warm-up run 1: 0\.weight holds a new array"):
        capture(sgd_step, *_static(*_batch(0)), state=model, warmup=1)


def test_an_in_place_update_is_accepted_and_replays_every_time():
    model = _mlp().to("fake")
    step = _train_step(model)
    first = model[0].weight

    def sgd_step(x, y):
        loss = step(x, y)
        first.data[...] = first.data - 0.1 * first.grad
        return loss

    before = first.data.get()
    graph = capture(sgd_step, *_static(*_batch(0)), state=model, warmup=1)
    after_capture = first.data.get()
    graph.replay()
    assert not np.array_equal(before, after_capture)
    assert not np.array_equal(after_capture, first.data.get())  # each replay is a step


def test_work_that_changes_between_calls_is_refused_on_replay():
    model = _mlp().to("fake")
    step = _train_step(model)
    calls = []

    def counting_step(x, y):  # a branch on a host counter: a graph would freeze it
        calls.append(1)
        loss = step(x, y)
        return loss + loss if len(calls) > 2 else loss

    graph = capture(counting_step, *_static(*_batch(0)), state=model, warmup=1)
    with pytest.raises(GraphError, match="replay 1: the step launched other work than at capture"):
        graph.replay()


def test_replay_checks_its_inputs():
    model = _mlp().to("fake")
    x, y = _static(*_batch(0))
    graph = capture(_train_step(model), x, y, state=model, warmup=1)
    with pytest.raises(GraphError, match="captured with 2 inputs, got 1"):
        graph.replay(x)
    with pytest.raises(GraphError, match=r"input 0 has shape \(4, 6\), captured \(5, 6\)"):
        graph.replay(np.zeros((4, 6), np.float32), _batch(0)[1])
    x.data = to_fake(np.zeros((5, 6), np.float32))  # rebinding a static input between replays
    with pytest.raises(GraphError, match="before replay: input 0 holds a new array"):
        graph.replay()
    with pytest.raises(GraphError, match="inputs must be tensors on a device"):
        capture(_train_step(model), tf.Tensor(np.zeros((5, 6), np.float32)))


def test_nested_launch_counts_that_end_equal_close_cleanly():
    """counting() blocks are removed by identity: an inner block whose counts equal the outer
    one's (nothing ran outside it) once made the outer block's exit fail."""
    with counting() as outer:
        with counting() as inner:
            to_fake(np.zeros(2)) + 1.0
        to_fake(np.zeros(2)) + 1.0  # counted by the outer block only
    assert (outer.total, inner.total) == (2, 1)


@pytest.mark.skipif(not tf.backend.cuda_available(), reason="needs CuPy and a GPU")
def test_a_real_graph_replays_what_the_eager_step_computes_on_the_gpu():
    """Capture on a side stream with CuPy, replay: the same loss and gradients as the host."""
    model = _mlp().to("cuda")
    host = _mlp()
    x, y = (tf.Tensor(a, device="cuda") for a in _batch(0))
    graph = capture(_train_step(model), x, y, state=model)
    assert graph._graph is not None  # a CuPy graph was recorded, not the fake stand-in
    for seed in (1, 2):
        xb, yb = _batch(seed)
        loss = graph.replay(xb, yb)
        want_loss, want_grads = _eager(host, xb, yb)
        np.testing.assert_allclose(float(loss.data), want_loss, rtol=1e-5)
        for p, g in zip(model.parameters(), want_grads):
            np.testing.assert_allclose(p.grad.get(), g, rtol=1e-4, atol=1e-6)
