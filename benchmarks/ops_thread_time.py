"""benchmarks/ops.py's rows at one thread, timed in CPU time of the calling thread (time.thread_time).

At one thread metal_backend, numpy (OpenBLAS limited to one thread) and torch all compute on the
calling thread, so its CPU time leaves out the time other processes held the core: on a shared,
loaded machine these ratios stay put where ops.py's wall-clock ones swing. The engines are called in
turn, call by call; min and median per engine, ratios peer / ours of the medians. (Shared caches and
memory bandwidth still feel the load; quote the load with the numbers. A peer that ran on hidden worker
threads would have them left out, which only flatters the peer.)

    python benchmarks/ops_thread_time.py --only out_prod,conv_2d --calls 30
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import ops  # noqa: E402  (benchmarks/ops.py: the rows and the engines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="rows whose name or shape contains this (comma-separated)")
    ap.add_argument("--calls", type=int, default=30, help="calls of each engine, in turn")
    args = ap.parse_args()
    if args.calls < 1:
        ap.error(f"--calls takes a count of at least 1, got {args.calls}")
    if ops.torch is not None:
        ops.torch.set_num_threads(1)
    print(f"1 thread, thread CPU time, {args.calls} calls each in turn; load average {os.getloadavg()[0]:.2f}")
    for row in ops.all_rows(np.random.default_rng(0)):
        if args.only and not any(o in row.name or o in row.shape for o in args.only.split(",")):
            continue
        fns = {"ours": ops.Ours(1, *row.ours)}
        if row.numpy_peer:
            fns["numpy"] = row.numpy_fn
        if ops.torch is not None and row.torch_fn is not None:
            fns["torch"] = row.torch_fn
        for f in fns.values():
            f()
        times = {k: [] for k in fns}
        for _ in range(args.calls):
            for k, f in fns.items():
                t = time.thread_time()
                f()
                times[k].append(time.thread_time() - t)
        med = {k: float(np.median(v)) for k, v in times.items()}
        cells = "  ".join(f"{k} {min(v) * 1e3:.2f}/{med[k] * 1e3:.2f} ms" for k, v in times.items())
        ratios = " ".join(f"{k}/ours {med[k] / med['ours']:.2f}" for k in fns if k != "ours")
        print(f"{row.name:12s} {row.shape:22s} min/median: {cells}   {ratios}")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
