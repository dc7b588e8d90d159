"""Silero VAD v6.2: ours on the backend against onnxruntime and whisper.cpp, on 10 minutes of audio.

    python benchmarks/vad.py [--minutes 10] [--device CPU] [--repeat 3] [--fw-onnx PATH]

The audio: the test speech (tests/assets/audio: jfk.wav, passage.wav, espeak sentences) with
silence, white noise and tones between, repeated to --minutes. Peers, each on the same samples:
- onnxruntime running silero-vad 6.2.3's silero_vad.onnx one window per call with the previous
  window's last 64 samples in front, as silero-vad's own wrapper runs it (the reference for the
  probabilities; tests/assets/vad/silero_vad.onnx);
- faster-whisper's VAD path: its silero_vad_v6.onnx fed every window (with context) of the file in
  one call, as faster_whisper.vad.SileroVADModel does (installed faster_whisper or --fw-onnx;
  other weights, so only its time is compared);
- whisper.cpp's VAD (whisper_vad_detect_speech) on a ggml-silero file written in whisper.cpp's
  layout (f16 conv weights) from our weights: through pywhispercpp where its VAD API works, else
  through ctypes on the libwhisper that pywhispercpp ships (pywhispercpp 1.5.1 binds
  whisper_vad_init_from_file_with_params without its return type, a TypeError after whisper.cpp
  has read the file; ctypes declares the return type and the context-parameter struct
  {int n_threads; bool use_gpu; int gpu_device} of whisper.h 1.8).
Each is timed at 1 and 2 threads (best of --repeat); ratios are peer time / our time (> 1: ours
faster). Probability differences are against the onnxruntime reference. whisper.cpp's is printed
twice: against that reference, and against onnxruntime fed whisper.cpp's framing. whisper.cpp does
not put the previous window's last 64 samples in front of a window: it reflect-pads each 512-sample
window 64 on both sides (whisper_vad_build_stft_layer), so its probabilities differ from silero-vad's
by up to ~0.4-0.9 around onsets whatever the file; with the mirrored samples in front onnxruntime
computes the same 640 samples, and the difference left is whisper.cpp's f16 weights and conv inputs
(up to ~4e-2, carried by the LSTM state; tests/vad/test_whisper_cpp_runs_our_file.py puts those
roundings in the onnxruntime model too, and then the two agree within 9e-4 over 10 min).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "tests" / "assets" / "audio"
RATE = 16000


def read_wav16(path: Path) -> np.ndarray:
    with wave.open(str(path)) as f:
        return np.frombuffer(f.readframes(f.getnframes()), "<i2").astype(np.float32) / 32768


def make_audio(minutes: float) -> np.ndarray:
    rng = np.random.default_rng(0)
    parts = []
    for name in ("jfk", "passage", "door_light", "good_morning"):
        path = ASSETS / f"{name}.wav"
        if path.is_file():
            parts.append(read_wav16(path))
    if not parts:
        sys.exit(f"no speech in {ASSETS}: run scripts/make_test_audio.sh")
    t = np.arange(3 * RATE) / RATE
    gaps = [np.zeros(2 * RATE, np.float32), (0.05 * rng.standard_normal(3 * RATE)).astype(np.float32),
            (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)]
    pieces, total, i = [], 0, 0
    while total < minutes * 60 * RATE:
        piece = parts[i % len(parts)] if i % 2 == 0 else gaps[(i // 2) % len(gaps)]
        pieces.append(piece)
        total += piece.size
        i += 1
    return np.concatenate(pieces)[:int(minutes * 60 * RATE)]


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def ort_session(path: Path, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def ort_per_window(session, audio: np.ndarray, framing: str = "previous") -> np.ndarray:
    """framing "previous": the previous window's last 64 samples in front (silero-vad's wrapper);
    "reflect": the window's own samples 64..1 mirrored in front (whisper.cpp's padding)."""
    n = audio.size // 512
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(64, np.float32)
    sr = np.array(RATE, np.int64)
    out = np.empty(n, np.float32)
    for i in range(n):
        window = audio[i * 512:(i + 1) * 512]
        if framing == "reflect":
            context = window[64:0:-1]
        prob, state = session.run(None, {"input": np.concatenate([context, window])[None], "state": state, "sr": sr})
        out[i] = prob.reshape(-1)[0]
        context = window[-64:]
    return out


def ort_batched(session, audio: np.ndarray) -> np.ndarray:
    """faster-whisper's way: every window with its context, 10000 per call, h and c carried."""
    windows = audio[:audio.size // 512 * 512].reshape(-1, 512)
    context = np.roll(windows[:, -64:], 1, axis=0)
    context[0] = 0
    batched = np.concatenate([context, windows], axis=1)
    h = np.zeros((1, 1, 128), np.float32)
    c = np.zeros((1, 1, 128), np.float32)
    outs = []
    for i in range(0, batched.shape[0], 10000):
        out, h, c = session.run(None, {"input": batched[i:i + 10000], "h": h, "c": c})
        outs.append(out)
    return np.concatenate(outs).reshape(-1)


def whisper_cpp_vad():
    """A maker of whisper.cpp VAD runners, make(path, threads) -> (run(audio) -> probabilities,
    free()), through pywhispercpp's binding when it works, else ctypes on its libwhisper; None
    without pywhispercpp."""
    try:
        import _pywhispercpp as binding
    except ImportError:
        return None

    def through_binding(path: Path, threads: int):
        params = binding.whisper_vad_default_context_params()
        params.n_threads = threads
        params.use_gpu = False
        ctx = binding.whisper_vad_init_from_file_with_params(str(path), params)

        def run(audio: np.ndarray) -> np.ndarray:
            """pywhispercpp"""
            assert binding.whisper_vad_detect_speech(ctx, audio, audio.size)
            return np.array(binding.whisper_vad_probs(ctx))

        return run, lambda: binding.whisper_vad_free(ctx)

    def through_ctypes(path: Path, threads: int):
        # The one ctypes binding of whisper.cpp's VAD, shared with the tests that check our file in it.
        sys.path.insert(0, str(ROOT / "tests" / "vad"))
        from vad_testing import WhisperCppVad

        vad = WhisperCppVad(path, threads)

        def run(audio: np.ndarray) -> np.ndarray:
            """ctypes"""
            return vad.probabilities(audio)

        return run, vad.close

    def make(path: Path, threads: int):
        if hasattr(binding, "whisper_vad_detect_speech"):
            try:
                return through_binding(path, threads)
            except TypeError:
                pass  # pywhispercpp 1.5.1: no return type bound (see the module docstring)
        return through_ctypes(path, threads)

    return make


def run_table(minutes: float = 10.0, device: str = "CPU", repeat: int = 3, fw_onnx: Path | None = None) -> None:
    """Prints the table (times at 1 and 2 threads, ratios to ours) and the probability differences
    (benchmarks/whisper_vad_batched.py prints it as its first part)."""
    sys.path.insert(0, str(ROOT))
    from metal_backend.vad import SileroVad, read_silero_file, write_silero_file

    args = argparse.Namespace(minutes=minutes, device=device, repeat=repeat, fw_onnx=fw_onnx)
    audio = make_audio(args.minutes)
    audio = audio[:audio.size // 512 * 512]
    n = audio.size // 512
    print(f"{audio.size / RATE / 60:.1f} min of audio, {n} windows; device {args.device}")

    reference = reflect_reference = None
    onnx = ROOT / "tests" / "assets" / "vad" / "silero_vad.onnx"
    rows: list[tuple[str, int, float, str]] = []
    ours_time: dict[int, float] = {}
    for threads in (1, 2):
        vad = SileroVad.load(device=args.device, threads=threads)
        vad.speech_probabilities(audio[:RATE])  # builds the graphs
        t, ours = best(lambda: vad.speech_probabilities(audio), args.repeat)
        ours_time[threads] = t
        rows.append(("ours (metal_backend SileroVad)", threads, t, ""))
    if onnx.is_file():
        for threads in (1, 2):
            session = ort_session(onnx, threads)
            t, ref = best(lambda: ort_per_window(session, audio), max(1, args.repeat - 1))
            reference = ref if reference is None else reference
            if reflect_reference is None:
                reflect_reference = ort_per_window(session, audio, "reflect")
            rows.append(("onnxruntime silero_vad.onnx, window by window", threads, t, ""))
    else:
        print(f"(no {onnx}: see tests/assets/vad/README.md)")
    fw = args.fw_onnx
    if fw is None and importlib.util.find_spec("faster_whisper") is not None:
        import faster_whisper

        fw = Path(faster_whisper.__file__).parent / "assets" / "silero_vad_v6.onnx"
    if fw is not None and fw.is_file():
        for threads in (1, 2):
            session = ort_session(fw, threads)
            t, _ = best(lambda: ort_batched(session, audio), args.repeat)
            rows.append(("faster-whisper VAD path (its silero_vad_v6.onnx, batched)", threads, t, "other weights"))
    else:
        print("(faster-whisper's silero_vad_v6.onnx not found: pass --fw-onnx or install faster-whisper)")
    cpp_probs = None
    cpp = whisper_cpp_vad()
    if cpp is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ggml-silero-v6.2.0.bin"
            write_silero_file(path, read_silero_file(ROOT / "metal_backend/vad/data/silero_vad_v6.2.bin").tensors,
                              (6, 2, 0), f16=True)
            for threads in (1, 2):
                run_cpp, free = cpp(path, threads)
                t, cpp_probs = best(lambda: run_cpp(audio), args.repeat)
                rows.append((f"whisper.cpp VAD ({run_cpp.__doc__}, f16 ggml-silero file)", threads, t, ""))
                free()
    else:
        print("(no whisper.cpp VAD: pywhispercpp is not installed)")

    print()
    print(f"| {'implementation':58} | threads | seconds | x realtime | peer / ours |")
    print(f"|{'-' * 60}|---------|---------|------------|-------------|")
    for name, threads, t, note in rows:
        ratio = t / ours_time[threads]
        print(f"| {name:58} | {threads:7} | {t:7.3f} | {audio.size / RATE / t:10.0f} | {ratio:11.2f} |"
              + (f" {note}" if note else ""))
    print()
    if reference is not None:
        ours_probs = SileroVad.load(device=args.device).speech_probabilities(audio)
        print(f"max |ours - onnxruntime| over {n} windows: {np.abs(ours_probs - reference).max():.2e}")
        if cpp_probs is not None:
            m = min(cpp_probs.size, n)
            print(f"max |whisper.cpp (f16 file) - onnxruntime| over {m} windows: "
                  f"{np.abs(cpp_probs[:m] - reference[:m]).max():.2e} (whisper.cpp's framing differs)")
            print(f"max |whisper.cpp (f16 file) - onnxruntime in whisper.cpp's framing| over {m} windows: "
                  f"{np.abs(cpp_probs[:m] - reflect_reference[:m]).max():.2e} (f16 weights and conv inputs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fw-onnx", type=Path, help="faster-whisper's assets/silero_vad_v6.onnx")
    args = ap.parse_args()
    run_table(args.minutes, args.device, args.repeat, args.fw_onnx)


if __name__ == "__main__":
    main()
