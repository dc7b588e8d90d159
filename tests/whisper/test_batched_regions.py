"""How batched transcription lays out its work (batched.py), without a model: regions of whole
chunks, windows cut at span boundaries, unfinished ends snapped to a boundary, prompts of one
length."""

from __future__ import annotations

import numpy as np

from metal_backend.whisper.batched import pack_chunks, snap_to_boundary, split_regions, window_end, window_prompts
from metal_backend.whisper.speech_map import SpeechMap

SR = 16000


def _map(seconds: list[tuple[float, float]], total: float) -> SpeechMap:
    return SpeechMap.from_seconds(seconds, int(total * SR))


def test_regions_are_runs_of_whole_chunks():
    # Ten 12 s spans: five chunks of two spans (24 s each).
    m = _map([(i * 13.0, i * 13.0 + 12.0) for i in range(10)], 131.0)
    chunks = pack_chunks(m)
    assert len(chunks) == 5
    regions = split_regions(chunks, 2)
    # Three chunks, then two; the regions tile the joined speech end to end.
    assert regions == [(chunks[0][0], chunks[2][1]), (chunks[3][0], chunks[4][1])]
    assert regions[0][1] == regions[1][0] and regions[-1][1] == m.joined_ends[-1]
    assert split_regions(chunks, 8) == chunks  # more rows than chunks: one chunk per region
    assert split_regions(chunks, 1) == [(0, chunks[-1][1])]
    assert split_regions([], 4) == []


def test_windows_end_at_the_last_boundary_within_30_s():
    boundaries = np.array([10, 20, 29, 35, 70], dtype=np.int64) * SR
    assert window_end(boundaries, 0, 70 * SR) == 29 * SR
    assert window_end(boundaries, 5 * SR, 70 * SR) == 35 * SR  # a window starts after a boundary too
    assert window_end(boundaries, 0, 20 * SR) == 20 * SR  # the region's end comes first
    assert window_end(boundaries, 21 * SR, 25 * SR) == 25 * SR
    # No boundary within 30 s (a span longer than a window): cut at 30 s.
    assert window_end(boundaries, 36 * SR, 70 * SR) == 66 * SR


def test_unfinished_ends_snap_to_a_boundary_within_a_second():
    boundaries = np.array([10, 20, 29], dtype=np.int64) * SR
    # The closing timestamp 0.6 s after the boundary at 20 s: the rest starts at the boundary.
    assert snap_to_boundary(boundaries, int(20.6 * SR), 0, 29 * SR) == 20 * SR
    assert snap_to_boundary(boundaries, int(19.2 * SR), 0, 29 * SR) == 20 * SR
    # 1.5 s away from any boundary: the timestamp itself.
    assert snap_to_boundary(boundaries, int(15.5 * SR), 0, 29 * SR) == int(15.5 * SR)
    # Only boundaries strictly inside the window count (not its start or end).
    assert snap_to_boundary(boundaries, int(10.4 * SR), 10 * SR, 29 * SR) == int(10.4 * SR)
    assert snap_to_boundary(boundaries, int(28.5 * SR), 10 * SR, 29 * SR) == int(28.5 * SR)


def test_prompts_are_each_historys_last_tokens():
    histories = [[1, 2, 3, 4, 5], [6, 7, 8], [9, 10, 11, 12]]
    assert window_prompts(histories, 223) == histories
    assert window_prompts(histories, 2) == [[4, 5], [7, 8], [11, 12]]
    # A window without history does not take the others' prompts away.
    assert window_prompts([[1, 2], []], 223) == [[1, 2], []]


def test_short_gaps_stay_in_the_audio():
    # Gaps of 0.2 s, 1.5 s and 0.3 s.
    m = _map([(0.5, 5.0), (5.2, 10.0), (11.5, 20.0), (20.3, 41.0)], 45.0)
    kept = m.keep_short_gaps(1.0, 30.0)
    assert [(s / SR, e / SR) for s, e in kept.spans] == [(0.5, 5.2), (5.2, 10.0), (11.5, 20.3), (20.3, 41.0)]
    # Spans stay separate, so windows can still end between them; times map back unchanged.
    assert kept.joined_ends.size == 4 and kept.original_time(4.8) == 5.3
    assert m.keep_short_gaps(0.1, 30.0).spans == m.spans
    # A span is not extended past 30 s (a chunk must hold it whole).
    long = _map([(0.0, 29.8), (30.1, 35.0)], 40.0)
    assert long.keep_short_gaps(1.0, 30.0).spans == long.spans
