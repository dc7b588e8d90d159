"""Batched long-form transcription: faster-whisper's BatchedInferencePipeline, conditioned on text.

The speech of the recording (a SpeechMap: the voice activity detector's spans, or the whole
recording) is joined and packed into chunks of at most 30 s: whole spans, in order, while they fit
(a span longer than 30 s, only possible without the detector, is cut every 30 s). The chunks are
split into min(batch_size, chunks) regions of consecutive chunks, the longest region as short as
can be (split_regions), and each region is transcribed as its own sequential loop; the loops run
in lockstep, one window of every region per batch,
encoded as one encoder graph (WhisperCompute.encode_batch) and decoded as one decoder batch
(batch_decoding.BatchDecoder), at the first temperature only (no fallback):

- a region's next window starts where its last one stopped and ends at the last span boundary
  (a cut in silence) within 30 s, so no word is cut by the window's end;
- a window's tokens are cut into segments at consecutive timestamp pairs; when they do not end on
  a single timestamp (the last sentence was not decoded, or not closed), the region goes on from
  the last closing timestamp, moved to the span boundary within a second of it (small models'
  timestamps run early or late; a boundary is silence), as the sequential loop seeks there;
- each window's prompt is its region's earlier text (condition_on_previous_text; timestamps
  included, as sequentially), its last max_prompt tokens, whatever the other windows' prompts:
  shorter prompts are left-padded and the padding masked (decode_batch's skip), so each window
  decodes at its own text positions, as it would alone. A region's first window has only the
  initial prompt, so the first batch decodes without previous text (faster-whisper's batched
  pipeline decodes every chunk so); a file of k chunks at batch size N has k - min(N, k)
  windows with their text before them. batch_size=1 is one region: one loop.

Windows skipped as silence follow transcribe.is_silence. Segment and word times are mapped back to
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
from .mel import CHUNK_SECONDS, HOP_LENGTH, N_FRAMES, N_SAMPLES, window_log_mel
from .model_data import WhisperModelData
from .options import DecodingOptions
from .speech_map import EDGE_SLACK, SpeechMap
from .tokenizer import Tokenizer
from .transcribe import FRAMES_PER_SECOND, PROMPT_RESET_TEMPERATURE, is_silence
from .transcript import Segment, Transcript

Progress = Callable[[float, float], None]


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
    mel, encode, decode, total and tokens."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise WhisperError(f"batch_size must be a positive integer (got {batch_size!r})")
    t0 = time.perf_counter()
    timings = {"mel": 0.0, "encode": 0.0, "decode": 0.0}
    joined = speech.join(samples)
    tokenizer = Tokenizer(model.vocab, model.special)
    language = resolve_language(model, options.language)
    language_probability = 1.0
    initial = tokenizer.encode(" " + options.initial_prompt.strip()) if options.initial_prompt else []
    temperature = options.temperatures[0]
    conditioned = options.condition_on_previous_text and temperature <= PROMPT_RESET_TEMPERATURE
    boundaries = speech.joined_ends.astype(np.int64)
    regions = [_Region(start, stop, list(initial)) for start, stop in split_regions(pack_chunks(speech), batch_size)]
    rng = np.random.default_rng(0)
    decoder: BatchDecoder | None = None
    segments: list[Segment] = []
    total = speech.speech_seconds
    while True:
        live = [r for r in regions if r.cursor < r.stop]
        if not live:
            break
        windows = [(r.cursor, window_end(boundaries, r.cursor, r.stop)) for r in live]
        t = time.perf_counter()
        mels = np.stack([_window(model, joined[s:e]) for s, e in windows])
        t_enc = time.perf_counter()
        features = compute.encode_batch(mels)
        t_dec = time.perf_counter()
        timings["mel"] += t_enc - t
        timings["encode"] += t_dec - t_enc
        if language is None:
            language, language_probability = _detect(compute, model, features, len(live))
        if decoder is None:
            decoder = BatchDecoder(model, options, language)
        previous = window_prompts([r.history for r in live], decoder.max_prompt)
        results = decoder.decode_windows(compute, features, len(live), temperature=temperature, rng=rng,
                                         previous_windows=previous)
        timings["decode"] += time.perf_counter() - t_dec
        decoded = []
        for index, (region, (s, e), result) in enumerate(zip(live, windows, results)):
            region.cursor = e
            if is_silence(result, options):
                continue
            window_segments, rest, kept = _segments(model, tokenizer, result, s, e, speech)
            if rest is not None:
                rest = snap_to_boundary(boundaries, rest, s, e)
                for segment in window_segments:
                    segment.end = min(segment.end, round(rest / SAMPLE_RATE, 3))
                    segment.start = min(segment.start, segment.end)
                region.cursor = rest
            region.history = region.history + kept if conditioned else list(initial)
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
            done = sum(min(r.cursor, r.stop) - r.start for r in regions) / SAMPLE_RATE
            progress(min(done, total), total)
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
    """A stretch of the joined speech [start, stop) (samples) transcribed as its own sequential
    loop: the next window starts at cursor; history holds the tokens kept so far (the prompt);
    last_end is the end of its latest segment (seconds, joined)."""

    start: int
    stop: int
    history: list[int]
    cursor: int = -1
    last_end: float | None = None

    def __post_init__(self) -> None:
        self.cursor = self.start


def split_regions(chunks: list[tuple[int, int]], batch_size: int) -> list[tuple[int, int]]:
    """The chunks (pack_chunks) split into min(batch_size, len(chunks)) runs of consecutive chunks
    whose longest is as short as can be (in audio, not in chunks: a region's windows, and so the
    batches of the run, follow its length): [(start, stop)] in samples of the joined speech.
    The regions are filled front to back up to that length."""
    if not chunks:
        return []
    count = min(batch_size, len(chunks))
    lengths = [end - start for start, end in chunks]

    def fill(limit: int) -> list[list[int]]:
        """Chunk indices packed front to back into runs of at most limit samples."""
        groups: list[list[int]] = [[]]
        total = 0
        for i, length in enumerate(lengths):
            if groups[-1] and total + length > limit:
                groups.append([])
                total = 0
            groups[-1].append(i)
            total += length
        return groups

    low, high = max(lengths), sum(lengths)
    while low < high:  # the shortest limit that needs at most count runs
        middle = (low + high) // 2
        if len(fill(middle)) <= count:
            high = middle
        else:
            low = middle + 1
    groups = fill(low)
    while len(groups) < count:
        # Fewer runs than regions (a long chunk set the limit): the longest run of several chunks
        # is cut where its longer half is shortest; no run grows.
        index = max((g for g in range(len(groups)) if len(groups[g]) > 1),
                    key=lambda g: sum(lengths[i] for i in groups[g]))
        group = groups[index]
        cut = min(range(1, len(group)), key=lambda c: max(sum(lengths[i] for i in group[:c]),
                                                          sum(lengths[i] for i in group[c:])))
        groups[index:index + 1] = [group[:cut], group[cut:]]
    return [(chunks[g[0]][0], chunks[g[-1]][1]) for g in groups]


def window_end(boundaries: np.ndarray, start: int, stop: int) -> int:
    """Where a window starting at start (joined samples) ends: at the last span boundary (a cut in
    silence: boundaries are the joined spans' ends) within 30 s and at most stop; without one,
    30 s on (or stop)."""
    limit = min(start + N_SAMPLES, stop)
    inside = boundaries[(boundaries > start) & (boundaries <= limit)]
    return int(inside.max()) if inside.size else limit


def snap_to_boundary(boundaries: np.ndarray, rest: int, start: int, end: int) -> int:
    """Where a window's unfinished rest is decoded again from: the span boundary inside the window
    (start, end) nearest the closing timestamp rest, when it lies within EDGE_SLACK of it (small
    models' timestamps run up to a second early or late; a boundary is silence, so no word is cut
    or decoded twice), else rest itself."""
    inside = boundaries[(boundaries > start) & (boundaries < end)]
    if inside.size:
        nearest = int(inside[np.argmin(np.abs(inside - rest))])
        if abs(nearest - rest) <= EDGE_SLACK * SAMPLE_RATE:
            return nearest
    return rest


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
              speech: SpeechMap) -> tuple[list[Segment], int | None, list[int]]:
    """A chunk's segments in joined time, and where the rest of the chunk starts when it is to be
    decoded again (None: the chunk is done). Segments are cut at consecutive timestamp pairs. When
    the tokens do not end on a single timestamp (a segment closed, none opened), what follows the
    last pair is dropped and the audio from its closing timestamp on is decoded again, as the
    sequential loop seeks there (tiny.en often opens a timestamp and ends, leaving the last
    sentence of a chunk undecoded); without a pair, or with the pair at 0, the rest is a segment
    to the chunk's end."""
    tb = model.special.timestamp_begin
    tokens = result.tokens
    offset = start / SAMPLE_RATE
    duration = (end - start) / SAMPLE_RATE
    pairs = [i + 1 for i in range(len(tokens) - 1) if tokens[i] >= tb and tokens[i + 1] >= tb]
    single_timestamp_ending = len(tokens) >= 2 and tokens[-1] >= tb and tokens[-2] < tb
    rest = None
    if pairs and not single_timestamp_ending:
        seek = int(round((tokens[pairs[-1] - 1] - tb) * TIME_PRECISION * SAMPLE_RATE))
        if 0 < seek < end - start:
            rest = start + seek
            tokens = tokens[:pairs[-1]]
    cuts = pairs + [len(tokens)]
    seek = int(round(speech.original_time(offset) * FRAMES_PER_SECOND)) if speech.spans else 0
    segments = []
    last = 0
    previous_end = 0.0
    for cut in cuts:
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
    return segments, rest, tokens


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
