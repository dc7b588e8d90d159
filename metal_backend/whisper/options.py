"""DecodingOptions: every setting of transcription, with openai-whisper's names and defaults.

The defaults are those of openai-whisper's command line and faster-whisper: beam search of 5 at
temperature 0, best of 5 samples at the fallback temperatures 0.2 .. 1.0, timestamps on,
conditioning on the previous window's text, and the fallback thresholds 2.4 (gzip compression
ratio), -1.0 (average log-probability) and 0.6 (no-speech probability).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

from .errors import SettingLimitError, WhisperError
from .model_data import LANGUAGES

TASKS = ("transcribe", "translate")
DEFAULT_TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)

# What one setting may cost is bounded; a value over its limit raises SettingLimitError naming
# the value and the limit. Each fallback temperature may decode a window once more, so their
# number multiplies the decoding time (openai-whisper's default is 6; 0.01 steps from 0 give 101).
MAX_TEMPERATURES = 101
# beam_size and best_of are decoder rows kept at once, each with its own self-attention cache
# (n_text_layer * n_text_ctx * n_text_state * 8 bytes: 5.5 MB for tiny, 147 MB for large-v3),
# and each costs a row of every decoder step. whisper.cpp stops at 8 decoders.
MAX_CANDIDATES = 16
# The beam score divides by ((5 + length) / 6) ** length_penalty; at most 448 tokens, 100 keeps
# that within float64 (75.5 ** 100 ~ 1e188). The usual values are 0 to 2.
MAX_LENGTH_PENALTY = 100.0


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode; every field is checked when the options are made (bad values raise WhisperError).

    language: a language code ("en", "es", ...) or None (also "auto") to detect it from the first
    30 s on multilingual models; English-only models always transcribe "en". task: "transcribe"
    or "translate" (into English; multilingual models only).
    max_new_tokens: tokens sampled per 30 s window (None: half the text context, 224).
    suppress_blank: no blank or end-of-text as the first sampled token. suppress_non_speech: also
    suppress the model's own list of symbol tokens (from a CTranslate2 config; openai-whisper's
    suppress_tokens="-1"); suppress_tokens: more token ids never sampled.
    temperature: one temperature or the fallback sequence; 0 decodes with beam search (beam_size
    beams, patience, length_penalty) or greedily (beam_size None); above 0 samples best_of
    candidates and keeps the most likely.
    without_timestamps: decode text only (segments are then whole windows); max_initial_timestamp:
    the latest first timestamp of a window, seconds (None: no limit).
    condition_on_previous_text: the previous windows' text is the prompt of the next one (reset
    after a fallback temperature above 0.5); initial_prompt: text given as the prompt of the
    first window.
    compression_ratio_threshold / logprob_threshold: a window whose text compresses better than
    this (gzip ratio above it) or whose average log-probability is below it is decoded again at
    the next temperature (None disables the check). no_speech_threshold: a window whose
    no-speech probability is above it and whose average log-probability is below
    logprob_threshold is skipped as silence.
    word_timestamps: each segment gets words with start and end times (alignment.py);
    prepend_punctuations / append_punctuations: merged into the next / previous word there.
    """

    language: str | None = None
    task: str = "transcribe"
    max_new_tokens: int | None = None
    suppress_blank: bool = True
    suppress_non_speech: bool = True
    suppress_tokens: tuple[int, ...] = ()
    temperature: Union[float, tuple[float, ...]] = DEFAULT_TEMPERATURES
    beam_size: int | None = 5
    best_of: int | None = 5
    patience: float | None = None
    length_penalty: float | None = None
    without_timestamps: bool = False
    max_initial_timestamp: float | None = 1.0
    condition_on_previous_text: bool = True
    initial_prompt: str | None = None
    compression_ratio_threshold: float | None = 2.4
    logprob_threshold: float | None = -1.0
    no_speech_threshold: float | None = 0.6
    word_timestamps: bool = False
    prepend_punctuations: str = "\"'“¿([{-"
    append_punctuations: str = "\"'.。,，!！?？:：”)]}、"

    def __post_init__(self) -> None:
        language = self.language
        if language is not None:
            if not isinstance(language, str):
                raise WhisperError(f"language must be a language code or None (got {language!r})")
            language = language.strip().lower()
            if language == "auto":
                language = None
            elif language not in LANGUAGES:
                raise WhisperError(f"unknown language {self.language!r}; expected a code such as 'en' or 'es', "
                                   f"or None to detect it")
            object.__setattr__(self, "language", language)
        if self.task not in TASKS:
            raise WhisperError(f"unknown task {self.task!r}; expected one of {TASKS}")
        if self.max_new_tokens is not None and (not _is_int(self.max_new_tokens) or self.max_new_tokens <= 0):
            raise WhisperError(f"max_new_tokens must be a positive integer or None (got {self.max_new_tokens!r})")
        suppress = self.suppress_tokens
        if isinstance(suppress, (str, bytes)) or not hasattr(suppress, "__iter__"):
            raise WhisperError(f"suppress_tokens must be a sequence of token ids (got {suppress!r})")
        suppress = tuple(suppress)
        bad = [t for t in suppress if not _is_int(t) or t < 0]
        if bad:
            raise WhisperError(f"suppress_tokens must be token ids >= 0 (got {bad[0]!r})")
        object.__setattr__(self, "suppress_tokens", tuple(int(t) for t in suppress))

        temperatures = self.temperature
        if isinstance(temperatures, (int, float)) and not isinstance(temperatures, bool):
            temperatures = (temperatures,)
        try:
            temperatures = tuple(float(t) for t in temperatures)
        except (TypeError, ValueError):
            raise WhisperError(f"temperature must be a number or a sequence of numbers "
                               f"(got {self.temperature!r})") from None
        if len(temperatures) > MAX_TEMPERATURES:
            raise SettingLimitError("len(temperature)", len(temperatures), MAX_TEMPERATURES,
                                    "each fallback temperature may decode a window again")
        if not temperatures or any(not math.isfinite(t) or t < 0 for t in temperatures):
            raise WhisperError(f"temperatures must be finite and >= 0, at least one (got {self.temperature!r})")
        object.__setattr__(self, "temperature", temperatures if len(temperatures) > 1 else temperatures[0])

        for name in ("beam_size", "best_of"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value <= 0):
                raise WhisperError(f"{name} must be a positive integer or None (got {value!r})")
            if value is not None and value > MAX_CANDIDATES:
                raise SettingLimitError(name, value, MAX_CANDIDATES, "each is a decoder row with its own attention "
                                        "cache, decoded at every step")
        if self.patience is not None:
            if not _is_finite(self.patience) or self.patience <= 0:
                raise WhisperError(f"patience must be a positive number or None (got {self.patience!r})")
            if self.beam_size is None:
                raise WhisperError("patience needs beam search (beam_size is None)")
        if self.length_penalty is not None and (not _is_finite(self.length_penalty) or self.length_penalty < 0):
            raise WhisperError(f"length_penalty must be a number >= 0 or None (got {self.length_penalty!r})")
        if self.length_penalty is not None and self.length_penalty > MAX_LENGTH_PENALTY:
            raise SettingLimitError("length_penalty", self.length_penalty, MAX_LENGTH_PENALTY,
                                    "the length weight ((5 + length) / 6) ** length_penalty would overflow")
        if self.max_initial_timestamp is not None and (not _is_finite(self.max_initial_timestamp)
                                                       or self.max_initial_timestamp < 0):
            raise WhisperError(f"max_initial_timestamp must be >= 0 seconds or None "
                               f"(got {self.max_initial_timestamp!r})")
        if self.initial_prompt is not None and not isinstance(self.initial_prompt, str):
            raise WhisperError(f"initial_prompt must be a string or None (got {self.initial_prompt!r})")
        if self.compression_ratio_threshold is not None and (not _is_finite(self.compression_ratio_threshold)
                                                             or self.compression_ratio_threshold <= 0):
            raise WhisperError(f"compression_ratio_threshold must be a positive number or None "
                               f"(got {self.compression_ratio_threshold!r})")
        if self.logprob_threshold is not None and not _is_finite(self.logprob_threshold):
            raise WhisperError(f"logprob_threshold must be a finite number or None (got {self.logprob_threshold!r})")
        if self.no_speech_threshold is not None and (not _is_finite(self.no_speech_threshold)
                                                     or not 0.0 <= self.no_speech_threshold <= 1.0):
            raise WhisperError(f"no_speech_threshold must be a probability in [0, 1] or None "
                               f"(got {self.no_speech_threshold!r})")
        for name in ("suppress_blank", "suppress_non_speech", "without_timestamps", "condition_on_previous_text",
                     "word_timestamps"):
            if not isinstance(getattr(self, name), bool):
                raise WhisperError(f"{name} must be True or False (got {getattr(self, name)!r})")
        for name in ("prepend_punctuations", "append_punctuations"):
            if not isinstance(getattr(self, name), str):
                raise WhisperError(f"{name} must be a string (got {getattr(self, name)!r})")

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The fallback sequence of temperatures (one element when a single temperature was given)."""
        t = self.temperature
        return t if isinstance(t, tuple) else (t,)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
