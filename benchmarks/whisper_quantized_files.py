"""Ours against whisper.cpp on the very same whisper.cpp files: f16 and quantized (q8_0, q5_1, q5_0, q4_0).

    python benchmarks/whisper_quantized_files.py [--threads 2] [--models tiny.en base]
        [--types f16 q8_0 q5_1 q5_0] [--audio jfk passage] [--beam 1] [--rounds 2] [--work DIR] [--json OUT]

Each model's CTranslate2 directory (the PyPI model packages the tests use) is converted once per
type by `python -m metal_backend.whisper.convert --type TYPE`, and that one file is loaded by ours
(Whisper.load, CPU device) and by whisper.cpp (pywhispercpp). Both transcribe the committed
tests/assets/audio clips (jfk.wav, 11 s; passage.wav, 65 s of espeak sentences, passage.json has
the text) in English, greedy unless --beam, at the given threads. Per row: each engine's WER
(scoring.normalize, word-level Levenshtein) and its best wall time over --rounds, the engines taking
turns (ours, whisper.cpp, ours, ...) so load changes hit both; ours / whisper.cpp below 1 is faster.
Model loading is excluded from the times.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path, and whisper.py there would shadow
# openai-whisper's package `whisper`.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from metal_backend.whisper import Whisper, load_audio  # noqa: E402
from metal_backend.whisper.convert import convert  # noqa: E402
from metal_backend.whisper.scoring import word_errors  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
AUDIO = REPO / "tests" / "assets" / "audio"
JFK_TEXT = ("And so my fellow Americans, ask not what your country can do for you, "
            "ask what you can do for your country.")


def _sibling(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clips(names: list[str]) -> dict[str, tuple[object, str]]:
    out = {}
    for name in names:
        if name == "jfk":
            out[name] = (load_audio(AUDIO / "jfk.wav"), JFK_TEXT)
        else:
            sentences = json.loads((AUDIO / f"{name}.json").read_text())["sentences"]
            out[name] = (load_audio(AUDIO / f"{name}.wav"), " ".join(s["text"] for s in sentences))
    return out


class Ours:
    name = "ours"

    def __init__(self, path: Path, threads: int, beam: int):
        self.model = Whisper.load(path, device="CPU", threads=threads)
        self.beam = None if beam == 1 else beam

    def transcribe(self, samples) -> str:
        return self.model.transcribe(samples, language="en", beam_size=self.beam).text


class WhisperCpp:
    name = "whisper.cpp"

    def __init__(self, path: Path, threads: int, beam: int):
        from pywhispercpp.model import Model

        extra = {} if beam == 1 else {"params_sampling_strategy": 1,
                                      "beam_search": {"beam_size": beam, "patience": -1.0}}
        self.model = Model(str(path), n_threads=threads, redirect_whispercpp_logs_to=None, print_progress=False,
                           print_realtime=False, language="en", **extra)

    def transcribe(self, samples) -> str:
        return " ".join(s.text.strip() for s in self.model.transcribe(samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base"], choices=["tiny.en", "base"])
    parser.add_argument("--types", nargs="+", default=["f16", "q8_0", "q5_1", "q5_0"],
                        choices=["f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"])
    parser.add_argument("--audio", nargs="+", default=["jfk", "passage"], choices=["jfk", "passage"])
    parser.add_argument("--beam", type=int, default=1, help="beam size (1: greedy)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per engine, best time kept")
    parser.add_argument("--work", type=Path, help="directory for the converted files (default: temp)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    if importlib.util.find_spec("pywhispercpp") is None:
        sys.exit("pywhispercpp is not installed (pip install pywhispercpp)")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = run(args, work)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def run(args: argparse.Namespace, work: Path) -> list[dict]:
    audio = clips(args.audio)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"threads {args.threads}, beam {args.beam}, best of {args.rounds} (engines in turn), load average "
          f"{load:.1f} at the start; " + ", ".join(f"{k} {a.size / 16000:.0f} s" for k, (a, _) in audio.items()),
          flush=True)
    print(f"{'model':7s} {'type':5s} {'MB':>5s} {'audio':8s} {'ours WER':>8s} {'w.cpp WER':>9s} "
          f"{'ours s':>7s} {'w.cpp s':>7s} {'ours/w.cpp':>10s}", flush=True)
    model_dir = _sibling("whisper").model_dir
    rows = []
    for model_name in args.models:
        ct2 = model_dir(model_name, work)
        if ct2 is None:
            print(f"{model_name}: model package not installed, skipped", flush=True)
            continue
        for qtype in args.types:
            path = work / f"ggml-{model_name}-{qtype}.bin"
            if not path.exists():
                convert(ct2, path, type=qtype)
            engines = [Ours(path, args.threads, args.beam), WhisperCpp(path, args.threads, args.beam)]
            for clip, (samples, reference) in audio.items():
                best = {e.name: float("inf") for e in engines}
                texts = {}
                for _ in range(args.rounds):
                    for engine in engines:
                        start = time.perf_counter()
                        texts[engine.name] = engine.transcribe(samples)
                        best[engine.name] = min(best[engine.name], time.perf_counter() - start)
                wers = {name: word_errors(reference, text).wer for name, text in texts.items()}
                row = dict(model=model_name, type=qtype, megabytes=path.stat().st_size / 1e6, audio=clip,
                           threads=args.threads, beam=args.beam, ours_wer=wers["ours"],
                           whisper_cpp_wer=wers["whisper.cpp"], ours_seconds=best["ours"],
                           whisper_cpp_seconds=best["whisper.cpp"], ours_text=texts["ours"],
                           whisper_cpp_text=texts["whisper.cpp"])
                rows.append(row)
                print(f"{model_name:7s} {qtype:5s} {row['megabytes']:5.0f} {clip:8s} {100 * wers['ours']:7.1f}% "
                      f"{100 * wers['whisper.cpp']:8.1f}% {best['ours']:7.2f} {best['whisper.cpp']:7.2f} "
                      f"{best['ours'] / best['whisper.cpp']:10.2f}", flush=True)
    return rows


if __name__ == "__main__":
    main()
