"""Batched long-form transcription: faster-whisper's BatchedInferencePipeline, conditioned on text.

The speech of the recording (a SpeechMap: the voice activity detector's spans, or the whole
recording) is joined and packed into chunks of at most 30 s: whole spans, in order, while they fit
(a span longer than 30 s, only possible without the detector, is cut every 30 s). Each chunk is one
encoder window, encoded once and decoded once, as faster-whisper's pipeline does. The chunks are
split into min(batch_size, chunks) regions of consecutive chunks (split_regions: counts as even as
can be) and each region is transcribed as its own sequential loop; the loops run in lockstep, one
chunk of every region per batch, encoded as one encoder graph (WhisperCompute.encode_batch) and
decoded as one decoder batch (batch_decoding.BatchDecoder), at the first temperature only (no
fallback):

- a chunk's tokens are cut into segments at consecutive timestamp pairs; text after the last pair
  that no timestamp closes is a segment to the chunk's end (the chunk ends in silence, at a span's
  end, so no word is cut there);
- the sequential loop decodes the audio after an unfinished last segment again, in a new window;
  here the chunk is not re-windowed: its text may not end right after a timestamp pair more than
  UNFINISHED_SECONDS before its end (open_until: tiny.en often opens a segment and ends, leaving the
  chunk's last sentence undecoded), so the decoder goes on in the same window;
- each chunk's prompt is its region's earlier text (condition_on_previous_text; timestamps
  included, as sequentially), its last max_prompt tokens, whatever the other chunks' prompts:
  shorter prompts are left-padded and the padding masked (decode_batch's skip), so each chunk
  decodes at its own text positions, as it would alone. A region's first chunk has only the
  initial prompt, so the first batch decodes without previous text (faster-whisper's batched
  pipeline decodes every chunk so); a file of k chunks at batch size N has k - min(N, k)
  chunks with their text before them. batch_size=1 is one region: one loop.

Chunks skipped as silence follow transcribe.is_silence. Segment and word times are mapped back to
the original recording by the SpeechMap. Word timestamps reuse the batch's encoder output
(BackendWhisper.select_window copies one window's cross-attention keys and values out of it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .audio import SAMPLE_RATE
from .batch_decoding import BatchDecoder
from .compute import WhisperCompute
from .decoding import DecodingResult, resolve_language
from .errors import WhisperError
from .language import language_probabilities
from .logit_filters import TIME_PRECISION
from .mel import CHUNK_SECONDS, HOP_LENGTH, N_FRAMES, window_log_mel
from .model_data import WhisperModelData
from .options import DecodingOptions
from .speech_map import SpeechMap
from .tokenizer import Tokenizer
from .transcribe import FRAMES_PER_SECOND, PROMPT_RESET_TEMPERATURE, is_silence
from .transcript import Segment, Transcript

Progress = Callable[[float, float], None]
# Seconds: a chunk's text may not end right after a timestamp pair earlier than this before the
# chunk's end (open_until). The chunk ends where the VAD's speech does (its pad, 400 ms, included);
# small models' timestamps run up to a second early or late (EDGE_SLACK).
UNFINISHED_SECONDS = 2.0


def pack_chunks(speech: SpeechMap, max_seconds: float = CHUNK_SECONDS) -> list[tuple[int, int]]:
    """[(start, end)] in samples of the joined speech: consecutive whole spans, each chunk at most
    max_seconds long (spans longer than that cut into max_seconds pieces)."""
    limit = int(round(max_seconds * SAMPLE_RATE))
    chunks: list[tuple[int, int]] = []
    start = end = 0
    for j_start, j_end in zip(speech.joined_starts.tolist(), speech.joined_ends.tolist()):
        while j_end - j_start > limit:
            if end > start:
                chunks.append((start, end))
            chunks.append((j_start, j_start + limit))
            j_start += limit
            start = end = j_start
        if j_end - start > limit:
            chunks.append((start, end))
            start = j_start
        end = j_end
    if end > start:
        chunks.append((start, end))
    return chunks


def transcribe_batched(compute: WhisperCompute, model: WhisperModelData, samples: np.ndarray, speech: SpeechMap,
                       options: DecodingOptions, batch_size: int, progress: Progress | None = None) -> Transcript:
    """Transcribes the speech of samples (16 kHz mono float32; speech is its map) in up to
    batch_size regions decoded in lockstep (see the module docstring). The result's timings hold
    mel, encode, decode, total, tokens and windows (windows encoded: one per chunk)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise WhisperError(f"batch_size must be a positive integer (got {batch_size!r})")
    t0 = time.perf_counter()
    timings = {"mel": 0.0, "encode": 0.0, "decode": 0.0, "windows": 0.0}
    joined = speech.join(samples)
    tokenizer = Tokenizer(model.vocab, model.special)
    language = resolve_language(model, options.language)
    language_probability = 1.0
    initial = tokenizer.encode(" " + options.initial_prompt.strip()) if options.initial_prompt else []
    temperature = options.temperatures[0]
    conditioned = options.condition_on_previous_text and temperature <= PROMPT_RESET_TEMPERATURE
    regions = [_Region(run, list(initial)) for run in split_regions(pack_chunks(speech), batch_size)]
    rng = np.random.default_rng(0)
    decoder: BatchDecoder | None = None
    segments: list[Segment] = []
    total = speech.speech_seconds
    done = 0
    for step in range(max((len(r.chunks) for r in regions), default=0)):
        live = [r for r in regions if step < len(r.chunks)]
        windows = [r.chunks[step] for r in live]
        t = time.perf_counter()
        mels = np.stack([_window(model, joined[s:e]) for s, e in windows])
        t_enc = time.perf_counter()
        features = compute.encode_batch(mels)
        t_dec = time.perf_counter()
        timings["mel"] += t_enc - t
        timings["encode"] += t_dec - t_enc
        timings["windows"] += len(windows)
        if language is None:
            language, language_probability = _detect(compute, model, features, len(live))
        if decoder is None:
            decoder = BatchDecoder(model, options, language)
        previous = window_prompts([r.history for r in live], decoder.max_prompt)
        results = decoder.decode_windows(compute, features, len(live), temperature=temperature, rng=rng,
                                         previous_windows=previous,
                                         open_until=[open_until(model, e - s) for s, e in windows])
        timings["decode"] += time.perf_counter() - t_dec
        decoded = []
        for index, (region, (s, e), result) in enumerate(zip(live, windows, results)):
            done += e - s
            if is_silence(result, options):
                continue
            window_segments = _segments(model, tokenizer, result, s, e, speech)
            region.history = region.history + result.tokens if conditioned else list(initial)
            if window_segments:
                decoded.append((index, region, s, e, window_segments))
            segments += window_segments
        for index, region, s, e, window_segments in decoded:
            if options.word_timestamps:
                # The window's encoder output is reused: its cross-attention keys and values are
                # copied out of the batch on the device.
                t = time.perf_counter()
                _add_words(compute, model, tokenizer, compute.select_window(features, index), window_segments, s,
                           e, options, language, region.last_end)
                timings["decode"] += time.perf_counter() - t
            region.last_end = window_segments[-1].end
        if progress is not None:
            progress(min(done / SAMPLE_RATE, total), total)
    segments.sort(key=lambda segment: segment.start)
    speech.restore(segments)
    for i, segment in enumerate(segments):
        segment.id = i
    timings["total"] = time.perf_counter() - t0
    timings["tokens"] = float(sum(len(s.tokens) for s in segments))
    return Transcript(text="".join(s.text for s in segments).strip(), segments=segments, language=language,
                      language_probability=language_probability, timings=timings)


@dataclass
class _Region:
    """A run of consecutive chunks (samples of the joined speech, [(start, end)]) transcribed as
    its own sequential loop: history holds the tokens kept so far (the prompt); last_end is the
    end of its latest segment (seconds, joined)."""

    chunks: list[tuple[int, int]]
    history: list[int]
    last_end: float | None = None


def split_regions(chunks: list[tuple[int, int]], batch_size: int) -> list[list[tuple[int, int]]]:
    """The chunks (pack_chunks) split into min(batch_size, len(chunks)) runs of consecutive chunks,
    their counts as even as can be (each chunk is one window, so the batches of the run follow
    the longest run's count); the longer runs come first."""
    count = min(batch_size, len(chunks))
    if count == 0:
        return []
    size, extra = divmod(len(chunks), count)
    runs, first = [], 0
    for i in range(count):
        last = first + size + (1 if i < extra else 0)
        runs.append(chunks[first:last])
        first = last
    return runs


def open_until(model: WhisperModelData, length: int) -> int:
    """The timestamp token below which a chunk of length samples may not end its text right after a
    timestamp pair (BatchDecoder.decode_windows' open_until): UNFINISHED_SECONDS before its end.
    A chunk ends at a speech span's end, so a pair earlier than that leaves speech undecoded
    (tiny.en often opens a segment and ends, the chunk's last sentence left out); the sequential
    loop decodes such a rest again in a new window, a chunk goes on in the same one."""
    steps = int((length / SAMPLE_RATE - UNFINISHED_SECONDS) / TIME_PRECISION)
    return model.special.timestamp_begin + max(steps, 0)


def window_prompts(histories: list[list[int]], max_prompt: int) -> list[list[int]]:
    """Every window's prompt: the last max_prompt tokens of its region's history (lengths differ)."""
    return [list(h[max(len(h) - max_prompt, 0):]) for h in histories]


def _window(model: WhisperModelData, audio: np.ndarray) -> np.ndarray:
    """The (n_mels, 3000) log-mel window of one chunk (at most 30 s) padded with zeros to 30 s
    (mel.window_log_mel: only the frames that reach the audio are transformed)."""
    return window_log_mel(audio, model.hparams.n_mels, filters=model.mel_filters)


def _detect(compute: WhisperCompute, model: WhisperModelData, features: Any, count: int) -> tuple[str, float]:
    """The language of a batch of windows: language probabilities averaged over its windows."""
    if not model.hparams.is_multilingual:
        return "en", 1.0
    logits = np.asarray(compute.decode_batch(features, [[model.special.sot]] * count, 0), dtype=np.float64)
    probabilities: dict[str, float] = {}
    for row in logits:
        for code, p in language_probabilities(model, row)[2].items():
            probabilities[code] = probabilities.get(code, 0.0) + p / count
    best = max(probabilities, key=probabilities.get)
    return best, probabilities[best]


def _segments(model: WhisperModelData, tokenizer: Tokenizer, result: DecodingResult, start: int, end: int,
              speech: SpeechMap) -> list[Segment]:
    """A chunk's segments in joined time, cut at consecutive timestamp pairs; the text after the
    last pair (not closed by a timestamp) is a segment to the chunk's end, as is a chunk's text
    without any pair."""
    tb = model.special.timestamp_begin
    tokens = result.tokens
    offset = start / SAMPLE_RATE
    duration = (end - start) / SAMPLE_RATE
    pairs = [i + 1 for i in range(len(tokens) - 1) if tokens[i] >= tb and tokens[i + 1] >= tb]
    seek = int(round(speech.original_time(offset) * FRAMES_PER_SECOND)) if speech.spans else 0
    segments = []
    last = 0
    previous_end = 0.0
    for cut in pairs + [len(tokens)]:
        piece = tokens[last:cut]
        last = cut
        text_tokens = [t for t in piece if t < model.special.eot]
        if not piece:
            continue
        seg_start = (piece[0] - tb) * TIME_PRECISION if piece[0] >= tb else previous_end
        seg_end = (piece[-1] - tb) * TIME_PRECISION if piece[-1] >= tb and len(piece) > 1 else duration
        seg_end = min(seg_end, duration)
        seg_start = min(seg_start, seg_end)
        previous_end = seg_end
        text = tokenizer.decode(text_tokens)
        if not text.strip():
            continue
        segments.append(Segment(id=0, seek=seek, start=round(offset + seg_start, 3), end=round(offset + seg_end, 3),
                                text=text, tokens=text_tokens, temperature=result.temperature,
                                avg_logprob=result.avg_logprob, compression_ratio=result.compression_ratio,
                                no_speech_prob=result.no_speech_prob))
    return segments


def _add_words(compute: WhisperCompute, model: WhisperModelData, tokenizer: Tokenizer, features: Any,
               segments: list[Segment], start: int, end: int, options: DecodingOptions, language: str,
               last_speech_time: float | None) -> None:
    try:
        from .alignment import add_word_timestamps
    except ImportError as exc:
        raise WhisperError(f"word timestamps are not available: {exc}") from None
    frames = min(N_FRAMES, -(-(end - start) // HOP_LENGTH))
    add_word_timestamps(compute, model, tokenizer, features, segments, start / SAMPLE_RATE, frames, options,
                        language=language, last_speech_time=last_speech_time)
