"""Per-node profile of the Whisper encoder (tiny.en by default) on a device: where its time goes.

    python3 benchmarks/profile_whisper_encoder.py [--device CPU|MetalSim|Metal] [--model PATH]
        [--audio WAV] [--threads N] [--top N] [--trace OUT.json] [--quantize q8_0]
        [--compute-type float32|int8 ...] [--runs N] [--encoder-attention flash|matmul]

Loads the model, encodes the first 30 s window of the audio once (through the model's scheduler,
which also places the graph's intermediates), then runs Backend.profile on the encoder graph and
prints the per-op and per-node tables; --trace writes a Chrome/Perfetto trace.

With --runs N (> 1) every node keeps its fastest of N profiles (a loaded machine slows some runs of a
node, never speeds them up), and the table groups the nodes by op and layer role (attn.kq, mlp.0, ...;
the layers summed). Several --compute-type values load one model each and profile them in turn in
the same process, side by side: e.g. `--compute-type float32 int8 --runs 5` (int8 quantizes to q8_0).
"""
from __future__ import annotations

import argparse
import os
import re
import sys

from metal_backend.whisper.__main__ import default_model_path
from metal_backend.whisper.audio import load_audio
from metal_backend.whisper.mel import mel_windows
from metal_backend.whisper.model import Whisper

HERE = os.path.dirname(os.path.abspath(__file__))


def role(node) -> str:
    """A node's op and name without its layer index: the nodes every layer repeats group together."""
    name = re.sub(r"blocks\.[0-9]+\.", "", node.name)
    return f"{node.op} {name}".strip()


def fastest(profiles) -> dict:
    """Per node index, the least time (ms) over the profiles, with the node's role."""
    best: dict = {}
    for prof in profiles:
        for n in prof.nodes:
            t = n.time_us / 1e3
            if n.index not in best or t < best[n.index][1]:
                best[n.index] = (role(n), t)
    return best


def grouped(best: dict) -> dict:
    out: dict = {}
    for key, t in best.values():
        count, total = out.get(key, (0, 0.0))
        out[key] = (count + 1, total + t)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--model", default=None)
    parser.add_argument("--audio", default=os.path.join(HERE, "..", "tests", "assets", "audio", "jfk.wav"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--trace", default=None)
    parser.add_argument("--quantize", default=None, help="Whisper.load's quantize (q8_0, ...)")
    parser.add_argument("--compute-type", nargs="+", default=["float32"],
                        help='Whisper.load\'s compute_type ("int8": q8_0 and 8-bit activations); several: side by side')
    parser.add_argument("--encoder-attention", default=None,
                        help='Whisper.load\'s encoder_attention ("flash", "matmul")')
    parser.add_argument("--runs", type=int, default=1, help="profiles per compute type, fastest per node kept")
    args = parser.parse_args()

    computes = {}
    for ct in args.compute_type:
        model = Whisper.load(args.model or default_model_path(), device=args.device, threads=args.threads,
                             quantize=args.quantize, compute_type=ct,
                             encoder_attention=args.encoder_attention)
        compute = model.compute
        compute.encode(mel_windows(load_audio(args.audio), n_mels=compute.hp.n_mels)[0])
        computes[ct] = compute
    if args.runs <= 1 and len(computes) == 1:
        prof = next(iter(computes.values())).profile_encoder()
        print(prof.summary(top=args.top))
        if args.trace:
            prof.to_chrome_trace(args.trace)
            print(f"\ntrace written to {args.trace}", file=sys.stderr)
        return 0
    profiles: dict = {ct: [] for ct in computes}
    for _ in range(max(1, args.runs)):
        for ct, compute in computes.items():  # interleaved, so load changes hit every compute type alike
            profiles[ct].append(compute.profile_encoder())
    groups = {ct: grouped(fastest(p)) for ct, p in profiles.items()}
    totals = {ct: sum(t for _, t in g.values()) for ct, g in groups.items()}
    first = args.compute_type[0]
    keys = sorted(set().union(*groups.values()), key=lambda k: -groups[first].get(k, (0, 0.0))[1])
    print(f"fastest of {args.runs} profile(s) per node, {args.threads or 'default'} thread(s); load "
          f"{os.getloadavg()[0]:.2f}; ms (nodes summed over layers)")
    print(f"{'op role':<44} {'nodes':>5}" + "".join(f" {ct:>9} {'%':>5}" for ct in computes))
    for key in keys:
        count = max(g.get(key, (0, 0.0))[0] for g in groups.values())
        seconds = [groups[ct].get(key, (0, 0.0))[1] for ct in computes]
        row = "".join(f" {t:9.3f} {100 * t / totals[ct]:5.1f}" for t, ct in zip(seconds, computes))
        print(f"{key[:44]:<44} {count:>5}{row}")
    print(f"{'total':<44} {'':>5}" + "".join(f" {totals[ct]:9.3f} {100.0:5.1f}" for ct in computes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
