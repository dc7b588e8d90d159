"""VAD-gated and batched Whisper: ours against faster-whisper, side by side in one run.

    python benchmarks/whisper_vad_batched.py [--threads 2] [--model tiny.en] [--repeats 1 5]
        [--batch-sizes 1 4 8] [--settings greedy beam5] [--parts probabilities vad batched]
        [--vad-minutes 10] [--vad-repeat 3] [--work DIR] [--engines ours ours-int8 fw-float32 fw-int8]
        [--runs 1]
        (--engines also takes ours-fw-options ours-int8-fw-options: ours with faster-whisper's
        batched options, condition_on_previous_text=False and without_timestamps=True)

By default the three parts run, in this order, each printing its table:

(p) VAD probabilities: benchmarks/vad.py's table (its run_table) on --vad-minutes of speech,
    silence, noise and tones: max |probability difference| of our SileroVad against onnxruntime
    running silero-vad's silero_vad.onnx window by window, and the time of ours, that onnxruntime
    run, faster-whisper's VAD path (its onnx, batched) and whisper.cpp's VAD (pywhispercpp's
    libwhisper) at 1 and 2 threads (the VAD's own thread counts, not --threads).
(a) vad_filter: the espeak-ng passage (scripts/make_passage.py, 25 sentences; needs espeak-ng and
    sox) with four gaps of 30-60 s inserted between sentences: digital silence, white noise, a
    440 Hz tone, noise plus tone. Ours `transcribe(vad_filter=True)` and faster-whisper
    `transcribe(vad_filter=True)`, both at their defaults (beam 5, faster-whisper's VadOptions),
    with word timestamps: WER, words whose middle lies in a gap (0.5 s in from its edges), and
    the wall time. Ours without the VAD is shown as the baseline.
(b) batched: the passage repeated each of --repeats times (default 1 and 5); ours
    `transcribe(batch_size=N)` and faster-whisper's BatchedInferencePipeline (float32 and int8
    weights) at the same batch sizes, threads and beam (greedy = 1, beam5 = 5), each at its own
    defaults otherwise (faster-whisper decodes without timestamps, ours with). Ours runs with
    float32 weights and with compute_type="int8" (q8_0 weights, 8-bit activations), as
    faster-whisper's two rows. Engines run one after the other for each setting and batch size
    (ours, ours int8, fw float32, fw int8), so each line's peers share the machine's load. WER
    and wall time, and the process's CPU time of that run (all threads; on a loaded machine the
    steadier of the two); the last columns are each of our rows' time over faster-whisper
    float32's and int8's at the same batch size and beam (below 1 is faster); our rows end with
    where their time went (result.timings: encoder, decoder, VAD, mel; the profiler's parts,
    benchmarks/profile_whisper_longform.py, so the two scripts can be checked against each other:
    give it --audio PASSAGE_X1.wav --repeat 5, the same audio) and the windows encoded (batched:
    one per chunk).
    Our sequential run (no VAD, no batching) of the same audio is the WER reference row, and the
    load average is printed before each block.

Each time is the best of --runs runs (default 1: no warm-up; the engines' first runs at a batch
size then build their graphs, which costs ours little: measured 0.3 s of thread time of a 30 s
batch-8 run), model loading excluded; on a shared machine times are noisy. The issue's three
tables in one run of about 10 minutes at 2 threads on a 16-core Xeon (tiny.en):

    python benchmarks/whisper_vad_batched.py --threads 2 --repeats 5 --vad-repeat 1

faster-whisper (`pip install faster-whisper`, 1.2.1 measured) is not in the project's extras: its
rows are left out, with a line saying so, when it is not importable.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from metal_backend.whisper import Whisper, load_audio  # noqa: E402
from metal_backend.whisper.scoring import wer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SR = 16000
SETTINGS = {"greedy": 1, "beam5": 5}
ENGINES = ["ours", "ours-int8", "fw-float32", "fw-int8"]
# Opt-in rows: ours with faster-whisper BatchedInferencePipeline's decoding options (no previous
# text as prompt, no timestamp tokens), so the peers' rows can be compared like with like.
EXTRA_ENGINES = ["ours-fw-options", "ours-int8-fw-options"]
FW_BATCHED_OPTIONS = {"condition_on_previous_text": False, "without_timestamps": True}
PARTS = ["probabilities", "vad", "batched"]


def _sibling(name: str):
    """Another benchmark script of this folder, as a module."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_dir(name: str, work: Path) -> Path | None:
    return _sibling("whisper").model_dir(name, work)


def part_probabilities(args) -> None:
    print(f"\n(p) VAD probabilities and time: {args.vad_minutes:g} min of speech, silence, noise and tones "
          f"({load_average()})", flush=True)
    _sibling("vad").run_table(minutes=args.vad_minutes, repeat=args.vad_repeat)


def passage(work: Path, repeat: int) -> tuple[np.ndarray, dict]:
    wav = work / f"passage25x{repeat}.wav"
    if not wav.exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_passage.py"), str(wav), "--repeat", str(repeat)],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return load_audio(wav), json.loads(wav.with_suffix(".json").read_text())


def gapped(samples: np.ndarray, info: dict) -> tuple[np.ndarray, list[tuple[float, float]], str]:
    """The passage with gaps after sentences 5, 10, 15 and 20; (audio, gap spans in s, reference)."""
    rng = np.random.default_rng(0)

    def tone(n):
        return 0.1 * np.sin(2 * np.pi * 440 * np.arange(n) / SR)

    gaps = {5: np.zeros(40 * SR), 10: 0.05 * rng.standard_normal(45 * SR), 15: tone(30 * SR),
            20: 0.03 * rng.standard_normal(60 * SR) + tone(60 * SR)}
    pieces, spans, cursor, out_len = [], [], 0, 0
    sentences = info["sentences"]
    for i, s in enumerate(sentences, 1):
        if i in gaps:
            cut = int((s["end"] + (sentences[i]["start"] if i < len(sentences) else s["end"])) / 2 * SR)
            pieces.append(samples[cursor:cut])
            out_len += cut - cursor
            cursor = cut
            gap = gaps[i].astype(np.float32)
            spans.append((out_len / SR, (out_len + gap.size) / SR))
            pieces.append(gap)
            out_len += gap.size
    pieces.append(samples[cursor:])
    return np.concatenate(pieces).astype(np.float32), spans, " ".join(s["text"] for s in sentences)


def words_in_gaps(words: list[tuple[float, float]], gaps: list[tuple[float, float]]) -> int:
    return sum(any(a + 0.5 < (s + e) / 2 < b - 0.5 for a, b in gaps) for s, e in words)


def part_vad(args, ct2: Path, work: Path) -> None:
    samples, info = passage(work, 1)
    audio, gaps, ref = gapped(samples, info)
    print(f"\n(a) vad_filter: passage {samples.size / SR:.1f} s + gaps {', '.join(f'{b - a:.0f}' for a, b in gaps)} s "
          f"(silence, noise, tone, noise+tone) = {audio.size / SR:.1f} s; beam 5, word timestamps, "
          f"{args.threads} threads", flush=True)
    print(f"{'engine':30s} {'WER %':>6s} {'words in gaps':>13s} {'time s':>7s}", flush=True)
    ours = Whisper.load(ct2, device="CPU", threads=args.threads)
    ours.transcribe(audio[:SR], vad_filter=True, language="en")  # loads the VAD
    rows = []
    for name, kw in [("ours vad_filter=True", dict(vad_filter=True)), ("ours, no VAD", {})]:
        t = time.perf_counter()
        r = ours.transcribe(audio, language="en", word_timestamps=True, **kw)
        rows.append((name, r.text, [(w.start, w.end) for s in r.segments for w in s.words or []],
                     time.perf_counter() - t))
    if importlib.util.find_spec("faster_whisper") is not None:
        from faster_whisper import WhisperModel

        fw = WhisperModel(str(ct2), device="cpu", cpu_threads=args.threads)
        t = time.perf_counter()
        segments = list(fw.transcribe(audio, language="en", vad_filter=True, word_timestamps=True)[0])
        rows.append(("faster-whisper vad_filter=True", "".join(s.text for s in segments),
                     [(w.start, w.end) for s in segments for w in s.words or []], time.perf_counter() - t))
    for name, text, words, seconds in rows:
        print(f"{name:30s} {100 * wer(ref, text):6.2f} {words_in_gaps(words, gaps):13d} {seconds:7.1f}", flush=True)


def load_average() -> str:
    try:
        return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load unknown"


def part_batched(args, ct2: Path, work: Path) -> None:
    ours = Whisper.load(ct2, device="CPU", threads=args.threads)
    ours.transcribe(np.zeros(SR, np.float32) + 0.01, batch_size=1, language="en")  # loads the VAD
    engines = []
    int8_model = None
    for name, compute_type, extra in [("ours", "float32", {}), ("ours int8", "int8", {}),
                                      ("ours fw-options", "float32", FW_BATCHED_OPTIONS),
                                      ("ours int8 fw-options", "int8", FW_BATCHED_OPTIONS)]:
        if name.replace(" ", "-") not in args.engines:
            continue
        if compute_type == "float32":
            model = ours
        else:
            if int8_model is None:
                int8_model = Whisper.load(ct2, device="CPU", threads=args.threads, compute_type=compute_type)
                int8_model.transcribe(np.zeros(SR, np.float32) + 0.01, batch_size=1, language="en")
            model = int8_model

        def run_ours(audio, beam, n, model=model, extra=extra):
            r = model.transcribe(audio, language="en", batch_size=n, beam_size=None if beam == 1 else beam, **extra)
            return r.text, r.timings

        engines.append((name, run_ours))
    if importlib.util.find_spec("faster_whisper") is None:
        print("faster-whisper is not importable (pip install faster-whisper): its rows are left out", flush=True)
    else:
        from faster_whisper import BatchedInferencePipeline, WhisperModel

        for compute_type in ("float32", "int8"):
            if f"fw-{compute_type}" not in args.engines:
                continue
            pipeline = BatchedInferencePipeline(WhisperModel(str(ct2), device="cpu", cpu_threads=args.threads,
                                                             compute_type=compute_type))

            def run(audio, beam, n, pipeline=pipeline):
                segments = pipeline.transcribe(audio, language="en", beam_size=beam, batch_size=n)[0]
                return "".join(s.text for s in segments), {}

            engines.append((f"faster-whisper {compute_type}", run))
    for repeat in args.repeats:
        samples, info = passage(work, repeat)
        ref = " ".join(s["text"] for s in info["sentences"])
        print(f"\n(b) batched: {args.model}, passage x{repeat} = {samples.size / SR:.1f} s, {args.threads} threads",
              flush=True)
        print(f"{'engine':28s} {'setting':7s} {'batch':>5s} {'WER %':>6s} {'time s':>7s} {'cpu s':>6s} "
              f"{'ours/fw-f32':>11s} {'ours/fw-int8':>12s}  ours: encoder / decoder / VAD / mel s, windows",
              flush=True)
        for setting in args.settings:
            beam = SETTINGS[setting]
            print(f"  ({load_average()})", flush=True)

            def sequential(audio, beam, n):
                r = ours.transcribe(audio, language="en", beam_size=None if beam == 1 else beam)
                return r.text, r.timings

            text, seconds, cpu, timings = best_of(args.runs, sequential, samples, beam, None)
            print(f"{'ours sequential (reference)':28s} {setting:7s} {'-':>5s} {100 * wer(ref, text):6.2f} "
                  f"{seconds:7.1f} {cpu:6.1f} {'-':>11s} {'-':>12s}  {parts(timings)}", flush=True)
            for n in args.batch_sizes:
                times = {}
                lines = []
                for name, run in engines:
                    text, times[name], cpu, timings = best_of(args.runs, run, samples, beam, n)
                    lines.append((name, 100 * wer(ref, text), cpu, timings))
                for name, w, cpu, timings in lines:
                    ratios = ""
                    if name.startswith("ours"):
                        for peer, width in (("faster-whisper float32", 11), ("faster-whisper int8", 12)):
                            ratio = f"{times[name] / times[peer]:.2f}" if peer in times else "-"
                            ratios += f" {ratio:>{width}s}"
                        ratios += f"  {parts(timings)}"
                    print(f"{name:28s} {setting:7s} {n:5d} {w:6.2f} {times[name]:7.1f} {cpu:6.1f}{ratios}", flush=True)
            print(f"  ({load_average()})", flush=True)


def best_of(runs: int, run, audio: np.ndarray, beam: int, n: int | None) -> tuple[str, float, float, dict]:
    """The text, the shortest wall time of runs runs of run(audio, beam, n), that run's CPU time
    (the process's, all threads: on a loaded machine less noisy than the wall time) and timings."""
    best = None
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        text, timings = run(audio, beam, n)
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
        if best is None or seconds < best[1]:
            best = (text, seconds, cpu, timings)
    return best


def parts(timings: dict) -> str:
    """Our run's encoder / decoder / VAD / mel seconds and, batched, the windows encoded (result.timings)."""
    seconds = " / ".join(f"{timings.get(k, 0.0):.1f}" for k in ("encode", "decode", "vad", "mel"))
    return seconds + (f", {timings['windows']:.0f}" if "windows" in timings else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="tiny.en", choices=["tiny.en", "base"])
    parser.add_argument("--repeats", nargs="+", type=int, default=[1, 5], help="passage repetitions for (b)")
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES + EXTRA_ENGINES,
                        help="rows of (b); the sequential reference row always runs; ours-fw-options and "
                             "ours-int8-fw-options (not default): ours with condition_on_previous_text=False, "
                             "without_timestamps=True, faster-whisper's batched pipeline's options")
    parser.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS,
                        help="probabilities: VAD vs onnxruntime; vad: vad_filter on the gapped passage; batched")
    parser.add_argument("--vad-minutes", type=float, default=10.0, help="audio of part (p)")
    parser.add_argument("--vad-repeat", type=int, default=3, help="best of this many runs in part (p)")
    parser.add_argument("--work", type=Path, help="directory for the passages (default: temp)")
    parser.add_argument("--runs", type=int, default=1, help="(b): each time the best of this many runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ct2 = model_dir(args.model, work)
        if ct2 is None:
            raise SystemExit(f"{args.model}: model package not installed")
        if "probabilities" in args.parts:
            part_probabilities(args)
        if "vad" in args.parts:
            part_vad(args, ct2, work)
        if "batched" in args.parts:
            part_batched(args, ct2, work)


if __name__ == "__main__":
    main()
