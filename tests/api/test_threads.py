"""Threads: one model's weights shared by several backends, each used from its own thread or from
several, computing at once. The CPU resolves tensor addresses per compute; it used to clear them on
the shared weight when one compute ended while another still read it (SIGSEGV). Computes that write
the same tensors (one graph on two backends) are ordered, so each sees a whole compute's result.
Every case runs in a fresh process with a time limit: a regression fails one test."""
from __future__ import annotations

from isolated import run_isolated

ONE_MODEL = """
import threading
import numpy as np
import metal_backend as mb
dev = mb.device("CPU")
rng = np.random.default_rng(0)
ctx = mb.Context()
w = ctx.tensor(mb.{wtype}, (64, 256), name="w")
graphs = []
for i in range(2):
    x = ctx.tensor(mb.f32, ({tokens}, 256), name=f"x{{i}}")
    graphs.append((x, mb.ops.mul_mat(w, x)))
mb.alloc_ctx_tensors(ctx, dev.buffer_type)
w.set(rng.standard_normal((64, 256)).astype(np.float32))
wd = w.get().astype(np.float64)
for x, _ in graphs:
    x.set(rng.standard_normal(({tokens}, 256)).astype(np.float32))
errors = []
def run(i, same):
    try:
        be = dev.init_backend("n_threads={nth}")
        x, y = graphs[0] if same else graphs[i]
        g = mb.Graph(y)
        for _ in range({iters}):
            assert be.graph_compute(g) == mb.Status.SUCCESS
        ref = x.get().astype(np.float64) @ wd.T
        err = np.abs(y.get() - ref).max() / np.abs(ref).max()
        assert err < 2e-2, err
    except Exception as e:
        errors.append(repr(e))
for same in (False, True):
    ts = [threading.Thread(target=run, args=(i, same)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
assert not errors, errors
print("ok")
"""


def test_one_model_one_backend_per_thread_q8_0():
    """The issue's probe: two CPU backends, two threads, each its own graph over one q8_0 weight,
    500 computes each; then both computing the same graph."""
    out = run_isolated(ONE_MODEL.format(wtype="q8_0", tokens=4, nth=2, iters=500), timeout=120)
    assert out.split() == ["ok"]


def test_one_model_one_backend_per_thread_gemm_path():
    """Many tokens take the packed-weight GEMM path (shared packing scratch per backend)."""
    out = run_isolated(ONE_MODEL.format(wtype="f16", tokens=48, nth=2, iters=100), timeout=120)
    assert out.split() == ["ok"]


def test_one_model_one_thread_per_backend_single_threaded():
    out = run_isolated(ONE_MODEL.format(wtype="q4_0", tokens=4, nth=1, iters=500), timeout=120)
    assert out.split() == ["ok"]


STRESS = """
import threading, time
import numpy as np
import metal_backend as mb

rng = np.random.default_rng(1)
K, M = 128, 48
cpu = mb.device("CPU")
sim = mb.device("MetalSim")
WTYPES = (mb.f32, mb.f16, mb.q8_0, mb.q4_0)


def make_model(dev):
    ctx = mb.Context()
    ws = [ctx.tensor(t, (M, K), name=f"w_{{t}}") for t in WTYPES]
    bias = ctx.tensor(mb.f32, (M,), name="bias")
    return ctx, ws, bias


def reference(wd, bias, x):
    outs = []
    for w in wd:
        h = x @ w.T + bias
        h = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
        e = np.exp(h - h.max(axis=-1, keepdims=True))
        outs.append(e / e.sum(axis=-1, keepdims=True))
    return outs


class Worker:
    # One thread's graph over the shared weights: per weight type mul_mat, add bias, rms_norm, soft_max.
    def __init__(self, ctx, ws, bias, tokens, name):
        self.x = ctx.tensor(mb.f32, (tokens, K), name="x_" + name)
        self.outs = []
        for w in ws:
            h = mb.ops.add(mb.ops.mul_mat(w, self.x), bias)
            self.outs.append(mb.ops.soft_max(mb.ops.rms_norm(h, 1e-6)))
        self.graph = mb.Graph(*self.outs)
        self.tokens = tokens


def build(dev, n_backends, threads_per_backend, params):
    ctx, ws, bias = make_model(dev)
    workers = [[Worker(ctx, ws, bias, tokens=(4 if (b + m) % 2 == 0 else 32), name=f"{{b}}_{{m}}")
                for m in range(threads_per_backend)] for b in range(n_backends)]
    mb.alloc_ctx_tensors(ctx, dev.buffer_type)
    for w in ws:
        w.set(rng.standard_normal((M, K)).astype(np.float32))
    bias.set(rng.standard_normal(M).astype(np.float32))
    wd = [w.get().astype(np.float64) for w in ws]
    # Inputs and references made before the threads start: they only compute and compare.
    for w in (w for ws_ in workers for w in ws_):
        w.cases = []
        for _ in range(3):
            x = rng.standard_normal((w.tokens, K)).astype(np.float32)
            w.cases.append((x, reference(wd, bias.get().astype(np.float64), x.astype(np.float64))))
    backends = [dev.init_backend(params) for _ in range(n_backends)]
    return backends, workers, wd, bias.get().astype(np.float64)


errors = []
counts = []


def run(backend, worker, wd, bias, seconds, min_iters):
    try:
        cases = worker.cases
        outs = [np.empty((worker.tokens, M), np.float32) for _ in worker.outs]
        n = 0
        end = time.monotonic() + seconds
        while n < min_iters or time.monotonic() < end:
            x, refs = cases[n % len(cases)]
            backend.set_tensor_async(worker.x, x)
            backend.graph_compute_async(worker.graph)
            for t, o in zip(worker.outs, outs):
                backend.get_tensor_async(t, o)
            backend.synchronize()
            for t, o, r in zip(WTYPES, outs, refs):
                err = np.abs(o - r).max() / np.abs(r).max()
                assert err < 3e-2, (backend.name, str(t), worker.tokens, err)
            n += 1
        counts.append((backend.name, n))
    except Exception as e:
        errors.append(repr(e))


threads = []
for dev, nb, nt, params, seconds, min_iters in (
        (cpu, 3, 2, "n_threads=2", {seconds}, 20),
        (sim, 2, 2, "", {seconds}, 1)):
    backends, workers, wd, bias = build(dev, nb, nt, params)
    for be, ws in zip(backends, workers):
        for w in ws:
            threads.append(threading.Thread(target=run, args=(be, w, wd, bias, seconds, min_iters)))
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
assert len(counts) == len(threads), counts
print(sorted(counts))
"""


def test_stress_backends_x_threads_over_shared_weights():
    """3 CPU backends x 2 threads and 2 MetalSim backends x 2 threads, all at once, over shared f32,
    f16, q8_0 and q4_0 weights (mul_mat + add + rms_norm + soft_max, matrix-vector and GEMM token
    counts), inputs set and outputs read with the async calls; every result checked against numpy."""
    out = run_isolated(STRESS.format(seconds=3.0), timeout=240)
    assert "CPU" in out and "MetalSim" in out
