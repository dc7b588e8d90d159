"""Greedy decoding with Whisper's rules, and transcription of whole recordings.

Rules (as openai-whisper and whisper.cpp apply them without timestamps):
the prompt is <|startoftranscript|> (English-only models) or
<|startoftranscript|><|lang|><|transcribe|> (multilingual), then
<|notimestamps|>; every control, language and timestamp token is suppressed
so only text tokens and <|endoftext|> can be picked; at the first sampled
step the blank (the lone space token) and <|endoftext|> are suppressed too;
decoding stops at <|endoftext|>, after max_new_tokens, or when the text
context is full. Long audio is cut into consecutive 30 s windows whose texts
are concatenated.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .audio import SAMPLE_RATE, load_audio
from .compute import WhisperCompute
from .errors import WhisperError
from .mel import CHUNK_SECONDS, mel_windows
from .model_data import WhisperModelData
from .tokenizer import Tokenizer

_TASKS = ("transcribe", "translate")


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode.

    language and task only matter for multilingual models. max_new_tokens
    None means half the text context (224), as openai-whisper does.
    suppress_non_speech adds the model's own list of symbol tokens (from a
    CTranslate2 config) to the suppressed set; suppress_tokens adds more ids.
    """

    language: str = "en"
    task: str = "transcribe"
    max_new_tokens: int | None = None
    suppress_blank: bool = True
    suppress_non_speech: bool = False
    suppress_tokens: tuple[int, ...] = ()


@dataclass
class Segment:
    """The text of one 30 s window."""

    start: float
    end: float
    text: str
    tokens: list[int]


@dataclass
class Transcript:
    """Result of transcribe(): the text, per-window segments and timings in seconds."""

    text: str
    segments: list[Segment]
    timings: dict[str, float] = field(default_factory=dict)


def initial_tokens(model: WhisperModelData, options: DecodingOptions) -> list[int]:
    """The prompt that starts every window."""
    special = model.special
    tokens = [special.sot]
    if model.hparams.is_multilingual:
        if options.task not in _TASKS:
            raise WhisperError(f"unknown task {options.task!r}; expected one of {_TASKS}")
        task = special.transcribe if options.task == "transcribe" else special.translate
        tokens += [special.language(options.language), task]
    tokens.append(special.no_timestamps)
    return tokens


class GreedyDecoder:
    """Picks the most likely allowed token at each step."""

    def __init__(self, model: WhisperModelData, options: DecodingOptions | None = None):
        self.model = model
        self.options = options or DecodingOptions()
        hp = model.hparams
        special = model.special
        self.prompt = initial_tokens(model, self.options)
        self.eot = special.eot
        self.n_text_ctx = hp.n_text_ctx
        limit = self.options.max_new_tokens
        self.max_new_tokens = hp.n_text_ctx // 2 if limit is None else limit
        if self.max_new_tokens <= 0:
            raise WhisperError(f"max_new_tokens must be positive (got {self.max_new_tokens})")

        suppressed = set(range(special.eot + 1, hp.n_vocab))
        suppressed.update(self.options.suppress_tokens)
        if self.options.suppress_non_speech:
            suppressed.update(model.suppress_tokens)
        bad = [t for t in suppressed if not 0 <= t < hp.n_vocab]
        if bad:
            raise WhisperError(f"suppressed token id {bad[0]} is outside the vocabulary")
        self.suppressed = np.array(sorted(suppressed), dtype=np.int64)
        self.first_step_suppressed = np.array([special.eot], dtype=np.int64)
        if self.options.suppress_blank:
            blank = [i for i, token in enumerate(model.vocab[:special.eot]) if token == b" "]
            self.first_step_suppressed = np.array(blank + [special.eot], dtype=np.int64)

    def decode(self, compute: WhisperCompute, features: Any) -> list[int]:
        """Sampled text tokens for one window (prompt and <|endoftext|> excluded)."""
        sampled: list[int] = []
        feed = list(self.prompt)
        offset = 0
        while len(sampled) < self.max_new_tokens and offset + len(feed) <= self.n_text_ctx:
            logits = np.array(compute.decode(features, feed, offset), dtype=np.float32)
            if logits.shape != (self.model.hparams.n_vocab,):
                raise WhisperError(f"decode returned logits of shape {logits.shape}, "
                                   f"expected ({self.model.hparams.n_vocab},)")
            logits[self.suppressed] = -np.inf
            if not sampled:
                logits[self.first_step_suppressed] = -np.inf
            token = int(np.argmax(logits))
            if token == self.eot:
                break
            sampled.append(token)
            offset += len(feed)
            feed = [token]
        return sampled


def transcribe(compute: WhisperCompute, model: WhisperModelData, audio: str | os.PathLike | np.ndarray,
               options: DecodingOptions | None = None) -> Transcript:
    """Transcribes a WAV file (or 16 kHz mono float32 samples) window by window."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    if isinstance(audio, np.ndarray):
        samples = np.asarray(audio, dtype=np.float32)
        if samples.ndim != 1:
            raise WhisperError(f"audio samples must be 1-D (got shape {samples.shape})")
        if samples.size == 0:
            raise WhisperError("audio is empty")
    else:
        samples = load_audio(audio)
    t1 = time.perf_counter()
    windows = mel_windows(samples, model.hparams.n_mels, filters=model.mel_filters)
    t2 = time.perf_counter()
    timings.update(load_audio=t1 - t0, mel=t2 - t1, encode=0.0, decode=0.0)

    decoder = GreedyDecoder(model, options)
    tokenizer = Tokenizer(model.vocab, model.special)
    duration = samples.size / SAMPLE_RATE
    segments = []
    n_tokens = 0
    for i, mel in enumerate(windows):
        t_enc = time.perf_counter()
        features = compute.encode(mel)
        t_dec = time.perf_counter()
        tokens = decoder.decode(compute, features)
        t_end = time.perf_counter()
        timings["encode"] += t_dec - t_enc
        timings["decode"] += t_end - t_dec
        n_tokens += len(tokens)
        start = i * CHUNK_SECONDS
        segments.append(Segment(start=float(start), end=float(min(start + CHUNK_SECONDS, duration)),
                                text=tokenizer.decode(tokens), tokens=tokens))
    timings["total"] = time.perf_counter() - t0
    timings["tokens"] = float(n_tokens)
    text = "".join(s.text for s in segments).strip()
    return Transcript(text=text, segments=segments, timings=timings)
