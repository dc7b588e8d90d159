"""SpeechMap (joined speech -> original times) against a sample-by-sample table, and VadOptions'
checks of bad parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metal_backend.whisper import WhisperError
from metal_backend.whisper.batched import pack_chunks
from metal_backend.whisper.speech_map import EDGE_SLACK, SpeechMap
from metal_backend.whisper.transcript import Segment, Word
from metal_backend.whisper.vad_options import BATCHED_DEFAULTS, VadOptions, batched_vad_options

SR = 16000


def _table(spans, n):
    """original sample index of every joined sample: an independent reference."""
    return np.concatenate([np.arange(s, e) for s, e in spans])


def _segment(start, end, words=None):
    return Segment(id=0, seek=0, start=start, end=end, text=" x", tokens=[1], temperature=0.0, avg_logprob=-0.1,
                   compression_ratio=1.0, no_speech_prob=0.0, words=words)


SPANS = [(8000, 40000), (200000, 230000), (231000, 300000), (900000, 960000)]


def test_original_times_match_a_sample_table():
    n = 1_000_000
    m = SpeechMap(SPANS, n)
    table = _table(SPANS, n)
    rng = np.random.default_rng(0)
    for joined in rng.integers(0, table.size, 500):
        assert m.original_time(joined / SR) == pytest.approx(table[joined] / SR, abs=1e-3)
    assert m.points[0] == (0.0, 0.5) and m.points[-1] == (table.size / SR, 60.0)
    assert m.speech_seconds == table.size / SR
    samples = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(m.join(samples), samples[table])


def test_boundaries_starts_ends_and_words():
    m = SpeechMap(SPANS, 1_000_000)
    boundary = 32000 / SR  # joined end of span 0 = joined start of span 1
    assert m.original_time(boundary) == 200000 / SR
    assert m.original_time(boundary, is_end=True) == 40000 / SR
    # A word is mapped with the span of its middle: both edges stay in that span.
    seg = _segment(1.9, 2.3, [Word(1.9, 1.98, " a", 0.9), Word(1.98, 2.3, " b", 0.9)])
    m.restore([seg])
    assert seg.words[0].start == pytest.approx((8000 + 1.9 * SR) / SR)
    assert seg.words[1].start == pytest.approx(200000 / SR)  # clamped to its span's start
    assert seg.words[1].end == pytest.approx((200000 + 0.3 * SR) / SR)
    assert (seg.start, seg.end) == (seg.words[0].start, seg.words[1].end)
    # A segment starting just before a boundary it crosses starts at the next span.
    early = _segment(boundary - EDGE_SLACK / 2, boundary + 1.5)
    m.restore([early])
    assert early.start == pytest.approx(200000 / SR) and early.end == pytest.approx(200000 / SR + 1.5)
    # ...but not when the part before the boundary is longer than EDGE_SLACK.
    long = _segment(boundary - EDGE_SLACK - 0.5, boundary + 1.5)
    m.restore([long])
    assert long.start == pytest.approx(40000 / SR - EDGE_SLACK - 0.5)
    # An end just after a boundary ends at the previous span's end.
    late = _segment(0.5, boundary + EDGE_SLACK / 2)
    m.restore([late])
    assert late.end == pytest.approx(40000 / SR)


def test_from_seconds_rounds_clips_and_joins():
    m = SpeechMap.from_seconds([(-0.2, 1.0), (1.0, 2.0), (3.0, 3.0), (4.0, 99.0)], 5 * SR)
    assert m.spans == [(0, 2 * SR), (4 * SR, 5 * SR)]
    assert SpeechMap.from_seconds([], SR).spans == []


@pytest.mark.parametrize("spans", [[(5, 3)], [(0, 10), (5, 20)], [(0, 200)]])
def test_bad_spans(spans):
    with pytest.raises(WhisperError, match="sorted, disjoint and inside"):
        SpeechMap(spans, 100)


def test_pack_chunks_fills_30_s_with_whole_spans():
    spans = [(i * 20 * SR, i * 20 * SR + 12 * SR) for i in range(5)] + [(200 * SR, 275 * SR)]
    m = SpeechMap(spans, 300 * SR)
    chunks = pack_chunks(m)
    # 12 + 12 fit in 30 s, a third does not; the 75 s span is cut at 30 s steps.
    assert [(e - s) / SR for s, e in chunks] == [24, 24, 12, 30, 30, 15]
    assert chunks[0][0] == 0 and chunks[-1][1] == m.joined_ends[-1]
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))


def test_vad_options_defaults_and_batched():
    v = VadOptions()
    assert (v.threshold, v.min_speech_duration_ms, v.min_silence_duration_ms, v.speech_pad_ms) == (0.5, 0, 2000, 400)
    assert math.isinf(v.max_speech_duration_s)
    assert (BATCHED_DEFAULTS.max_speech_duration_s, BATCHED_DEFAULTS.min_silence_duration_ms) == (30, 160)
    assert batched_vad_options({"threshold": 0.6}).threshold == 0.6
    assert VadOptions.from_parameters({"speech_pad_ms": 30}).segment_arguments()["speech_pad_ms"] == 30


@pytest.mark.parametrize("parameters, match", [
    ({"treshold": 0.5}, "unknown vad_parameters 'treshold'"),
    ({"threshold": 1.5}, "threshold must be a probability.*1.5"),
    ({"threshold": float("nan")}, "threshold must be a probability"),
    ({"threshold": "0.5"}, "threshold must be a probability.*'0.5'"),
    ({"neg_threshold": 0.7}, r"neg_threshold must be in \(0, threshold=0.5\].*0.7"),
    ({"speech_pad_ms": -1}, "speech_pad_ms must be.*-1"),
    ({"min_silence_duration_ms": float("inf")}, "min_silence_duration_ms must be.*inf"),
    ({"min_speech_duration_ms": True}, "min_speech_duration_ms must be.*True"),
    ({"max_speech_duration_s": 0}, "max_speech_duration_s must be a positive.*0"),
    ({"max_speech_duration_s": 0.5}, "max_speech_duration_s=0.5 leaves no room"),
    ([("threshold", 0.5)], "must be a dict or VadOptions"),
])
def test_bad_vad_parameters(parameters, match):
    with pytest.raises(WhisperError, match=match):
        VadOptions.from_parameters(parameters)


def test_batched_needs_pieces_that_fit_a_window():
    with pytest.raises(WhisperError, match="max_speech_duration_s=60 is longer than a 30 s window"):
        batched_vad_options({"max_speech_duration_s": 60})
