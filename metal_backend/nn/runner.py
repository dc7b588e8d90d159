"""Where a model's graphs run: a device, its backends (the CPU as fallback), schedulers, compute."""

from __future__ import annotations

from typing import Optional, Sequence

import metal_backend as mb


class ComputeError(mb.MetalBackendError):
    """A graph did not complete (the message names the graph and the status)."""


def resolve_device(device: mb.Device | str | None) -> mb.Device:
    """A Device from a Device, a device name ("CPU", "MetalSim", "Metal"), or None (the best real
    device: Metal where present, else the CPU). An unknown name raises mb.InvalidArgumentError
    listing the known ones; anything else raises TypeError."""
    if isinstance(device, mb.Device):
        return device
    if device is not None and not isinstance(device, str):
        raise TypeError(f"device must be a metal_backend Device, a device name or None (got {device!r})")
    return mb.device(device)


class Runner:
    """A device and the backends that compute a model's graphs.

    backends is [the device's backend] on the CPU device, else [the device's backend, a CPU
    backend]: a Scheduler over them runs each op on the device where it is supported and on the CPU
    where not (never aborting). threads sets every backend's n_threads option where it has one (None
    keeps the default); spin_us sets how long CPU workers stay awake after a graph (None keeps the
    default; a model with many short graphs separated by a little host work wants them awake).
    """

    def __init__(self, device: mb.Device | str | None = None, threads: Optional[int] = None,
                 spin_us: Optional[int] = None):
        if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads <= 0):
            raise mb.InvalidArgumentError(f"threads must be a positive integer (got {threads!r})")
        if spin_us is not None and (not isinstance(spin_us, int) or isinstance(spin_us, bool) or spin_us < 0):
            raise mb.InvalidArgumentError(f"spin_us must be a non-negative integer (got {spin_us!r})")
        self.device = resolve_device(device)
        self.backend = self.device.init_backend()
        self.backends = [self.backend]
        if self.device.type != mb.DeviceType.CPU:
            self.backends.append(mb.device("CPU").init_backend())
        for backend in self.backends:
            if threads is not None and "n_threads" in backend.options:
                backend.options["n_threads"] = threads
            if spin_us is not None and "spin_us" in backend.options:
                backend.options["spin_us"] = spin_us
        self._scheduler: Optional[mb.Scheduler] = None

    @property
    def buffer_type(self) -> mb.BufferType:
        """The device's default buffer type (where weights and state live)."""
        return self.device.buffer_type

    @property
    def is_cpu(self) -> bool:
        """True when the device is the CPU."""
        return self.device.type == mb.DeviceType.CPU

    def scheduler(self) -> mb.Scheduler:
        """A new Scheduler over the backends. A model keeps one per family of graphs it reuses
        (a scheduler keeps the split of the graph it ran last)."""
        return mb.Scheduler(self.backends)

    @property
    def default_scheduler(self) -> mb.Scheduler:
        """The scheduler compute() uses when given none (made on first use)."""
        if self._scheduler is None:
            self._scheduler = self.scheduler()
        return self._scheduler

    def compute(self, graph: mb.Graph, what: str = "graph", scheduler: Optional[mb.Scheduler] = None) -> None:
        """Computes graph (waiting for it) through scheduler (default: default_scheduler); a status
        other than SUCCESS raises ComputeError naming `what`."""
        status = (scheduler or self.default_scheduler).graph_compute(graph)
        if status != mb.Status.SUCCESS:
            raise ComputeError(f"[{what}] the graph did not complete ({status.name})")

    @staticmethod
    def placements(scheduler: mb.Scheduler, graph: mb.Graph) -> dict[str, int]:
        """Nodes of graph per backend name as scheduler would run them."""
        counts: dict[str, int] = {}
        for entry in scheduler.plan(graph):
            counts[entry.backend.name] = counts.get(entry.backend.name, 0) + 1
        return counts

    def placements_of(self, graphs: Sequence[tuple[str, mb.Scheduler, mb.Graph]]) -> dict[str, dict[str, int]]:
        """placements() of each (name, scheduler, graph), by name."""
        return {name: self.placements(scheduler, graph) for name, scheduler, graph in graphs}
