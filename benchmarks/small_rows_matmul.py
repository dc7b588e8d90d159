"""Few-token mul_mat (the matrix-vector path) against numpy, process CPU time per call.

Shapes: K 384 x M 51864 f16 (Whisper's vocabulary projection) and K 384 x M 1536 f32, at N tokens
1, 5, 8, 11, 1 and 2 threads. Before/after in one build: run once with MB_VEC_WIDE_TILES=0 (the
4x2 tiles alone) and once without (the AVX-512 4x6 tiles where the CPU has them); --ab does both,
interleaved, in child processes.
Usage: python3 benchmarks/small_rows_matmul.py [--ab] [--reps 20]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

SHAPES = [("f16", 384, 51864), ("f32", 384, 1536)]
NS = [1, 5, 8, 11]


def cpu_ms(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - t0) / reps * 1e3)
    return best


def run(reps: int) -> None:
    import metal_backend as mb

    cpu = mb.device("CPU")
    rng = np.random.default_rng(0)
    for wtype, k, m in SHAPES:
        w = rng.standard_normal((m, k)).astype(np.float32)
        wn = w.astype(np.float16) if wtype == "f16" else w
        for threads in (1, 2):
            for n in NS:
                x = rng.standard_normal((n, k)).astype(np.float32)
                ctx = mb.Context()
                tw = ctx.tensor(getattr(mb, wtype), (m, k))
                tx = ctx.tensor(mb.f32, (n, k))
                out = mb.ops.mul_mat(tw, tx)
                backend = cpu.init_backend(f"n_threads={threads}")
                _buf = mb.alloc_ctx_tensors(ctx, backend)
                tw.set(wn.tobytes())
                tx.set(x)
                g = mb.Graph(out)
                ours = cpu_ms(lambda: backend.graph_compute(g), reps)
                wf = wn.astype(np.float32)
                ref = cpu_ms(lambda: x @ wf.T, reps)  # numpy f32 (f16 weights pre-widened, its best case)
                print(f"{wtype} K{k} M{m} threads {threads} N {n:2d}: ours {ours:7.3f} ms  numpy {ref:7.3f} ms",
                      flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ab", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if not args.ab:
        run(args.reps)
        return 0
    for r in range(args.rounds):
        for wide in ("0", "1"):
            print(f"--- round {r} MB_VEC_WIDE_TILES={wide}", flush=True)
            env = dict(os.environ, MB_VEC_WIDE_TILES=wide, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            subprocess.run([sys.executable, __file__, "--reps", str(args.reps)], env=env, check=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
