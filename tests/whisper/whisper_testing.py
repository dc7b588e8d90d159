"""Helpers shared by the Whisper tests: expected transcripts, text normalisation, optional dependencies."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# One normalisation and WER for the tests and the benchmarks: re-exported, imported from here by the
# tests (test_whisper_longform.py and others), so unused in this file.
from metal_backend.whisper.scoring import normalize  # noqa: F401 (re-export)
from metal_backend.whisper.scoring import wer as word_error_rate  # noqa: F401 (re-export)

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "audio"

JFK_TEXT = ("And so my fellow Americans, ask not what your country can do for you, "
            "ask what you can do for your country.")
DOOR_TEXT = "Please open the door and turn on the light."
MORNING_TEXT = "Good morning. How are you today?"


def require(available: bool, what: str) -> None:
    """Skips (developer machine) or fails (CI) when an optional dependency is missing."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI is missing {what}", pytrace=False)
    pytest.skip(f"missing {what}")


_CUE_TIME = r"(\d{{2,}}):(\d{{2}}):(\d{{2}})[{sep}](\d{{3}})"


def _seconds(h: str, m: str, s: str, ms: str) -> float:
    return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000


def parse_cues(text: str, kind: str) -> list[tuple[float, float, str]]:
    """(start, end, text) of every cue of an SRT or WebVTT document, parsed strictly.

    An independent reader for the writers' output: each cue is an optional (SRT: required,
    counting from 1) number line, a timing line and text lines, followed by a blank line.
    """
    sep = "," if kind == "srt" else "."
    timing = re.compile(_CUE_TIME.format(sep=sep) + " --> " + _CUE_TIME.format(sep=sep) + "$")
    blocks = [b for b in text.split("\n\n") if b.strip()]
    if kind == "vtt":
        assert blocks and blocks[0] == "WEBVTT", blocks[:1]
        blocks = blocks[1:]
    cues = []
    for i, block in enumerate(blocks):
        lines = block.strip("\n").split("\n")
        if kind == "srt":
            assert lines[0] == str(i + 1), lines
            lines = lines[1:]
        match = timing.match(lines[0])
        assert match, lines[0]
        g = match.groups()
        cues.append((_seconds(*g[:4]), _seconds(*g[4:]), "\n".join(lines[1:])))
    return cues
