"""Subtitle, text and JSON writers on synthetic transcripts, read back by independent parsers."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from metal_backend.whisper import Segment, Transcript, WhisperError, Word
from metal_backend.whisper.writers import FORMATS, format_timestamp, render, write_files
from whisper_testing import parse_cues

TEXTS = [" Hello there.", " It is 3 --> 4 o'clock.", "   ", " Tabs\there and an\nembedded line."]


def make_segment(i: int, start: float, end: float, text: str, words=None) -> Segment:
    return Segment(id=i, seek=0, start=start, end=end, text=text, tokens=[1, 2, i], temperature=0.0,
                   avg_logprob=-0.25, compression_ratio=1.5, no_speech_prob=0.01, words=words)


def make_transcript(times: list[tuple[float, float]], words: bool = False) -> Transcript:
    segments = []
    for i, ((start, end), text) in enumerate(zip(times, TEXTS)):
        ws = None
        if words:
            ws = [Word(start=start, end=(start + end) / 2, word=" first", probability=0.5),
                  Word(start=(start + end) / 2, end=end, word=" second", probability=0.75)]
        segments.append(make_segment(i, start, end, text, ws))
    return Transcript(text="".join(s.text for s in segments).strip(), segments=segments, language="en",
                      language_probability=1.0, timings={})


TIMES = [(0.0, 1.5), (62.345, 64.0), (64.0, 70.0), (3723.4567, 3725.0)]


@pytest.mark.parametrize("seconds,srt,vtt", [
    (0.0, "00:00:00,000", "00:00:00.000"),
    (62.345, "00:01:02,345", "00:01:02.345"),
    (3723.4567, "01:02:03,457", "01:02:03.457"),
    (59.9996, "00:01:00,000", "00:01:00.000"),
    (360000.0, "100:00:00,000", "100:00:00.000"),
])
def test_format_timestamp(seconds, srt, vtt):
    assert format_timestamp(seconds, ",") == srt
    assert format_timestamp(seconds) == vtt


@pytest.mark.parametrize("bad", [-0.001, math.nan, math.inf])
def test_bad_times_raise(bad):
    with pytest.raises(WhisperError, match="finite and non-negative"):
        format_timestamp(bad)
    with pytest.raises(WhisperError):
        render(make_transcript([(0.0, bad)]), "srt")


@pytest.mark.parametrize("kind", ["srt", "vtt"])
def test_cues_read_back(kind):
    cues = parse_cues(render(make_transcript(TIMES), kind), kind)
    # The blank segment has no cue; "-->" in text is defused; lines are kept.
    assert [c[2] for c in cues] == ["Hello there.", "It is 3 -> 4 o'clock.", "Tabs\there and an\nembedded line."]
    expected = [TIMES[0], TIMES[1], TIMES[3]]
    for (start, end, _), (s, e) in zip(cues, expected):
        assert start == pytest.approx(s, abs=5e-4) and end == pytest.approx(e, abs=5e-4)


def test_tsv_integer_milliseconds():
    rows = list(csv.reader(io.StringIO(render(make_transcript(TIMES), "tsv")), delimiter="\t"))
    assert rows[0] == ["start", "end", "text"]
    assert [(int(r[0]), int(r[1])) for r in rows[1:]] == [(0, 1500), (62345, 64000), (64000, 70000),
                                                           (3723457, 3725000)]
    assert [r[2] for r in rows[1:]] == ["Hello there.", "It is 3 --> 4 o'clock.", "", "Tabs here and an embedded line."]


def test_txt_one_line_per_segment():
    assert render(make_transcript(TIMES), "txt").split("\n") == [
        "Hello there.", "It is 3 --> 4 o'clock.", "", "Tabs\there and an\nembedded line.".split("\n")[0],
        "embedded line.", ""]


@pytest.mark.parametrize("words", [False, True])
def test_json(words):
    transcript = make_transcript(TIMES, words=words)
    doc = json.loads(render(transcript, "json"))
    assert doc["text"] == transcript.text and doc["language"] == "en"
    assert len(doc["segments"]) == len(TIMES)
    for seg, s in zip(doc["segments"], transcript.segments):
        assert seg["id"] == s.id and seg["start"] == s.start and seg["end"] == s.end and seg["text"] == s.text
        assert seg["tokens"] == s.tokens and seg["avg_logprob"] == s.avg_logprob
        if words:
            assert seg["words"] == [{"start": w.start, "end": w.end, "word": w.word, "probability": w.probability}
                                    for w in s.words]
        else:
            assert "words" not in seg


def test_write_files_all(tmp_path):
    paths = write_files(make_transcript(TIMES), "all", tmp_path / "out", "talk")
    assert [p.name for p in paths] == [f"talk.{f}" for f in FORMATS]
    assert all(p.read_text(encoding="utf-8") for p in paths)


def test_unknown_format(tmp_path):
    with pytest.raises(WhisperError, match="unknown output format 'doc'"):
        write_files(make_transcript(TIMES), "doc", tmp_path, "talk")
    assert list(tmp_path.iterdir()) == []


def test_output_dir_is_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(WhisperError, match="cannot create the output directory"):
        write_files(make_transcript(TIMES), "txt", blocker, "talk")
