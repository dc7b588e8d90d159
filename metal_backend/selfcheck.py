"""Short self-checks of a device, run by `python -m metal_backend`.

Each check exercises one thing a user relies on and returns a line saying what it verified; a check
that finds a fault raises, naming the device and what differed.
"""
from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np

from ._core import Buffer, Device, MetalBackendError


class SelfCheckError(MetalBackendError):
    """A self-check found the device misbehaving."""


def _expect(ok: bool, what: str) -> None:
    if not ok:
        raise SelfCheckError(what)


def _roundtrip(dev: Device) -> str:
    pattern = np.random.default_rng(0).integers(0, 256, size=1 << 20, dtype=np.uint8)
    done = []
    for buft in dev.buffer_types:
        with buft.alloc(pattern.size) as buf:
            buf.set(pattern)
            _expect(buf.get() == pattern.tobytes(), f"{dev.name}/{buft.name}: set/get round trip differs")
            buf.memset(0xAB, offset=100, size=50)
            back = np.frombuffer(buf.get(90, 70), dtype=np.uint8)
            _expect(bool((back[10:60] == 0xAB).all()) and bool((back[:10] == pattern[90:100]).all()),
                    f"{dev.name}/{buft.name}: memset wrote outside its range")
        done.append(buft.name)
    return f"set/get/memset round trip of 1 MiB on {', '.join(done)}"


def _mapped(dev: Device) -> str:
    if not dev.props.caps.buffer_from_host_ptr:
        return "buffer_from_host_ptr: not offered by this device"
    host = np.arange(4096, dtype=np.float32)
    buf: Buffer = dev.buffer_from_host_ptr(host)
    host[7] = -1.0
    seen = np.frombuffer(buf.get(7 * 4, 4), dtype=np.float32)[0]
    _expect(seen == -1.0, f"{dev.name}: mapped buffer does not see writes to its source (got {seen})")
    buf.set(np.float32(42.0).tobytes(), offset=0)
    _expect(host[0] == 42.0, f"{dev.name}: writes to the mapped buffer do not reach its source")
    buf.free()
    return f"zero-copy mapped buffer over a numpy array ({host.nbytes} bytes), both directions"


def _compute(dev: Device) -> str:
    # A small layer: softmax(gelu(x @ w.T) + b), computed through the scheduler with the CPU as
    # fallback, so a device that refuses an op still gives the answer.
    from . import Context, Graph, Scheduler, alloc_ctx_tensors, device, f32, ops

    rng = np.random.default_rng(1)
    xs = rng.standard_normal((33, 64)).astype(np.float32)
    ws = rng.standard_normal((48, 64)).astype(np.float32) * 0.1
    bs = rng.standard_normal(48).astype(np.float32)
    ctx = Context()
    x, w, b = ctx.tensor(f32, xs.shape), ctx.tensor(f32, ws.shape), ctx.tensor(f32, bs.shape)
    alloc_ctx_tensors(ctx, dev.buffer_type)
    y = ops.soft_max(ops.add(ops.gelu(ops.mul_mat(w, x)), b))
    for t, v in ((x, xs), (w, ws), (b, bs)):
        t.set(v)
    backends = [dev.init_backend()] + ([device("CPU").init_backend()] if dev.name != "CPU" else [])
    sched = Scheduler(backends)
    graph = Graph(y)
    where = sorted({p.backend.name for p in sched.plan(graph)})
    sched.graph_compute(graph)
    h = xs.astype(np.float64) @ ws.T.astype(np.float64)
    h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3))) + bs
    ref = np.exp(h - h.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    err = float(np.abs(y.get() - ref).max())
    _expect(err < 1e-4, f"{dev.name}: matmul/gelu/add/softmax differ from numpy by {err:.3g}")
    return f"mul_mat+gelu+add+soft_max vs numpy: max error {err:.2g} (ran on {', '.join(where)})"


CHECKS: List[Tuple[str, Callable[[Device], str]]] = [
    ("buffers", _roundtrip),
    ("mapped", _mapped),
    ("compute", _compute),
]


def run(dev: Device) -> List[str]:
    """Runs every check on `dev`; returns one line per check. Raises SelfCheckError on a fault."""
    return [f"{name}: {check(dev)}" for name, check in CHECKS]
