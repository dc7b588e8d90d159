"""Transcription of a whole recording, window by window."""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np

from .audio import SAMPLE_RATE, load_audio
from .compute import WhisperCompute
from .decoding import GreedyDecoder
from .errors import WhisperError
from .mel import CHUNK_SECONDS, mel_windows
from .model_data import WhisperModelData
from .options import DecodingOptions
from .tokenizer import Tokenizer
from .transcript import Segment, Transcript

Progress = Callable[[float, float], None]


def transcribe(compute: WhisperCompute, model: WhisperModelData, audio: str | os.PathLike | np.ndarray,
               options: DecodingOptions | None = None, progress: Progress | None = None) -> Transcript:
    """Transcribes an audio file (or 16 kHz mono float samples) window by window.

    progress(seconds_done, seconds_total) is called after each window.
    """
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
        segments.append(Segment(id=i, seek=i * 3000, start=float(start),
                                end=float(min(start + CHUNK_SECONDS, duration)), text=tokenizer.decode(tokens),
                                tokens=tokens, temperature=0.0, avg_logprob=0.0, compression_ratio=0.0,
                                no_speech_prob=0.0))
        if progress is not None:
            progress(min((i + 1) * CHUNK_SECONDS, duration), duration)
    timings["total"] = time.perf_counter() - t0
    timings["tokens"] = float(n_tokens)
    text = "".join(s.text for s in segments).strip()
    return Transcript(text=text, segments=segments, language="en", language_probability=1.0, timings=timings)
