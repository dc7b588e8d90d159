"""The encoder's many-token matmuls alone: our int8 GEMM (q8_0 weights, 8-bit activations) against our
f32 GEMM (f32 weights; q8_0 weights dequantised into f32 panels) and torch's dynamic int8 linear
(fbgemm), same shapes, same thread count, interleaved.

    python benchmarks/int8_gemm.py [--threads 2] [--rounds 5] [--shapes 1500x384x1536 ...]

With --cpu-time --threads 1 the times are CPU seconds, steadier on a shared machine.
A shape is TOKENSxKxROWS (activations tokens x K, weights rows x K): Whisper's encoder runs
1500 x d x 4d (fc1), 1500 x 4d x d (fc2) and 1500 x d x d (q, k, v, out) per layer, d = 384 (tiny),
512 (base). Each engine runs in bursts, the engines in turn over the rounds; the best time is kept.
Ratios are engine time / our int8 time: above 1 means the int8 GEMM is faster. Print `uptime` beside.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

import metal_backend as mb  # noqa: E402


class Ours:
    def __init__(self, wtype, compute_type, w, x, threads):
        self.ctx = mb.Context()
        tw = self.ctx.tensor(getattr(mb, wtype), w.shape)
        tx = self.ctx.tensor(mb.f32, x.shape)
        self.out = mb.ops.mul_mat(tw, tx, compute_type=compute_type)
        self.backend = mb.device("CPU").init_backend(f"n_threads={threads}")
        self.buffer = mb.alloc_ctx_tensors(self.ctx, self.backend)
        tw.set(w if wtype == "f32" else bytes(mb.quantize(w, getattr(mb, wtype))))
        tx.set(x)
        self.graph = mb.Graph(self.out)

    def __call__(self):
        self.backend.graph_compute(self.graph)


class Torch:
    def __init__(self, w, x, threads):
        import torch

        torch.set_num_threads(threads)
        lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
        self.model = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                            dtype=torch.qint8)
        self.x = torch.from_numpy(x)
        self.torch = torch

    def __call__(self):
        with self.torch.no_grad():
            self.model(self.x)


CLOCK = time.perf_counter


def best_of(fn, min_time: float) -> float:
    fn()
    best = float("inf")
    start = time.perf_counter()
    while time.perf_counter() - start < min_time:
        t0 = CLOCK()
        fn()
        best = min(best, CLOCK() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per burst")
    parser.add_argument("--shapes", nargs="+", default=["1500x384x1536", "1500x1536x384", "1500x384x384",
                                                         "1500x512x2048", "1500x2048x512"])
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by the process's CPU time (with --threads 1: less sensitive to a loaded machine)")
    args = parser.parse_args()
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    print(f"threads {args.threads}; clock {'cpu' if args.cpu_time else 'wall'}; load: {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)
    header = (f"{'shape':>16} {'int8 ms':>8} {'f32w ms':>8} {'q8f32 ms':>8} {'torch8 ms':>9} "
              f"{'f32w/i8':>8} {'q8f32/i8':>8} {'torch/i8':>8}")
    print(header)
    for shape in args.shapes:
        n, k, m = (int(v) for v in shape.split("x"))
        w = rng.standard_normal((m, k)).astype(np.float32) * 0.05
        x = rng.standard_normal((n, k)).astype(np.float32)
        engines = {"int8": Ours("q8_0", "int8", w, x, args.threads), "f32w": Ours("f32", "float32", w, x, args.threads),
                   "q8f32": Ours("q8_0", "float32", w, x, args.threads)}
        if not args.no_torch:
            try:
                engines["torch8"] = Torch(w, x, args.threads)
            except Exception as exc:  # torch missing or without a quantized engine
                print(f"torch: {exc}")
        best = {name: float("inf") for name in engines}
        for _ in range(args.rounds):
            for name, fn in engines.items():
                best[name] = min(best[name], best_of(fn, args.min_time))
        ms = {name: 1e3 * t for name, t in best.items()}
        t8 = ms.get("torch8", float("nan"))
        print(f"{shape:>16} {ms['int8']:8.2f} {ms['f32w']:8.2f} {ms['q8f32']:8.2f} {t8:9.2f} "
              f"{ms['f32w'] / ms['int8']:8.2f} {ms['q8f32'] / ms['int8']:8.2f} {t8 / ms['int8']:8.2f}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
