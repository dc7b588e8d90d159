"""One library per shader family, and a family the compiler rejects costs only its own ops.

MetalSim's `reject_shader_families` prop makes chosen families fail to compile as Apple's compiler
might reject them. Then: supports_op is False for exactly the ops of those families (the compiler's
message kept in `dev.shader_families`), computing one directly raises UnsupportedOpError naming the
family and the message, and a Scheduler over MetalSim and the CPU still computes every conformance
case right, running the rejected family's ops on the CPU. With the prop cleared, the families
compile again and MetalSim runs everything.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from op_cases import CASES, draw, seed_of

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")

VIEW_OPS = {"NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"}
# A few families, each behind ops that Whisper and the conformance cases use.
REJECTED = ["soft_max", "mul_mat", "norm", "rope", "cpy", "binary"]
# Ops whose result is a view of a tensor they write into (ggml's cpy(src, dst), set_rows): when that
# tensor lives in MetalSim memory, the Scheduler has no backend for them once MetalSim refuses them
# (it does not let the CPU write device memory), and says so with UnsupportedOpError.
WRITES_INTO_INPUT = {"CPY", "SET_ROWS"}


@pytest.fixture
def sim():
    dev = SIM[0]
    dev.set_prop("reject_shader_families", "")
    yield dev
    dev.set_prop("reject_shader_families", "")


def nmse(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    den = float(np.sum(ref * ref))
    num = float(np.sum((out - ref) ** 2))
    return num / den if den > 0 else num


def build(case):
    """The case's graph with its inputs set in MetalSim memory (the rest is the scheduler's)."""
    rng = np.random.default_rng(seed_of(case.name))
    ctx = mb.Context()
    arrays = [draw(spec, rng) for spec in case.inputs]
    tensors = [ctx.tensor(spec.type, spec.shape, name=f"in{i}") for i, spec in enumerate(case.inputs)]
    mb.alloc_ctx_tensors(ctx, SIM[0].buffer_type)
    for t, a in zip(tensors, arrays):
        if t.nelements:
            t.set(a)
    out = case.build(*tensors)
    return tensors, out, mb.Graph(out)


def inputs_now(tensors):
    """The inputs' values and bytes, for a reference taken before a compute that writes into one."""
    stored = [t.get().astype(np.float64) if t.nelements else np.zeros(t.shape) for t in tensors]
    raws = [t.get_bytes() if t.nelements else b"" for t in tensors]
    return stored, raws


def check(case, tensors, out, before=None):
    stored, raws = before if before is not None else inputs_now(tensors)
    if case.ref_bytes is not None:
        assert (out.get_bytes() if out.nelements else b"") == case.ref_bytes(stored, raws), case.name
        return
    result = out.get() if out.nelements else np.zeros(out.shape)
    ref = np.asarray(case.ref(*stored))
    if case.nmse == 0.0:
        np.testing.assert_array_equal(result.astype(np.float64), ref, err_msg=case.name)
    else:
        fin = np.isfinite(ref)
        assert np.all(np.isfinite(result) == fin), f"{case.name}: non-finite values differ"
        assert nmse(result[fin], ref[fin]) <= case.nmse, case.name


def supported_ops(dev, case) -> list[tuple[str, bool]]:
    _, _, graph = build(case)
    return [(n.op, dev.supports_op(n)) for n in graph.nodes if n.op not in VIEW_OPS]


@pytest.fixture(scope="module")
def baseline():
    """What MetalSim supports of each case with every family compiled."""
    dev = SIM[0]
    dev.set_prop("reject_shader_families", "")
    return {case.name: supported_ops(dev, case) for case in CASES}


def test_one_family_per_metal_file_all_compile(sim):
    from pathlib import Path
    shaders = Path(__file__).resolve().parents[2] / "shaders"
    states = sim.compile_shader_families()
    assert sorted(states) == sorted(p.stem for p in shaders.glob("*.metal"))
    assert all(s.startswith("compiled in ") for s in states.values()), states
    assert {k.split(".", 1)[1]: v for k, v in sim.props.extra.items() if k.startswith("shader_family.")} == states


@pytest.mark.parametrize("family", REJECTED)
def test_conformance_through_the_scheduler_with_a_family_rejected(sim, baseline, family):
    sim.set_prop("reject_shader_families", family)
    assert sim.props.extra["reject_shader_families"] == family
    states = sim.compile_shader_families()
    assert states[family].startswith("failed: ") and f"{family}.metal" in states[family], states[family]
    assert all(s.startswith("compiled") for f, s in states.items() if f != family), states

    sched = mb.Scheduler([sim.init_backend(), mb.device("CPU").init_backend()])
    fell_back = 0
    for case in CASES:
        now = supported_ops(sim, case)
        before = baseline[case.name]
        # Only ops the family serves lose support; each op is of one family.
        lost = {op for (op, was), (_, is_) in zip(before, now) if was and not is_}
        kept = {op for (op, was), (_, is_) in zip(before, now) if was and is_}
        assert not lost & kept, (case.name, lost, kept)
        if not all(was for _, was in before):
            continue  # MetalSim refuses part of it anyway: its fallback is not this test's
        tensors, out, graph = build(case)
        before = inputs_now(tensors)
        plan = sched.plan(graph)
        on_cpu = {p.node.op for p in plan if p.backend.name == "CPU" and p.node.op not in VIEW_OPS}
        assert on_cpu == lost, (case.name, on_cpu, lost)
        if lost & WRITES_INTO_INPUT and out.view_src is not None:
            # Into a view of MetalSim memory: computed in CPU memory and copied back.
            staged = [p for p in plan if p.reason.startswith("fallback: computed in CPU memory and copied back")]
            assert [p.node.op for p in staged] == [out.op], (case.name, [(p.node.op, p.reason) for p in plan])
        sched.graph_compute(graph)
        check(case, tensors, out, before)
        fell_back += bool(lost)
    assert fell_back > 0, f"no conformance case uses the {family} family"


def test_a_rejected_op_computed_directly_names_its_family_and_the_message(sim):
    sim.set_prop("reject_shader_families", "soft_max,rope")
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (4, 32), name="x")
    mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    x.set(np.ones((4, 32), np.float32))
    y = mb.ops.soft_max(x)
    z = mb.ops.gelu(x)
    assert not sim.supports_op(y) and sim.supports_op(z)
    backend = sim.init_backend()
    mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    with pytest.raises(mb.UnsupportedOpError, match=r"SOFT_MAX.*shader family 'soft_max' failed: .*soft_max\.metal"):
        backend.graph_compute(mb.Graph(y))
    # The rest of the device works.
    backend.graph_compute(mb.Graph(z))
    ref = 0.5 * (1 + np.tanh(0.7978845608 * (1 + 0.044715)))
    np.testing.assert_allclose(z.get(), np.full((4, 32), ref), rtol=1e-5)
    # Cleared, the family compiles again and MetalSim runs the op.
    sim.set_prop("reject_shader_families", "")
    assert sim.supports_op(y)
    backend.graph_compute(mb.Graph(y))
    np.testing.assert_allclose(y.get(), np.full((4, 32), 1 / 32), rtol=1e-6)


@pytest.mark.parametrize("strategy", [0, 1, 2])
def test_every_compile_strategy_gives_the_same_answers(sim, strategy):
    before = sim.props.extra["shader_compile"]
    sim.set_prop("shader_compile", strategy)
    try:
        sim.set_prop("reject_shader_families", "rope")  # forget what compiled: first use again
        case = next(c for c in CASES if c.op == "SOFT_MAX")
        tensors, out, graph = build(case)
        sched = mb.Scheduler([sim.init_backend(), mb.device("CPU").init_backend()])
        sched.graph_compute(graph)
        check(case, tensors, out)
        states = sim.shader_families
        assert states["soft_max"].startswith("compiled"), states
        if strategy == 0:
            # On demand: only what was asked about compiled (a rejected family not even tried).
            assert states["flash_attn_ext"] == states["rope"] == "not compiled", states
        else:
            states = sim.compile_shader_families()  # waits for the background compiles
            assert states["rope"].startswith("failed") and states["flash_attn_ext"].startswith("compiled"), states
    finally:
        sim.set_prop("shader_compile", int(before))


def test_bad_family_props_raise(sim):
    with pytest.raises(mb.InvalidArgumentError, match=r"no shader family 'softmax'.*soft_max"):
        sim.set_prop("reject_shader_families", "softmax")
    with pytest.raises(mb.InvalidArgumentError, match=r"shader_compile must be 0.*got 3"):
        sim.set_prop("shader_compile", 3)
    with pytest.raises(mb.InvalidArgumentError, match=r"no settable text prop"):
        mb.device("CPU").set_prop("reject_shader_families", "soft_max")
    with pytest.raises(TypeError):
        sim.set_prop("reject_shader_families", 1.5)
    assert mb.device("CPU").shader_families == {}


@pytest.mark.parametrize("layout", ["rows", "column block", "transposed"])
def test_rejected_cpy_into_gpu_memory_is_computed_on_the_cpu_and_copied_back(sim, layout):
    """A CPY into a view of MetalSim memory with `cpy` rejected (a KV-cache write): the CPU computes
    it in its own memory and only the view's bytes are written back; the rest of the tensor stays."""
    sim.set_prop("reject_shader_families", "cpy")
    rng = np.random.default_rng(7)
    ctx = mb.Context()
    cache = ctx.tensor(mb.f32, (8, 16), name="cache")
    shape, strides, offset = {"rows": ((3, 16), (64, 4), 2 * 64), "column block": ((8, 4), (64, 4), 4 * 4),
                              "transposed": ((4, 8), (4, 64), 8 * 4)}[layout]
    src = ctx.tensor(mb.f32, shape, name="src")
    mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    old = rng.standard_normal((8, 16)).astype(np.float32)
    new = rng.standard_normal(shape).astype(np.float32)
    cache.set(old)
    src.set(new)
    dst = mb.ops.view(cache, shape, strides, offset)
    out = mb.ops.cpy(src, dst)
    graph = mb.Graph(out)
    sched = mb.Scheduler([sim.init_backend(), mb.device("CPU").init_backend()])
    (placed,) = [p for p in sched.plan(graph) if p.node.op == "CPY"]
    assert placed.backend.name == "CPU", placed.reason
    assert placed.reason == "fallback: computed in CPU memory and copied back into its 'MetalSim' memory"
    sched.graph_compute(graph)
    want = old.copy()
    np.lib.stride_tricks.as_strided(want.reshape(-1)[offset // 4:], shape, strides)[...] = new
    np.testing.assert_array_equal(cache.get(), want)
    np.testing.assert_array_equal(out.get(), new)
    # The node keeps its own layout: a second compute writes the same place again.
    src.set(-new)
    sched.graph_compute(graph)
    np.lib.stride_tricks.as_strided(want.reshape(-1)[offset // 4:], shape, strides)[...] = -new
    np.testing.assert_array_equal(cache.get(), want)
    assert out.view_src is not None and out.view_src.name == "cache"
