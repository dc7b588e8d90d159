"""Silero VAD v6.2 on the backend: speech probabilities of 32 ms windows of 16 kHz audio.

The network, per 512-sample window (with the previous window's last 64 samples in front, zeros
before the first): reflect-pad 64 samples on the right (640); the "STFT", a convolution with a
fixed (258, 1, 256) basis at stride 128, gives 4 frames of 129 real and 129 imaginary parts, whose
magnitudes feed 4 convolutions (kernel 3, padding 1, bias, ReLU; 129->128, 128->64 stride 2,
64->64 stride 2, 64->128) down to one frame of 128; an LSTM cell (128) carries its state from
window to window; ReLU, a 1x1 convolution to one value and a sigmoid give the probability.

How it runs: windows are computed in blocks of up to BLOCK. One graph per block size does the
whole block from its samples (with the 64 before them): the windows with their context as an
overlapping view, reflect-padded (PAD_REFLECT_1D), then the front end (STFT to the LSTM's input
gates) as batched products over every window of the block, then the LSTM recurrence unrolled over the block's
windows on the device (the state lives in two device tensors between blocks and between push() calls), then the output
layer over the block. A file of n windows takes about n / BLOCK graph computes, not n.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

import metal_backend as mb
from metal_backend import ops
from metal_backend.nn import Runner, Weights, layers

from .errors import VadError
from .segments import SAMPLE_RATE, SegmentOptions, speech_segments_from_probabilities
from .silero_file import CONTEXT, ENCODER, HIDDEN, N_FFT, WINDOW, SileroWeights, read_silero_file

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_WEIGHTS = DATA / "silero_vad_v6.2.bin"
# Windows per graph, largest first: a run of n windows uses the largest sizes that fit, so a long
# file is mostly BLOCK-window graphs and a short push needs few small ones. 64 measured fastest per
# window on the CPU device (2-core Zen, one thread, best of 30: 16 windows 43 us, 64 44 us, 256 90 us
# per window: a 256-window block's front end no longer stays in the caches).
BLOCK = 64
_SIZES = (64, 16, 4, 1)
_PADDED = WINDOW + CONTEXT + CONTEXT  # 640: context + window + reflect padding
_HOP = N_FFT // 2


class _BlockGraph:
    """The graph that computes `size` consecutive windows."""

    def __init__(self, graph: mb.Graph, samples: mb.Tensor, probs: mb.Tensor):
        self.graph = graph
        self.samples = samples
        self.probs = probs


def check_samples(samples: object, what: str = "samples") -> np.ndarray:
    """samples as a float32 1-D array; raises VadError naming the problem for anything that is not
    a non-empty 1-D floating-point array of finite values (16 kHz mono)."""
    array = np.asarray(samples)
    if array.dtype.kind != "f":
        hint = " (divide integer PCM by 32768)" if array.dtype.kind in "iu" else ""
        raise VadError(f"{what} must be floating point (got dtype {array.dtype}){hint}")
    if array.ndim != 1:
        raise VadError(f"{what} must be a 1-D array of 16 kHz mono samples (got shape {array.shape})")
    finite = np.isfinite(array)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise VadError(f"{what} hold {int(array.size - finite.sum())} non-finite values "
                       f"(first at index {bad}: {array[bad]})")
    return np.ascontiguousarray(array, dtype=np.float32)


def check_sampling_rate(sampling_rate: object) -> None:
    """Raises VadError naming the value unless sampling_rate is 16000 (the model's rate)."""
    if isinstance(sampling_rate, bool) or not isinstance(sampling_rate, (int, np.integer)) \
            or sampling_rate != SAMPLE_RATE:
        raise VadError(f"the Silero VAD runs on {SAMPLE_RATE} Hz audio (got sampling_rate={sampling_rate!r}); "
                       f"resample first (metal_backend.io.resample)")


class SileroVad:
    """Silero VAD v6.2 (16 kHz) on a metal_backend device.

    load() reads the weights shipped in the package (or a whisper.cpp ggml-silero file);
    speech_probabilities() and speech_segments() take a whole file; reset() / push() take audio as
    it arrives and give the probabilities of each window once it is complete.
    """

    sample_rate = SAMPLE_RATE
    window = WINDOW
    context = CONTEXT

    def __init__(self, weights: SileroWeights, device: mb.Device | str | None = None,
                 threads: Optional[int] = None):
        try:
            self.runner = Runner(device, threads=threads)
        except (ValueError, TypeError) as exc:
            raise VadError(str(exc)) from None
        self.version = weights.version
        self.source = weights.source
        t = weights.tensors
        self.weights = w = Weights(self.runner.buffer_type)
        basis = t["_model.stft.forward_basis_buffer"][:, 0, :]  # (258, 256)
        half = N_FFT // 2 + 1
        w.add("stft.real", basis[:half])
        w.add("stft.imag", basis[half:])
        # im2col takes a kernel tensor only for its shape: (1, 1, 256).
        w.add("stft.shape", np.zeros((1, 1, N_FFT), np.float32))
        for i in range(len(ENCODER)):
            w.add(f"encoder.{i}.weight", t[f"_model.encoder.{i}.reparam_conv.weight"])
            w.add(f"encoder.{i}.bias", t[f"_model.encoder.{i}.reparam_conv.bias"])
        w.add("lstm.weight_ih", t["_model.decoder.rnn.weight_ih"])
        w.add("lstm.weight_hh", t["_model.decoder.rnn.weight_hh"])
        w.add("lstm.bias", t["_model.decoder.rnn.bias_ih"] + t["_model.decoder.rnn.bias_hh"])
        w.add("head.weight", t["_model.decoder.decoder.2.weight"].reshape(1, HIDDEN))
        w.add("head.bias", t["_model.decoder.decoder.2.bias"])
        w.upload()

        ctx = w.ctx
        self._h = ctx.tensor(mb.f32, (1, HIDDEN), name="lstm.h")
        self._c = ctx.tensor(mb.f32, (1, HIDDEN), name="lstm.c")
        self._state_buffer = mb.alloc_ctx_tensors(ctx, self.runner.buffer_type)
        self._scheduler = self.runner.scheduler()
        self._graphs: dict[int, _BlockGraph] = {}
        self._buffers: list[mb.Buffer] = []
        self._context = np.zeros(CONTEXT, np.float32)
        self._pending = np.zeros(0, np.float32)
        self.reset()

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, device: mb.Device | str | None = None,
             threads: Optional[int] = None) -> "SileroVad":
        """The VAD with weights from path (None: the v6.2 weights shipped in the package; else a
        Silero file in whisper.cpp's layout, e.g. ggml-silero-v6.2.0.bin) on device (a Device, a
        name, or None for the best real device). threads sets the CPU backend's thread count."""
        return cls(read_silero_file(DEFAULT_WEIGHTS if path is None else Path(path)), device, threads)

    @property
    def device(self) -> mb.Device:
        """The device the network runs on."""
        return self.runner.device

    # ------------------------------------------------------------------ graphs

    def _graph(self, size: int) -> _BlockGraph:
        g = self._graphs.get(size)
        if g is None:
            g = self._graphs[size] = self._build(size)
        return g

    def _build(self, n: int) -> _BlockGraph:
        w, ctx = self.weights, self.weights.ctx
        samples = ctx.tensor(mb.f32, (CONTEXT + n * WINDOW,), name=f"vad.samples.{n}")
        samples.is_input = True
        rows = ctx.tensor(mb.i32, (n,), name=f"vad.rows.{n}")
        hidden = ctx.tensor(mb.f32, (n, HIDDEN), name=f"vad.hidden.{n}")
        buffer = mb.alloc_ctx_tensors(ctx, self.runner.buffer_type)
        self._buffers.append(buffer)
        rows.set(np.arange(n, dtype=np.int32))

        # Window i with its context: samples [512 i, 512 i + 576), views overlapping by 64.
        windows = ops.cont(ops.view(samples, (n, CONTEXT + WINDOW), strides=(WINDOW * 4, 4)))
        frames = ops.reshape(ops.pad_reflect_1d(windows, 0, CONTEXT), (n, 1, _PADDED))
        # STFT: 4 frames of 256 samples at stride 128, real and imaginary parts, magnitudes.
        cols = ops.im2col(w["stft.shape"], frames, _HOP, 0, 0, 0, 1, 0, False, mb.f32)  # (n, 4, 256)
        real = ops.mul_mat(w["stft.real"], cols)
        imag = ops.mul_mat(w["stft.imag"], cols)
        x = layers.named(ops.sqrt(ops.add(ops.sqr(real), ops.sqr(imag))), "stft.magnitude")  # (n, 4, 129)
        for i, stride in enumerate((1, 2, 2, 1)):
            x = layers.conv1d(ops.permute(x, [0, 2, 1]), w[f"encoder.{i}.weight"], w[f"encoder.{i}.bias"],
                              stride=stride, padding=1, name=f"encoder.{i}")
            x = ops.relu(x)  # (n, frames, channels)
        x = ops.reshape(x, (n, HIDDEN))
        gates_x = layers.lstm_input_gates(x, w["lstm.weight_ih"], w["lstm.bias"], name="lstm.input")  # (n, 512)

        h, c, out = self._h, self._c, hidden
        for step in range(n):
            g = ops.view(gates_x, (1, 4 * HIDDEN), offset=step * 4 * HIDDEN * 4)
            h, c = layers.lstm_cell(g, h, c, w["lstm.weight_hh"])
            # set_rows returns the whole tensor after the write: the head reads it after every step.
            out = ops.set_rows(out, h, ops.view(rows, (1,), offset=step * 4))
        keep_h = ops.cpy(h, self._h)
        keep_c = ops.cpy(c, self._c)
        logits = layers.linear(ops.relu(out), w["head.weight"], w["head.bias"], name="head")  # (n, 1)
        probs = layers.named(ops.sigmoid(logits), "probability")
        return _BlockGraph(mb.Graph(probs, keep_h, keep_c), samples, probs)

    def _run(self, samples: np.ndarray, n_windows: int) -> np.ndarray:
        """Probabilities of the n_windows windows of samples (n_windows * 512 samples), continuing
        from the current state and context, which it advances."""
        out = np.empty(n_windows, np.float32)
        done = 0
        while done < n_windows:
            size = next(s for s in _SIZES if s <= n_windows - done)
            g = self._graph(size)
            chunk = samples[done * WINDOW:(done + size) * WINDOW]
            g.samples.set(np.concatenate([self._context, chunk]))
            self.runner.compute(g.graph, "SileroVad", self._scheduler)
            out[done:done + size] = g.probs.get().reshape(-1)
            self._context = chunk[-CONTEXT:].copy()
            done += size
        return out

    # ------------------------------------------------------------------ whole files

    def speech_probabilities(self, samples: np.ndarray, sampling_rate: int = SAMPLE_RATE) -> np.ndarray:
        """The speech probability of each 512-sample window of samples (16 kHz mono, float),
        float32 of ceil(len / 512) values; the last window is zero-padded as silero-vad does.
        Runs from a fresh state and leaves the stream reset (as after reset()). sampling_rate
        (silero-vad's parameter) must be 16000: other rates raise VadError (resample first)."""
        check_sampling_rate(sampling_rate)
        audio = check_samples(samples)
        if audio.size == 0:
            raise VadError("samples are empty")
        n = -(-audio.size // WINDOW)
        padded = np.zeros(n * WINDOW, np.float32)
        padded[:audio.size] = audio
        self.reset()
        try:
            return self._run(padded, n)
        finally:
            self.reset()

    def speech_segments(self, samples: np.ndarray, threshold: float = 0.5, min_speech_duration_ms: float = 250,
                        min_silence_duration_ms: float = 100, max_speech_duration_s: float = float("inf"),
                        speech_pad_ms: float = 30, neg_threshold: Optional[float] = None,
                        sampling_rate: int = SAMPLE_RATE) -> List[Tuple[float, float]]:
        """Speech segments [(start_s, end_s), ...] of samples, by silero-vad's get_speech_timestamps
        rules and parameters (metal_backend/vad/segments.py) over speech_probabilities(samples)."""
        check_sampling_rate(sampling_rate)
        options = SegmentOptions(threshold, min_speech_duration_ms, min_silence_duration_ms,
                                 max_speech_duration_s, speech_pad_ms, neg_threshold)
        audio = check_samples(samples)
        probs = self.speech_probabilities(audio)
        return [(a / SAMPLE_RATE, b / SAMPLE_RATE)
                for a, b in speech_segments_from_probabilities(probs, audio.size, options)]

    # ------------------------------------------------------------------ streaming

    def reset(self) -> None:
        """Starts a new stream: zero LSTM state and context, no pending samples."""
        self._state_buffer.clear(0)
        self._context = np.zeros(CONTEXT, np.float32)
        self._pending = np.zeros(0, np.float32)

    def push(self, chunk: np.ndarray) -> np.ndarray:
        """Adds samples (16 kHz mono float, any length, empty allowed) to the stream and returns the
        probabilities of the windows they complete (float32, possibly none). The samples of an
        incomplete window wait for the next push."""
        audio = check_samples(chunk, "chunk")
        pending = np.concatenate([self._pending, audio]) if self._pending.size else audio
        n = pending.size // WINDOW
        probs = self._run(pending[:n * WINDOW], n) if n else np.zeros(0, np.float32)
        self._pending = pending[n * WINDOW:].copy()
        return probs

    @property
    def pending_samples(self) -> int:
        """Samples pushed that do not yet make a whole window."""
        return int(self._pending.size)

    def placements(self) -> dict[str, dict[str, int]]:
        """Nodes per backend of each graph built so far, by window count."""
        return {f"block[{n}]": Runner.placements(self._scheduler, g.graph) for n, g in self._graphs.items()}
