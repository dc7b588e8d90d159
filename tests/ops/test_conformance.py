"""Op conformance: every case of op_cases.CASES on every device, plus bad-input behaviour.

For each case and device: the graph is built, every tensor of the context is placed in one buffer
(followed by an unused guard tensor) and the whole buffer is filled with a sentinel byte; the inputs
are set, the graph computed, and the output compared with the case's float64 reference (NMSE) or exact
bytes. Every byte of the buffer that no tensor owns (alignment gaps, the guard) must still hold the
sentinel, so a kernel writing past the end of its output fails the case.

A device may refuse a case through supports_op; the CPU must support every case. A refusal must be
consistent: computing the graph on that device then raises UnsupportedOpError (never a crash, never a
silent wrong answer). Refusals are recorded as the test's `refused` property.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from op_cases import CASES, Case, draw, seed_of

SENTINEL = 0xA5
GUARD_BYTES = 256
VIEW_OPS = {"NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"}

_backends: dict = {}


def backend_for(device, params=""):
    key = (device.name, params)
    if key not in _backends:
        _backends[key] = device.init_backend(params)
    return _backends[key]


def nmse(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    if out.size == 0:
        return 0.0
    den = float(np.sum(ref * ref))
    num = float(np.sum((out - ref) ** 2))
    return num / den if den > 0 else num


def owned_ranges(ctx, buf, buft, skip):
    """Byte ranges of buf that tensors own: data plus any op scratch the buffer type asks for."""
    ranges = []
    for t in ctx.tensors:
        if t.view_src is not None or t is skip or t.buffer is None:
            continue
        ranges.append((t.offset, t.offset + max(t.nbytes, buft.alloc_size(t))))
    return sorted(ranges)


def check_sentinels(ctx, buf, buft, guard, case_name):
    raw = np.frombuffer(buf.get(), np.uint8)
    free = np.ones(raw.size, bool)
    for lo, hi in owned_ranges(ctx, buf, buft, guard):
        free[lo:hi] = False
    bad = np.nonzero(free & (raw != SENTINEL))[0]
    assert bad.size == 0, f"{case_name}: {bad.size} byte(s) outside every tensor were written, first at {bad[0]}"
    # The guard must really follow the output: a kernel running past the output's end lands in it.
    assert guard.offset >= max(hi for _, hi in owned_ranges(ctx, buf, buft, guard)), "guard is not last"


def run_case(case: Case, device, params=""):
    backend = backend_for(device, params)
    rng = np.random.default_rng(seed_of(case.name))
    ctx = mb.Context()
    arrays = [draw(spec, rng) for spec in case.inputs]
    tensors = [ctx.tensor(spec.type, spec.shape, name=f"in{i}") for i, spec in enumerate(case.inputs)]
    out = case.build(*tensors)
    graph = mb.Graph(out)
    guard = ctx.tensor(mb.i32, (GUARD_BYTES // 4,), name="guard")

    nodes = [n for n in graph.nodes if n.op not in VIEW_OPS]
    refused = [n.op for n in nodes if not device.supports_op(n)]
    if refused:
        return graph, refused, None

    buf = mb.alloc_ctx_tensors(ctx, backend)
    buf.clear(SENTINEL)
    for t, a in zip(tensors, arrays):
        t.set(a)
    # What the inputs hold after conversion to their types: the reference starts from these.
    stored = [t.get().astype(np.float64) if t.nelements else np.zeros(t.shape) for t in tensors]
    raws = [t.get_bytes() if t.nelements else b"" for t in tensors]
    backend.graph_compute(graph)

    if case.ref_bytes is not None:
        got = out.get_bytes() if out.nelements else b""
        want = case.ref_bytes(stored, raws)
        assert got == want, f"{case.name}: output bytes differ from the reference"
    else:
        result = out.get() if out.nelements else np.zeros(out.shape)
        ref = np.asarray(case.ref(*stored))
        assert tuple(result.shape) == tuple(ref.shape), f"{case.name}: shape {result.shape} != {ref.shape}"
        if case.nmse == 0.0:
            np.testing.assert_array_equal(result.astype(np.float64), ref, err_msg=case.name)
        else:
            assert np.all(np.isfinite(result) == np.isfinite(ref)), f"{case.name}: non-finite values differ"
            fin = np.isfinite(ref)
            err = nmse(result[fin], ref[fin])
            assert err <= case.nmse, f"{case.name}: NMSE {err:.3g} > {case.nmse:.3g}"
    check_sentinels(ctx, buf, backend.device.buffer_type, guard, case.name)
    return graph, refused, out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op(case, target, record_property):
    device, params = target
    graph, refused, _ = run_case(case, device, params)
    if not refused:
        return
    record_property("refused", ",".join(sorted(set(refused))))
    assert device.name != "CPU", f"the CPU device must support every case; it refuses {refused}"
    # A refusal must be the device's answer at compute time too, not a crash or a wrong result.
    backend = backend_for(device, params)
    mb.alloc_ctx_tensors(graph.nodes[-1].context, backend)
    with pytest.raises(mb.UnsupportedOpError):
        backend.graph_compute(graph)


def test_table_covers_every_op_family():
    ops = {c.op for c in CASES}
    # Every op of the table of ops (shaders/op_table.h) that computes, and the composite conv_1d.
    want = {name for name, _, kind, _ in mb._core.op_table() if kind != "VIEW"} | {"CONV_1D"}
    assert want <= ops, f"no cases for {sorted(want - ops)}"
    assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"


# --------------------------------------------------------------------------------------- bad input

def _ctx_tensors(*specs):
    ctx = mb.Context()
    return [ctx.tensor(t, s) for t, s in specs]


BAD_BUILDS = [
    ("add", lambda: mb.ops.add(*_ctx_tensors((mb.f32, (3, 4)), (mb.f32, (3, 5)))), ["(3, 4)", "(3, 5)"]),
    ("mul", lambda: mb.ops.mul(*_ctx_tensors((mb.f32, (4, 6)), (mb.f32, (4, 4)))), ["(4, 6)", "(4, 4)"]),
    ("mul_mat", lambda: mb.ops.mul_mat(*_ctx_tensors((mb.f32, (8, 32)), (mb.f32, (2, 33)))), ["(8, 32)", "(2, 33)"]),
    ("mul_mat", lambda: mb.ops.mul_mat(*_ctx_tensors((mb.f32, (2, 8, 32)), (mb.f32, (3, 2, 32)))),
     ["(2, 8, 32)", "(3, 2, 32)"]),
    ("cpy", lambda: mb.ops.cpy(*_ctx_tensors((mb.f32, (3, 4)), (mb.f16, (13,)))), ["(3, 4)", "(13,)"]),
    ("concat", lambda: mb.ops.concat(*_ctx_tensors((mb.f32, (3, 4)), (mb.f32, (2, 5))), 1), ["(3, 4)", "(2, 5)"]),
    ("concat", lambda: mb.ops.concat(*_ctx_tensors((mb.f32, (3, 4)), (mb.f16, (3, 4))), 1), ["f32", "f16"]),
    ("get_rows", lambda: mb.ops.get_rows(*_ctx_tensors((mb.f32, (10, 8)), (mb.f32, (3,)))), ["(3,)"]),
    ("repeat", lambda: mb.ops.repeat(*_ctx_tensors((mb.f32, (3, 4)), (mb.f32, (5, 8)))), ["(3, 4)", "(5, 8)"]),
    ("pad_reflect_1d", lambda: mb.ops.pad_reflect_1d(*_ctx_tensors((mb.f32, (3, 4))), 4, 0), ["p0 4", "(3, 4)"]),
    ("pad_reflect_1d", lambda: mb.ops.pad_reflect_1d(*_ctx_tensors((mb.f32, (3, 4))), 0, -1), ["p1 -1"]),
    ("soft_max_ext", lambda: mb.ops.soft_max_ext(*_ctx_tensors((mb.f32, (4, 9)), (mb.f32, (4, 8)))),
     ["(4, 9)", "(4, 8)"]),
    ("flash_attn_ext", lambda: mb.ops.flash_attn_ext(
        *_ctx_tensors((mb.f32, (1, 2, 3, 64)), (mb.f16, (1, 2, 10, 64)), (mb.f32, (1, 2, 10, 64)))), ["f16", "f32"]),
    ("flash_attn_ext", lambda: mb.ops.flash_attn_ext(
        *_ctx_tensors((mb.f32, (1, 3, 3, 64)), (mb.f16, (1, 2, 10, 64)), (mb.f16, (1, 2, 10, 64)))),
     ["(1, 3, 3, 64)", "(1, 2, 10, 64)"]),
    ("rope", lambda: mb.ops.rope(*_ctx_tensors((mb.f32, (1, 5, 2, 32)), (mb.i32, (4,))), 32), ["(4,)"]),
    ("swiglu", lambda: mb.ops.swiglu(*_ctx_tensors((mb.f32, (3, 7)))), ["(3, 7)", "even"]),
    ("geglu_split", lambda: mb.ops.geglu_split(*_ctx_tensors((mb.f32, (3, 8)), (mb.f32, (3, 4)))),
     ["(3, 8)", "(3, 4)"]),
    ("reglu", lambda: mb.ops.reglu(*_ctx_tensors((mb.i32, (3, 8)))), ["i32"]),
    ("reglu_split", lambda: mb.ops.reglu_split(*_ctx_tensors((mb.f32, (3, 8)), (mb.f16, (3, 8)))), ["f32", "f16"]),
    ("swiglu_oai", lambda: mb.ops.swiglu_oai(*_ctx_tensors((mb.f32, (3, 8)), (mb.f32, (3, 8))), limit=0.0),
     ["limit"]),
    ("arange", lambda: mb.ops.arange(mb.Context(), 0.0, 5.0, 0.0), ["step"]),
    ("arange", lambda: mb.ops.arange(mb.Context(), 5.0, 0.0, 1.0), ["start 5", "stop 0"]),
    ("argsort", lambda: mb.ops.argsort(*_ctx_tensors((mb.i32, (3, 8)))), ["i32"]),
    ("mul_mat_id", lambda: mb.ops.mul_mat_id(*_ctx_tensors((mb.f32, (4, 8, 32)), (mb.f32, (3, 2, 16)),
                                                           (mb.i32, (3, 2)))), ["(4, 8, 32)", "(3, 2, 16)"]),
    ("mul_mat_id", lambda: mb.ops.mul_mat_id(*_ctx_tensors((mb.f32, (4, 8, 32)), (mb.f32, (3, 2, 32)),
                                                           (mb.i32, (3, 3)))), ["(3, 2, 32)", "(3, 3)"]),
    ("add_id", lambda: mb.ops.add_id(*_ctx_tensors((mb.f32, (3, 5, 16)), (mb.f32, (4, 16)), (mb.i32, (5, 3)))),
     ["(3, 5, 16)", "(5, 3)"]),
    ("group_norm", lambda: mb.ops.group_norm(*_ctx_tensors((mb.f32, (1, 4, 3, 3))), 0), ["n_groups", "0"]),
    ("timestep_embedding", lambda: mb.ops.timestep_embedding(*_ctx_tensors((mb.f32, (2, 3))), 8), ["(2, 3)"]),
    ("conv_transpose_1d", lambda: mb.ops.conv_transpose_1d(*_ctx_tensors((mb.f32, (3, 4, 5)), (mb.f32, (1, 2, 9)))),
     ["(3, 4, 5)", "(1, 2, 9)"]),
    ("pool_2d", lambda: mb.ops.pool_2d(*_ctx_tensors((mb.f32, (1, 1, 2, 2))), "max", 3, 3, 1, 1), ["(1, 1, 2, 2)"]),
    ("ssm_conv", lambda: mb.ops.ssm_conv(*_ctx_tensors((mb.f32, (1, 8, 6)), (mb.f32, (4, 4)))),
     ["(1, 8, 6)", "(4, 4)"]),
    ("upscale", lambda: mb.ops.upscale(*_ctx_tensors((mb.f32, (2, 3))), 0), ["scale_factor", "0"]),
    ("upscale", lambda: mb.ops.upscale(*_ctx_tensors((mb.f32, (2, 3))), 2, "area"), ["area", "bicubic"]),
    ("interpolate", lambda: mb.ops.interpolate(*_ctx_tensors((mb.f32, (2, 3))), (4, -1)), ["(4, -1)"]),
    ("interpolate", lambda: mb.ops.interpolate(*_ctx_tensors((mb.f32, (2, 3))), (4, 6), "bicubic", antialias=True),
     ["antialias", "bicubic"]),
    ("upscale", lambda: mb.ops.upscale(*_ctx_tensors((mb.f32, (2, 3))), 2, antialias=True), ["antialias", "nearest"]),
    ("interpolate", lambda: mb.ops.interpolate(*_ctx_tensors((mb.f16, (2, 3))), (4, 6), "bilinear"), ["f16"]),
    ("interpolate", lambda: mb.ops.interpolate(*_ctx_tensors((mb.f32, (0, 3))), (4, 6)), ["(0, 3)", "(1, 1, 4, 6)"]),
    ("ssm_scan", lambda: mb.ops.ssm_scan(*_ctx_tensors(
        (mb.f32, (1, 2, 8, 16)), (mb.f32, (1, 3, 2, 8)), (mb.f32, (1, 3, 2)), (mb.f32, (2, 16)),
        (mb.f32, (1, 3, 1, 16)), (mb.f32, (1, 3, 1, 8)), (mb.i32, (1,)))),
     ["C f32 (1, 3, 1, 8)", "B f32 (1, 3, 1, 16)"]),
    ("ssm_scan", lambda: mb.ops.ssm_scan(*_ctx_tensors(
        (mb.f32, (1, 3, 8, 16)), (mb.f32, (1, 3, 3, 8)), (mb.f32, (1, 3, 3)), (mb.f32, (3, 1)),
        (mb.f32, (1, 3, 2, 16)), (mb.f32, (1, 3, 2, 16)), (mb.i32, (1,)))), ["n_group", "(1, 3, 2, 16)"]),
    ("ssm_scan", lambda: mb.ops.ssm_scan(*_ctx_tensors(
        (mb.f32, (1, 2, 8, 16)), (mb.f32, (1, 3, 2, 8)), (mb.f32, (1, 3, 2)), (mb.f32, (2, 16)),
        (mb.f32, (1, 3, 1, 16)), (mb.f32, (1, 3, 1, 16)), (mb.f32, (1,)))), ["ids", "i32"]),
    ("rwkv_wkv6", lambda: mb.ops.rwkv_wkv6(*_ctx_tensors(
        (mb.f32, (4, 2, 8)), (mb.f32, (4, 2, 8)), (mb.f32, (4, 2, 8)), (mb.f32, (2, 8)), (mb.f32, (4, 2, 7)),
        (mb.f32, (1, 128)))), ["td f32 (4, 2, 7)", "[S, H, T]"]),
    ("rwkv_wkv6", lambda: mb.ops.rwkv_wkv6(*_ctx_tensors(
        (mb.f32, (4, 2, 8)), (mb.f32, (4, 2, 8)), (mb.f32, (4, 2, 8)), (mb.f32, (2, 8)), (mb.f32, (4, 2, 8)),
        (mb.f32, (1, 100)))), ["state f32 (1, 100)"]),
    ("rwkv_wkv7", lambda: mb.ops.rwkv_wkv7(*_ctx_tensors(*[(mb.f32, (3, 2, 8))] * 6, (mb.f32, (2, 128)))),
     ["multiple of n_seqs", "state f32 (2, 128)"]),
    ("rwkv_wkv7", lambda: mb.ops.rwkv_wkv7(*_ctx_tensors(*[(mb.f32, (4, 2, 8))] * 5, (mb.f16, (4, 2, 8)),
                                                         (mb.f32, (1, 128)))), ["f32", "b f16 (4, 2, 8)"]),
    ("acc", lambda: mb.ops.acc(*_ctx_tensors((mb.f32, (6, 10)), (mb.f32, (3, 4))), 40, 120, 120, 4 * 40),
     ["(6, 10)", "(3, 4)", "offset 160"]),
    ("acc", lambda: mb.ops.acc(*_ctx_tensors((mb.f32, (6, 10)), (mb.f32, (3, 4))), 8, 120, 120, 0), ["nb1 8"]),
    ("im2col", lambda: mb.ops.im2col(*_ctx_tensors((mb.f16, (4, 3, 3)), (mb.f32, (1, 5, 20))), 1, 0, 1, 0, 1, 0,
                                     False, mb.f16), ["(4, 3, 3)", "(1, 5, 20)"]),
]


@pytest.mark.parametrize("op,build,parts", BAD_BUILDS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD_BUILDS)])
def test_bad_input_raises_at_build(op, build, parts):
    with pytest.raises(mb.InvalidArgumentError) as info:
        build()
    msg = str(info.value)
    assert op in msg, f"message does not name the op: {msg}"
    for p in parts:
        assert p in msg, f"message does not show {p}: {msg}"


def test_compute_with_unallocated_tensors_raises(device):
    backend = backend_for(device)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 8))
    y = mb.ops.gelu(a)
    with pytest.raises(mb.MetalBackendError):
        backend.graph_compute(mb.Graph(y))


def test_unsupported_op_raises_unsupported_op_error(device):
    """A node the device refuses raises UnsupportedOpError when computed directly."""
    backend = backend_for(device)
    ctx = mb.Context()
    # Element-wise ops on a quantized tensor: no backend computes these.
    a = ctx.tensor(mb.q8_0, (2, 64))
    y = mb.ops.gelu(a)
    mb.alloc_ctx_tensors(ctx, backend)
    a.set(np.zeros((2, 64), np.float32))
    assert not device.supports_op(y)
    with pytest.raises(mb.UnsupportedOpError) as info:
        backend.graph_compute(mb.Graph(y))
    assert "GELU" in str(info.value)


def test_get_rows_index_out_of_range_raises(device):
    backend = backend_for(device)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (5, 8))
    idx = ctx.tensor(mb.i32, (3,))
    y = mb.ops.get_rows(a, idx)
    mb.alloc_ctx_tensors(ctx, backend)
    a.set(np.zeros((5, 8), np.float32))
    idx.set(np.array([0, 5, 1], np.int32))
    # A device that cannot run the gather says so; one that can must reject the index: the CPU at
    # once (IndexError), a GPU when it finds the bad index in a kernel (DeviceError at the sync).
    if not device.supports_op(y):
        expected = mb.UnsupportedOpError
    elif device.name == "CPU":
        expected = IndexError
    else:
        expected = (IndexError, mb.DeviceError)
    with pytest.raises(expected):
        backend.graph_compute(mb.Graph(y))
