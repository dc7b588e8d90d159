"""The mat-vec tiles' two row orders (VecTileOrder, src/cpu/kernels/vec_dot.h) on Whisper's few-token
products: process CPU time per call of MB_VEC_TILE_ORDER=interleaved over MB_VEC_TILE_ORDER=rows.

    python3 benchmarks/tile_order.py [--threads 1 2] [--tokens 1 2 5] [--rounds 3] [--reps 20]

Shapes (N x K x M, weights M x K): the decoder's products of Whisper base (K 512: q/k/v fused 1536, MLP
2048 and back, the vocabulary projection 51864) and tiny's vocabulary projection (K 384), each with
f16 weights and f32 activations (compute_type float32) and q8_0 weights with 8-bit activations
(compute_type int8; from int8_gemm_min_tokens tokens those take the int8 GEMM, not the tiles). Both
orders give the same bits (tests/cpu/test_vec_tile_order.py); only the time differs. Each order runs
in a child process (the order is read once per process), the two alternating, rounds times; each
row keeps its fastest call of all rounds. Above 1: the row order is faster. Print `uptime` beside:
the ratios of a loaded machine are rough.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from small_rows_matmul import cpu_ms  # this folder's script: best CPU ms per call of 3 bursts

SHAPES = [(512, 1536), (512, 2048), (2048, 512), (512, 51864), (384, 51864)]
ORDERS = ("interleaved", "rows")


def child(threads: list[int], tokens: list[int], reps: int) -> None:
    import metal_backend as mb

    cpu = mb.device("CPU")
    rng = np.random.default_rng(0)
    rows = {}
    for k, m in SHAPES:
        w = rng.standard_normal((m, k)).astype(np.float32) * 0.05
        for wtype, compute_type in (("f16", "float32"), ("q8_0", "int8")):
            data = w.astype(np.float16).tobytes() if wtype == "f16" else bytes(mb.quantize(w, mb.q8_0))
            for nth in threads:
                backend = cpu.init_backend(f"n_threads={nth}")
                for n in tokens:
                    ctx = mb.Context()
                    tw = ctx.tensor(getattr(mb, wtype), (m, k))
                    tx = ctx.tensor(mb.f32, (n, k))
                    out = mb.ops.mul_mat(tw, tx, compute_type=compute_type)
                    _buf = mb.alloc_ctx_tensors(ctx, backend)
                    tw.set(data)
                    tx.set(rng.standard_normal((n, k)).astype(np.float32))
                    g = mb.Graph(out)
                    rows[f"{wtype} {n}x{k}x{m} t{nth}"] = cpu_ms(lambda: backend.graph_compute(g), reps)
    print(json.dumps({"order": cpu.props.extra["vec_tile_order"], "rows": rows}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 5])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.threads, args.tokens, args.reps)
        return 0
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    best: dict[str, dict[str, float]] = {o: {} for o in ORDERS}
    for _ in range(args.rounds):
        for order in ORDERS:
            env = dict(os.environ, MB_VEC_TILE_ORDER=order, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            cmd = [sys.executable, __file__, "--child", "--reps", str(args.reps), "--threads",
                   *map(str, args.threads), "--tokens", *map(str, args.tokens)]
            out = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
            assert out["order"] == order, out["order"]
            for key, ms in out["rows"].items():
                best[order][key] = min(best[order].get(key, float("inf")), ms)
    print(f"{'weights, N x K x M, threads':34s} {'interleaved ms':>14s} {'rows ms':>9s} {'ratio':>6s}")
    for key in best["rows"]:
        a, b = best["interleaved"][key], best["rows"][key]
        print(f"{key:34s} {a:14.3f} {b:9.3f} {a / b:6.2f}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
