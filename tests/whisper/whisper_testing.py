"""Helpers shared by the Whisper tests: expected transcripts, text normalisation, optional dependencies."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import numpy as np
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


# ggml type ids -> (values per block, bytes per block), from ggml.c's type traits: the types a
# whisper.cpp .bin file holds (f32, f16, q4_0, q4_1, q5_0, q5_1, q8_0).
GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34)}


def walk_ggml_file(path) -> tuple[tuple[int, ...], int, dict[str, tuple[int, tuple[int, ...], bytes]]]:
    """(hparams, n_words, {name: (ggml type, ne, data bytes)}) of a whisper.cpp .bin file, read by hand
    from whisper.cpp's layout (magic, 11 hparams, mel filters, vocabulary, tensors), independently of
    metal_backend's reader, so the tests check the reader and writer against the format itself."""
    raw = Path(path).read_bytes()
    assert struct.unpack_from("<I", raw, 0)[0] == 0x67676D6C
    hparams = struct.unpack_from("<11i", raw, 4)
    pos = 48
    n_mel, n_fft = struct.unpack_from("<2i", raw, pos)
    pos += 8 + 4 * n_mel * n_fft
    (n_words,) = struct.unpack_from("<i", raw, pos)
    pos += 4
    for _ in range(n_words):
        pos += 4 + struct.unpack_from("<I", raw, pos)[0]
    tensors = {}
    while pos < len(raw):
        n_dims, name_len, ttype = struct.unpack_from("<3i", raw, pos)
        ne = struct.unpack_from(f"<{n_dims}i", raw, pos + 12)
        pos += 12 + 4 * n_dims
        name = raw[pos:pos + name_len].decode()
        pos += name_len
        block, nbytes = GGML_BLOCKS[ttype]
        size = int(np.prod(ne)) // block * nbytes
        tensors[name] = (ttype, ne, raw[pos:pos + size])
        pos += size
    assert pos == len(raw)
    return hparams, n_words, tensors


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
