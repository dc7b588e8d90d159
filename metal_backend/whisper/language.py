"""Spoken-language detection with a multilingual model.

The published method of openai-whisper and faster-whisper: one decoder step on
<|startoftranscript|> over a window's audio features; the softmax of the logits restricted to the
language tokens gives each language's probability.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .compute import WhisperCompute
from .errors import WhisperError
from .logit_filters import log_softmax
from .model_data import WhisperModelData


def detect_language(
    compute: WhisperCompute, model: WhisperModelData, features: Any
) -> tuple[str, float, dict[str, float]]:
    """(most likely language code, its probability, every language's probability) for the audio
    of features (one window, encoded by compute). English-only models raise WhisperError."""
    if not model.hparams.is_multilingual:
        raise WhisperError("language detection needs a multilingual model (this one is English-only)")
    special = model.special
    logits = np.asarray(compute.decode(features, [special.sot], 0), dtype=np.float64)
    if logits.shape != (model.hparams.n_vocab,):
        raise WhisperError(f"decode returned logits of shape {logits.shape}, expected ({model.hparams.n_vocab},)")
    return language_probabilities(model, logits)


def language_probabilities(model: WhisperModelData, logits: np.ndarray) -> tuple[str, float, dict[str, float]]:
    """detect_language's answer from the (n_vocab,) logits of <|startoftranscript|>."""
    special = model.special
    first = special.sot + 1
    probs = np.exp(log_softmax(np.asarray(logits, dtype=np.float64)[first:first + len(special.languages)]))
    best = int(np.argmax(probs))
    return special.languages[best], float(probs[best]), dict(zip(special.languages, probs.tolist()))
