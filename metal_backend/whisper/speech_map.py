"""SpeechMap: the speech of a recording cut out and joined, and the way back to its times.

VAD-gated transcription decodes only the speech: the spans the voice activity detector found are
joined end to end (as faster-whisper's collect_chunks does, nothing between them) and transcribed as
one recording. A time t of that joined audio lies in one span; its time in the original recording is
the span's original start plus t minus the span's start in the joined audio. The map is a table of
(joined, original) time points, two per span, searched by bisection (whisper.cpp keeps such a
table; faster-whisper's SpeechTimestampsMap adds the silence removed before the span).

A time exactly at the boundary of two spans belongs to the later span, except an end time (a
segment's or a word's end), which belongs to the span it ends. A word is mapped with the span of
its middle, so its start and end never fall into two different spans; a segment's edges that lie
just before (start) or just after (end) a boundary it crosses are moved across it
(SpeechMap.original_range).
"""

from __future__ import annotations

import bisect
from typing import Sequence

import numpy as np

from .audio import SAMPLE_RATE
from .errors import WhisperError
from .transcript import Segment

# Seconds: how far a segment's edge may lie past a span boundary it crosses and still be moved
# across it. Segment timestamps of small models are often up to a second early or late (tiny.en
# puts many on whole seconds: a sentence starting 0.67 s after a boundary got the start 6.00 s, before
# it); the pads of the VAD (400 ms by default) hold little speech. Word times are exact instead.
EDGE_SLACK = 1.0


class SpeechMap:
    """Speech spans [(start, end) in samples of the original audio], sorted and disjoint."""

    def __init__(self, spans: Sequence[tuple[int, int]], n_samples: int):
        previous_end = 0
        checked = []
        for start, end in spans:
            start, end = int(start), int(end)
            if not previous_end <= start < end <= n_samples:
                raise WhisperError(f"speech spans must be sorted, disjoint and inside the audio of {n_samples} "
                                   f"samples (got ({start}, {end}) after a span ending at {previous_end})")
            checked.append((start, end))
            previous_end = end
        self.spans = checked
        self.n_samples = n_samples
        lengths = np.array([e - s for s, e in checked], dtype=np.int64)
        # Joined start of each span, in samples.
        self.joined_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if checked else \
            np.zeros(0, np.int64)
        self.joined_ends = self.joined_starts + lengths

    @classmethod
    def from_seconds(cls, segments: Sequence[tuple[float, float]], n_samples: int) -> "SpeechMap":
        """The map of VAD segments [(start_s, end_s)] (SileroVad.speech_segments), rounded to samples;
        segments that touch or overlap after rounding are joined."""
        spans: list[tuple[int, int]] = []
        for start_s, end_s in segments:
            start = min(max(int(round(start_s * SAMPLE_RATE)), 0), n_samples)
            end = min(max(int(round(end_s * SAMPLE_RATE)), 0), n_samples)
            if end <= start:
                continue
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
            else:
                spans.append((start, end))
        return cls(spans, n_samples)

    def keep_short_gaps(self, max_gap: float, max_span: float) -> "SpeechMap":
        """The map with every gap between spans shorter than max_gap seconds kept in the audio
        (the span before it extended to the next one's start), where the extended span stays at
        most max_span seconds long; the spans stay separate (a chunk may still end between
        them). Batched transcription keeps the short pauses between sentences: tiny.en heard
        "The weather report" as "But when the report" once the 0.2 s left between two padded
        sentences was cut out."""
        gap, longest = int(round(max_gap * SAMPLE_RATE)), int(round(max_span * SAMPLE_RATE))
        spans = [list(span) for span in self.spans]
        for this, following in zip(spans, spans[1:]):
            if following[0] - this[1] < gap and following[0] - this[0] <= longest:
                this[1] = following[0]
        return SpeechMap([(start, end) for start, end in spans], self.n_samples)

    @property
    def points(self) -> list[tuple[float, float]]:
        """The (joined time, original time) points in seconds: each span's start and end."""
        result = []
        for (start, end), j_start, j_end in zip(self.spans, self.joined_starts, self.joined_ends):
            result += [(j_start / SAMPLE_RATE, start / SAMPLE_RATE), (j_end / SAMPLE_RATE, end / SAMPLE_RATE)]
        return result

    @property
    def speech_seconds(self) -> float:
        """Length of the joined speech."""
        return float(self.joined_ends[-1]) / SAMPLE_RATE if self.spans else 0.0

    def join(self, samples: np.ndarray) -> np.ndarray:
        """The speech of samples (the recording the map was made for), joined end to end."""
        if samples.shape[0] != self.n_samples:
            raise WhisperError(f"the speech map is for {self.n_samples} samples, got {samples.shape[0]}")
        if not self.spans:
            return np.zeros(0, np.float32)
        return np.ascontiguousarray(np.concatenate([samples[s:e] for s, e in self.spans]), dtype=np.float32)

    def span_index(self, joined_time: float, is_end: bool = False) -> int:
        """The span holding joined_time (seconds of the joined audio); see the module docstring for
        boundaries. Times past the end belong to the last span."""
        if not self.spans:
            raise WhisperError("the speech map has no speech spans")
        sample = joined_time * SAMPLE_RATE
        ends = self.joined_ends
        i = bisect.bisect_left(ends.tolist(), sample) if is_end else bisect.bisect_right(ends.tolist(), sample)
        return min(i, len(self.spans) - 1)

    def original_time(self, joined_time: float, span: int | None = None, is_end: bool = False) -> float:
        """The original time (seconds) of joined_time, inside span `span` (default: the one holding it)."""
        if span is None:
            span = self.span_index(joined_time, is_end)
        start, end = self.spans[span]
        t = start / SAMPLE_RATE + joined_time - self.joined_starts[span] / SAMPLE_RATE
        return round(min(max(t, start / SAMPLE_RATE), end / SAMPLE_RATE), 3)

    def restore(self, segments: Sequence[Segment]) -> None:
        """Moves segments (and their words) from joined times to original times, in place. A
        segment with words spans its first word's start to its last word's end."""
        for segment in segments:
            if segment.words:
                for word in segment.words:
                    span = self.span_index((word.start + word.end) / 2)
                    word.start = self.original_time(word.start, span)
                    word.end = self.original_time(word.end, span)
                segment.start = segment.words[0].start
                segment.end = segment.words[-1].end
            else:
                segment.start, segment.end = self.original_range(segment.start, segment.end)

    def original_range(self, start: float, end: float) -> tuple[float, float]:
        """Original (start, end) of a segment from start to end (joined seconds). An edge that lies
        within EDGE_SLACK of a span boundary the segment crosses moves across it (to the next span's
        start, or the previous span's end): timestamps run a little early or late, and the removed
        gap holds no speech."""
        first = self.span_index(start)
        if (first + 1 < len(self.spans) and end * SAMPLE_RATE > self.joined_ends[first]
                and self.joined_ends[first] - start * SAMPLE_RATE < EDGE_SLACK * SAMPLE_RATE):
            first += 1
            start = max(start, self.joined_starts[first] / SAMPLE_RATE)
        last = self.span_index(end, is_end=True)
        if (last > first and start * SAMPLE_RATE < self.joined_starts[last]
                and end * SAMPLE_RATE - self.joined_starts[last] < EDGE_SLACK * SAMPLE_RATE):
            last -= 1
            end = min(end, self.joined_ends[last] / SAMPLE_RATE)
        original_start = self.original_time(start, first)
        return original_start, max(self.original_time(end, max(last, first)), original_start)
