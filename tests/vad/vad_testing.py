"""The VAD tests' reference and signals: onnxruntime running silero-vad 6.2.3's silero_vad.onnx.

The reference follows silero-vad's own wrapper (OnnxWrapper): each 512-sample window is fed with
the previous window's last 64 samples in front (zeros before the first), the state (2, 1, 128)
carried from call to call, the last window zero-padded. The model is committed in
tests/assets/vad/ (its README says where it comes from), the speech in tests/assets/audio/.
"""

from __future__ import annotations

import os
import wave
from pathlib import Path

import numpy as np
import pytest

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "audio"
ONNX = Path(__file__).resolve().parents[1] / "assets" / "vad" / "silero_vad.onnx"
RATE = 16000


def require(available: bool, what: str) -> None:
    """Skips (developer machine) or fails (CI) when a test asset is missing."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI is missing {what}", pytrace=False)
    pytest.skip(f"missing {what}")


class OnnxSilero:
    """silero_vad.onnx under onnxruntime, one window per call as silero-vad's wrapper runs it."""

    def __init__(self, path: Path = ONNX, threads: int = 1):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.reset()

    def reset(self) -> None:
        self.state = np.zeros((2, 1, 128), np.float32)
        self.context = np.zeros(64, np.float32)

    def window(self, samples: np.ndarray) -> float:
        x = np.concatenate([self.context, samples.astype(np.float32)])[None]
        prob, self.state = self.session.run(None, {"input": x, "state": self.state,
                                                   "sr": np.array(RATE, np.int64)})
        self.context = x[0, -64:]
        return float(prob.reshape(-1)[0])

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        self.reset()
        n = -(-len(samples) // 512)
        padded = np.zeros(n * 512, np.float32)
        padded[:len(samples)] = samples
        return np.array([self.window(padded[i * 512:(i + 1) * 512]) for i in range(n)])


def read_wav16(path: Path) -> np.ndarray:
    """A 16 kHz mono 16-bit WAV as float32 in [-1, 1)."""
    with wave.open(str(path)) as f:
        assert f.getframerate() == RATE and f.getnchannels() == 1 and f.getsampwidth() == 2
        return np.frombuffer(f.readframes(f.getnframes()), "<i2").astype(np.float32) / 32768


def signals() -> dict[str, np.ndarray]:
    """Synthetic test signals (seconds at 16 kHz): silence, noise, tones, and a mixture."""
    rng = np.random.default_rng(1234)
    t = np.arange(3 * RATE) / RATE
    chirp = 0.4 * np.sin(2 * np.pi * (100 * t + 1200 * t ** 2))
    mixed = np.concatenate([np.zeros(RATE // 2), 0.3 * rng.standard_normal(RATE), chirp[:RATE],
                            np.zeros(RATE // 3)])
    return {
        "silence": np.zeros(2 * RATE, np.float32),
        "white_noise": (0.1 * rng.standard_normal(2 * RATE)).astype(np.float32),
        "loud_noise": np.clip(0.8 * rng.standard_normal(RATE), -1, 1).astype(np.float32),
        "tone_440": (0.5 * np.sin(2 * np.pi * 440 * t[:2 * RATE])).astype(np.float32),
        "chirp": chirp.astype(np.float32),
        "mixed_odd_length": mixed[:-77].astype(np.float32),
    }


def speech(name: str) -> np.ndarray:
    path = ASSETS / f"{name}.wav"
    require(path.is_file(), f"{path} (scripts/make_test_audio.sh)")
    return read_wav16(path)
