"""The VAD tests' reference and signals: onnxruntime running silero-vad 6.2.3's silero_vad.onnx.

The reference follows silero-vad's own wrapper (OnnxWrapper): each 512-sample window is fed with
the previous window's last 64 samples in front (zeros before the first), the state (2, 1, 128)
carried from call to call, the last window zero-padded. The model is committed in
tests/assets/vad/ (its README says where it comes from), the speech in tests/assets/audio/.
"""

from __future__ import annotations

import importlib.util
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
    """silero_vad.onnx under onnxruntime, one window per call as silero-vad's wrapper runs it.

    framing "previous" (silero-vad's): the 64 samples in front of a window are the previous
    window's last 64. framing "reflect" (whisper.cpp's VAD graph, which takes the 512-sample window
    alone and reflect-pads it 64 on both sides): the 64 in front are the window's samples 64..1
    mirrored, so the network sees exactly the padded window whisper.cpp computes on.
    f16_weights: the STFT basis and conv weights rounded to f16, as a whisper.cpp file holds them;
    f16_conv_inputs: every conv's input rounded to f16 too, as whisper.cpp computes (ggml_f16_numerics)."""

    def __init__(self, path: Path = ONNX, threads: int = 1, framing: str = "previous", f16_weights: bool = False,
                 f16_conv_inputs: bool = False):
        if framing not in ("previous", "reflect"):
            raise ValueError(f"framing {framing!r} is not 'previous' or 'reflect'")
        self.framing = framing
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        model = ggml_f16_numerics(path, f16_conv_inputs) if f16_weights or f16_conv_inputs else str(path)
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.reset()

    def reset(self) -> None:
        self.state = np.zeros((2, 1, 128), np.float32)
        self.context = np.zeros(64, np.float32)

    def window(self, samples: np.ndarray) -> float:
        samples = samples.astype(np.float32)
        if self.framing == "reflect":
            self.context = samples[64:0:-1]
        x = np.concatenate([self.context, samples])[None]
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


def ggml_f16_numerics(path: Path, conv_inputs: bool = True) -> bytes:
    """silero_vad.onnx computing in f16 where whisper.cpp's VAD does: the STFT basis and the conv
    weights rounded to f16 (the types whisper.cpp's loader gives them), and with conv_inputs every
    conv's input rounded to f16 (ggml_conv_1d's im2col writes f16 patches for an f16 kernel; the
    products accumulate in f32, as onnxruntime's do). The LSTM stays f32 in both. Needs onnx (the
    test extra; the wheel check's environment has onnxruntime only, so there these tests skip)."""
    require(importlib.util.find_spec("onnx") is not None, "onnx (the test extra)")
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from metal_backend.vad.silero_file import F16_IN_WHISPER_CPP

    model = onnx.load(str(path))
    branch = next(n for n in model.graph.node if n.op_type == "If")
    graph = next(a.g for a in branch.attribute if a.name == "then_branch")  # the 16 kHz branch
    for node in graph.node:
        if node.op_type == "Constant" and "_model." + node.output[0].rsplit("__", 1)[-1] in F16_IN_WHISPER_CPP:
            tensor = node.attribute[0].t
            rounded = numpy_helper.to_array(tensor).astype(np.float16).astype(np.float32)
            tensor.CopyFrom(numpy_helper.from_array(rounded, tensor.name))
    nodes = []
    for node in graph.node:
        if node.op_type == "Conv" and conv_inputs:
            half, back = node.input[0] + "/f16", node.input[0] + "/f16/f32"
            nodes.append(helper.make_node("Cast", [node.input[0]], [half], to=TensorProto.FLOAT16))
            nodes.append(helper.make_node("Cast", [half], [back], to=TensorProto.FLOAT))
            node.input[0] = back
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model.SerializeToString()


class WhisperCppVad:
    """whisper.cpp's own Silero VAD (the libwhisper that pywhispercpp bundles) on a ggml-silero file,
    through ctypes: pywhispercpp 1.5.1 binds whisper_vad_detect_speech without a usable return."""

    def __init__(self, path: Path, threads: int = 1):
        import ctypes

        import pywhispercpp

        libs = sorted((Path(pywhispercpp.__file__).parent.parent / "pywhispercpp.libs").glob("libwhisper*"))
        assert libs, "pywhispercpp ships no libwhisper"
        lib = ctypes.CDLL(str(libs[0]))

        class ContextParams(ctypes.Structure):  # whisper.h's whisper_vad_context_params
            _fields_ = [("n_threads", ctypes.c_int), ("use_gpu", ctypes.c_bool), ("gpu_device", ctypes.c_int)]

        lib.whisper_vad_default_context_params.restype = ContextParams
        lib.whisper_vad_init_from_file_with_params.restype = ctypes.c_void_p
        lib.whisper_vad_init_from_file_with_params.argtypes = [ctypes.c_char_p, ContextParams]
        lib.whisper_vad_detect_speech.restype = ctypes.c_bool
        lib.whisper_vad_detect_speech.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int]
        lib.whisper_vad_n_probs.restype = ctypes.c_int
        lib.whisper_vad_n_probs.argtypes = [ctypes.c_void_p]
        lib.whisper_vad_probs.restype = ctypes.POINTER(ctypes.c_float)
        lib.whisper_vad_probs.argtypes = [ctypes.c_void_p]
        lib.whisper_vad_free.argtypes = [ctypes.c_void_p]
        params = lib.whisper_vad_default_context_params()
        params.n_threads = threads
        params.use_gpu = False
        self.lib = lib
        self.ctx = lib.whisper_vad_init_from_file_with_params(str(path).encode(), params)
        if not self.ctx:
            raise RuntimeError(f"whisper.cpp could not load {path}")

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        """One probability per 512-sample window (the last zero-padded), state reset first."""
        import ctypes

        x = np.ascontiguousarray(samples, dtype=np.float32)
        assert self.lib.whisper_vad_detect_speech(self.ctx, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), x.size)
        n = self.lib.whisper_vad_n_probs(self.ctx)
        return np.ctypeslib.as_array(self.lib.whisper_vad_probs(self.ctx), shape=(n,)).copy()

    def close(self) -> None:
        if self.ctx:
            self.lib.whisper_vad_free(self.ctx)
            self.ctx = None


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
