"""Speech segments from per-window speech probabilities: silero-vad's get_speech_timestamps rules.

The rules are those of silero-vad's get_speech_timestamps as faster-whisper and whisper.cpp copy
it (silero-vad 6.2's `use_max_poss_sil_at_max_speech=False` branch):
- a window with probability >= threshold starts speech;
- while in speech, a window below neg_threshold (default max(threshold - 0.15, 0.01)) starts a
  possible end; speech that comes back (>= threshold) cancels it; once the silence has lasted
  min_silence_duration_ms the segment ends where the silence began, and is kept only when longer
  than min_speech_duration_ms;
- a segment reaching max_speech_duration_s (less one window and both pads) is cut at the start of
  the last silence longer than 98 ms, or where it is when there was none;
- a segment still open at the end runs to the end of the audio (kept when long enough);
- every segment is padded by speech_pad_ms on both sides, clipped to the audio; where two pads
  would overlap, the gap between the segments is split in half.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .errors import VadError

SAMPLE_RATE = 16000
WINDOW = 512
# A silence must last longer than this to be a place where an over-long segment may be cut.
MIN_SILENCE_AT_MAX_SPEECH_MS = 98


@dataclass(frozen=True)
class SegmentOptions:
    """The parameters of speech_segments (silero-vad's names and defaults), checked on creation."""

    threshold: float = 0.5
    min_speech_duration_ms: float = 250
    min_silence_duration_ms: float = 100
    max_speech_duration_s: float = float("inf")
    speech_pad_ms: float = 30
    neg_threshold: Optional[float] = None

    def __post_init__(self) -> None:
        def number(name: str) -> float:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise VadError(f"{name} must be a number (got {value!r})")
            if math.isnan(value):
                raise VadError(f"{name} must not be NaN")
            return float(value)

        threshold = number("threshold")
        if not 0.0 < threshold < 1.0:
            raise VadError(f"threshold must be in (0, 1) (got {threshold})")
        if self.neg_threshold is not None:
            neg = number("neg_threshold")
            if not 0.0 <= neg <= threshold:
                raise VadError(f"neg_threshold must be in [0, threshold={threshold}] (got {neg})")
        for name in ("min_speech_duration_ms", "min_silence_duration_ms", "speech_pad_ms"):
            value = number(name)
            if not 0.0 <= value < math.inf:
                raise VadError(f"{name} must be finite and >= 0 (got {value})")
        max_speech = number("max_speech_duration_s")
        # The cut point is max_speech_duration_s less one window and both pads: it must stay positive.
        floor = (WINDOW + 2 * SAMPLE_RATE * float(self.speech_pad_ms) / 1000) / SAMPLE_RATE
        if not max_speech > floor:
            raise VadError(f"max_speech_duration_s must exceed one window plus both pads ({floor:.3f} s) "
                           f"(got {max_speech})")


def speech_segments_from_probabilities(probabilities: Sequence[float] | np.ndarray, n_samples: int,
                                       options: SegmentOptions = SegmentOptions()) -> List[Tuple[int, int]]:
    """The speech segments [(start_sample, end_sample), ...] of audio of n_samples samples whose
    512-sample windows have these speech probabilities (window i starts at sample 512 i)."""
    probs = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    threshold = float(options.threshold)
    neg_threshold = (max(threshold - 0.15, 0.01) if options.neg_threshold is None
                     else float(options.neg_threshold))
    min_speech = SAMPLE_RATE * options.min_speech_duration_ms / 1000
    pad = SAMPLE_RATE * options.speech_pad_ms / 1000
    max_speech = SAMPLE_RATE * options.max_speech_duration_s - WINDOW - 2 * pad
    min_silence = SAMPLE_RATE * options.min_silence_duration_ms / 1000
    min_silence_at_max = SAMPLE_RATE * MIN_SILENCE_AT_MAX_SPEECH_MS / 1000

    segments: list[list[int]] = []
    start: Optional[int] = None     # the open segment's start (None: not in speech)
    silence_start = 0               # where the current silence inside speech began (0: none)
    last_cut = 0                    # start of the last silence longer than 98 ms in this segment
    restart = 0                     # where speech resumed after last_cut

    for i, p in enumerate(probs):
        sample = WINDOW * i
        if p >= threshold and silence_start:
            silence_start = 0
            if restart < last_cut:
                restart = sample
        if p >= threshold and start is None:
            start = sample
            continue
        if start is not None and sample - start > max_speech:
            if last_cut:
                segments.append([start, last_cut])
                start = None if restart < last_cut else restart
                last_cut = restart = silence_start = 0
            else:
                segments.append([start, sample])
                start = None
                last_cut = restart = silence_start = 0
                continue
        if p < neg_threshold and start is not None:
            if not silence_start:
                silence_start = sample
            if sample - silence_start > min_silence_at_max:
                last_cut = silence_start
            if sample - silence_start < min_silence:
                continue
            if silence_start - start > min_speech:
                segments.append([start, silence_start])
            start = None
            last_cut = restart = silence_start = 0

    if start is not None and n_samples - start > min_speech:
        segments.append([start, n_samples])

    for i, seg in enumerate(segments):
        if i == 0:
            seg[0] = int(max(0, seg[0] - pad))
        if i + 1 < len(segments):
            gap = segments[i + 1][0] - seg[1]
            if gap < 2 * pad:
                seg[1] += int(gap // 2)
                segments[i + 1][0] = int(max(0, segments[i + 1][0] - gap // 2))
            else:
                seg[1] = int(min(n_samples, seg[1] + pad))
                segments[i + 1][0] = int(max(0, segments[i + 1][0] - pad))
        else:
            seg[1] = int(min(n_samples, seg[1] + pad))
    return [(int(a), int(b)) for a, b in segments]
