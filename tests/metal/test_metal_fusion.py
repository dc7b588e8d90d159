"""Fused encodings on MetalSim give what the unfused ones give (and numpy): chains of up to 8 ADDs and
NORM/RMS_NORM -> MUL -> ADD, under both executor schedules. Fusion is observed, not timed: a fused
intermediate result is never written, so a sentinel left in its memory shows which encoding ran.
Intermediates that something else needs (flagged is_output, read by another node) are always written."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import metal_backend as mb

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")

SENTINEL = -12345.0


@pytest.fixture(params=[0, 1], ids=["lockstep", "run-ahead"])
def schedule(request):
    return request.param


def _backend(fusion, schedule):
    backend = SIM[0].init_backend()
    backend.options["fusion"] = fusion
    backend.options["schedule"] = schedule
    return backend


def _rng(seed=0):
    return np.random.default_rng(seed)


def _ctx_on_sim(ctx):
    mb.alloc_ctx_tensors(ctx, SIM[0].buffer_type)


def _run(build, fusion, schedule, seed=0):
    """build(ctx) -> (inputs {tensor: array}, out, intermediates). Returns (out, [intermediates])."""
    ctx = mb.Context()
    inputs, out, mids = build(ctx)
    _ctx_on_sim(ctx)
    for t, v in inputs.items():
        t.set(v)
    for t in mids:
        t.set(np.full(t.shape, SENTINEL, np.float32))
    backend = _backend(fusion, schedule)
    assert backend.graph_compute(mb.Graph(out)) == mb.Status.SUCCESS
    return out.get(), [t.get() for t in mids]


# ------------------------------------------------------------------ ADD chains

# Operand shapes (numpy order) against x of shape (3, 2, 5, 8): full, one row, one value, broadcast on
# dims 1..3 by modulo, and one that takes the row_c4 path when all operands are rows.
X_SHAPE = (3, 2, 5, 8)
OPERANDS = [(3, 2, 5, 8), (8,), (1,), (1, 2, 1, 8), (3, 1, 5, 4), (1, 1, 5, 1), (3, 2, 5, 8), (8,), (2, 1, 1)]


def _add_chain(shapes, x_shape=X_SHAPE, seed=0):
    rng = _rng(seed)
    xs = rng.standard_normal(x_shape).astype(np.float32)
    vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def build(ctx):
        x = ctx.tensor(mb.f32, x_shape, name="x")
        ops = [ctx.tensor(mb.f32, s, name=f"b{k}") for k, s in enumerate(shapes)]
        t, mids = x, []
        for b in ops:
            t = mb.ops.add(t, b)
            mids.append(t)
        return {x: xs, **dict(zip(ops, vals))}, t, mids[:-1]

    ref = xs.astype(np.float64)
    for v in vals:
        ref = ref + _broadcast_mod(v, x_shape)
    return build, ref


def _broadcast_mod(v, shape):
    """ggml broadcasting: v tiled over shape (each dim of shape a multiple of v's)."""
    v = v.reshape((1,) * (len(shape) - v.ndim) + v.shape)
    return np.tile(v, [s // d for s, d in zip(shape, v.shape)])


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9])
def test_add_chain_fused_equals_unfused(n, schedule):
    build, ref = _add_chain(OPERANDS[:n])
    fused, mids_f = _run(build, 1, schedule)
    plain, mids_p = _run(build, 0, schedule)
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(plain, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-6)
    # Unfused, every intermediate is written; fused, those inside a chain of up to 8 are not.
    assert all((m != SENTINEL).all() for m in mids_p)
    for k, m in enumerate(mids_f):
        chain_end = (k + 1) % 8 == 0  # the 8th ADD ends a chain; the 9th starts a new one
        assert (m != SENTINEL).all() if chain_end else (m == SENTINEL).all(), k


def test_add_chain_of_rows_takes_the_row_path(schedule):
    """Contiguous x and row operands (ne0 % 4 == 0): the float4 row kernel, fused or not."""
    shapes = [(16,)] * 4
    build, ref = _add_chain(shapes, x_shape=(6, 16))
    fused, mids = _run(build, 1, schedule)
    plain, _ = _run(build, 0, schedule)
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused, plain, rtol=1e-6, atol=1e-6)
    assert all((m == SENTINEL).all() for m in mids)


def test_add_chain_keeps_needed_intermediates(schedule):
    """An intermediate flagged is_output, or read by a later node, is written: the chain stops there."""
    rng = _rng(1)
    xs, a, b, c = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(4))

    def build(ctx):
        x, ta, tb, tc = (ctx.tensor(mb.f32, (4, 8), name=n) for n in "xabc")
        t1 = mb.ops.add(x, ta)
        t1.is_output = True
        t2 = mb.ops.add(t1, tb)
        t3 = mb.ops.add(t2, tc)
        out = mb.ops.mul(t3, t2)  # t2 read again after the chain
        return {x: xs, ta: a, tb: b, tc: c}, out, [t1, t2, t3]

    for fusion in (0, 1):
        out, (m1, m2, m3) = _run(build, fusion, schedule)
        np.testing.assert_allclose(m1, xs + a, rtol=1e-6)
        np.testing.assert_allclose(m2, xs + a + b, rtol=1e-6)
        np.testing.assert_allclose(out, (xs + a + b + c) * (xs + a + b), rtol=1e-5)
        assert (m3 != SENTINEL).all()  # read by the MUL


def test_add_chain_with_reused_memory(schedule):
    """With a graph allocator, a fused result may land on an input that died inside the chain (here the
    fourth ADD's memory is the SCALE result the chain starts from: read and written in place)."""
    rng = _rng(2)
    xs = rng.standard_normal((8, 32)).astype(np.float32)
    bs = [rng.standard_normal((32,)).astype(np.float32) for _ in range(4)]
    results = []
    for fusion in (0, 1):
        ctx = mb.Context()
        x = ctx.tensor(mb.f32, (8, 32), name="x")
        ops = [ctx.tensor(mb.f32, (32,), name=f"b{k}") for k in range(4)]
        for t in [x, *ops]:
            t.is_input = True
        h = mb.ops.scale(x, 2.0)  # dies at the first ADD
        t = h
        for b in ops:
            t = mb.ops.add(t, b)
        out = mb.ops.scale(t, 1.0)
        out.is_output = True
        graph = mb.Graph(out)
        backend = _backend(fusion, schedule)
        mb.GraphAllocator(backend).alloc_graph(graph)
        x.set(xs)
        for t, v in zip(ops, bs):
            t.set(v)
        assert backend.graph_compute(graph) == mb.Status.SUCCESS
        results.append(out.get())
    ref = 2.0 * xs.astype(np.float64) + sum(bs)
    np.testing.assert_allclose(results[0], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-6)


def test_add_chain_never_overwrites_what_it_reads(schedule):
    """The chain's result placed over an operand of its first ADD: run in sequence that is fine (the
    operand is dead by then), fused the kernel would overwrite it while other threads still read it,
    so the chain must stop before that node."""
    rng = _rng(5)
    xs = rng.standard_normal((8, 32)).astype(np.float32)
    b0v, b1v = (rng.standard_normal((32,)).astype(np.float32) for _ in range(2))
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (8, 32), name="x")
    b0 = ctx.tensor(mb.f32, (32,), name="b0")
    b1 = ctx.tensor(mb.f32, (32,), name="b1")
    t1 = mb.ops.add(x, b0)
    t2 = mb.ops.add(t1, b1)
    buf = SIM[0].buffer_type.alloc(4096)
    x.place(buf, 0)
    b1.place(buf, 1024)
    t1.place(buf, 1152)
    t2.place(buf, 2176)
    b0.place(buf, 2176 + 3 * 128)  # inside row 3 of t2
    x.set(xs)
    b0.set(b0v)
    b1.set(b1v)
    backend = _backend(1, schedule)
    assert backend.graph_compute(mb.Graph(t2)) == mb.Status.SUCCESS
    np.testing.assert_allclose(t2.get(), xs.astype(np.float64) + b0v + b1v, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ NORM / RMS_NORM -> MUL -> ADD


def _norm_ref(x, rms, eps):
    x = x.astype(np.float64)
    if rms:
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    c = x - x.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + eps)


@pytest.mark.parametrize("rms", [False, True], ids=["norm", "rms_norm"])
@pytest.mark.parametrize("ne0", [64, 37], ids=["float4", "scalar"])
@pytest.mark.parametrize("with_add", [True, False], ids=["mul_add", "mul"])
@pytest.mark.parametrize("w_shape", ["row", "rows"])
def test_norm_mul_add_fused_equals_unfused(rms, ne0, with_add, w_shape, schedule):
    rng = _rng(3)
    x_shape = (2, 6, ne0)
    ws = (ne0,) if w_shape == "row" else (1, 3, ne0)  # "rows": broadcast by row modulo
    xs = (rng.standard_normal(x_shape) * 3 + 1).astype(np.float32)
    wv = rng.standard_normal(ws).astype(np.float32)
    bv = rng.standard_normal((ne0,)).astype(np.float32)
    eps = 1e-5

    def build(ctx):
        x = ctx.tensor(mb.f32, x_shape, name="x")
        w = ctx.tensor(mb.f32, ws, name="w")
        b = ctx.tensor(mb.f32, (ne0,), name="b")
        n = mb.ops.rms_norm(x, eps) if rms else mb.ops.norm(x, eps)
        m = mb.ops.mul(n, w)
        out = mb.ops.add(m, b) if with_add else m
        return {x: xs, w: wv, b: bv}, out, ([n, m] if with_add else [n])

    ref = _norm_ref(xs, rms, eps) * _broadcast_mod(wv, x_shape)
    if with_add:
        ref = ref + bv
    fused, mids_f = _run(build, 1, schedule)
    plain, mids_p = _run(build, 0, schedule)
    np.testing.assert_allclose(fused, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(plain, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)
    assert all((m == SENTINEL).all() for m in mids_f)
    assert all((m != SENTINEL).all() for m in mids_p)


def test_norm_keeps_needed_intermediate(schedule):
    """The normalised rows are read again after the MUL: MUL is not folded in, results still right."""
    rng = _rng(4)
    xs = rng.standard_normal((5, 16)).astype(np.float32)
    wv = rng.standard_normal((16,)).astype(np.float32)

    def build(ctx):
        x = ctx.tensor(mb.f32, (5, 16), name="x")
        w = ctx.tensor(mb.f32, (16,), name="w")
        n = mb.ops.norm(x, 1e-5)
        m = mb.ops.mul(n, w)
        out = mb.ops.add(m, n)
        return {x: xs, w: wv}, out, [n, m]

    ref_n = _norm_ref(xs, False, 1e-5)
    for fusion in (0, 1):
        out, (n, m) = _run(build, fusion, schedule)
        np.testing.assert_allclose(n, ref_n, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out, ref_n * wv + ref_n, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ long graphs

_LONG_CHAIN = """
import json, numpy as np, metal_backend as mb
sim = [d for d in mb.devices() if d.name == "MetalSim"][0]
ctx = mb.Context()
x, w = ctx.tensor(mb.f32, (4,)), ctx.tensor(mb.f32, (4,))
y = x
for _ in range({n}):
    y = mb.ops.add(y, w)
graph = mb.Graph(y)
mb.alloc_ctx_tensors(ctx, sim.buffer_type)
x.set(np.arange(4, dtype=np.float32))
w.set(np.full(4, 0.5, np.float32))
backend = sim.init_backend()
backend.options["fusion"] = {fusion}
assert backend.graph_compute(graph) == mb.Status.SUCCESS
print(json.dumps(y.get().tolist()))
"""


@pytest.mark.parametrize("fusion", [1, 0], ids=["fused", "unfused"])
def test_long_add_chain_encodes_in_linear_time(fusion):
    # Encoding once asked, for every node, about every other node (whether a result is read
    # elsewhere): 100k nodes took over 70 s. Linear encoding takes a few seconds for 200k nodes; a
    # return to quadratic needs minutes, so the generous timeout fails it without timing anything.
    n = 200_000
    proc = subprocess.run([sys.executable, "-c", _LONG_CHAIN.format(n=n, fusion=fusion)],
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == [k + 0.5 * n for k in range(4)]
