"""Long-form Whisper: accuracy, segment times and speed of ours against faster-whisper and whisper.cpp.

    python benchmarks/whisper_longform.py [--threads 2] [--models tiny.en base] [--repeats 1 5]
        [--audio A.wav ...] [--settings greedy beam5]
        [--engines ours faster-whisper ours-q8_0 ours-int8 faster-whisper-int8 whisper.cpp]
        [--work DIR] [--json OUT] [--spin-us US] [--rounds N] [--cpu-time]

The audio is an espeak-ng passage built by scripts/make_passage.py (25 sentences, about 132 s;
needs espeak-ng and sox), once and repeated 5 times (about 11 minutes); its JSON lists where each
sentence starts. --audio adds other WAV files with such a JSON next to them (A.json for A.wav). Every engine
transcribes the same 16 kHz samples, in English, with its own
long-form algorithm (timestamps, seeking, conditioning on previous text, temperature fallback)
at the given thread count:

- greedy: beam size 1 (ours: beam_size=None), everything else at the engine's defaults;
- beam5: beam search of 5 (patience 1), which is every engine's default.

Columns: WER (scoring.normalize, then word-level Levenshtein) with the substitutions, deletions
(words lost) and insertions (words duplicated or invented); the longest run of one repeated word
n-gram (a loop shows as a large number); for each sentence, the distance from its true start to the
nearest segment start: median, maximum and the share within 1 s; the end-to-end wall time from
samples to segments (model loading and file reading excluded, no warm-up: one run of long audio)
and ours over faster-whisper's time in the same setting (below 1 is faster). On a shared machine
the times are noisy; the ratios compare runs made minutes apart (use --rounds for best-of-N with the
engines interleaved; --cpu-time --threads 1 times by CPU seconds, steadier on a loaded machine).
Engines: ours (compute_type "float32"), ours-q8_0 (Whisper.load(..., quantize="q8_0"):
q8_0 matrices, the encoder's products in f32 on dequantized weights), ours-int8 (Whisper.load(...,
compute_type="int8"): q8_0 matrices, 8-bit activations), faster-whisper float32 and int8 (its
compute_type), whisper.cpp on the converted f16 file. Ratio columns: time over faster-whisper
float32's and over faster-whisper int8's in the same setting.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and whisper.py there would shadow
# openai-whisper's package `whisper`.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

from metal_backend.whisper import Whisper, load_audio  # noqa: E402
from metal_backend.whisper.convert import convert  # noqa: E402
from metal_backend.whisper.scoring import longest_repeat, start_errors, word_errors  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


model_dir = _sibling("whisper").model_dir

SETTINGS = {"greedy": 1, "beam5": 5}


# ---------------------------------------------------------------- engines: (text, segment starts)


class Ours:
    name = "ours"
    compute_type = "float32"
    quantize = None

    def __init__(self, ct2: Path, work: Path, threads: int, spin_us: int | None = None):
        self.model = Whisper.load(ct2, device="CPU", threads=threads, compute_type=self.compute_type,
                                  quantize=self.quantize)
        if spin_us is not None:
            self.model.compute.backend.options["spin_us"] = spin_us

    def transcribe(self, samples: np.ndarray, beam: int) -> tuple[str, list[float]]:
        result = self.model.transcribe(samples, language="en", beam_size=None if beam == 1 else beam)
        return result.text, [s.start for s in result.segments if s.text.strip()]


class OursInt8(Ours):
    """Whisper.load(compute_type="int8"): q8_0 matrices, 8-bit activations in every product."""

    name = "ours-int8"
    compute_type = "int8"


class OursQ8(Ours):
    """Whisper.load(quantize="q8_0"): q8_0 matrices (byte dot products for few tokens), the
    encoder's products on dequantized f32 weights."""

    name = "ours-q8_0"
    quantize = "q8_0"


class FasterWhisper:
    name = "faster-whisper"
    compute_type = "float32"

    def __init__(self, ct2: Path, work: Path, threads: int):
        from faster_whisper import WhisperModel

        self.model = WhisperModel(str(ct2), device="cpu", cpu_threads=threads, num_workers=1,
                                  compute_type=self.compute_type)

    def transcribe(self, samples, beam):
        segments, _ = self.model.transcribe(samples, language="en", beam_size=beam, vad_filter=False)
        segments = list(segments)
        return "".join(s.text for s in segments).strip(), [s.start for s in segments if s.text.strip()]


class FasterWhisperInt8(FasterWhisper):
    """CTranslate2's int8 (its README's advice for CPUs): int8 weights and activations."""

    name = "faster-whisper-int8"
    compute_type = "int8"


class WhisperCpp:
    name = "whisper.cpp"

    def __init__(self, ct2: Path, work: Path, threads: int):
        from pywhispercpp.model import Model

        path = work / f"ggml-{ct2.name}.bin"
        if not path.exists():
            convert(str(ct2), str(path))
        self.path, self.threads, self.Model = path, threads, Model
        self.models = {}

    def transcribe(self, samples, beam):
        if beam not in self.models:
            extra = {} if beam == 1 else {"params_sampling_strategy": 1,
                                          "beam_search": {"beam_size": beam, "patience": -1.0}}
            self.models[beam] = self.Model(str(self.path), n_threads=self.threads, redirect_whispercpp_logs_to=None,
                                           print_progress=False, print_realtime=False, language="en", **extra)
        segments = self.models[beam].transcribe(samples)
        # whisper.cpp times are in units of 10 ms.
        return " ".join(s.text.strip() for s in segments), [s.t0 / 100.0 for s in segments if s.text.strip()]


ENGINES = {"ours": (Ours, None), "faster-whisper": (FasterWhisper, "faster_whisper"),
           "ours-q8_0": (OursQ8, None), "ours-int8": (OursInt8, None),
           "faster-whisper-int8": (FasterWhisperInt8, "faster_whisper"),
           "whisper.cpp": (WhisperCpp, "pywhispercpp")}


# ---------------------------------------------------------------- audio


def passage(work: Path, repeat: int) -> tuple[np.ndarray, dict]:
    """The 25-sentence passage repeated `repeat` times, built once per work directory."""
    wav = work / f"passage25x{repeat}.wav"
    if not wav.exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_passage.py"), str(wav), "--repeat", str(repeat)],
                       check=True, stdout=subprocess.DEVNULL)
    return load_audio(wav), json.loads(wav.with_suffix(".json").read_text())


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base"], choices=["tiny.en", "base"])
    parser.add_argument("--repeats", nargs="*", type=int, default=[1, 5], help="passage repetitions")
    parser.add_argument("--audio", nargs="+", type=Path, default=[],
                        help="more WAV files, each with its sentence list A.json (make_passage.py writes it)")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--work", type=Path, help="directory for the passages and converted models (default: temp)")
    parser.add_argument("--json", type=Path, help="also write every row as JSON here")
    parser.add_argument("--spin-us", type=int, help="ours: the CPU backend's spin_us option (default: its own)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs per engine, engines interleaved (A B A B ...); the best time counts")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by the process's CPU time, every thread's (with --threads 1: steadier on a "
                             "loaded machine than wall time; at more threads it counts spin-waiting too)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = run(args, work)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def run(args: argparse.Namespace, work: Path) -> list[dict]:
    audios = {f"x{r}": passage(work, r) for r in args.repeats}
    for path in args.audio:
        audios[path.stem] = (load_audio(path), json.loads(path.with_suffix(".json").read_text()))
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(f"threads {args.threads}; best of {args.rounds} run(s) each, engines interleaved, "
          f"{'CPU' if args.cpu_time else 'wall'} time, loading "
          "excluded; " + "; ".join(f"{name}: {a.size / 16000:.1f} s, {len(ref['sentences'])} sentences"
                                   for name, (a, ref) in audios.items()), flush=True)
    header = (f"{'model':7s} {'audio':6s} {'setting':7s} {'engine':19s} {'WER %':>6s} {'sub/del/ins':>11s} "
              f"{'loop':>4s} {'start err med/max s':>19s} {'<1 s':>5s} {'time s':>7s} {'/fw':>5s} {'/fw-i8':>6s}")
    print(header, flush=True)
    rows = []
    for model_name in args.models:
        ct2 = model_dir(model_name, work)
        if ct2 is None:
            print(f"{model_name}: model package not installed, skipped", flush=True)
            continue
        engines = []
        for name in [n for n in ENGINES if n in args.engines]:  # interleaved: ours, fw, ours-q8_0, ours-int8, fw-int8
            make, module = ENGINES[name]
            if module is not None and importlib.util.find_spec(module) is None:
                print(f"{name}: package {module} not installed, skipped", flush=True)
                continue
            engines.append(make(ct2, work, args.threads, args.spin_us) if name.startswith("ours")
                           else make(ct2, work, args.threads))
        for audio_name, (samples, reference) in audios.items():
            ref_text = " ".join(s["text"] for s in reference["sentences"])
            ref_starts = [s["start"] for s in reference["sentences"]]
            for setting in args.settings:
                times: dict[str, float] = {}
                outputs: dict[str, tuple[str, list[float]]] = {}
                for _ in range(max(1, args.rounds)):
                    for engine in engines:
                        start = clock()
                        outputs[engine.name] = engine.transcribe(samples, SETTINGS[setting])
                        seconds = clock() - start
                        times[engine.name] = min(seconds, times.get(engine.name, math.inf))
                for engine in engines:
                    text, starts = outputs[engine.name]
                    seconds = times[engine.name]
                    errors = word_errors(ref_text, text)
                    dist = start_errors(ref_starts, starts)
                    row = dict(model=model_name, audio=audio_name, setting=setting, engine=engine.name,
                               wer=errors.wer, substitutions=errors.substitutions, deletions=errors.deletions,
                               insertions=errors.insertions, loop=longest_repeat(text),
                               start_median=statistics.median(dist), start_max=max(dist),
                               start_within_1s=sum(d <= 1.0 for d in dist) / len(dist), seconds=seconds,
                               segments=len(starts), text=text)
                    fw, fw8 = times.get("faster-whisper"), times.get("faster-whisper-int8")
                    row["over_fw"] = seconds / fw if fw else None
                    row["over_fw_int8"] = seconds / fw8 if fw8 else None
                    rows.append(row)
                    ratio = "" if row["over_fw"] is None else f"{row['over_fw']:.2f}"
                    ratio8 = "" if row["over_fw_int8"] is None else f"{row['over_fw_int8']:.2f}"
                    max_err = "inf" if math.isinf(row["start_max"]) else f"{row['start_max']:.2f}"
                    print(f"{model_name:7s} {row['audio']:6s} {setting:7s} {engine.name:19s} {100 * errors.wer:6.1f} "
                          f"{errors.substitutions:>3d}/{errors.deletions:>3d}/{errors.insertions:>3d} "
                          f"{row['loop']:4d} {row['start_median']:9.2f}/{max_err:>9s} "
                          f"{100 * row['start_within_1s']:4.0f}% {seconds:7.1f} {ratio:>5s} {ratio8:>6s}", flush=True)
    return rows


if __name__ == "__main__":
    main()
