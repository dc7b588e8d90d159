"""The CPU backend's thread pool as a user meets it: results that do not depend on the thread count
or on when the workers wake (parked after a pause, busy with other threads, late), and errors and
aborts that leave the pool usable.

Slots of a node may run on any thread, and the calling thread runs the slots of workers that have
not woken yet, so these tests compute the same graphs with every worker in a different state and
require bit-identical results: each output element's arithmetic does not depend on which thread
computes it.
"""
from __future__ import annotations

import threading
import time

try:
    import resource
except ImportError:  # not on Windows
    resource = None

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")


def _graph(w_type, n_tokens, k=256, m=200, seed=0):
    """mul_mat(w, x) + softmax + add: a mat-vec or GEMM node, a row op and an element-wise op."""
    rng = np.random.default_rng(seed)
    ctx = mb.Context()
    w = ctx.tensor(w_type, (m, k), name="w")
    x = ctx.tensor(mb.f32, (n_tokens, k), name="x")
    bias = ctx.tensor(mb.f32, (n_tokens, m), name="bias")
    y = mb.ops.add(mb.ops.soft_max(mb.ops.mul_mat(w, x)), bias)
    buf = mb.alloc_ctx_tensors(ctx, CPU)
    w_vals = rng.standard_normal((m, k)).astype(np.float32)
    w.set(w_vals)
    x_vals = rng.standard_normal((n_tokens, k)).astype(np.float32)
    x.set(x_vals)
    b_vals = rng.standard_normal((n_tokens, m)).astype(np.float32)
    bias.set(b_vals)
    return ctx, buf, y, (w_vals, x_vals, b_vals)


@pytest.mark.parametrize("w_type,n_tokens", [(mb.q4_0, 1), (mb.q8_0, 3), (mb.f16, 1), (mb.f32, 2), (mb.f32, 40)])
def test_results_identical_across_thread_counts_and_wake_states(w_type, n_tokens):
    ctx, buf, y, (w_vals, x_vals, b_vals) = _graph(w_type, n_tokens)
    graph = mb.Graph(y)
    reference = None
    for n_threads in (1, 2, 3, 7, 16):
        backend = CPU.init_backend(f"n_threads={n_threads}")
        runs = []
        for state in ("fresh", "hot", "hot", "parked", "busy"):
            if state == "parked":
                time.sleep(0.05)  # past the workers' spin: they park
            if state == "busy":
                # Numpy work in another Python thread keeps a core busy while we compute.
                stop = threading.Event()
                def hog_work():
                    while not stop.is_set():
                        np.linalg.svd(np.ones((64, 64)))

                hog = threading.Thread(target=hog_work)
                hog.start()
                try:
                    backend.graph_compute(graph)
                finally:
                    stop.set()
                    hog.join()
            else:
                backend.graph_compute(graph)
            runs.append(y.get())
        for r in runs:
            np.testing.assert_array_equal(r, runs[0])
        if reference is None:
            reference = runs[0]
        np.testing.assert_array_equal(runs[0], reference, err_msg=f"{n_threads} threads vs 1")
    # And the values themselves, against numpy (quantized weights: against their stored values).
    stored = mb.dequantize(mb.quantize(w_vals, w_type), w_type, w_vals.shape).astype(np.float64)
    logits = x_vals.astype(np.float64) @ stored.T
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    expect = e / e.sum(axis=-1, keepdims=True) + b_vals
    tol = 5e-3 if w_type in (mb.q4_0, mb.q8_0) else 1e-4  # q8 activations for quantized weights
    np.testing.assert_allclose(reference, expect, rtol=tol, atol=tol)


@pytest.mark.parametrize("w_type,k,n_tokens", [(mb.q4_0, 1568, 1), (mb.q4_K, 2048, 1), (mb.q6_K, 4096, 2),
                                               (mb.f32, 4096, 1)])
def test_split_activation_rows_and_capped_jobs_identical_across_thread_counts(w_type, k, n_tokens):
    """Fewer activation rows than threads: each row is converted in pieces by several threads (K of
    1568 ends in a piece shorter than the others); rows of 16 KiB (f32, K = 4096) make jobs of a few
    rows each. Every thread count gives the one-thread bits, and those match numpy."""
    ctx, buf, y, (w_vals, x_vals, b_vals) = _graph(w_type, n_tokens, k=k, m=720)  # 16 threads take part
    graph = mb.Graph(y)
    results = {}
    for n_threads in (1, 2, 5, 16):
        CPU.init_backend(f"n_threads={n_threads}").graph_compute(graph)
        results[n_threads] = y.get()
    for n_threads, r in results.items():
        np.testing.assert_array_equal(r, results[1], err_msg=f"{n_threads} threads vs 1")
    stored = mb.dequantize(mb.quantize(w_vals, w_type), w_type, w_vals.shape).astype(np.float64)
    logits = x_vals.astype(np.float64) @ stored.T
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    expect = e / e.sum(axis=-1, keepdims=True) + b_vals
    tol = 1e-4 if w_type == mb.f32 else 2e-2  # q8 / q8_K activations for quantized weights
    np.testing.assert_allclose(results[1], expect, rtol=tol, atol=tol)


def test_many_short_computes_with_pauses_between():
    """A decoder's pattern: short graphs, host work and pauses between them, on every thread count."""
    ctx, buf, y, _ = _graph(mb.q4_0, 1, k=384, m=1536)
    graph = mb.Graph(y)
    ref_backend = CPU.init_backend("n_threads=1")
    ref_backend.graph_compute(graph)
    expect = y.get()
    backend = CPU.init_backend("n_threads=4")
    for i in range(60):
        if i % 10 == 9:
            time.sleep(0.01)
        backend.graph_compute(graph)
        np.testing.assert_array_equal(y.get(), expect)


def test_thread_count_change_between_computes():
    ctx, buf, y, _ = _graph(mb.f32, 30)
    graph = mb.Graph(y)
    backend = CPU.init_backend("n_threads=1")
    backend.graph_compute(graph)
    expect = y.get()
    for n in (5, 2, 16, 1, 3):
        backend.options = {"n_threads": n}
        backend.graph_compute(graph)
        np.testing.assert_array_equal(y.get(), expect)


def test_abort_mid_graph_leaves_the_pool_usable():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (512, 300), name="a")
    node = a
    for _ in range(8):
        node = mb.ops.gelu(node)
    mb.alloc_ctx_tensors(ctx, CPU)
    a.set(np.full((512, 300), 0.5, dtype=np.float32))
    backend = CPU.init_backend("n_threads=4")
    calls = []

    def abort_after_two_nodes():
        calls.append(1)
        return len(calls) > 2

    backend.set_abort_callback(abort_after_two_nodes)
    graph = mb.Graph(node)
    status = backend.graph_compute(graph)
    assert status == mb.Status.ABORTED
    backend.set_abort_callback(None)
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    expect = np.full((512, 300), 0.5, dtype=np.float64)
    for _ in range(8):
        expect = 0.5 * expect * (1 + np.tanh(np.sqrt(2 / np.pi) * (expect + 0.044715 * expect**3)))
    np.testing.assert_allclose(node.get(), expect, rtol=1e-5, atol=1e-6)


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.skipif(resource is None, reason="needs the resource module (POSIX)")
def test_spin_us_keeps_workers_awake_after_a_compute_only_when_asked():
    """spin_us is how long the idle workers spin after a compute: with 0 they sleep at once (no CPU
    burnt while the caller sleeps), with 300 ms they burn CPU through a 0.3 s sleep. CPU time, not
    speed, and margins of several times the expected values."""
    ctx, buf, y, _ = _graph(mb.q4_0, 1, k=384, m=1536)
    graph = mb.Graph(y)
    backend = CPU.init_backend("n_threads=2")
    backend.graph_compute(graph)
    expect = y.get()
    burnt: dict[int, list[float]] = {0: [], 300_000: []}
    # Up to 5 rounds, until one shows the spin: other processes on the machine can take the cores
    # from a spinning worker for a while, never give a sleeping one CPU time.
    for _ in range(5):
        for spin_us in (0, 300_000, 0):
            backend.options["spin_us"] = spin_us
            backend.graph_compute(graph)
            np.testing.assert_array_equal(y.get(), expect)
            before = _cpu_seconds()
            time.sleep(0.3)
            burnt[spin_us].append(_cpu_seconds() - before)
        if burnt[300_000][-1] > 0.1:
            break
    assert max(burnt[300_000]) > 0.1, burnt
    assert max(burnt[0]) < 0.05, burnt


def test_spin_us_range_is_checked():
    backend = CPU.init_backend("n_threads=2")
    assert backend.options["spin_us"] == 500
    for bad in (-1, 1_000_001):
        with pytest.raises(mb.InvalidArgumentError, match=str(bad)):
            backend.options["spin_us"] = bad
    assert backend.options["spin_us"] == 500
    assert CPU.init_backend("spin_us=0").options["spin_us"] == 0
