"""Live transcription: Whisper over audio that is still arriving.

    s = model.stream(language="en")
    for chunk in chunks:                 # 16 kHz mono float samples, any length
        for seg in s.push(chunk):        # what this push committed: final, absolute times
            print(seg.start, seg.end, seg.text)
        show(s.tentative)                # heard, not committed yet (may still change)
    s.finish()                           # commits the rest
    s.segments                           # everything committed

How (Whisper-Streaming's LocalAgreement-2, gated by a voice activity detector):

- A Silero VAD (metal_backend.vad) scores every 512-sample window as it arrives; SpeechGate turns
  the scores into stretches of speech. Outside speech nothing is transcribed and only a short
  pre-roll of audio (speech_pad_ms) is kept, so silence and noise cost the VAD alone.
- Inside a stretch the buffer (the stretch so far) is transcribed again whenever at least
  min_step_seconds of new audio arrived since the last transcription, with word timestamps, as
  one window (Whisper.transcribe_window: one encoding, one decoding, words aligned on that
  encoding; never the long-form loop's second window after the last word). A
  word is committed once two consecutive transcriptions agree on it (LocalAgreement) and it ends
  at least edge_hold_seconds before the end of the newer one's audio (a word at the buffer's edge
  is often misheard by both and revised once more audio follows it) and the newer one gives it a
  probability of at least commit_probability (0.6: a word Whisper guesses at the edge, 'sells
  fruit' as 'sailed through' at 0.14 and 0.19, can be guessed the same way by two hypotheses; a
  final pass heard it right; 'The weather report' was committed as 'But when the' at 0.53 by two
  greedy hypotheses); the words after the committed prefix are the tentative text.
- A word held back for its probability alone (the hypotheses agree on it, clear of the edge) is
  settled by a beam inside the stretch (confirm_beam_size, 5 by default): the next transcription
  decodes with a beam of that many, and the words it agrees on with the greedy hypothesis before
  it are committed whatever their probability (a sentence's first word is often below 0.6: 'The'
  at 0.22 in four hypotheses of 'The weather report'; greedy and beam agreeing on it is rarer when
  it is wrong: the beam heard 'The weather report'). Once per committed prefix: when the beam
  hears the word otherwise, the next such pass waits until more is committed, so a word both keep
  disputing waits for a confident hypothesis or the final pass. None: held words always wait so.
  unsure_agreement=N, off by default, instead commits such a word once N consecutive hypotheses
  agree on it.
- The end of a stretch (the VAD heard min_silence_duration_ms of silence) closes it with a final
  pass whose words are all committed (final_beam_size, 5 by default: that pass decodes with a beam
  of that many, the hypotheses as the options say, one beam decoding per stretch; None: as they).
  A stretch that follows within context_gap_seconds keeps the closed one's audio in its buffer as
  left context (its committed words are not committed again: LocalAgreement drops them), cut back
  at a sentence end when it is longer than trim_seconds; after a longer silence the buffer starts
  empty.
- The committed words before the buffer are the prompt of each transcription (with
  initial_prompt in front), as the long-form loop conditions on previous text. The committed
  words inside the buffer can be its forced decoder prefix (forced_prefix=True; off by default:
  on the 132 s passage it cut latency but not the word error rate): Whisper continues
  after them, as timestamped sentences, instead of hearing them again, so every hypothesis of a
  buffer shares that context and samples only the words after it (the prefix goes in as one
  batch, a fraction of the cost of sampling it). They come back first and are taken off by
  position, whatever times the alignment gives them; a hypothesis that strays off them (a token
  glued onto the last one) is compared by time and n-gram instead.
- agreement: how many consecutive hypotheses must agree on a word (2: LocalAgreement-2).
- The buffer never exceeds max_buffer_seconds (at most 30 s, one Whisper window): past
  trim_seconds it is cut after a committed word that ends a sentence, halfway to the next word
  (never at a word's aligned edge, which clips it), keeping up to two thirds of trim_seconds as
  left context; near max_buffer_seconds after a committed segment or word, or, when nothing was
  committed, by a final pass over the whole buffer.

Compute per push is bounded: a push runs the VAD over its samples and at most one transcription
per max_step_seconds of speech it brings (so a 0.5 s chunk costs at most one transcription,
plus a final pass when it ends a stretch; a confirming beam pass takes a hypothesis's place).
Memory is bounded too: at most the buffer and one push of audio are held; the committed segments
are text (a few hundred bytes each).

Threads: push() may be called from one or more threads while others read `tentative`,
`segments` and `pushed_seconds`. Those read a snapshot taken under the stream's lock, which is
held only to swap state, never during a transcription. One push transcribes at a time: a push
that arrives while another thread's push is transcribing only queues its samples and returns []
at once (nothing is dropped); the queued samples are transcribed by the next push or by
finish(), and what they commit is returned there (and passed to on_commit). finish() waits for a
running push. Callbacks run on the thread whose push did the work, after it, without the state
lock (so they may read the stream; a push from a callback is queued like any concurrent one).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import fields, replace
from typing import Callable, Protocol

import numpy as np

from .audio import SAMPLE_RATE, check_samples
from .errors import WhisperError
from .local_agreement import LocalAgreement, TimedWord, word_key
from .logit_filters import TIME_PRECISION
from .mel import HOP_LENGTH
from .options import DecodingOptions
from .speech_gate import WINDOW, SpeechGate, VadParameters
from .tokenizer import Tokenizer
from .transcript import Segment, Transcript, Word

MAX_WINDOW_SECONDS = 30.0
# Streaming decodes the buffer many times over, so its defaults favour bounded compute: greedy,
# one temperature (no fallback re-decodes). Any DecodingOptions field may be given instead.
STREAM_DEFAULTS = {"beam_size": None, "temperature": 0.0}
_PROMPT_WORDS = 200
_LAST_TIMESTAMP = round(MAX_WINDOW_SECONDS / TIME_PRECISION)  # <|30.00|>, the window's last timestamp
_TOKENS_PER_SECOND = 8
# The least probability of a word committed by greedy agreement alone (a final pass commits any, a
# confirming beam pass any it agrees on). On tiny.en's passage x5 (2 threads, sim clock, pinned costs)
# 0.5 without confirming passes gave 6.52 % WER against 5.24 % offline, median latency 1.60 s, p90 3.17 s;
# 0.6 without them 5.62 %, 1.67 s, p90 4.00 s (the unsure words waited for the final pass); 0.6 with
# CONFIRM_BEAM_SIZE 5: 5.69 %, 1.70 s, 2.79 s.
COMMIT_PROBABILITY = 0.6
# The final pass's beam: on tiny.en's passage x5 (sim clock, pinned costs) it took the stream's WER
# from 6.84 % to 6.20 % against 5.24 % offline (x1: 5.75 % -> 6.07 % against 5.43 %).
FINAL_BEAM_SIZE = 5
# The beam of a confirming pass (a word the greedy hypotheses agree on below COMMIT_PROBABILITY).
CONFIRM_BEAM_SIZE = 5
# Past this many seconds the buffer (and a closed stretch kept as left context) is cut at a committed
# sentence end, keeping up to two thirds of it. Whisper-Streaming trims at 15 s; with 15 (up to 10 s of
# left context) tiny.en misheard sentences after a long context in the buffer ('The weather report' as
# 'But when the report' by two agreeing hypotheses over 12 s, 'the castle on the hill' as 'the village
# here' by a final pass over 14 s); 8 (up to 5.3 s) took tiny.en's passage x1 (2 threads, sim clock, pinned
# costs) from 6.07 % to 5.75 % WER against 5.43 % offline, median latency 1.82 -> 1.61 s, p90 2.81 -> 3.07 s.
TRIM_SECONDS = 8.0


class StreamFinishedError(WhisperError):
    """push() or finish() work on a stream that finish() already closed."""


class VoiceActivityDetector(Protocol):
    """What the stream needs of a VAD (metal_backend.vad.SileroVad has it): push(chunk) returns the
    speech probabilities of the complete 512-sample windows the chunk completes; reset() starts over."""

    def push(self, chunk: np.ndarray) -> np.ndarray: ...

    def reset(self) -> None: ...


class Transcriber(Protocol):
    """What the stream needs of a model (metal_backend.whisper.Whisper has it): transcribe_window
    decodes at most 30 s as one window, prompted with `previous` text tokens, its text starting
    with the forced `prefix` tokens."""

    data: object

    def transcribe_window(self, audio: np.ndarray, options: DecodingOptions | None = None,
                          previous: list[int] | tuple[int, ...] = (),
                          prefix: list[int] | tuple[int, ...] = ()) -> Transcript: ...


CommitCallback = Callable[[list[Segment]], None]
TentativeCallback = Callable[[str], None]


def stream_options(options: DecodingOptions | None, overrides: dict) -> DecodingOptions:
    """The stream's decoding options: options (or DecodingOptions with STREAM_DEFAULTS) with overrides."""
    if options is None:
        options = DecodingOptions(**STREAM_DEFAULTS)
    elif not isinstance(options, DecodingOptions):
        raise WhisperError(f"options must be DecodingOptions (got {type(options).__name__})")
    if overrides:
        known = {f.name for f in fields(DecodingOptions)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise WhisperError(f"unknown decoding option {unknown[0]!r}; expected DecodingOptions fields")
        options = replace(options, **overrides)
    return options


class Stream:
    """Live transcription of one audio stream (see the module docstring for how and for threads).

    Made by Whisper.stream(). push(samples) takes 16 kHz mono float samples (any length, 1-D,
    finite; WhisperError otherwise, StreamFinishedError after finish()) and returns the segments
    that push committed. Segments carry absolute times (seconds since the first sample pushed) and,
    when word_timestamps=True was asked, their words. on_commit(segments) is called with every
    non-empty commit, on_tentative(text) whenever the tentative text changes.
    """

    def __init__(self, model: Transcriber, options: DecodingOptions, vad: VoiceActivityDetector,
                 vad_parameters: VadParameters | None = None, *, on_commit: CommitCallback | None = None,
                 on_tentative: TentativeCallback | None = None, min_step_seconds: float = 0.5,
                 max_step_seconds: float = 5.0, trim_seconds: float = TRIM_SECONDS,
                 max_buffer_seconds: float = 25.0,
                 context_gap_seconds: float = 2.0, edge_hold_seconds: float = 0.3, forced_prefix: bool = False,
                 agreement: int = 2, commit_probability: float = COMMIT_PROBABILITY,
                 final_beam_size: int | None = FINAL_BEAM_SIZE, unsure_agreement: int | None = None,
                 confirm_beam_size: int | None = CONFIRM_BEAM_SIZE):
        if not 0.0 < min_step_seconds <= max_step_seconds:
            raise WhisperError(f"min_step_seconds must be in (0, max_step_seconds] (got {min_step_seconds!r})")
        if not (0.0 < trim_seconds <= max_buffer_seconds
                and max_buffer_seconds + max_step_seconds <= MAX_WINDOW_SECONDS):
            raise WhisperError(f"need 0 < trim_seconds <= max_buffer_seconds and max_buffer_seconds + "
                               f"max_step_seconds <= {MAX_WINDOW_SECONDS:g} (got trim {trim_seconds!r}, max buffer "
                               f"{max_buffer_seconds!r}, max step {max_step_seconds!r})")
        if not isinstance(agreement, int) or isinstance(agreement, bool) or not 2 <= agreement <= 5:
            raise WhisperError(f"agreement must be an integer in 2..5 hypotheses (got {agreement!r})")
        if not isinstance(commit_probability, (int, float)) or isinstance(commit_probability, bool) \
                or not 0.0 <= commit_probability <= 1.0:
            raise WhisperError(f"commit_probability must be a number in [0, 1] (got {commit_probability!r})")
        if final_beam_size is not None and (not isinstance(final_beam_size, int) or isinstance(final_beam_size, bool)
                                            or final_beam_size < 1):
            raise WhisperError(f"final_beam_size must be a positive integer or None (got {final_beam_size!r})")
        if unsure_agreement is not None and (not isinstance(unsure_agreement, int) or isinstance(
                unsure_agreement, bool) or not agreement < unsure_agreement <= 6):
            raise WhisperError(f"unsure_agreement must be None or an integer in (agreement, 6] "
                               f"(got {unsure_agreement!r})")
        if confirm_beam_size is not None and (not isinstance(confirm_beam_size, int) or isinstance(
                confirm_beam_size, bool) or confirm_beam_size < 1):
            raise WhisperError(f"confirm_beam_size must be a positive integer or None (got {confirm_beam_size!r})")
        if not 0.0 <= edge_hold_seconds <= max_step_seconds:
            raise WhisperError(f"edge_hold_seconds must be in [0, max_step_seconds] (got {edge_hold_seconds!r})")
        self.model = model
        self.options = options
        self.vad = vad
        self.vad_parameters = vad_parameters if vad_parameters is not None else VadParameters()
        self.on_commit = on_commit
        self.on_tentative = on_tentative
        self._want_words = options.word_timestamps
        self._hyp_options = replace(options, word_timestamps=True, initial_prompt=None)
        # The final pass of a stretch commits all it hears, unchecked by agreement: it may decode
        # with a beam (final_beam_size) while the hypotheses stay as options say.
        self._final_options = self._hyp_options if final_beam_size is None else replace(
            self._hyp_options, beam_size=final_beam_size)
        self._confirm_options = None if confirm_beam_size is None else replace(
            self._hyp_options, beam_size=confirm_beam_size)
        self._confirmed_at: float | None = None  # committed_end when the last confirming pass ran
        self._tokenizer = Tokenizer(model.data.vocab, model.data.special)
        initial_prompt = (options.initial_prompt or "").strip()
        self._initial_tokens = self._tokenizer.encode(" " + initial_prompt) if initial_prompt else []
        self._language = options.language
        self._min_step = int(min_step_seconds * SAMPLE_RATE)
        self._max_step = int(max_step_seconds * SAMPLE_RATE)
        self._trim = int(trim_seconds * SAMPLE_RATE)
        self._max_buffer = int(max_buffer_seconds * SAMPLE_RATE)
        self._context_gap = int(context_gap_seconds * SAMPLE_RATE)
        self._edge_hold = float(edge_hold_seconds)
        self._commit_probability = float(commit_probability)
        self._unsure_agreement = unsure_agreement
        self._pad = int(self.vad_parameters.speech_pad_ms * SAMPLE_RATE / 1000)
        self._min_speech = int(self.vad_parameters.min_speech_duration_ms * SAMPLE_RATE / 1000)

        self._lock = threading.Lock()  # state readers see: pending, segments, tentative, finished
        self._work = threading.Lock()  # held by the one push (or finish) that transcribes
        self._pending: list[np.ndarray] = []
        self._pushed = 0
        self._finished = False
        self._segments: list[Segment] = []
        self._tentative = ""

        vad.reset()
        self._gate = SpeechGate(self.vad_parameters, SAMPLE_RATE)
        self._audio = np.zeros(0, np.float32)  # held samples, the first at absolute sample _audio_start
        self._audio_start = 0
        self._slice_start: int | None = None  # absolute sample where the open stretch's buffer starts
        self._context_start: int | None = None  # buffer start kept from a closed stretch (left context)
        self._context_cuts: list[int] = []  # sentence ends in that context where it may be cut
        self._speech_start = 0  # where the VAD heard speech start (before padding is taken off)
        self._last_hypothesis = 0  # buffer end of the last transcription
        self._hypothesis_segments: list[Segment] = []
        self._agreement = LocalAgreement(agreement)
        self._prompt_words: deque[tuple[TimedWord, list[int]]] = deque(maxlen=_PROMPT_WORDS)  # with tokens
        self._last_request: tuple | None = None  # what the last hypothesis transcribed, and its words
        self._last_words: list[TimedWord] = []
        self._last_fresh = False
        self._forced_prefix = bool(forced_prefix)
        self._timestamp_begin = model.data.special.timestamp_begin

    # ------------------------------------------------------------------ public

    @property
    def segments(self) -> list[Segment]:
        """Every segment committed so far (a copy of the list)."""
        with self._lock:
            return list(self._segments)

    @property
    def tentative(self) -> str:
        """The words heard after the committed ones, not final yet ("" when none)."""
        with self._lock:
            return self._tentative

    @property
    def text(self) -> str:
        """The committed text so far."""
        with self._lock:
            return "".join(s.text for s in self._segments).strip()

    @property
    def pushed_seconds(self) -> float:
        """Seconds of audio accepted by push() so far."""
        with self._lock:
            return self._pushed / SAMPLE_RATE

    @property
    def buffer_seconds(self) -> float:
        """Seconds of audio the stream holds now (the open stretch or the pre-roll, plus queued pushes)."""
        with self._lock:
            queued = sum(c.size for c in self._pending)
            return (self._audio.size + queued) / SAMPLE_RATE

    @property
    def finished(self) -> bool:
        """Whether finish() was called."""
        with self._lock:
            return self._finished

    def push(self, samples: np.ndarray) -> list[Segment]:
        """Adds samples; returns the segments this push committed (see the class docstring)."""
        chunk = self._check(samples)
        with self._lock:
            if self._finished:
                raise StreamFinishedError("push() after finish(): the stream is closed; start a new one with "
                                          "model.stream()")
            if chunk.size:
                self._pending.append(chunk)
                self._pushed += chunk.size
        if not self._work.acquire(blocking=False):
            return []  # another thread is transcribing; it or the next push takes these samples
        try:
            before = self.tentative
            committed = self._run(final=False)
        finally:
            self._work.release()
        self._notify(committed, before)
        return committed

    def finish(self) -> list[Segment]:
        """Transcribes what is queued, closes the open stretch with a final pass and returns what
        that committed. Later pushes raise StreamFinishedError; finish() again returns []."""
        with self._work:
            with self._lock:
                if self._finished:
                    return []
                self._finished = True
                before = self._tentative
            committed = self._run(final=True)
        self._notify(committed, before)
        return committed

    def transcript(self) -> Transcript:
        """The committed segments as a Transcript (for the file writers)."""
        segments = self.segments
        return Transcript(text="".join(s.text for s in segments).strip(), segments=segments,
                          language=self._language or "en")

    # ------------------------------------------------------------------ work

    def _check(self, samples: np.ndarray) -> np.ndarray:
        array = np.asarray(samples)
        if array.ndim == 1 and array.size == 0 and array.dtype.kind == "f":
            return np.zeros(0, np.float32)
        return check_samples(array)

    def _run(self, final: bool) -> list[Segment]:
        with self._lock:
            chunks, self._pending = self._pending, []
        committed: list[Segment] = []
        data = np.concatenate(chunks) if len(chunks) > 1 else (chunks[0] if chunks else np.zeros(0, np.float32))
        # Pieces of at most max_step_seconds keep the buffer within its limit however large a push is.
        for i in range(0, data.size, self._max_step):
            committed += self._piece(data[i:i + self._max_step])
        if final and self._slice_start is not None:
            committed += self._close(self._audio_end, self._gate.voiced_end)
        if final:
            self._set_tentative("")
        return committed

    @property
    def _audio_end(self) -> int:
        return self._audio_start + self._audio.size

    def _piece(self, piece: np.ndarray) -> list[Segment]:
        committed: list[Segment] = []
        self._audio = np.concatenate([self._audio, piece]) if self._audio.size else piece.copy()
        events = self._gate.feed(np.asarray(self.vad.push(piece), dtype=np.float64).ravel())
        for kind, position in events:
            if kind == "start":
                start = max(position, self._audio_start)
                self._slice_start = start if self._context_start is None else self._context_start
                self._context_start = None
                self._speech_start = position + self._pad
                self._last_hypothesis = start
            elif self._slice_start is not None:
                committed += self._close(min(position, self._audio_end), position - self._pad)
        if self._slice_start is None:
            if self._context_start is not None:
                if self._audio_end - self._gate.voiced_end > self._context_gap:
                    self._context_start = None
                elif self._audio_end - self._context_start > self._trim:
                    # Too long a context: keep its last sentences (a cut at a sentence end), or none.
                    cut = self._keep_from(self._context_cuts, self._audio_end)
                    self._context_start = cut if cut is not None and cut > self._context_start else None
            if self._context_start is None:
                self._drop_before(self._audio_end - self._pad - WINDOW)
        elif self._audio_end - self._last_hypothesis >= self._min_step:
            committed += self._step()
        return committed

    def _step(self) -> list[Segment]:
        """One transcription of the open stretch: commit what the last two agree on, then keep the
        buffer within its limits."""
        start, end = self._slice_start, self._audio_end
        if end - start < self._min_speech:
            return []
        agreement = self._agreement
        # A word the hypotheses agree on but are unsure of: this transcription decodes with a beam
        # (once per committed prefix), and what it agrees on with the hypothesis before is committed.
        confirm = (self._confirm_options is not None and agreement.held is not None
                   and self._confirmed_at != agreement.committed_end)
        if confirm:
            self._confirmed_at = agreement.committed_end
        words, fresh = self._hypothesis(start, end, self._gate.voiced_end,
                                        options=self._confirm_options if confirm else None)
        committed = self._segments_of(agreement.insert(words, end / SAMPLE_RATE, self._edge_hold, fresh,
                                                       0.0 if confirm else self._commit_probability,
                                                       self._unsure_agreement))
        self._set_tentative("".join(w.text for w in self._agreement.tentative).strip())
        if end - start > self._trim:
            committed += self._limit(end)
        return committed

    def _limit(self, end: int) -> list[Segment]:
        """Cuts the buffer at a committed sentence end past trim_seconds (keeping up to two thirds
        of trim_seconds of audio as left context); forces it under max_buffer_seconds."""
        done = self._agreement.committed_end
        cut = self._keep_from(self._cuts(sentences=True), end)
        if cut is None and end - self._slice_start > self._max_buffer - self._max_step:
            cut = self._keep_from(self._cuts(sentences=False), end)
            if cut is None and done > self._slice_start / SAMPLE_RATE + 1.0:
                cut = int(round(done * SAMPLE_RATE))
            elif cut is None:  # nothing committed in a full buffer: a final pass over it, then a fresh buffer
                committed = self._segments_of(self._agreement.flush())
                self._set_tentative("")
                self._cut(end)
                return committed
        if cut is not None:
            self._cut(cut)
        return []

    def _cuts(self, sentences: bool) -> list[int]:
        """Absolute samples where the buffer may be cut, in order: in the gap after each committed
        word of the last hypothesis that ends a sentence (when `sentences`; Whisper's segments
        often run over several sentences) or its segment, halfway to the next word. A cut at a
        word's aligned edge clips it: the alignment is off by a few hundredths of a second either
        way, and Whisper then hears the clipped word at the buffer's start as another one ('sells'
        as 'tells')."""
        done = self._agreement.committed_end
        words = [(w, k == len(seg.words) - 1) for seg in self._hypothesis_segments
                 for k, w in enumerate(seg.words or [])]
        cuts = []
        for (word, segment_end), (following, _) in zip(words, words[1:]):
            if word.end > done + 1e-6:
                break
            if word.word.rstrip().endswith((".", "?", "!")) if sentences else segment_end:
                middle = (word.end + max(following.start, word.end)) / 2
                cuts.append(int(round(middle * SAMPLE_RATE)))
        return cuts

    def _keep_from(self, cuts: list[int], end: int) -> int | None:
        """The earliest cut leaving at most two thirds of trim_seconds before `end`, else the last
        cut (None when there is none)."""
        keep = self._trim * 2 // 3
        for cut in cuts:
            if end - cut <= keep:
                return cut
        return cuts[-1] if cuts else None

    def _cut(self, position: int) -> None:
        position = min(max(position, self._slice_start), self._audio_end)
        self._slice_start = position
        self._drop_before(position)

    def _close(self, end: int, voiced_end: int) -> list[Segment]:
        """The final pass over the stretch that ends at `end`: every word it hears is committed."""
        start = self._slice_start
        self._slice_start = None
        committed: list[Segment] = []
        if end - self._speech_start >= self._min_speech or self._agreement.tentative:
            words, fresh = self._hypothesis(start, end, voiced_end, final=True) if end > start else ([], False)
            committed = self._segments_of(self._agreement.flush(words, fresh))
        else:
            self._agreement.forget()
        self._set_tentative("")
        if self._agreement.committed_end > start / SAMPLE_RATE:
            # The stretch stays in the buffer as left context for the next one, if that follows
            # within context_gap_seconds: tiny models hear a sentence better after the one before
            # (a stretch that starts with no context loses words: 'a warm cup of tea' heard as
            # 'Warren Compunti'). Where a long one may be cut is kept with it.
            self._context_start = start
            self._context_cuts = self._cuts(sentences=True)
        else:
            self._drop_before(end)
        return committed

    def _drop_before(self, position: int) -> None:
        drop = min(max(position - self._audio_start, 0), self._audio.size)
        if drop:
            self._audio = self._audio[drop:].copy()
            self._audio_start += drop

    def _hypothesis(self, start: int, end: int, voiced_end: int, final: bool = False,
                    options: DecodingOptions | None = None) -> tuple[list[TimedWord], bool]:
        """The words Whisper hears in the buffer [start, end) (absolute samples; with the final pass's options
        when `final`), less those that start after voiced_end and those of segments whose no-speech
        probability is above the threshold: Whisper fills the silence after an abrupt end with text
        ("Thank you."), in a segment of its own placed at the very end, where the VAD heard nothing."""
        offset = start / SAMPLE_RATE
        limit = end / SAMPLE_RATE
        voiced = voiced_end / SAMPLE_RATE
        prompt = list(self._initial_tokens)
        forced: list[tuple[TimedWord, list[int]]] = []
        for word, tokens in self._prompt_words:
            if word.end <= offset + 1e-6:
                prompt += tokens
            elif self._forced_prefix:
                forced.append((word, tokens))
        prefix = self._prefix_tokens(forced, offset)
        base = options if options is not None else self._final_options if final else self._hyp_options
        request = (start, end, voiced_end, tuple(prompt), tuple(prefix), self._language, base.beam_size)
        if request == self._last_request:
            # The same audio with the same prompt (finish() right after a push, a stretch closed
            # where the last transcription ended): Whisper would hear the same words again.
            self._last_hypothesis = end
            return list(self._last_words), self._last_fresh
        audio = self._audio[start - self._audio_start:end - self._audio_start]
        # A bound on the tokens of a buffer (speech runs at 3-5 tokens a second) keeps a decoding
        # loop from costing a whole window's 224 tokens on every push; the forced prefix holds
        # those of the committed words, so only the rest is bounded.
        seconds_left = (end - (int(round(forced[-1][0].end * SAMPLE_RATE)) if forced else start)) / SAMPLE_RATE
        max_tokens = min(int(_TOKENS_PER_SECOND * max(seconds_left, 0.0)) + 16, 224)
        if self.options.max_new_tokens is not None:
            max_tokens = min(max_tokens, self.options.max_new_tokens)
        options = replace(base, language=self._language, max_new_tokens=max_tokens)
        result = self.model.transcribe_window(audio, options, prompt, prefix=prefix)
        if self._language is None and result.language is not None:
            self._language = result.language
        self._last_hypothesis = end
        # The forced words come back first (the prefix is their text); they are committed
        # already, so they are dropped here by position, whatever times the alignment gives them.
        expected = [w.key for w, _ in forced]
        matched = 0
        left = False  # past the forced words (or off them: a token glued onto the last one)
        segments: list[Segment] = []
        words: list[TimedWord] = []
        no_speech = self.options.no_speech_threshold
        for seg in result.segments:
            seg_words = []
            for w in seg.words or []:
                key = word_key(w.word)
                if not left and matched < len(expected) and key == expected[matched]:
                    matched += 1
                    continue
                left = left or bool(key)
                if offset + w.start < voiced:
                    seg_words.append(w)
            if no_speech is not None and seg.no_speech_prob > no_speech:
                continue  # a window Whisper itself hears no speech in (the long-form loop also
                # wants a low log-probability; in a stream that window is the silence after the end)
            index = len(segments)  # the word's segment in _hypothesis_segments
            timed = [TimedWord(min(offset + w.start, limit), min(offset + w.end, limit), w.word, w.probability,
                               index) for w in seg_words]
            segments.append(replace(seg, start=min(offset + seg.start, limit), end=min(offset + seg.end, limit),
                                    words=[Word(w.start, w.end, w.text, w.probability) for w in timed]))
            words += timed
        fresh = bool(forced) and matched == len(forced)
        self._hypothesis_segments = segments
        self._last_request, self._last_words, self._last_fresh = request, words, fresh
        return list(words), fresh

    def _prefix_tokens(self, forced: list[tuple[TimedWord, list[int]]], offset: float) -> list[int]:
        """The forced decoder prefix of a hypothesis: the committed words inside the buffer as
        Whisper writes them, one timestamped segment per sentence (<|start|> text <|end|>), the
        last one left open so that the decoding continues it."""
        if not forced:
            return []
        tb = self._timestamp_begin

        def stamp(t: float, floor: int) -> int:
            return max(tb + min(max(int(round((t - offset) / TIME_PRECISION)), 0), _LAST_TIMESTAMP), floor)

        tokens: list[int] = []
        floor = tb
        opened = False
        for k, (word, word_tokens) in enumerate(forced):
            if not opened:
                tokens.append(stamp(word.start, floor))
                floor = tokens[-1]
                opened = True
            tokens += word_tokens
            if word.text.rstrip().endswith((".", "?", "!")) and k + 1 < len(forced):
                tokens.append(stamp(word.end, floor + 1))
                floor = tokens[-1]
                opened = False
        return tokens

    def _segments_of(self, words: list[TimedWord]) -> list[Segment]:
        """Committed words as segments: one per run of words from one Whisper segment."""
        out: list[Segment] = []
        runs: list[list[TimedWord]] = []
        for w in words:
            if runs and runs[-1][-1].segment == w.segment:
                runs[-1].append(w)
            else:
                runs.append([w])
        word_tokens = [self._tokenizer.encode(w.text) for w in words]
        self._prompt_words.extend(zip(words, word_tokens))
        tokens_of = dict(zip(map(id, words), word_tokens))
        with self._lock:
            for run in runs:
                text = "".join(w.text for w in run)
                source = self._hypothesis_segments[run[0].segment] if run[0].segment < len(
                    self._hypothesis_segments) else None
                seg = Segment(id=len(self._segments), seek=int(run[0].start * SAMPLE_RATE) // HOP_LENGTH,
                              start=round(run[0].start, 3), end=round(max(run[-1].end, run[0].start), 3), text=text,
                              tokens=[t for w in run for t in tokens_of[id(w)]],
                              temperature=source.temperature if source else 0.0,
                              avg_logprob=source.avg_logprob if source else 0.0,
                              compression_ratio=source.compression_ratio if source else 0.0,
                              no_speech_prob=source.no_speech_prob if source else 0.0,
                              words=[Word(round(w.start, 3), round(w.end, 3), w.text, w.probability) for w in run]
                              if self._want_words else None)
                self._segments.append(seg)
                out.append(seg)
        return out

    def _set_tentative(self, text: str) -> None:
        with self._lock:
            self._tentative = text

    def _notify(self, committed: list[Segment], tentative_before: str) -> None:
        if committed and self.on_commit is not None:
            self.on_commit(committed)
        if self.on_tentative is not None:
            text = self.tentative
            if text != tentative_before:
                self.on_tentative(text)
