"""Whisper's audio input: metal_backend.io.audio's readers and resamplers, raising WhisperError.

The reading, mixing and resampling live in metal_backend.io.audio (shared by every application);
this module gives the Whisper application the same functions with its own error type, so callers
that catch WhisperError keep working.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

from metal_backend.io import InputError
from metal_backend.io import audio as _audio
from metal_backend.io.audio import AUDIO_EXTRA_HINT, MAX_SAMPLE_RATE, SAMPLE_RATE

from .errors import WhisperError

F = TypeVar("F", bound=Callable)

__all__ = ["AUDIO_EXTRA_HINT", "MAX_SAMPLE_RATE", "SAMPLE_RATE", "check_samples", "load_audio", "read_audio",
           "read_wav", "resample", "resample_sinc", "to_mono"]


def _as_whisper_error(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WhisperError:
            raise
        except InputError as exc:
            raise WhisperError(str(exc)) from None
    return wrapper  # type: ignore[return-value]


read_wav = _as_whisper_error(_audio.read_wav)
read_audio = _as_whisper_error(_audio.read_audio)
load_audio = _as_whisper_error(_audio.load_audio)
check_samples = _as_whisper_error(_audio.check_samples)
resample = _as_whisper_error(_audio.resample)
resample_sinc = _as_whisper_error(_audio.resample_sinc)
to_mono = _audio.to_mono
