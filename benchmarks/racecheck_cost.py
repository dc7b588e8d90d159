"""What MetalSim's racecheck costs: the op conformance suite (tests/ops/test_conformance.py) on MetalSim
with and without the backend option racecheck=1, and one op graph's compute time.

    python3 benchmarks/racecheck_cost.py [--rounds 2] [--skip-suite]

The suite runs in a fresh pytest process per measurement, the two configurations interleaved (off, on,
off, on, ...); the best wall time of each is printed with the ratio on/off. The graph (a 256x512 by
128x512 MUL_MAT then SOFT_MAX) is computed in this process, interleaved, best of 5 each.
Run from the repository root.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SUITE = {"off": "MetalSim and not runahead and not racecheck", "on": "MetalSim-racecheck"}


def suite_seconds(select: str) -> float:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_conformance.py",
                          "-k", select], cwd=os.path.join("tests", "ops"), capture_output=True, text=True)
    dt = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"the suite failed ({select}):\n{out.stdout[-3000:]}")
    return dt


def graph_seconds(params: str) -> float:
    import numpy as np

    import metal_backend as mb
    backend = mb.device("MetalSim").init_backend(params)
    ctx = mb.Context()
    a, b = ctx.tensor(mb.f32, (256, 512)), ctx.tensor(mb.f32, (128, 512))
    out = mb.ops.soft_max(mb.ops.mul_mat(a, b))
    graph = mb.Graph(out)
    mb.alloc_ctx_tensors(ctx, backend)
    rng = np.random.default_rng(0)
    a.set(rng.random((256, 512), dtype=np.float32))
    b.set(rng.random((128, 512), dtype=np.float32))
    t = time.perf_counter()
    backend.graph_compute(graph)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip-suite", action="store_true")
    args = ap.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f}")
    best = {"off": float("inf"), "on": float("inf")}
    for _ in range(5):
        best["off"] = min(best["off"], graph_seconds(""))
        best["on"] = min(best["on"], graph_seconds("racecheck=1"))
    print(f"graph mul_mat+soft_max: off {best['off'] * 1e3:.1f} ms, on {best['on'] * 1e3:.1f} ms, "
          f"racecheck/off {best['on'] / best['off']:.2f}x")
    if args.skip_suite:
        return
    best = {"off": float("inf"), "on": float("inf")}
    for _ in range(args.rounds):
        for key in ("off", "on"):
            best[key] = min(best[key], suite_seconds(SUITE[key]))
    print(f"conformance suite on MetalSim: off {best['off']:.1f} s, racecheck {best['on']:.1f} s, "
          f"racecheck/off {best['on'] / best['off']:.2f}x (load average now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
