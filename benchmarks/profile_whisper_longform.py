"""Where the time of a long-form transcription goes: encoder, decoder steps, host work per token.

    python benchmarks/profile_whisper_longform.py [--model tiny.en|base|PATH] [--audio WAV]
        [--threads 2] [--beam 1|5] [--quantize q8_0] [--compute-type float32|int8] [--repeat 1]
        [--batch-size N]

Transcribes the audio (default: tests/assets/audio/passage.wav, the first 12 sentences of
scripts/make_passage.py's passage, 65 s; --repeat 5 makes 324 s, half of whisper_vad_batched.py's
"passage x5", which is the whole 25-sentence passage five times, 659 s) once with our CPU backend
(--batch-size N: batched, transcribe(batch_size=N), the VAD first) and times each part of the run
by wrapping the functions that do it:

- mel: the log-mel spectrogram;
- encoder: BackendWhisper.encode (inputs set, graph computed, outputs kept on the device);
- decoder graph: the decoder graph's compute (the arithmetic of every decoder step);
- decoder in/out: the rest of decode_batch (argument checks, the token/position/mask inputs set,
  the logits read back);
- cache reorder: BackendWhisper.reorder (beam search's and best-of's cache copies);
- logit rules: LogitRules.apply (suppression, timestamp rules);
- batched: the encoder graph over a batch of windows (encode_batch), keep_windows (finished windows
  leaving the batch: window moves and cache reorders), BatchDecoder's host work (picks, beam
  bookkeeping; nested parts excluded), the VAD;
- host rest: everything else (log-softmax, picks, beam bookkeeping, seeking, text).

A "step" is one decoder graph run (a batch of beams or windows counts once); the histogram of
sequences per step shows how full the batched steps are. Prints ms per step and each part's share of
the wall time. Measurements on a loaded machine are rough; print `uptime`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from metal_backend.whisper import (  # noqa: E402
    Whisper,
    backend_compute,
    batch_decoding,
    batched,
    load_audio,
    logit_filters,  # noqa: E402
)
from metal_backend.whisper import mel as mel_module  # noqa: E402

HERE = Path(__file__).resolve().parent


def _model_path(name: str, work: Path) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_whisper", HERE / "whisper.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if name in ("tiny.en", "base"):
        path = module.model_dir(name, work)
        if path is None:
            raise SystemExit(f"{name}: model package not installed")
        return path
    return Path(name)


class Timers:
    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[list[float]] = []  # per active timer: time spent in nested timers

    def wrap(self, owner, attr: str, part: str):
        original = getattr(owner, attr)
        timers = self

        def wrapped(*args, **kwargs):
            timers._stack.append([0.0])
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                nested = timers._stack.pop()[0]
                timers.seconds[part] = timers.seconds.get(part, 0.0) + spent - nested
                timers.calls[part] = timers.calls.get(part, 0) + 1
                if timers._stack:
                    timers._stack[-1][0] += spent

        setattr(owner, attr, wrapped)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--audio", type=Path, default=HERE.parent / "tests" / "assets" / "audio" / "passage.wav")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--quantize", default=None)
    parser.add_argument("--compute-type", default=None)
    parser.add_argument("--repeat", type=int, default=1, help="the audio concatenated this many times")
    parser.add_argument("--batch-size", type=int, default=None, help="transcribe(batch_size=N): batched")
    parser.add_argument("--work", type=Path, default=Path("/tmp/mb_profile_work"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    import numpy as np

    kwargs = {}
    if args.quantize:
        kwargs["quantize"] = args.quantize
    if args.compute_type:
        kwargs["compute_type"] = args.compute_type
    model = Whisper.load(_model_path(args.model, args.work), device="CPU", threads=args.threads, **kwargs)
    samples = np.tile(load_audio(args.audio), args.repeat)

    timers = Timers()
    bw = backend_compute.BackendWhisper
    # transcribe computes the log-mel by chunks (mel.LogMel): each chunk's spectrogram is the mel work.
    timers.wrap(mel_module.LogMel, "_log_chunk", "mel")
    timers.wrap(batched, "_window", "mel")  # the batched path's windows
    timers.wrap(bw, "encode", "encoder (host)")
    timers.wrap(bw, "reorder", "cache reorder (host)")
    timers.wrap(bw, "encode_batch", "batched encoder (host)")
    timers.wrap(bw, "keep_windows", "keep_windows (host)")
    timers.wrap(batch_decoding.BatchDecoder, "decode_windows", "batch decoding (host)")
    timers.wrap(logit_filters.LogitRules, "apply", "logit rules")
    runner = model.compute.runner
    original_compute = runner.compute
    graph_parts = {"encoder": "encoder graph", "decoder": "decoder graph", "reorder": "cache reorder graph",
                   "window move": "keep_windows graphs"}

    def compute(graph, what="graph", scheduler=None):
        part = next((v for k, v in graph_parts.items() if k in what), "other graphs")
        timers._stack.append([0.0])
        start = time.perf_counter()
        try:
            return original_compute(graph, what, scheduler)
        finally:
            spent = time.perf_counter() - start
            timers._stack.pop()
            timers.seconds[part] = timers.seconds.get(part, 0.0) + spent
            if timers._stack:
                timers._stack[-1][0] += spent

    runner.compute = compute
    steps = {"n": 0}
    widths: dict[int, int] = {}
    original_decode = bw.decode_batch

    def counting(self, features, tokens, offset, skip=None):
        steps["n"] += 1
        widths[len(tokens)] = widths.get(len(tokens), 0) + 1
        return original_decode(self, features, tokens, offset, skip)

    bw.decode_batch = counting
    timers.wrap(bw, "decode_batch", "decoder in/out")

    start = time.perf_counter()
    result = model.transcribe(samples, language="en", beam_size=None if args.beam == 1 else args.beam,
                              batch_size=args.batch_size)
    wall = time.perf_counter() - start
    parts = dict(timers.seconds)
    if "vad" in result.timings:
        # The VAD's graphs ran through their own runner: its time, out of the host rest.
        parts["vad"] = result.timings["vad"]
    parts["host rest"] = wall - sum(parts.values())
    n = steps["n"]
    print(f"model {args.model}, beam {args.beam}, threads {args.threads}, {samples.size / 16000:.0f} s audio, "
          f"{n} decoder steps, wall {wall:.2f} s, {1000 * wall / max(n, 1):.2f} ms per step")
    for part, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        per_step = 1000 * seconds / max(n, 1)
        print(f"  {part:20s} {seconds:7.2f} s  {per_step:6.2f} ms/step  {100 * seconds / wall:5.1f} %")
    print("sequences per decoder step: " + ", ".join(f"{w} x{c}" for w, c in sorted(widths.items())))
    print(f"text: {result.text[:100]}...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
