"""Transcripts written as plain text, subtitles (SRT, WebVTT), TSV and JSON.

The formats are those openai-whisper's command line writes, so files made here
open in the same players and scripts:

- txt: one line per segment, the segment's text stripped.
- srt: numbered cues, times ``HH:MM:SS,mmm``.
- vtt: ``WEBVTT`` then cues, times ``HH:MM:SS.mmm``.
- tsv: a ``start<TAB>end<TAB>text`` header, then start and end in integer
  milliseconds.
- json: the transcript's text and language and every segment with its fields
  (and its words, when word timestamps were asked for); a number that is not
  finite is written as null.

Hours take as many digits as they need (at least two). Times are rounded to
the nearest millisecond. A time that is negative or not finite is a bug
upstream, so it raises WhisperError instead of being written.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Callable, TextIO

from .errors import WhisperError

FORMATS = ("txt", "vtt", "srt", "tsv", "json")


def _milliseconds(seconds: float) -> int:
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise WhisperError(f"cannot write the time {seconds!r}: times must be finite and non-negative")
    return int(round(seconds * 1000.0))


def format_timestamp(seconds: float, decimal_marker: str = ".") -> str:
    """``HH:MM:SS<marker>mmm`` for a time in seconds (SRT uses ",", WebVTT ".")."""
    ms = _milliseconds(seconds)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal_marker}{ms:03d}"


def _cue_text(text: str) -> str:
    # "-->" inside a cue would be read as a timing line by SRT and WebVTT parsers, and a blank
    # line would end the cue early. Replaced until none is left: one pass turns "--->" into "-->".
    while "-->" in text:
        text = text.replace("-->", "->")
    lines = [line.strip() for line in text.strip().splitlines()]
    return "\n".join(line for line in lines if line)


def write_txt(transcript: Any, out: TextIO) -> None:
    """One line per segment."""
    for segment in transcript.segments:
        out.write(segment.text.strip() + "\n")


def write_srt(transcript: Any, out: TextIO) -> None:
    """SubRip cues numbered from 1; segments with no text are left out."""
    index = 0
    for segment in transcript.segments:
        text = _cue_text(segment.text)
        if not text:
            continue
        index += 1
        out.write(f"{index}\n{format_timestamp(segment.start, ',')} --> "
                  f"{format_timestamp(segment.end, ',')}\n{text}\n\n")


def write_vtt(transcript: Any, out: TextIO) -> None:
    """WebVTT cues; segments with no text are left out."""
    out.write("WEBVTT\n\n")
    for segment in transcript.segments:
        text = _cue_text(segment.text)
        if not text:
            continue
        out.write(f"{format_timestamp(segment.start)} --> {format_timestamp(segment.end)}\n{text}\n\n")


def write_tsv(transcript: Any, out: TextIO) -> None:
    """start, end (integer milliseconds) and text, tab separated, under a header line."""
    out.write("start\tend\ttext\n")
    for segment in transcript.segments:
        text = " ".join(segment.text.replace("\t", " ").split())
        out.write(f"{_milliseconds(segment.start)}\t{_milliseconds(segment.end)}\t{text}\n")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        # JSON has no NaN or infinity (e.g. the log-probability of a window with no tokens).
        return None
    return value


def segment_dict(segment: Any) -> dict[str, Any]:
    """A segment's fields as JSON-ready values; ``words`` only when the segment has words."""
    result = _plain(segment)
    if result.get("words") is None:
        result.pop("words", None)
    return result


def transcript_dict(transcript: Any) -> dict[str, Any]:
    """text, language (None when unknown) and segments of a transcript, as JSON-ready values."""
    return {"text": transcript.text, "language": getattr(transcript, "language", None),
            "segments": [segment_dict(s) for s in transcript.segments]}


def write_json(transcript: Any, out: TextIO) -> None:
    """transcript_dict() as one JSON document."""
    json.dump(transcript_dict(transcript), out, ensure_ascii=False, allow_nan=False)
    out.write("\n")


WRITERS: dict[str, Callable[[Any, TextIO], None]] = {
    "txt": write_txt, "vtt": write_vtt, "srt": write_srt, "tsv": write_tsv, "json": write_json}


def render(transcript: Any, fmt: str) -> str:
    """The transcript in one of FORMATS, as a string."""
    writer = _writer(fmt)
    buffer = io.StringIO()
    writer(transcript, buffer)
    return buffer.getvalue()


def write_files(transcript: Any, formats: str | list[str], output_dir: str | os.PathLike,
                stem: str) -> list[Path]:
    """Writes ``output_dir/stem.<fmt>`` for each format ("all" means every one); returns the paths.

    Each file is rendered completely before it is opened, so an error leaves no half-written file.
    """
    names = list(FORMATS) if formats == "all" else [formats] if isinstance(formats, str) else list(formats)
    rendered = [(fmt, render(transcript, fmt)) for fmt in names]
    directory = Path(output_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WhisperError(f"{directory}: cannot create the output directory ({exc.strerror})") from None
    paths = []
    for fmt, text in rendered:
        path = directory / f"{stem}.{fmt}"
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise WhisperError(f"{path}: cannot write ({exc.strerror})") from None
        paths.append(path)
    return paths


def _writer(fmt: str) -> Callable[[Any, TextIO], None]:
    try:
        return WRITERS[fmt]
    except (KeyError, TypeError):
        raise WhisperError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)} or 'all'") from None
