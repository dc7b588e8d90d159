"""How batched transcription lays out its work (batched.py), without a model: regions of whole
chunks, windows cut at span boundaries, unfinished ends snapped to a boundary, prompts of one
length."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

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


def _shortest_longest_region(lengths: list[int], count: int) -> int:
    """Brute force: the longest region of the best split of lengths into count consecutive runs."""
    best = None
    for cuts in itertools.combinations(range(1, len(lengths)), count - 1):
        edges = [0, *cuts, len(lengths)]
        longest = max(sum(lengths[a:b]) for a, b in zip(edges, edges[1:]))
        best = longest if best is None else min(best, longest)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_regions_balance_audio_not_chunk_counts(seed):
    rng = np.random.default_rng(seed)
    lengths = [int(x) for x in rng.integers(2 * SR, 30 * SR, size=int(rng.integers(1, 11)))]
    edges = np.cumsum([0, *lengths])
    chunks = [(int(a), int(b)) for a, b in zip(edges, edges[1:])]
    batch_size = int(rng.integers(1, 6))
    regions = split_regions(chunks, batch_size)
    count = min(batch_size, len(chunks))
    assert len(regions) == count
    # Runs of whole chunks tiling the speech, in order.
    assert regions[0][0] == 0 and regions[-1][1] == edges[-1]
    assert all(a[1] == b[0] for a, b in zip(regions, regions[1:]))
    assert all(start in edges and stop in edges and start < stop for start, stop in regions)
    assert max(stop - start for start, stop in regions) == _shortest_longest_region(lengths, count)


def test_the_region_of_four_chunks_holds_the_short_one():
    # The passage x5's layout: 24 chunks of about 27 s and a last one of 16 s in 8 regions. By
    # count (4, 3, 3, ...) the first region would hold 108 s; by length the fourth chunk goes with
    # the short one: at most 27 + 27 + 27 + 16 = 97 s.
    lengths = [27 * SR] * 24 + [16 * SR]
    edges = np.cumsum([0, *lengths])
    regions = split_regions([(int(a), int(b)) for a, b in zip(edges, edges[1:])], 8)
    assert [round((b - a) / SR) for a, b in regions] == [81] * 7 + [97]


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
