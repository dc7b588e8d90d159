"""Every Backend call made from that backend's own abort callback (issue 24, item 2).

On MetalSim `backend.profile(graph)` from the callback deadlocked holding the GIL: its timed
compute took the backend's lock before asking whether it was re-entered. Now MetalBackend takes its
lock only through lock_for(), which asks first, and profile_graph asks for every backend. The class:
each public Backend call, from inside the callback, on every target, returns or raises a
metal_backend error; the ones that need the computing backend raise DeviceError naming it and the
call. A hang fails the case (each runs in its own process with a time limit), and the table must
name every public Backend attribute, so a new one cannot be left out.
"""
from __future__ import annotations

import pytest

import metal_backend as mb
from isolated import run_isolated

# Each case is a fresh interpreter (seconds each, dozens of them).
pytestmark = pytest.mark.slow

# call -> source run inside the callback; `g2` is a one-node graph over other tensors.
CALLS = {
    "graph_compute": "be.graph_compute(g)",
    "graph_compute_async": "be.graph_compute_async(g)",
    "synchronize": "be.synchronize()",
    "set_tensor_async": "be.set_tensor_async(a, np.ones((256, 64), np.float32))",
    "get_tensor_async": "be.get_tensor_async(a, np.empty((256, 64), np.float32))",
    "profile": "be.profile(g2)",
    "_profile": "be._profile(g2, 1)",
    "capture_next_compute": "be.capture_next_compute()",
    "graph_optimize": "be.graph_optimize(g2)",
    "options": "be.options['debug' if 'debug' in be.options else 'n_threads']",
    "set_abort_callback": "be.set_abort_callback(cb)",
    "supports_family": "be.supports_family(1007)",
    "device": "be.device",
    "name": "be.name",
}
# Calls that need the backend the callback's compute holds, per device kind.
MUST_REFUSE = {"CPU": {"graph_compute", "graph_compute_async", "profile", "_profile"},
               "MetalSim": {"graph_compute", "graph_compute_async", "synchronize", "set_tensor_async",
                            "get_tensor_async", "profile", "_profile"}}

SETUP = """
import numpy as np
import metal_backend as mb
dev = mb.device({name!r})
be = dev.init_backend({params!r})
ctx = mb.Context()
a = ctx.tensor(mb.f32, (256, 64), name="a")
b = ctx.tensor(mb.f32, (256, 64), name="b")
y = a
for _ in range(80):  # MetalSim asks before each command buffer: more than 64 nodes make two
    y = mb.ops.scale(y, 1.0)
y = mb.ops.scale(y, 2.0)
z = mb.ops.scale(b, 3.0)
mb.alloc_ctx_tensors(ctx, dev.buffer_type)
a.set(np.ones((256, 64), np.float32))
b.set(np.ones((256, 64), np.float32))
g, g2 = mb.Graph(y), mb.Graph(z)
outcome = []
def cb():
    if not outcome:
        try:
            {call}
            outcome.append("returned")
        except mb.DeviceError as e:
            outcome.append("DeviceError " + str(e))
        except mb.MetalBackendError as e:
            outcome.append(type(e).__name__)
    return False
be.set_abort_callback(cb)
assert be.graph_compute(g) == mb.Status.SUCCESS
be.set_abort_callback(None)
assert np.array_equal(y.get(), np.full((256, 64), 2.0, np.float32))
print(outcome[0])
"""


def test_the_table_names_every_public_backend_call():
    public = {n for n in dir(mb.Backend) if not n.startswith("__") and n != "_pybind11_conduit_v1_"}
    assert public == set(CALLS)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_call_from_the_abort_callback_returns_or_raises(target, call):
    device, params = target
    out = run_isolated(SETUP.format(name=device.name, params=params, call=CALLS[call]), timeout=90).strip()
    if call in MUST_REFUSE[device.name]:
        assert out.startswith("DeviceError") and "abort callback" in out and device.name in out, out
    else:
        assert out == "returned" or out in ("UnsupportedOpError", "InvalidArgumentError"), out


def test_profile_from_the_callback_names_the_call(target):
    device, params = target
    out = run_isolated(SETUP.format(name=device.name, params=params, call=CALLS["profile"]), timeout=90)
    assert "profile" in out, out


def test_an_aborted_profile_says_so(target):
    """Questionable item: an aborted profile looked like a normal one; it now says it was aborted."""
    device, params = target
    be = device.init_backend(params)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (8, 8))
    y = mb.ops.scale(mb.ops.scale(mb.ops.scale(a, 1.0), 2.0), 3.0)
    mb.alloc_ctx_tensors(ctx, device.buffer_type)
    a.set(__import__("numpy").ones((8, 8), "float32"))
    full = be.profile(mb.Graph(y))
    assert not full.aborted and len(full.nodes) == 3 and "ABORTED" not in str(full)
    be.set_abort_callback(lambda: True)
    cut = be.profile(mb.Graph(y))
    assert cut.aborted and len(cut.nodes) < 3 and "ABORTED by the abort callback" in str(cut)
