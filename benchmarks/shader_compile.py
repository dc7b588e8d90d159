"""Time to a first result on MetalSim under each shader-compile strategy (device prop shader_compile).

    python3 benchmarks/shader_compile.py [--us-per-kernel 5000]

Each strategy runs in a fresh process (families compile once per process): from the device's first
use (init_backend) to the first result of (a) one SOFT_MAX, which needs one family, and (b) a small
layer softmax(gelu(x @ w.T) + b), which needs four; then every family compiled (the rest of the
library ready). MetalSim's kernels are built into the module, so its compile is modeled: each family
takes --us-per-kernel per kernel it holds (shader_compile_us_per_kernel), on a thread of its own as
Metal's compiler service compiles libraries in parallel. Printed as ms and as ratios to the parallel
strategy (the default) measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
import metal_backend as mb
strategy, us = int(sys.argv[1]), int(sys.argv[2])
dev = mb.device("MetalSim")
dev.set_prop("shader_compile_us_per_kernel", us)
dev.set_prop("shader_compile", strategy)
t0 = time.perf_counter()
sched = mb.Scheduler([dev.init_backend(), mb.device("CPU").init_backend()])
ctx = mb.Context()
x = ctx.tensor(mb.f32, (33, 64)); w = ctx.tensor(mb.f32, (48, 64)); b = ctx.tensor(mb.f32, (48,))
mb.alloc_ctx_tensors(ctx, dev.buffer_type)
for t in (x, w, b):
    t.set(np.random.default_rng(0).standard_normal(t.shape).astype(np.float32))
s = mb.ops.soft_max(x)
sched.graph_compute(mb.Graph(s)); s.get()
t1 = time.perf_counter()
y = mb.ops.soft_max(mb.ops.add(mb.ops.gelu(mb.ops.mul_mat(w, x)), b))
sched.graph_compute(mb.Graph(y)); y.get()
t2 = time.perf_counter()
states = dev.compile_shader_families()
t3 = time.perf_counter()
placed = sorted({p.backend.name for p in sched.plan(mb.Graph(y))})
print(json.dumps({"one": (t1 - t0) * 1e3, "layer": (t2 - t0) * 1e3, "all": (t3 - t0) * 1e3, "placed": placed,
                  "compiled": sum(v.startswith("compiled") for v in states.values()), "families": len(states)}))
"""

NAMES = {0: "on demand", 1: "all up front", 2: "all in parallel (default)"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--us-per-kernel", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    res = {}
    for strategy in (2, 0, 1):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", CHILD, str(strategy), str(args.us_per_kernel)],
                                 check=True, capture_output=True, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
        res[strategy] = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in ("one", "layer", "all")}
        res[strategy]["placed"] = runs[0]["placed"]
        res[strategy]["compiled"] = f"{runs[0]['compiled']}/{runs[0]['families']}"
    base = res[2]
    print(f"MetalSim, modeled compile {args.us_per_kernel} us per kernel, median of {args.repeat} processes")
    print(f"{'strategy':28} {'1st SOFT_MAX ms':>16} {'1st layer ms':>13} {'all families ms':>16}  ratios to parallel")
    for s in (2, 0, 1):
        r = res[s]
        ratios = " / ".join(f"{r[k] / base[k]:.2f}" for k in ("one", "layer", "all"))
        print(f"{NAMES[s]:28} {r['one']:16.1f} {r['layer']:13.1f} {r['all']:16.1f}  {ratios}  "
              f"(on {','.join(r['placed'])}; {r['compiled']} compiled)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
