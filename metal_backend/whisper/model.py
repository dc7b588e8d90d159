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
from typing import Any, Mapping

import numpy as np

import metal_backend as mb
from metal_backend.io.ggml_types import GgmlType, QuantizedTensor

from .backend_compute import BackendWhisper
from .batched import transcribe_batched
from .decoding import resolve_language
from .errors import WhisperError
from .loader import load_model_data
from .mel import CHUNK_SECONDS
from .model_data import WhisperModelData
from .options import DecodingOptions
from .speech_map import SpeechMap
from .transcribe import Progress, audio_samples, transcribe, transcribe_window
from .transcript import Transcript
from .vad_options import VadOptions, batched_vad_options

QUANTIZED_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
COMPUTE_TYPES = ("float32", "int8")
# Batched transcription keeps pauses shorter than this between the VAD's speech pieces (SpeechMap.keep_short_gaps).
KEPT_GAP_SECONDS = 1.0


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
        self._vad: Any = None

    @classmethod
    def load(cls, path: str | os.PathLike, device: mb.Device | str | None = None, threads: int | None = None,
             quantize: mb.Type | str | None = None, encoder_attention: str | None = None,
             compute_type: str = "float32") -> "Whisper":
        """Loads a whisper.cpp ggml .bin file, a GGUF file with whisper.cpp's tensor names (gguf_format.py)
        or a CTranslate2 model directory onto a device.

        device: a Device, a device name ("CPU", "Metal", "MetalSim") or None for the best real
        device. threads: the CPU backend's thread count (None keeps its default). quantize: a
        quantized type (mb.q8_0 or "q8_0"; also q5_0, q4_0, q5_1, q4_1) for the linear-layer
        matrices and the token embedding, applied while loading float weights.
        encoder_attention: "flash" or "matmul" (see BackendWhisper; None picks "flash").
        compute_type (faster-whisper's spelling): "float32" (the default) computes with the weights
        as stored, quantized ones dequantized to f32 wherever many tokens share them (the encoder);
        "int8" quantizes float matrices to q8_0 (or to `quantize`) and quantizes the activations to
        8-bit blocks in every product with quantized weights (ggml's and CTranslate2's int8
        arithmetic on the CPU; other devices compute as with "float32").
        Raises WhisperError naming the path when the model is missing or unusable.
        """
        start = time.perf_counter()
        if compute_type not in COMPUTE_TYPES:
            raise WhisperError(f"unknown compute_type {compute_type!r}; expected one of {', '.join(COMPUTE_TYPES)}")
        if compute_type == "int8" and quantize is None:
            quantize = "q8_0"
        qtype = _quantized_type(quantize)
        hook = None if qtype is None else _quantize_hook(qtype)
        data = load_model_data(path, quantize=hook)
        compute = BackendWhisper(data, device=device, threads=threads, encoder_attention=encoder_attention,
                                 int8_activations=compute_type == "int8")
        return cls(data, compute, time.perf_counter() - start)

    @property
    def device(self) -> mb.Device:
        """The device running the model."""
        return self.compute.device

    def transcribe(self, audio: str | os.PathLike | np.ndarray, options: DecodingOptions | None = None, *,
                   progress: Progress | None = None, vad_filter: bool | None = None,
                   vad_parameters: VadOptions | Mapping[str, Any] | None = None, batch_size: int | None = None,
                   **overrides) -> Transcript:
        """Transcribes an audio file or 16 kHz mono float samples.

        overrides are DecodingOptions fields (beam_size=1, language="es", ...) applied on top of
        options, as openai-whisper's transcribe(**decode_options). progress(seconds_done,
        seconds_total) is called after each 30 s window (of the speech only, with the VAD).
        Calls from several threads are serialised (see the class docstring).

        vad_filter=True decodes only the speech Silero VAD finds (metal_backend.vad, on this
        model's device), joined, and maps segment and word times back to the audio (SpeechMap);
        vad_parameters is a dict of VadOptions fields (faster-whisper's defaults otherwise).
        batch_size=N transcribes batched (batched.py): speech in chunks of at most 30 s (pauses
        under KEPT_GAP_SECONDS between the VAD's pieces kept), each one window encoded once,
        split into N regions transcribed in lockstep, one chunk of each encoded and decoded
        together, each region prompted by its own earlier text, the first temperature only; the
        result's timings add windows (chunks encoded); the VAD is on unless vad_filter=False (then
        the audio is cut every 30 s), with vad_options.BATCHED_DEFAULTS under vad_parameters.

        The result's timings (seconds) hold load (this model's load time), load_audio, vad (with
        the VAD), mel, encode, decode, total (everything after loading the model), tokens (text
        tokens produced) and decode_per_token (decode / tokens).
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
        vad_options = self.check_transcribe_arguments(vad_filter, vad_parameters, batch_size)
        with self._lock:
            self._owner = threading.get_ident()
            try:
                if vad_options is None and batch_size is None:
                    result = transcribe(self.compute, self.data, audio, options, progress=progress)
                else:
                    result = self._transcribe_speech(audio, options, vad_options, batch_size, progress)
            finally:
                self._owner = None
        timings = result.timings
        timings["load"] = self.load_seconds
        timings["decode_per_token"] = timings["decode"] / max(timings["tokens"], 1.0)
        return result

    def transcribe_window(self, audio: np.ndarray, options: DecodingOptions | None = None,
                          previous: list[int] | tuple[int, ...] = (),
                          prefix: list[int] | tuple[int, ...] = ()) -> Transcript:
        """At most 30 s of samples decoded as one window, encoded once (transcribe.transcribe_window):
        the hypothesis step of live transcription. previous: prompt text tokens; prefix: forced
        tokens the window's text starts with (text and timestamps). Serialised with
        transcribe() (see the class docstring)."""
        if self._owner == threading.get_ident():
            raise WhisperError("transcribe_window() called from inside a transcribe() of the same model")
        with self._lock:
            self._owner = threading.get_ident()
            try:
                return transcribe_window(self.compute, self.data, audio, options, previous, prefix)
            finally:
                self._owner = None

    def stream(self, options: DecodingOptions | None = None, *, vad=None, vad_parameters=None, on_commit=None,
               on_tentative=None, forced_prefix: bool = False, agreement: int = 2,
               commit_probability: float | None = None, final_beam_size: int | None | str = "default",
               confirm_beam_size: int | None | str = "default", **overrides):
        """Live transcription: a Stream that takes audio as it arrives (see streaming.py).

        overrides are DecodingOptions fields as for transcribe(); without options the stream
        decodes greedily at one temperature (streaming.STREAM_DEFAULTS), since it transcribes its
        buffer many times. word_timestamps=True puts words in the committed segments.
        vad: an object with push(chunk) -> probabilities and reset() (None: the Silero VAD of
        metal_backend.vad on the CPU); vad_parameters: a VadParameters or a dict of its fields
        (threshold, neg_threshold, min_speech_duration_ms, min_silence_duration_ms, speech_pad_ms).
        on_commit(segments) and on_tentative(text) are called as the stream commits and revises.
        forced_prefix: the committed words inside the buffer are the forced decoder prefix of each
        hypothesis (streaming.py); with beam_size=5 it streamed tiny.en's 132 s passage at 5.1 %
        WER against 5.4 % offline (greedy, one temperature, no prefix: 7.0 %). agreement: how many
        consecutive hypotheses must agree on a word before it is committed (2..5; 2: LocalAgreement-2).
        commit_probability: the least probability (in the newer hypothesis) of a word committed by
        agreement (None: streaming.COMMIT_PROBABILITY); a final pass commits what it hears.
        final_beam_size: the final pass of a stretch (end of speech) decodes with a beam of this
        many ("default": streaming.FINAL_BEAM_SIZE, 5; None: as the hypotheses); its words are
        committed unchecked by agreement.
        confirm_beam_size: when the hypotheses agree on a word but give it less than
        commit_probability, the next hypothesis decodes with a beam of this many and the words it
        agrees on with the one before are committed, whatever their probability ("default":
        streaming.CONFIRM_BEAM_SIZE; None: such words wait for a confident hypothesis or the final pass).
        """
        from .speech_gate import VadParameters
        from .streaming import COMMIT_PROBABILITY, CONFIRM_BEAM_SIZE, FINAL_BEAM_SIZE, Stream, stream_options

        options = stream_options(options, overrides)
        if isinstance(vad_parameters, dict):
            known = {f.name for f in fields(VadParameters)}
            unknown = sorted(set(vad_parameters) - known)
            if unknown:
                raise WhisperError(f"unknown VAD parameter {unknown[0]!r}; expected one of {sorted(known)}")
            vad_parameters = VadParameters(**vad_parameters)
        elif vad_parameters is not None and not isinstance(vad_parameters, VadParameters):
            raise WhisperError(f"vad_parameters must be a dict or VadParameters (got {type(vad_parameters).__name__})")
        if vad is None:
            vad = _silero_vad()
        return Stream(self, options, vad, vad_parameters, on_commit=on_commit, on_tentative=on_tentative,
                      forced_prefix=forced_prefix, agreement=agreement,
                      final_beam_size=FINAL_BEAM_SIZE if final_beam_size == "default" else final_beam_size,
                      confirm_beam_size=CONFIRM_BEAM_SIZE if confirm_beam_size == "default" else confirm_beam_size,
                      commit_probability=COMMIT_PROBABILITY if commit_probability is None else commit_probability)


    @staticmethod
    def check_transcribe_arguments(vad_filter: bool | None = None,
                                   vad_parameters: VadOptions | Mapping[str, Any] | None = None,
                                   batch_size: int | None = None) -> VadOptions | None:
        """The VadOptions transcribe() would use for these arguments (None: no VAD); bad values
        raise WhisperError naming them."""
        if vad_filter is not None and not isinstance(vad_filter, bool):
            raise WhisperError(f"vad_filter must be True, False or None (got {vad_filter!r})")
        if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                                       or batch_size <= 0):
            raise WhisperError(f"batch_size must be a positive integer or None (got {batch_size!r})")
        use_vad = vad_filter if vad_filter is not None else batch_size is not None
        if vad_parameters is not None and not use_vad:
            raise WhisperError("vad_parameters were given but the VAD is off (vad_filter=False)")
        if not use_vad:
            return None
        if batch_size is not None:
            return batched_vad_options(vad_parameters)
        return VadOptions.from_parameters(vad_parameters)

    def _transcribe_speech(self, audio: str | os.PathLike | np.ndarray, options: DecodingOptions,
                           vad_options: VadOptions | None, batch_size: int | None,
                           progress: Progress | None) -> Transcript:
        """VAD-gated or batched transcription (see transcribe)."""
        t0 = time.perf_counter()
        samples = audio_samples(audio)
        t1 = time.perf_counter()
        if vad_options is None:
            speech = SpeechMap([(0, samples.size)], samples.size)
        else:
            segments = self.vad.speech_segments(samples, **vad_options.segment_arguments())
            speech = SpeechMap.from_seconds(segments, samples.size)
            if batch_size is not None:
                speech = speech.keep_short_gaps(KEPT_GAP_SECONDS, CHUNK_SECONDS)
        t2 = time.perf_counter()
        if not speech.spans:
            result = Transcript(text="", segments=[], language=resolve_language(self.data, options.language),
                                timings={"mel": 0.0, "encode": 0.0, "decode": 0.0, "tokens": 0.0})
        elif batch_size is not None:
            result = transcribe_batched(self.compute, self.data, samples, speech, options, batch_size, progress)
        else:
            result = transcribe(self.compute, self.data, speech.join(samples), options, progress=progress)
            result.timings.pop("load_audio", None)
            speech.restore(result.segments)
        result.timings.update(load_audio=t1 - t0, vad=t2 - t1, total=time.perf_counter() - t0)
        return result

    @property
    def vad(self) -> Any:
        """The Silero VAD (metal_backend.vad.SileroVad) on this model's device, loaded on first use."""
        if self._vad is None:
            try:
                from metal_backend.vad import SileroVad
            except ImportError as exc:
                raise WhisperError(f"vad_filter needs metal_backend.vad: {exc}") from None
            options = self.compute.backend.options
            threads = options["n_threads"] if "n_threads" in options else None
            self._vad = SileroVad.load(device=self.device, threads=threads)
        return self._vad


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


def _silero_vad():
    try:
        from metal_backend.vad import SileroVad
    except ImportError as exc:
        raise WhisperError(f"live transcription needs the Silero VAD (metal_backend.vad): {exc}") from None
    return SileroVad.load(device="CPU")
