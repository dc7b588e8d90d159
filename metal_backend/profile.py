"""Per-node profiles of a graph on a backend: where the time goes, node by node (ggml's perf print).

``backend.profile(graph)`` runs each computing node of an allocated graph alone (a one-node compute,
waited for); the results equal a normal compute's. Each node is timed on the host clock around its
compute (``ProfileNode.host_us``) and, where the backend has one, on the device's own clock;
``ProfileNode.time_us`` is the device time when every node got one, else the host time, and
``Profile.clock`` names the clock exactly:

- ``"host wall time"``: the CPU (a node's wall time), or a backend without a device clock;
- ``"MetalSim executor time per dispatch"``: the executor running the node's threadgroups, without
  the commit, queue and wait around it;
- ``"Metal GPU time per dispatch (counter samples)"``: timestamp counters sampled at dispatch
  boundaries, where the GPU supports them (``MTLCounterSamplingPointAtDispatchBoundary``);
- ``"Metal GPU time per command buffer"``: ``GPUEndTime - GPUStartTime`` elsewhere (Apple silicon
  samples no dispatch boundaries); a node is one command buffer, so this is still per node.

On Metal and MetalSim each node becomes its own command buffer, so fusion and concurrency are off.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import _core

_HOST_CLOCK = "host wall time"  # Profile.clock of times taken on the host around each node's compute


@dataclass(frozen=True)
class ProfileNode:
    """One computing node of a profiled graph."""

    index: int  # position among the graph's computing nodes
    op: str
    name: str
    shape: Tuple[int, ...]
    type: str
    start_us: float  # when its first run began (host clock), from the start of the profile
    time_us: float  # mean over the repeats, on the profile's clock (Profile.clock)
    bytes: int  # bytes of its sources and result
    flops: int  # floating-point operations where known (0: unknown)
    host_us: float  # mean over the repeats, host wall time of its compute (with commit and wait)

    @property
    def gflops(self) -> Optional[float]:
        """GFLOP/s, where the FLOPs are known."""
        return self.flops / self.time_us / 1e3 if self.flops and self.time_us > 0 else None

    @property
    def gbytes_per_s(self) -> Optional[float]:
        """GB/s of source and result bytes (a lower bound of the memory traffic)."""
        return self.bytes / self.time_us / 1e3 if self.bytes and self.time_us > 0 else None


@dataclass(frozen=True)
class Profile:
    """The per-node timings of one graph on one backend (see the module docstring for the clock)."""

    backend: str
    clock: str  # what ProfileNode.time_us measures, e.g. "MetalSim executor time per dispatch"
    wall_us: float  # the whole profiled run, every repeat
    repeat: int
    nodes: List[ProfileNode]
    aborted: bool = False  # the abort callback stopped the run: `nodes` are only those that ran

    @property
    def total_us(self) -> float:
        """Sum of the nodes' (mean) times."""
        return sum(n.time_us for n in self.nodes)

    @property
    def host_total_us(self) -> float:
        """Sum of the nodes' (mean) host wall times."""
        return sum(n.host_us for n in self.nodes)

    def by_op(self) -> List[Tuple[str, int, float]]:
        """(op, node count, total time in µs) per op, slowest first."""
        acc: Dict[str, List[float]] = {}
        for n in self.nodes:
            entry = acc.setdefault(n.op, [0, 0.0])
            entry[0] += 1
            entry[1] += n.time_us
        return sorted(((op, int(c), t) for op, (c, t) in acc.items()), key=lambda r: -r[2])

    @property
    def device_timed(self) -> bool:
        """Whether the times are the device's own (Metal, MetalSim), not the host's wall time."""
        return self.clock != _HOST_CLOCK

    def table(self, top: Optional[int] = 20) -> str:
        """The slowest `top` nodes (all when None) as a text table, slowest first; with a host ms
        column next to the time when the times are the device's."""
        total = self.total_us or 1.0
        rows = sorted(self.nodes, key=lambda n: -n.time_us)
        if top is not None:
            rows = rows[:top]
        host = f" {'host ms':>9}" if self.device_timed else ""
        lines = [f"{'#':>4} {'op':<15} {'name':<28} {'shape':<20} {'time ms':>9}{host} "
                 f"{'%':>6} {'GFLOP/s':>9} {'GB/s':>8}"]
        for n in rows:
            gf = f"{n.gflops:9.2f}" if n.gflops is not None else f"{'-':>9}"
            gb = f"{n.gbytes_per_s:8.2f}" if n.gbytes_per_s is not None else f"{'-':>8}"
            h = f" {n.host_us / 1e3:9.3f}" if self.device_timed else ""
            lines.append(f"{n.index:>4} {n.op:<15} {n.name[:28]:<28} {str(n.shape)[:20]:<20} "
                         f"{n.time_us / 1e3:9.3f}{h} {100 * n.time_us / total:6.1f} {gf} {gb}")
        return "\n".join(lines)

    def summary(self, top: Optional[int] = 20) -> str:
        """Header, time per op, and the slowest nodes."""
        total = self.total_us or 1.0
        host = f", {self.host_total_us / 1e3:.3f} ms host wall time" if self.device_timed else ""
        lines = [f"profile of {len(self.nodes)} node(s) on {self.backend}: {self.total_us / 1e3:.3f} ms{host} "
                 f"(mean of {self.repeat} run(s)); clock: {self.clock}"]
        if self.aborted:
            lines.append("ABORTED by the abort callback: only the nodes listed ran")
        lines += ["", f"{'op':<15} {'nodes':>6} {'time ms':>9} {'%':>6}"]
        for op, count, t in self.by_op():
            lines.append(f"{op:<15} {count:>6} {t / 1e3:9.3f} {100 * t / total:6.1f}")
        lines += ["", self.table(top)]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_chrome_trace(self, path: Optional[str] = None) -> Dict[str, Any]:
        """The nodes as a Chrome / Perfetto trace (complete events on one track, times in µs).

        Each event starts when the node's compute began (host clock) and lasts its time on the
        profile's clock; the host time is in its args.

        Returns the trace as a dict and writes it as JSON to `path` when given; open it in
        chrome://tracing or https://ui.perfetto.dev.
        """
        events: List[Dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": f"metal_backend {self.backend}"}},
        ]
        for n in self.nodes:
            events.append({
                "name": f"{n.op} {n.name}".strip(), "cat": n.op, "ph": "X", "pid": 0, "tid": 0,
                "ts": n.start_us, "dur": n.time_us,
                "args": {"index": n.index, "shape": list(n.shape), "type": n.type, "bytes": n.bytes, "flops": n.flops,
                         "host_us": n.host_us},
            })
        trace = {"traceEvents": events, "displayTimeUnit": "ms",
                 "otherData": {"backend": self.backend, "clock": self.clock, "repeat": self.repeat}}
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(trace, f)
        return trace


def profile(self: _core.Backend, graph: _core.Graph, repeat: int = 1) -> Profile:
    """Profile `graph` (allocated) on `backend`: each computing node run alone and timed, `repeat`
    times (times are means), on the device's clock where the backend has one (``Profile.clock``)
    and on the host's. The outputs are computed as by ``graph_compute``. Returns a Profile."""
    if not isinstance(repeat, int) or isinstance(repeat, bool):
        raise TypeError(f"[Backend.profile] repeat must be an int, got {type(repeat).__name__}")
    name, clock, wall_us, raw, aborted = self._profile(graph, repeat)
    nodes = [
        ProfileNode(index=i, op=t.op, name=t.name, shape=tuple(t.shape), type=t.type.name, start_us=start,
                    time_us=time, bytes=nbytes, flops=flops, host_us=host)
        for i, (t, start, time, host, nbytes, flops) in enumerate(raw)
    ]
    return Profile(backend=name, clock=clock, wall_us=wall_us, repeat=repeat, nodes=nodes, aborted=aborted)
