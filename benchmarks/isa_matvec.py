"""Mat-vec under each instruction-set cap of the CPU device, side by side.

    python benchmarks/isa_matvec.py [--threads 1 16] [--tokens 1 2] [--min-time 0.3] [--only q4_0]
        [--act f32|f16]

For q4_0 q4_1 q5_0 q5_1 q8_0 and f16 f32 bf16 weights, times mul_mat of a few weight shapes with 1
or 2 tokens under max_isa 0 (portable), 1 (avx2: AVX-VNNI byte dot products where the CPU has them)
and 2 (avx512: AVX512-VNNI byte dot products and 16-wide float tiles where the CPU has them), as many
as the machine offers; a cap's name carries the VNNI form it uses (+avxvnni, +avx512vnni). For the quantized types
every cap computes the same bits (tests/test_cpu_isa_bits.py); the float types' sums differ in order.
--act f16 gives f16 activations (the f16 x f16 pairing for f16 weights). Prints ns per weight row and the ratio of
each cap's time to the widest's (above 1: the widest is faster). Caps take turns in rounds and the best time is kept,
so a burst of load elsewhere on the machine shows in one round only.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import metal_backend as mb

CPU = mb.device("CPU")
ISA_NAMES = {0: "portable", 1: "avx2", 2: "avx512"}
TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "f16", "bf16", "f32"]
SHAPES = [(384, 1536), (1536, 384), (4096, 4096)]  # (K, weight rows)


def caps() -> list[int]:
    hw = {v: k for k, v in ISA_NAMES.items()}.get(CPU.props.extra["isa_hardware"])
    return [] if hw is None else list(range(hw + 1))


class Case:
    def __init__(self, wtype: str, k: int, m: int, n: int, threads: int, rng, act: str = "f32"):
        t = getattr(mb, wtype)
        self.ctx = mb.Context()
        tw = self.ctx.tensor(t, (m, k))
        tx = self.ctx.tensor(getattr(mb, act), (n, k))
        self.graph = mb.Graph(mb.ops.mul_mat(tw, tx))
        self.backend = CPU.init_backend(f"n_threads={threads}")
        self.buffer = mb.alloc_ctx_tensors(self.ctx, self.backend)
        tw.set(mb.quantize(rng.standard_normal((m, k)).astype(np.float32), t))
        tx.set(mb.quantize(rng.standard_normal((n, k)).astype(np.float32), getattr(mb, act)))
        self.rows = m

    def best(self, cap: int, min_time: float) -> float:
        """Best seconds per call over bursts of at least min_time under max_isa = cap."""
        CPU.set_prop("max_isa", cap)
        for _ in range(3):
            self.backend.graph_compute(self.graph)
        best = float("inf")
        end = time.perf_counter() + min_time
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            for _ in range(10):
                self.backend.graph_compute(self.graph)
            best = min(best, (time.perf_counter() - t0) / 10)
        return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per cap per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="run only this weight type, or the types containing this")
    ap.add_argument("--act", default="f32", choices=["f32", "f16"], help="activation type")
    args = ap.parse_args()
    cs = caps()
    if not cs:
        raise SystemExit("the CPU kernels are not capped on this machine (NEON): nothing to compare")
    before = int(CPU.props.extra["max_isa"])
    names = []
    for c in cs:
        CPU.set_prop("max_isa", c)
        q8 = CPU.props.extra["q8_dot"]
        names.append(ISA_NAMES[c] + (f"+{q8}" if q8 in ("avx512vnni", "avxvnni") else ""))
    CPU.set_prop("max_isa", before)
    print(f"CPU: {CPU.description}; caps compared: {', '.join(names)}")
    rng = np.random.default_rng(0)
    head = ["type", "KxM", "tok", "thr"] + [f"{n} ns/row" for n in names] + [f"{n}/{names[-1]}" for n in names[:-1]]
    print("  ".join(f"{h:>14}" for h in head))
    try:
        for threads in args.threads:
            for wtype in (t for t in TYPES if (t == args.only if args.only in TYPES else args.only in t)):
                for k, m in SHAPES:
                    for n in args.tokens:
                        case = Case(wtype, k, m, n, threads, rng, args.act)
                        best = {c: float("inf") for c in cs}
                        for _ in range(args.rounds):
                            for c in cs:
                                best[c] = min(best[c], case.best(c, args.min_time))
                        ns = [best[c] / m * 1e9 for c in cs]
                        ratios = [best[c] / best[cs[-1]] for c in cs[:-1]]
                        cells = [wtype, f"{k}x{m}", str(n), str(threads)] + [f"{v:.1f}" for v in ns]
                        cells += [f"{r:.2f}" for r in ratios]
                        print("  ".join(f"{c:>14}" for c in cells), flush=True)
    finally:
        CPU.set_prop("max_isa", before)


if __name__ == "__main__":
    main()
