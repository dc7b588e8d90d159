"""The abort callback runs inside a compute. Calling back into the same backend from it either works
(reading or setting options, synchronous copies on the CPU) or raises mb.DeviceError naming the
backend and the call (computing, synchronizing or queueing copies where the compute holds the
backend); it never deadlocks. A callback that raises ends the compute with its exception and leaves
the backend usable. Each case runs in its own process with a time limit: a regression is a hang."""
from __future__ import annotations

import pytest

from isolated import run_isolated

SETUP = """
import numpy as np
import metal_backend as mb
dev = mb.device({name!r})
be = dev.init_backend({params!r})
ctx = mb.Context()
a = ctx.tensor(mb.f32, (256, 64), name="a")
y = a
for _ in range(80):  # MetalSim asks before each command buffer: more than 64 nodes make two
    y = mb.ops.scale(y, 1.0)
y = mb.ops.scale(y, 2.0)
mb.alloc_ctx_tensors(ctx, dev.buffer_type)
a.set(np.ones((256, 64), np.float32))
g = mb.Graph(y)
def expect_ok():
    assert be.graph_compute(g) == mb.Status.SUCCESS
    assert np.array_equal(y.get(), np.full((256, 64), 2.0, np.float32))
"""


def run_case(target, body: str) -> str:
    device, params = target
    return run_isolated(SETUP.format(name=device.name, params=params) + body, timeout=90)


@pytest.fixture
def backend_target(target):
    return target


def test_compute_from_callback_raises(backend_target):
    out = run_case(backend_target, """
errors = []
def cb():
    try:
        be.graph_compute(g)
    except mb.DeviceError as e:
        errors.append(str(e))
    return False
be.set_abort_callback(cb)
expect_ok()
assert errors, "the callback was not asked"
assert "abort callback" in errors[0] and be.name in errors[0] and "graph_compute" in errors[0], errors[0]
be.set_abort_callback(None)
expect_ok()
print("ok")
""")
    assert out.split() == ["ok"]


def test_compute_async_from_callback_raises(backend_target):
    out = run_case(backend_target, """
errors = []
def cb():
    try:
        be.graph_compute_async(g)
    except mb.DeviceError as e:
        errors.append(str(e))
    return False
be.set_abort_callback(cb)
expect_ok()
assert errors and be.name in errors[0]
print("ok")
""")
    assert out.split() == ["ok"]


def test_options_from_callback(backend_target):
    """Setting an option from the callback works and takes effect at the next compute."""
    device, _ = backend_target
    key, value = ("n_threads", 1) if device.name == "CPU" else ("fusion", 0)
    out = run_case(backend_target, f"""
seen = []
def cb():
    seen.append(be.options[{key!r}])
    be.options[{key!r}] = {value}
    return False
be.set_abort_callback(cb)
expect_ok()
assert seen and be.options[{key!r}] == {value}
be.set_abort_callback(None)
expect_ok()
print("ok")
""")
    assert out.split() == ["ok"]


def test_n_threads_changes_while_computing_from_another_thread():
    """Setting n_threads from another thread during computes neither blocks nor breaks them."""
    out = run_isolated(SETUP.format(name="CPU", params="n_threads=2") + """
import threading
stop = False
def flip():
    i = 0
    while not stop:
        be.options["n_threads"] = 1 + i % 3
        i += 1
t = threading.Thread(target=flip)
t.start()
try:
    for _ in range(30):
        expect_ok()
finally:
    stop = True
    t.join()
print("ok")
""", timeout=90)
    assert out.split() == ["ok"]


def test_synchronize_and_copies_from_callback(backend_target):
    """CPU: synchronize and copies are synchronous and work between nodes. Metal/MetalSim: the compute
    holds the backend's queue, so they raise DeviceError."""
    device, _ = backend_target
    out = run_case(backend_target, """
results = []
def cb():
    for name, call in (("synchronize", lambda: be.synchronize()),
                       ("set_tensor_async", lambda: be.set_tensor_async(a, np.ones((256, 64), np.float32))),
                       ("get_tensor_async", lambda: be.get_tensor_async(a, np.empty((256, 64), np.float32)))):
        try:
            call()
            results.append((name, "ok"))
        except mb.DeviceError as e:
            assert be.name in str(e) and name in str(e), str(e)
            results.append((name, "DeviceError"))
    return False
be.set_abort_callback(cb)
expect_ok()
print(sorted(set(results)))
""")
    want = "ok" if device.name == "CPU" else "DeviceError"
    assert out.strip() == str(sorted({("get_tensor_async", want), ("set_tensor_async", want), ("synchronize", want)}))


def test_callback_that_raises(backend_target):
    out = run_case(backend_target, """
class Stop(Exception):
    pass
def cb():
    raise Stop("from the callback")
be.set_abort_callback(cb)
for _ in range(3):
    try:
        be.graph_compute(g)
        raise SystemExit("the callback's exception was swallowed")
    except Stop:
        pass
be.set_abort_callback(None)
expect_ok()
print("ok")
""")
    assert out.split() == ["ok"]


def test_callback_that_replaces_itself(backend_target):
    out = run_case(backend_target, """
calls = []
def cb():
    calls.append(1)
    be.set_abort_callback(lambda: False)  # drops this closure while it runs
    return False
be.set_abort_callback(cb)
expect_ok()
expect_ok()
assert len(calls) == 1
print("ok")
""")
    assert out.split() == ["ok"]


def test_callback_computing_on_another_backend(backend_target):
    """Another backend may compute from the callback, on other tensors; on the tensors the outer
    compute writes, the CPU refuses (waiting would wait for itself)."""
    out = run_case(backend_target, """
other = mb.device("CPU").init_backend("n_threads=1")
c2 = mb.Context()
b = c2.tensor(mb.f32, (8,), name="b")
z = mb.ops.scale(b, 3.0)
mb.alloc_ctx_tensors(c2, mb.device("CPU").buffer_type)
b.set(np.ones(8, np.float32))
h = mb.Graph(z)
got = []
def cb():
    other.graph_compute(h)
    got.append(z.get().tolist())
    if be.device.name == "CPU":
        try:
            other.graph_compute(g)
            got.append("computed")
        except mb.DeviceError as e:
            assert "in use by another compute" in str(e), str(e)
            got.append("refused")
    return False
be.set_abort_callback(cb)
expect_ok()
assert got[0] == [3.0] * 8
assert be.device.name != "CPU" or "refused" in got
print("ok")
""")
    assert out.split() == ["ok"]
