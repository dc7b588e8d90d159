"""VadOptions: the voice activity detector's settings for VAD-gated and batched transcription.

Names and rules are silero-vad's `get_speech_timestamps` (metal_backend.vad.SileroVad.speech_segments
applies them); the defaults are faster-whisper's `VadOptions` for `vad_filter=True`: threshold 0.5,
no minimum speech length, speech ends after 2000 ms of silence, 400 ms of padding on both sides, no
maximum length. Batched transcription starts from BATCHED_DEFAULTS instead (faster-whisper's
BatchedInferencePipeline): speech cut into pieces of at most 30 s, ended after 160 ms of silence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from .errors import WhisperError
from .mel import CHUNK_SECONDS

_WINDOW_MS = 32.0  # one Silero window of 512 samples at 16 kHz


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class VadOptions:
    """How speech is told from the rest; every field is checked when the options are made (bad
    values raise WhisperError naming the field and the value).

    threshold: a 32 ms window whose speech probability is at least this starts speech (0 < t < 1).
    neg_threshold: speech ends after min_silence_duration_ms below this (None: threshold - 0.15,
    at least 0.01); at most threshold. min_speech_duration_ms: shorter speech is dropped.
    max_speech_duration_s: longer speech is split at its last silence over 98 ms, else cut
    (float("inf"): no limit); must leave room for a window and both pads.
    min_silence_duration_ms: silence that ends speech. speech_pad_ms: added to both sides of
    each piece of speech (halving the gap where two pads would overlap).
    """

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_duration_ms: float = 0
    max_speech_duration_s: float = float("inf")
    min_silence_duration_ms: float = 2000
    speech_pad_ms: float = 400

    def __post_init__(self) -> None:
        if not _is_number(self.threshold) or not 0.0 < self.threshold < 1.0:
            raise WhisperError(f"vad_parameters: threshold must be a probability between 0 and 1 "
                               f"(got {self.threshold!r})")
        if self.neg_threshold is not None and (not _is_number(self.neg_threshold)
                                               or not 0.0 < self.neg_threshold <= self.threshold):
            raise WhisperError(f"vad_parameters: neg_threshold must be in (0, threshold={self.threshold}] or None "
                               f"(got {self.neg_threshold!r})")
        for name in ("min_speech_duration_ms", "min_silence_duration_ms", "speech_pad_ms"):
            value = getattr(self, name)
            if not _is_number(value) or value < 0:
                raise WhisperError(f"vad_parameters: {name} must be a finite number of milliseconds >= 0 "
                                   f"(got {value!r})")
        limit = self.max_speech_duration_s
        if not isinstance(limit, (int, float)) or isinstance(limit, bool) or math.isnan(limit) or limit <= 0:
            raise WhisperError(f"vad_parameters: max_speech_duration_s must be a positive number of seconds "
                               f"or inf (got {limit!r})")
        if limit * 1000.0 <= _WINDOW_MS + 2 * self.speech_pad_ms:
            raise WhisperError(f"vad_parameters: max_speech_duration_s={limit} leaves no room for speech: it must "
                               f"exceed one 32 ms window plus twice speech_pad_ms={self.speech_pad_ms} "
                               f"({(_WINDOW_MS + 2 * self.speech_pad_ms) / 1000:g} s)")

    @classmethod
    def from_parameters(cls, parameters: "VadOptions | Mapping[str, Any] | None",
                        base: "VadOptions | None" = None) -> "VadOptions":
        """VadOptions from a VadOptions, a dict of field values applied on top of base (default
        VadOptions()), or None (base). Unknown keys raise WhisperError naming them."""
        base = base if base is not None else cls()
        if parameters is None:
            return base
        if isinstance(parameters, VadOptions):
            return parameters
        if not isinstance(parameters, Mapping):
            raise WhisperError(f"vad_parameters must be a dict or VadOptions (got {type(parameters).__name__})")
        known = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in parameters if k not in known)
        if unknown:
            raise WhisperError(f"unknown vad_parameters {', '.join(map(repr, unknown))}; expected some of "
                               f"{', '.join(known)}")
        return replace(base, **dict(parameters))

    def segment_arguments(self) -> dict[str, float]:
        """The keyword arguments of SileroVad.speech_segments for these options."""
        args = {"threshold": self.threshold, "min_speech_duration_ms": self.min_speech_duration_ms,
                "min_silence_duration_ms": self.min_silence_duration_ms,
                "max_speech_duration_s": self.max_speech_duration_s, "speech_pad_ms": self.speech_pad_ms}
        if self.neg_threshold is not None:
            args["neg_threshold"] = self.neg_threshold
        return args


# Batched transcription: speech pieces that fit a window, ended by short silences.
BATCHED_DEFAULTS = VadOptions(max_speech_duration_s=CHUNK_SECONDS, min_silence_duration_ms=160)


def batched_vad_options(parameters: "VadOptions | Mapping[str, Any] | None") -> VadOptions:
    """The options of batched transcription: BATCHED_DEFAULTS with the given parameters on top;
    max_speech_duration_s above 30 s raises WhisperError (a piece must fit one window)."""
    options = VadOptions.from_parameters(parameters, BATCHED_DEFAULTS)
    if options.max_speech_duration_s > CHUNK_SECONDS:
        raise WhisperError(f"vad_parameters: max_speech_duration_s={options.max_speech_duration_s} is longer than "
                           f"a {CHUNK_SECONDS:g} s window; batched transcription needs at most {CHUNK_SECONDS:g}")
    return options
