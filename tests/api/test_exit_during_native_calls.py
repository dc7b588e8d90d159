"""The interpreter exits while daemon threads are inside native calls (issue 24, item 1).

At exit CPython ends every other thread that asks for the GIL back; a thread coming back from a
compute then was unwound through a noexcept destructor (SIGABRT, "terminate called without an
active exception", 10 of 10 runs). Every call that releases the GIL goes through one helper
(src/bindings/gil.h), which parks such a thread instead: the process exits with status 0. Each
case runs in its own process, several times, with a timeout (a parked thread must not hold up the
exit either).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from isolated import run_isolated

# Each case is a fresh interpreter (seconds each, dozens of them).
pytestmark = pytest.mark.slow

SETUP = """
import threading, time
import numpy as np
import metal_backend as mb
dev = mb.device({device!r})
ctx = mb.Context()
a = ctx.tensor(mb.f32, (256, 256), name="a")
b = ctx.tensor(mb.f32, (256, 256), name="b")
y = mb.ops.mul_mat(a, b)
for _ in range(8):
    y = mb.ops.mul_mat(y, b)
buf = mb.alloc_ctx_tensors(ctx, dev.buffer_type)
a.set(np.random.rand(256, 256).astype(np.float32))
b.set(np.random.rand(256, 256).astype(np.float32) / 256)
backend = dev.init_backend()
graph = mb.Graph(y)
host = np.zeros(256 * 256, np.float32)
"""

# Each loops forever in native calls that release the GIL; the main thread leaves while it runs.
CALLS = {
    "graph_compute": "backend.graph_compute(graph)",
    "graph_compute_async+synchronize": "backend.graph_compute_async(graph); backend.synchronize()",
    "scheduler": "sched.graph_compute(graph)",
    "profile": "backend.profile(graph)",
    "tensor_set_get": "a.set(host.reshape(256, 256)); a.get()",
    "buffer_set_get": "buf.set(host); buf.get(); buf.clear(0)",
    "abort_callback": "backend.graph_compute(graph)",
}


@pytest.mark.parametrize("device_name", ["CPU", "MetalSim"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_exit_while_a_daemon_thread_is_inside_a_native_call(device_name, call):
    code = SETUP.format(device=device_name)
    if call == "scheduler":
        code += "sched = mb.Scheduler([backend, mb.device('CPU').init_backend()])\n"
        code += "graph = mb.Graph(mb.ops.scale(y, 0.5))\n"
    if call == "abort_callback":
        # A Python callback asked inside the compute while the interpreter exits: it must not be
        # entered then (the compute stops instead).
        code += "backend.set_abort_callback(lambda: time.sleep(0.001) or False)\n"
    code += f"""
calls = [0]
def work():
    while True:
        {CALLS[call]}
        calls[0] += 1
for _ in range(2):
    threading.Thread(target=work, daemon=True).start()
while calls[0] < 2:
    time.sleep(0.005)
print("leaving", calls[0] >= 2)
"""
    for _ in range(3):
        assert run_isolated(code, timeout=120).strip() == "leaving True"


def test_exit_while_a_non_python_thread_drops_python_objects():
    """Copies queued with get_tensor_async hold the destination array; a backend dropped at exit
    releases it without the interpreter (nothing to release then), and the process exits 0."""
    code = SETUP.format(device="MetalSim") + """
outs = [np.zeros((256, 256), np.float32) for _ in range(4)]
for o in outs:
    backend.get_tensor_async(y, o)
backend.graph_compute_async(graph)
print("leaving")
"""
    for _ in range(3):
        assert run_isolated(code, timeout=120).strip() == "leaving"


def test_bindings_release_the_gil_only_through_the_exit_safe_helper():
    """The class: no binding may use pybind11's own GIL guards, whose destructors cannot survive
    being ended at exit."""
    root = Path(__file__).resolve().parents[2] / "src" / "bindings"
    offenders = []
    for path in sorted(root.glob("*.cpp")):
        if path.name in ("gil.cpp", "gil.h"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"gil_scoped_(release|acquire)|PyGILState_Ensure|PyEval_(Save|Restore)Thread", line):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert not offenders, "use ReleasedGil / HeldGil (bindings/gil.h):\n" + "\n".join(offenders)
