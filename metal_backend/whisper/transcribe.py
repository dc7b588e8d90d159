"""Transcription of a whole recording: the long-form loop of openai-whisper and faster-whisper.

The log-mel spectrogram is that of the whole audio followed by 30 s of silence, computed window by
window as the loop reaches it (mel.LogMel: memory bounded in the audio's length); a window of
30 s starts at `seek` (a mel frame, 10 ms each). Each window is decoded with
temperature fallback (decode again at the next temperature while the text's gzip compression
ratio is above compression_ratio_threshold or its average log-probability below
logprob_threshold; of all failed attempts the best one is kept). A window whose no-speech
probability is above no_speech_threshold with an average log-probability below
logprob_threshold is skipped as silence. Two more checks, beyond the peers' published rules, keep
silence and noise from producing text (tiny.en says "you" over digital silence with a no-speech
probability of 0.95 but an average log-probability of -0.7, and ". . ." over white noise): a window
whose samples all lie within one 16-bit step of zero is not decoded at all, and a window with a
no-speech probability above the threshold whose text has no letter or digit is skipped too.

The window's tokens are cut into segments at consecutive timestamp pairs. When the window ends
on a single timestamp (a segment closed and none opened) the rest of the window holds no speech
and the next window starts at its end; otherwise the last, unfinished segment is dropped and the
next window starts at the last closing timestamp, so a sentence cut by the window's end is
decoded again, whole, at the start of the next window. Without any timestamp pair the window is
one segment. The segments' text tokens (timestamps included) become the prompt of the next
window when condition_on_previous_text is set; the prompt is reset after a window decoded at a
temperature above 0.5.

transcribe_window is the hypothesis of a live stream (streaming.py): audio of at most one window,
encoded and decoded once, its unfinished last segment kept (the stream decides what is final), and
word times aligned on that same encoding. It never decodes a second window: the long-form loop
would decode the audio after the last word again, which for a growing stream buffer is the word
being spoken, at the cost of a whole second encoding.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

from .audio import SAMPLE_RATE, check_samples, load_audio
from .compute import WhisperCompute
from .decoding import DecodingResult, WindowDecoder, resolve_language
from .errors import WhisperError
from .language import detect_language
from .logit_filters import TIME_PRECISION
from .mel import HOP_LENGTH, N_FRAMES, N_SAMPLES, LogMel, MelArray, pad_or_trim, window_log_mel
from .model_data import WhisperModelData
from .options import DecodingOptions
from .tokenizer import Tokenizer
from .transcript import Segment, Transcript

Progress = Callable[[float, float], None]
FRAMES_PER_SECOND = SAMPLE_RATE // HOP_LENGTH  # 100 mel frames per second
INPUT_STRIDE = 2  # mel frames per encoder position: one timestamp step (20 ms) is 2 frames
PROMPT_RESET_TEMPERATURE = 0.5
_DIGITAL_SILENCE = 1.0 / 32768  # one step of 16-bit audio


def audio_samples(audio: str | os.PathLike | np.ndarray) -> np.ndarray:
    """16 kHz mono float32 samples of a file path or an array; bad arrays raise WhisperError
    naming the problem (integer or non-float dtype, not 1-D, empty, non-finite samples)."""
    if isinstance(audio, np.ndarray):
        return check_samples(audio)
    if isinstance(audio, (str, bytes, os.PathLike)):
        return load_audio(audio)
    raise WhisperError(f"audio must be a file path or a numpy array of samples (got {type(audio).__name__})")


def transcribe(compute: WhisperCompute, model: WhisperModelData, audio: str | os.PathLike | np.ndarray,
               options: DecodingOptions | None = None, progress: Progress | None = None) -> Transcript:
    """Transcribes an audio file (or 16 kHz mono float samples) window by window.

    progress(seconds_done, seconds_total) is called after each window. The result's timings
    (seconds) hold load_audio, mel, encode, decode (language detection included), total and
    tokens (text tokens produced).
    """
    options = options if options is not None else DecodingOptions()
    if not isinstance(options, DecodingOptions):
        raise WhisperError(f"options must be DecodingOptions (got {type(options).__name__})")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    samples = audio_samples(audio)
    t1 = time.perf_counter()
    mel = LogMel(samples, model.hparams.n_mels, padding=N_FRAMES * HOP_LENGTH, filters=model.mel_filters)
    t2 = time.perf_counter()
    timings.update(load_audio=t1 - t0, mel=t2 - t1, encode=0.0, decode=0.0)
    loop = _Loop(compute, model, options, mel, samples, timings, progress)
    segments = loop.run()
    timings["total"] = time.perf_counter() - t0
    timings["tokens"] = float(sum(len(s.tokens) for s in segments))
    text = "".join(s.text for s in segments).strip()
    return Transcript(text=text, segments=segments, language=loop.language,
                      language_probability=loop.language_probability, timings=timings)


def transcribe_window(compute: WhisperCompute, model: WhisperModelData, audio: np.ndarray,
                      options: DecodingOptions | None = None, previous: list[int] | tuple[int, ...] = (),
                      prefix: list[int] | tuple[int, ...] = ()) -> Transcript:
    """Transcribes at most 30 s of 16 kHz mono float samples as one window (see the module docstring).

    previous: text tokens fed as the prompt (after options.initial_prompt's, when given). prefix:
    forced tokens the window's text starts with (text and timestamp tokens; WindowDecoder.decode),
    returned in its segments as if decoded; timings["forced"] counts them, timings["tokens"]
    counts every token of the segments. Every
    segment of the window is returned, the last one even when no timestamp closes it (its end is
    then its last timestamp or the audio's end); options.word_timestamps aligns their words on
    the window's encoding. Audio longer than one window raises WhisperError. The timings are
    transcribe()'s.
    """
    options = options if options is not None else DecodingOptions()
    if not isinstance(options, DecodingOptions):
        raise WhisperError(f"options must be DecodingOptions (got {type(options).__name__})")
    t0 = time.perf_counter()
    samples = check_samples(audio)
    if samples.size > N_SAMPLES:
        raise WhisperError(f"transcribe_window takes at most {N_SAMPLES} samples (30 s; got {samples.size}); "
                           f"use transcribe() for longer audio")
    mel = MelArray(window_log_mel(samples, model.hparams.n_mels, filters=model.mel_filters))
    t1 = time.perf_counter()
    timings = {"load_audio": 0.0, "mel": t1 - t0, "encode": 0.0, "decode": 0.0}
    loop = _Loop(compute, model, options, mel, samples, timings, None)
    segments = loop.single_window([int(t) for t in previous], [int(t) for t in prefix])
    timings["total"] = time.perf_counter() - t0
    timings["tokens"] = float(sum(len(s.tokens) for s in segments))
    timings["forced"] = float(sum(1 for t in prefix if t < model.special.eot))
    return Transcript(text="".join(s.text for s in segments).strip(), segments=segments, language=loop.language,
                      language_probability=loop.language_probability, timings=timings)


def is_silence(result: DecodingResult, options: DecodingOptions) -> bool:
    """Whether a decoded window is skipped as silence: its no-speech probability is above
    no_speech_threshold and its text has no letter or digit or its average log-probability is
    below logprob_threshold (see the module docstring)."""
    if options.no_speech_threshold is None or result.no_speech_prob <= options.no_speech_threshold:
        return False
    if not any(c.isalnum() for c in result.text):
        return True
    return options.logprob_threshold is None or result.avg_logprob < options.logprob_threshold


class _Loop:
    """The state of one transcription: where the next window starts, the prompt, the segments."""

    def __init__(self, compute: WhisperCompute, model: WhisperModelData, options: DecodingOptions,
                 mel: LogMel | MelArray, samples: np.ndarray, timings: dict[str, float], progress: Progress | None):
        self.compute = compute
        self.model = model
        self.options = options
        self.mel = mel
        self.content_frames = mel.n_frames - N_FRAMES
        self.samples = samples
        self.duration = samples.size / SAMPLE_RATE
        self.timings = timings
        self.progress = progress
        self.tokenizer = Tokenizer(model.vocab, model.special)
        self.timestamp_begin = model.special.timestamp_begin
        self.language = resolve_language(model, options.language)
        self.language_probability = 1.0
        self.rng = np.random.default_rng(0)

    def run(self) -> list[Segment]:
        options = self.options
        all_tokens: list[int] = []
        if options.initial_prompt:
            all_tokens += self.tokenizer.encode(" " + options.initial_prompt.strip())
        prompt_reset_since = 0
        segments: list[Segment] = []
        decoder: WindowDecoder | None = None
        seek = 0
        while seek < self.content_frames:
            time_offset = seek / FRAMES_PER_SECOND
            segment_size = min(N_FRAMES, self.content_frames - seek)
            if self._is_digital_silence(seek, segment_size):
                seek += segment_size
                self._report(seek)
                continue
            t_mel = time.perf_counter()
            window = np.ascontiguousarray(pad_or_trim(self.mel.frames(seek, seek + N_FRAMES)))
            t_enc = time.perf_counter()
            self.timings["mel"] += t_enc - t_mel
            features = self.compute.encode(window)
            t_dec = time.perf_counter()
            self.timings["encode"] += t_dec - t_enc
            if decoder is None:
                if self.language is None:
                    self.language, self.language_probability, _ = detect_language(self.compute, self.model, features)
                decoder = WindowDecoder(self.model, options, self.language)
            # Without conditioning the prompt is reset after every window: only the initial prompt is used.
            previous = all_tokens[prompt_reset_since:]
            result = self._decode_with_fallback(decoder, features, previous)
            self.timings["decode"] += time.perf_counter() - t_dec

            if self._is_silence(result):
                seek += segment_size
                self._report(seek)
                continue
            window_segments, kept_tokens, next_seek, finished = self._split(result, seek, segment_size)
            window_segments = [s for s in window_segments if s.text.strip() and s.end > s.start]
            if options.word_timestamps and window_segments:
                next_seek = self._add_words(features, window_segments, time_offset, segment_size, finished, next_seek,
                                            decoder.language, segments[-1].end if segments else None)
            for s in window_segments:
                s.id = len(segments)
                segments.append(s)
            all_tokens += kept_tokens
            if not options.condition_on_previous_text or result.temperature > PROMPT_RESET_TEMPERATURE:
                prompt_reset_since = len(all_tokens)
            # Every window moves on (a timestamp pair at 0.00 s would otherwise stall the loop).
            seek = next_seek if next_seek > seek else seek + segment_size
            self._report(seek)
        return segments

    def single_window(self, previous: list[int], prefix: list[int] = ()) -> list[Segment]:
        """The whole audio (at most one window) as one window: see transcribe_window."""
        segment_size = min(self.samples.size // HOP_LENGTH, N_FRAMES)
        if segment_size == 0 or self._is_digital_silence(0, segment_size):
            return []
        prompt: list[int] = []
        if self.options.initial_prompt:
            prompt = self.tokenizer.encode(" " + self.options.initial_prompt.strip())
        window = np.ascontiguousarray(pad_or_trim(self.mel.frames(0, N_FRAMES)))
        t_enc = time.perf_counter()
        features = self.compute.encode(window)
        t_dec = time.perf_counter()
        self.timings["encode"] += t_dec - t_enc
        if self.language is None:
            self.language, self.language_probability, _ = detect_language(self.compute, self.model, features)
        decoder = WindowDecoder(self.model, self.options, self.language)
        result = self._decode_with_fallback(decoder, features, prompt + previous, prefix)
        self.timings["decode"] += time.perf_counter() - t_dec
        if self._is_silence(result):
            return []
        segments, _, _, finished = self._split(result, 0, segment_size, keep_unfinished=True)
        segments = [s for s in segments if s.text.strip() and s.end > s.start]
        if self.options.word_timestamps and segments:
            self._add_words(features, segments, 0.0, segment_size, finished, segment_size, decoder.language, None)
        for i, s in enumerate(segments):
            s.id = i
        return segments

    # ---------------------------------------------------------------- pieces

    def _decode_with_fallback(self, decoder: WindowDecoder, features: Any, previous: list[int],
                              prefix: list[int] = ()) -> DecodingResult:
        options = self.options
        attempts: list[DecodingResult] = []
        for temperature in options.temperatures:
            result = decoder.decode(self.compute, features, previous, temperature, self.rng, prefix)
            attempts.append(result)
            too_repetitive = (options.compression_ratio_threshold is not None
                              and result.compression_ratio > options.compression_ratio_threshold)
            too_unlikely = options.logprob_threshold is not None and result.avg_logprob < options.logprob_threshold
            if self._is_silence(result) or not (too_repetitive or too_unlikely):
                return result
        # Every temperature failed: the most likely text that is not repetitive, else the most likely.
        threshold = options.compression_ratio_threshold
        fine = [r for r in attempts if threshold is None or r.compression_ratio <= threshold]
        return max(fine or attempts, key=lambda r: r.avg_logprob)

    def _is_digital_silence(self, seek: int, segment_size: int) -> bool:
        window = self.samples[seek * HOP_LENGTH:(seek + segment_size) * HOP_LENGTH]
        return window.size == 0 or float(np.abs(window).max()) <= _DIGITAL_SILENCE

    def _is_silence(self, result: DecodingResult) -> bool:
        return is_silence(result, self.options)

    def _split(self, result: DecodingResult, seek: int, segment_size: int,
               keep_unfinished: bool = False) -> tuple[list[Segment], list[int], int, bool]:
        """The window's segments, the tokens kept as prompt, where the next window starts, and
        whether the window ended on a single timestamp. keep_unfinished: the tokens after the
        last timestamp pair become a segment too (ending at their last timestamp, else at the
        window's end) instead of being left for the next window."""
        tokens = result.tokens
        tb = self.timestamp_begin
        time_offset = seek / FRAMES_PER_SECOND
        is_timestamp = [t >= tb for t in tokens]
        single_timestamp_ending = is_timestamp[-2:] == [False, True]
        pairs = [i + 1 for i in range(len(tokens) - 1) if is_timestamp[i] and is_timestamp[i + 1]]
        segments: list[Segment] = []
        if pairs:
            cuts = pairs + ([len(tokens)] if single_timestamp_ending else [])
            last = 0
            for cut in cuts:
                piece = tokens[last:cut]
                start = time_offset + (piece[0] - tb) * TIME_PRECISION
                end = time_offset + (piece[-1] - tb) * TIME_PRECISION
                segments.append(self._segment(seek, start, end, piece, result))
                last = cut
            kept = tokens[:last]
            rest = tokens[last:]
            if keep_unfinished and not single_timestamp_ending and any(t < tb for t in rest):
                start = time_offset + ((rest[0] - tb) * TIME_PRECISION if rest[0] >= tb else 0.0)
                stamps = [t for t in rest[1:] if t >= tb]
                end = (time_offset + (stamps[-1] - tb) * TIME_PRECISION if stamps
                       else time_offset + segment_size / FRAMES_PER_SECOND)
                segments.append(self._segment(seek, start, max(end, start), rest, result))
            if single_timestamp_ending:
                next_seek = seek + segment_size
            else:
                next_seek = seek + (tokens[last - 1] - tb) * INPUT_STRIDE
        else:
            end = time_offset + segment_size / FRAMES_PER_SECOND
            stamps = [t for t in tokens if t >= tb]
            if stamps and stamps[-1] != tb:
                end = time_offset + (stamps[-1] - tb) * TIME_PRECISION
            segments.append(self._segment(seek, time_offset, end, tokens, result))
            kept = tokens
            next_seek = seek + segment_size
        return segments, kept, next_seek, single_timestamp_ending

    def _segment(self, seek: int, start: float, end: float, tokens: list[int], result: DecodingResult) -> Segment:
        text_tokens = [t for t in tokens if t < self.model.special.eot]
        end = min(end, self.duration)
        start = min(start, end)
        return Segment(id=0, seek=seek, start=round(start, 3), end=round(end, 3),
                       text=self.tokenizer.decode(text_tokens), tokens=text_tokens, temperature=result.temperature,
                       avg_logprob=result.avg_logprob, compression_ratio=result.compression_ratio,
                       no_speech_prob=result.no_speech_prob)

    def _add_words(self, features: Any, segments: list[Segment], time_offset: float, segment_size: int,
                   single_timestamp_ending: bool, next_seek: int, language: str, last_speech_time: float | None) -> int:
        """Word timestamps for the window's segments (alignment.py); with words, an unfinished
        window continues after its last word."""
        try:
            from .alignment import add_word_timestamps
        except ImportError as exc:
            raise WhisperError(f"word timestamps are not available: {exc}") from None
        add_word_timestamps(self.compute, self.model, self.tokenizer, features, segments, time_offset, segment_size,
                            self.options, language=language, last_speech_time=last_speech_time)
        ends = [w.end for s in segments for w in (s.words or [])]
        if not single_timestamp_ending and ends and ends[-1] > time_offset:
            return int(round(ends[-1] * FRAMES_PER_SECOND))
        return next_seek

    def _report(self, seek: int) -> None:
        if self.progress is not None:
            self.progress(min(seek, self.content_frames) / FRAMES_PER_SECOND, self.content_frames / FRAMES_PER_SECOND)
