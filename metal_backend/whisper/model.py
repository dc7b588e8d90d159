"""The Whisper application: a model loaded onto a metal_backend device, transcribing audio.

    from metal_backend.whisper import Whisper
    m = Whisper.load("ggml-tiny.en.bin", device=mb.device())
    print(m.transcribe("audio.wav").text)
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import fields, replace

import numpy as np

import metal_backend as mb
from metal_backend.io.ggml_types import GgmlType, QuantizedTensor

from .backend_compute import BackendWhisper
from .errors import WhisperError
from .loader import load_model_data
from .model_data import WhisperModelData
from .options import DecodingOptions
from .transcribe import Progress, transcribe
from .transcript import Transcript

QUANTIZED_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")


class Whisper:
    """A Whisper model whose weights live in a metal_backend device's memory.

    load_seconds is how long load() took (reading the file, quantizing, uploading the weights
    and building the encoder graph).

    Threads: one model may be used from several threads. transcribe() holds a lock for the whole
    call, so calls from different threads run one after the other (the network's key/value
    caches and graphs exist once per model); for parallel transcription load one model per thread.
    A call from inside another on the same thread (from a progress callback) raises WhisperError.
    """

    def __init__(self, data: WhisperModelData, compute: BackendWhisper, load_seconds: float = 0.0):
        self.data = data
        self.compute = compute
        self.load_seconds = load_seconds
        self._lock = threading.Lock()
        self._owner: int | None = None

    @classmethod
    def load(cls, path: str | os.PathLike, device: mb.Device | str | None = None, threads: int | None = None,
             quantize: mb.Type | str | None = None, encoder_attention: str | None = None) -> "Whisper":
        """Loads a whisper.cpp ggml .bin file or a CTranslate2 model directory onto a device.

        device: a Device, a device name ("CPU", "Metal", "MetalSim") or None for the best real
        device. threads: the CPU backend's thread count (None keeps its default). quantize: a
        quantized type (mb.q8_0 or "q8_0"; also q5_0, q4_0, q5_1, q4_1) for the linear-layer
        matrices and the token embedding, applied while loading float weights.
        encoder_attention: "flash" or "matmul" (see BackendWhisper; None picks per device).
        Raises WhisperError naming the path when the model is missing or unusable.
        """
        start = time.perf_counter()
        qtype = _quantized_type(quantize)
        hook = None if qtype is None else _quantize_hook(qtype)
        data = load_model_data(path, quantize=hook)
        compute = BackendWhisper(data, device=device, threads=threads, encoder_attention=encoder_attention)
        return cls(data, compute, time.perf_counter() - start)

    @property
    def device(self) -> mb.Device:
        """The device running the model."""
        return self.compute.device

    def transcribe(self, audio: str | os.PathLike | np.ndarray, options: DecodingOptions | None = None, *,
                   progress: Progress | None = None, **overrides) -> Transcript:
        """Transcribes an audio file or 16 kHz mono float samples.

        overrides are DecodingOptions fields (beam_size=1, language="es", ...) applied on top of
        options, as openai-whisper's transcribe(**decode_options). progress(seconds_done,
        seconds_total) is called after each 30 s window. Calls from several threads are
        serialised (see the class docstring).

        The result's timings (seconds) hold load (this model's load time), load_audio, mel,
        encode, decode, total (everything after loading the model), tokens (text tokens
        produced) and decode_per_token (decode / tokens).
        """
        options = options if options is not None else DecodingOptions()
        if not isinstance(options, DecodingOptions):
            raise WhisperError(f"options must be DecodingOptions (got {type(options).__name__})")
        if overrides:
            known = {f.name for f in fields(DecodingOptions)}
            unknown = sorted(set(overrides) - known)
            if unknown:
                raise WhisperError(f"unknown decoding option {unknown[0]!r}; expected DecodingOptions fields")
            options = replace(options, **overrides)
        if self._owner == threading.get_ident():
            raise WhisperError("transcribe() called from inside a transcribe() of the same model (a progress "
                               "callback?); the model runs one transcription at a time")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                result = transcribe(self.compute, self.data, audio, options, progress=progress)
            finally:
                self._owner = None
        timings = result.timings
        timings["load"] = self.load_seconds
        timings["decode_per_token"] = timings["decode"] / max(timings["tokens"], 1.0)
        return result


def _quantized_type(quantize: mb.Type | str | None) -> mb.Type | None:
    if quantize is None:
        return None
    name = quantize if isinstance(quantize, str) else getattr(quantize, "name", None)
    if name not in QUANTIZED_TYPES:
        raise WhisperError(f"cannot quantize to {quantize!r}; expected one of {', '.join(QUANTIZED_TYPES)}")
    return getattr(mb, name)


def _quantize_hook(qtype: mb.Type):
    ggml_type = GgmlType(qtype.id)

    def quantize(name: str, array: np.ndarray):
        if array.ndim != 2 or array.shape[1] % qtype.block_size:
            return array
        data = np.frombuffer(mb.quantize(np.ascontiguousarray(array, dtype=np.float32), qtype), dtype=np.uint8)
        return QuantizedTensor(ggml_type, tuple(array.shape), data.reshape(array.shape[0], -1))

    return quantize
