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

from typing import Any

import numpy as np

from .compute import WhisperCompute
from .errors import WhisperError
from .model_data import WhisperModelData
from .options import TASKS as _TASKS, DecodingOptions
from .transcript import Segment, Transcript, Word

__all__ = ["DecodingOptions", "GreedyDecoder", "Segment", "Transcript", "Word", "initial_tokens"]


def initial_tokens(model: WhisperModelData, options: DecodingOptions) -> list[int]:
    """The prompt that starts every window."""
    special = model.special
    tokens = [special.sot]
    if model.hparams.is_multilingual:
        if options.task not in _TASKS:
            raise WhisperError(f"unknown task {options.task!r}; expected one of {_TASKS}")
        task = special.transcribe if options.task == "transcribe" else special.translate
        tokens += [special.language(options.language or "en"), task]
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
