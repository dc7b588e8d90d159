"""How batched transcription lays out its work (batched.py), without decoding: chunks of whole
spans, regions of whole chunks even in count, an early timestamp pair not ending a chunk's text,
each window's own prompt."""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.whisper import DecodingOptions
from metal_backend.whisper.batched import open_until, pack_chunks, split_regions, window_prompts
from metal_backend.whisper.logit_filters import LogitRules
from metal_backend.whisper.speech_map import SpeechMap

SR = 16000


def _map(seconds: list[tuple[float, float]], total: float) -> SpeechMap:
    return SpeechMap.from_seconds(seconds, int(total * SR))


def test_regions_are_runs_of_whole_chunks():
    # Ten 12 s spans: five chunks of two spans (24 s each).
    m = _map([(i * 13.0, i * 13.0 + 12.0) for i in range(10)], 131.0)
    chunks = pack_chunks(m)
    assert len(chunks) == 5
    assert all(end - start <= 30 * SR for start, end in chunks)
    regions = split_regions(chunks, 2)
    # Three chunks, then two; the regions hold every chunk once, in order.
    assert regions == [chunks[:3], chunks[3:]]
    assert split_regions(chunks, 8) == [[c] for c in chunks]  # more rows than chunks: one chunk per region
    assert split_regions(chunks, 1) == [chunks]
    assert split_regions([], 4) == []


@pytest.mark.parametrize("seed", range(20))
def test_regions_balance_chunk_counts(seed):
    # Each chunk is one window: a run's batches follow its count of chunks, not its audio.
    rng = np.random.default_rng(seed)
    lengths = [int(x) for x in rng.integers(2 * SR, 30 * SR, size=int(rng.integers(1, 30)))]
    edges = np.cumsum([0, *lengths])
    chunks = [(int(a), int(b)) for a, b in zip(edges, edges[1:])]
    batch_size = int(rng.integers(1, 9))
    regions = split_regions(chunks, batch_size)
    assert len(regions) == min(batch_size, len(chunks))
    assert [c for region in regions for c in region] == chunks
    counts = [len(region) for region in regions]
    assert max(counts) == -(-len(chunks) // len(regions)) and max(counts) - min(counts) <= 1
    assert counts == sorted(counts, reverse=True)


def test_the_passage_x5_takes_four_batches_at_batch_8():
    # The passage x5's layout: 24 chunks of about 27 s and a last one of 16 s in 8 regions:
    # 4 + 3 x 7 chunks, so 4 batches and 25 windows encoded.
    lengths = [27 * SR] * 24 + [16 * SR]
    edges = np.cumsum([0, *lengths])
    regions = split_regions([(int(a), int(b)) for a, b in zip(edges, edges[1:])], 8)
    assert [len(r) for r in regions] == [4] + [3] * 7


def test_an_early_pair_may_not_end_the_text(tiny_en):
    tb, eot = tiny_en.special.timestamp_begin, tiny_en.special.eot
    # A 26.6 s chunk: no ending after a pair before 24.6 s.
    limit = open_until(tiny_en, int(26.6 * SR))
    assert limit == tb + int(round(24.6 / 0.02))
    assert open_until(tiny_en, SR) == tb  # shorter than the margin: no limit
    rules = LogitRules(tiny_en, DecodingOptions())
    text = tiny_en.special.sot - 100  # some text token
    sampled = [[tb, text, tb + 1050, tb + 1050],  # pair at 21.0 s: text must follow
               [tb, text, limit, limit],  # pair at the limit: it may end
               [tb, text, tb + 1050],  # one closing timestamp: it may end
               [tb]]  # the opening timestamp alone: it may end (no speech)
    logits = np.random.default_rng(0).standard_normal((len(sampled), tiny_en.hparams.n_vocab)).astype(np.float32)
    plain = logits.copy()
    rules.apply(logits, sampled, [limit] * len(sampled))
    rules.apply(plain, sampled)
    # Only the end right after the early pair is masked; every other logit is as without a limit.
    assert np.isfinite(plain[0, eot]) and not np.isfinite(logits[0, eot])
    logits[0, eot] = plain[0, eot]
    assert np.array_equal(logits, plain)


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
    # Spans stay separate, so chunks can still end between them; times map back unchanged.
    assert kept.joined_ends.size == 4 and kept.original_time(4.8) == 5.3
    assert m.keep_short_gaps(0.1, 30.0).spans == m.spans
    # A span is not extended past 30 s (a chunk must hold it whole).
    long = _map([(0.0, 29.8), (30.1, 35.0)], 40.0)
    assert long.keep_short_gaps(1.0, 30.0).spans == long.spans
