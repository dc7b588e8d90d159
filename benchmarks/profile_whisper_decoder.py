"""Per-node profile of one Whisper decoder step (tiny.en by default) at 1, 5 and 40 rows on a device.

    python3 benchmarks/profile_whisper_decoder.py [--device CPU|MetalSim|Metal] [--model PATH]
        [--audio WAV] [--threads N] [--rows 1 5 40] [--beams 5] [--prompt N] [--runs N]
        [--compute-type float32|int8]

Rows r: r < beams is r sequences over one window; otherwise r // beams windows (encode_batch of the
first window repeated) of `beams` sequences each, as batched beam search decodes (8 windows x 5 beams
= 40 rows). A prompt of --prompt tokens is fed first, then one token per row; that step's graph is
profiled (Backend.profile, its intermediates placed in a buffer of their own), each node keeping
its fastest of --runs profiles, grouped by op and layer role (the layers summed), rows side by side.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

import metal_backend as mb
from metal_backend.whisper.__main__ import default_model_path
from metal_backend.whisper.audio import load_audio
from metal_backend.whisper.mel import mel_windows
from metal_backend.whisper.model import Whisper

HERE = os.path.dirname(os.path.abspath(__file__))


def role(node) -> str:
    name = re.sub(r"blocks\.[0-9]+\.", "", node.name)
    return f"{node.op} {name}".strip()


def step_profiles(compute, mel: np.ndarray, rows: int, beams: int, prompt: int, runs: int) -> dict:
    """{role: (nodes, fastest summed ms)} of one decoder step of `rows` sequences."""
    windows = 0 if rows < beams else rows // beams
    if windows:
        features = compute.encode_batch(np.stack([mel] * windows))
        rows = windows * beams
    else:
        features = compute.encode(mel)
    sot = compute.hp.n_vocab - 1  # any valid id: the step's time does not depend on the ids
    compute.decode_batch(features, [[sot] * prompt] * rows, 0)
    compute.decode_batch(features, [[sot]] * rows, prompt)
    g = compute.decoder_graph(rows, 1, prompt, windows)
    mb.GraphAllocator(compute.backend).alloc_graph(g.graph)
    best: dict = {}
    for _ in range(max(1, runs)):
        for n in compute.backend.profile(g.graph).nodes:
            t = n.time_us / 1e3
            if n.index not in best or t < best[n.index][1]:
                best[n.index] = (role(n), t)
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
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 5, 40])
    parser.add_argument("--beams", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=8, help="tokens in the cache before the profiled step")
    parser.add_argument("--runs", type=int, default=5, help="profiles per row count, fastest per node kept")
    parser.add_argument("--compute-type", default="float32")
    args = parser.parse_args()

    model = Whisper.load(args.model or default_model_path(), device=args.device, threads=args.threads,
                         compute_type=args.compute_type)
    compute = model.compute
    mel = mel_windows(load_audio(args.audio), n_mels=compute.hp.n_mels)[0]
    groups = {r: step_profiles(compute, mel, r, args.beams, args.prompt, args.runs) for r in args.rows}
    totals = {r: sum(t for _, t in g.values()) for r, g in groups.items()}
    last = args.rows[-1]
    keys = sorted(set().union(*groups.values()), key=lambda k: -groups[last].get(k, (0, 0.0))[1])
    print(f"one decoder step, {args.compute_type}, fastest of {args.runs} profile(s) per node, "
          f"{args.threads or 'default'} thread(s); load {os.getloadavg()[0]:.2f}; ms (nodes summed over layers)")
    print(f"{'op role':<44} {'nodes':>5}" + "".join(f" {f'{r} rows':>9} {'%':>5}" for r in args.rows))
    for key in keys:
        count = max(g.get(key, (0, 0.0))[0] for g in groups.values())
        row = ""
        for r in args.rows:
            ms = groups[r].get(key, (0, 0.0))[1]
            row += f" {ms:9.3f} {100 * ms / totals[r]:5.1f}"
        print(f"{key[:44]:<44} {count:>5}{row}")
    print(f"{'total':<44} {'':>5}" + "".join(f" {totals[r]:9.3f} {100.0:5.1f}" for r in args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
