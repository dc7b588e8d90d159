"""Per-node profile of the Whisper encoder (tiny.en by default) on a device: where its time goes.

    python3 benchmarks/profile_whisper_encoder.py [--device CPU|MetalSim|Metal] [--model PATH]
        [--audio WAV] [--threads N] [--top N] [--trace OUT.json] [--quantize q8_0]
        [--compute-type float32|int8]

Loads the model, encodes the first 30 s window of the audio once (through the model's scheduler,
which also places the graph's intermediates), then runs Backend.profile on the encoder graph and
prints the per-op and per-node tables; --trace writes a Chrome/Perfetto trace.
"""
from __future__ import annotations

import argparse
import os
import sys

from metal_backend.whisper.__main__ import default_model_path
from metal_backend.whisper.audio import load_audio
from metal_backend.whisper.mel import mel_windows
from metal_backend.whisper.model import Whisper

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--model", default=None)
    parser.add_argument("--audio", default=os.path.join(HERE, "..", "tests", "assets", "audio", "jfk.wav"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--trace", default=None)
    parser.add_argument("--quantize", default=None, help="Whisper.load's quantize (q8_0, ...)")
    parser.add_argument("--compute-type", default="float32",
                        help='Whisper.load\'s compute_type ("int8": q8_0 and 8-bit activations)')
    args = parser.parse_args()

    model = Whisper.load(args.model or default_model_path(), device=args.device, threads=args.threads,
                         quantize=args.quantize, compute_type=args.compute_type)
    compute = model.compute
    hp = compute.hp
    compute.encode(mel_windows(load_audio(args.audio), n_mels=hp.n_mels)[0])
    prof = compute.profile_encoder()
    print(prof.summary(top=args.top))
    if args.trace:
        prof.to_chrome_trace(args.trace)
        print(f"\ntrace written to {args.trace}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
