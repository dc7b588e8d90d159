"""What transcription returns: the Transcript, its timed Segments and their Words."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Word:
    """One word of a segment: start and end in seconds from the start of the audio, the word's
    text (with its leading space, as the tokens spell it) and the mean probability of its tokens."""

    start: float
    end: float
    word: str
    probability: float


@dataclass
class Segment:
    """A stretch of speech between two timestamps (a whole window when decoding without timestamps).

    id counts segments from 0; seek is the first mel frame (10 ms each) of the window it was
    decoded in; start and end are seconds from the start of the audio; tokens are the segment's
    text tokens only (no timestamp tokens). temperature, avg_logprob, compression_ratio and
    no_speech_prob describe the decoding of its window (the temperature that was kept after
    fallback). words is filled when word timestamps were asked for.
    """

    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: list[Word] | None = None


@dataclass
class Transcript:
    """Result of transcribe(): the whole text, the segments, the language (detected or given) with
    its probability (1.0 when it was given or the model is English-only; language None when it was
    to be detected but the audio was silent throughout), and timings in seconds."""

    text: str
    segments: list[Segment]
    language: str | None = "en"
    language_probability: float = 1.0
    timings: dict[str, float] = field(default_factory=dict)
