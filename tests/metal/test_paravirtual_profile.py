"""MetalSim as the paravirtual GPU of GitHub's macOS runners (device prop profile="github_paravirtual":
family Common3 only, no simdgroup reduction or matrix, no bfloat), with the conformance suite under
it: every case either runs right on MetalSim, or MetalSim refuses an op through supports_op and a
Scheduler computes the case right with the CPU; nothing aborts. Under the profile the executor fails
any dispatch that uses simd reductions or simdgroup matrices, so an op supports_op claims while its
kernel needs them fails here as it would on the runners, instead of passing on MetalSim's own GPU.
"""
from __future__ import annotations

import pytest

import metal_backend as mb
from op_cases import CASES
from test_shader_families import VIEW_OPS, WRITES_INTO_INPUT, build, check, inputs_now

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")


@pytest.fixture(scope="module")
def paravirtual():
    dev = SIM[0]
    dev.set_prop("profile", "github_paravirtual")
    yield dev
    dev.set_prop("profile", "")


def test_the_profile_reads_as_the_runners_gpu(paravirtual):
    extra = paravirtual.props.extra
    assert extra["profile"] == "github_paravirtual"
    assert (extra["has_simdgroup_reduction"], extra["has_simdgroup_mm"], extra["has_bfloat"]) == ("0", "0", "0")
    assert extra["families"] == "3003"
    assert not paravirtual.init_backend().supports_family(7)
    with pytest.raises(mb.InvalidArgumentError, match="the GPU does not have has_simdgroup_mm"):
        paravirtual.set_prop("has_simdgroup_mm", 1)


def test_conformance_under_the_profile(paravirtual):
    backend = paravirtual.init_backend()
    sched = mb.Scheduler([backend, mb.device("CPU").init_backend()])
    on_gpu = refused = 0
    for case in CASES:
        tensors, out, graph = build(case)
        before = inputs_now(tensors)
        nodes = [n for n in graph.nodes if n.op not in VIEW_OPS]
        if all(paravirtual.supports_op(n) for n in nodes):
            mb.alloc_ctx_tensors(out.context, backend)
            backend.graph_compute(graph)  # a kernel needing what the GPU lacks raises DeviceError here
            on_gpu += 1
        else:
            refused += 1
            lost = {n.op for n in nodes if not paravirtual.supports_op(n)}
            if lost <= WRITES_INTO_INPUT and out.view_src is not None:
                # Into a view of MetalSim memory: the CPU computes it in its own memory, copied back.
                staged = [p for p in sched.plan(graph) if p.reason.startswith("fallback: computed in CPU memory")]
                assert staged, case.name
            sched.graph_compute(graph)
        check(case, tensors, out, before)
    # Element-wise ops, copies and layouts run; reductions, matrices and attention fall back.
    assert on_gpu > 0 and refused > 0, (on_gpu, refused)


def test_unknown_profile_raises(paravirtual):
    with pytest.raises(mb.InvalidArgumentError, match=r"unknown profile 'm1'.*github_paravirtual"):
        paravirtual.set_prop("profile", "m1")
    paravirtual.set_prop("profile", "github_paravirtual")
