"""SpeechGate: where speech starts and ends in a live stream, from per-window VAD probabilities.

Silero's rule (get_speech_timestamps), applied as the probabilities arrive: a window whose
probability is at least `threshold` starts speech; speech ends once `min_silence_ms` of windows in
a row fall below `neg_threshold` (default threshold - 0.15, at least 0.01), at the start of that
silence. Both ends are widened by `speech_pad_ms`. The stream does not transcribe a stretch whose
speech is shorter than `min_speech_duration_ms` (a click, a cough).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import WhisperError

WINDOW = 512  # samples per Silero window at 16 kHz (32 ms)


@dataclass(frozen=True)
class VadParameters:
    """The stream's VAD settings (silero-vad's names; see SpeechGate)."""

    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_duration_ms: int = 250
    min_silence_duration_ms: int = 300
    speech_pad_ms: int = 100

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise WhisperError(f"VAD threshold must be in (0, 1) (got {self.threshold!r})")
        if self.neg_threshold is not None and not 0.0 < self.neg_threshold <= self.threshold:
            raise WhisperError(f"VAD neg_threshold must be in (0, threshold] (got {self.neg_threshold!r})")
        for name in ("min_speech_duration_ms", "min_silence_duration_ms", "speech_pad_ms"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 10_000:
                raise WhisperError(f"VAD {name} must be 0..10000 ms (got {value!r})")

    @property
    def low(self) -> float:
        """The probability below which a window counts as silence."""
        if self.neg_threshold is not None:
            return self.neg_threshold
        return max(self.threshold - 0.15, 0.01)


class SpeechGate:
    """Turns a stream of per-window probabilities into speech start and end sample positions.

    feed(probabilities) takes the probabilities of the next complete windows and returns the
    events they decide, in order: ("start", sample) and ("end", sample), samples counted from the
    start of the stream, padding applied (a start is never before the end of the previous
    stretch). in_speech says whether a stretch is open; voiced_end is the sample where the last
    window that was not silence ended (no padding): no word can start after it.
    """

    def __init__(self, parameters: VadParameters, sample_rate: int = 16000):
        self.parameters = parameters
        self.in_speech = False
        self._windows = 0  # windows seen
        self._silence = 0  # windows below `low` in a row while in speech
        self._last_end = 0
        self.voiced_end = 0
        self._pad = int(parameters.speech_pad_ms * sample_rate / 1000)
        self._min_silence = max(1, -(-int(parameters.min_silence_duration_ms * sample_rate / 1000) // WINDOW))

    def feed(self, probabilities) -> list[tuple[str, int]]:
        p = self.parameters
        low = p.low
        events: list[tuple[str, int]] = []
        for prob in probabilities:
            start = self._windows * WINDOW
            self._windows += 1
            if not self.in_speech:
                if prob >= p.threshold:
                    self.in_speech = True
                    self._silence = 0
                    self.voiced_end = self._windows * WINDOW
                    events.append(("start", max(start - self._pad, self._last_end, 0)))
                continue
            if prob < low:
                self._silence += 1
                if self._silence >= self._min_silence:
                    silence_start = (self._windows - self._silence) * WINDOW
                    end = silence_start + self._pad
                    self.in_speech = False
                    self._last_end = end
                    events.append(("end", end))
            else:
                self._silence = 0
                self.voiced_end = self._windows * WINDOW
        return events
