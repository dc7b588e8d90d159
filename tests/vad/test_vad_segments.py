"""speech_segments: silero-vad's get_speech_timestamps rules (faster-whisper's and whisper.cpp's copy).

reference_timestamps below is written from silero-vad's published algorithm in its own terms
(temp_end, prev_end, next_start; samples of 512-window starts), independently of the package's
segments.py; both run on the same probabilities: hand-made sequences with the expected result
worked out by hand, random sequences, and the network's probabilities of real speech.
"""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.vad import SegmentOptions, SileroVad, VadError, speech_segments_from_probabilities
from vad_testing import signals, speech

W = 512
SR = 16000


def reference_timestamps(probs, n_samples, threshold=0.5, min_speech_duration_ms=250,
                         min_silence_duration_ms=100, max_speech_duration_s=float("inf"), speech_pad_ms=30,
                         neg_threshold=None):
    min_speech_samples = SR * min_speech_duration_ms / 1000
    speech_pad_samples = SR * speech_pad_ms / 1000
    max_speech_samples = SR * max_speech_duration_s - W - 2 * speech_pad_samples
    min_silence_samples = SR * min_silence_duration_ms / 1000
    min_silence_samples_at_max_speech = SR * 98 / 1000
    if neg_threshold is None:
        neg_threshold = max(threshold - 0.15, 0.01)
    triggered = False
    speeches = []
    current = {}
    temp_end = prev_end = next_start = 0
    for i, p in enumerate(probs):
        cur = W * i
        if p >= threshold and temp_end:
            temp_end = 0
            if next_start < prev_end:
                next_start = cur
        if p >= threshold and not triggered:
            triggered = True
            current["start"] = cur
            continue
        if triggered and cur - current["start"] > max_speech_samples:
            if prev_end:
                current["end"] = prev_end
                speeches.append(current)
                current = {}
                if next_start < prev_end:
                    triggered = False
                else:
                    current["start"] = next_start
                prev_end = next_start = temp_end = 0
            else:
                current["end"] = cur
                speeches.append(current)
                current = {}
                prev_end = next_start = temp_end = 0
                triggered = False
                continue
        if p < neg_threshold and triggered:
            if not temp_end:
                temp_end = cur
            if cur - temp_end > min_silence_samples_at_max_speech:
                prev_end = temp_end
            if cur - temp_end < min_silence_samples:
                continue
            current["end"] = temp_end
            if current["end"] - current["start"] > min_speech_samples:
                speeches.append(current)
            current = {}
            prev_end = next_start = temp_end = 0
            triggered = False
            continue
    if current and n_samples - current["start"] > min_speech_samples:
        current["end"] = n_samples
        speeches.append(current)
    for i, s in enumerate(speeches):
        if i == 0:
            s["start"] = int(max(0, s["start"] - speech_pad_samples))
        if i != len(speeches) - 1:
            gap = speeches[i + 1]["start"] - s["end"]
            if gap < 2 * speech_pad_samples:
                s["end"] += int(gap // 2)
                speeches[i + 1]["start"] = int(max(0, speeches[i + 1]["start"] - gap // 2))
            else:
                s["end"] = int(min(n_samples, s["end"] + speech_pad_samples))
                speeches[i + 1]["start"] = int(max(0, speeches[i + 1]["start"] - speech_pad_samples))
        else:
            s["end"] = int(min(n_samples, s["end"] + speech_pad_samples))
    return [(s["start"], s["end"]) for s in speeches]


def ours(probs, n_samples, **kw):
    return speech_segments_from_probabilities(probs, n_samples, SegmentOptions(**kw))


def windows(*runs):
    """Probabilities from (value, count) runs."""
    return np.concatenate([np.full(n, v) for v, n in runs])


def test_one_segment_worked_by_hand() -> None:
    # Speech from window 10 to 29; the silence from window 30 lasts 100 ms by window 34 (2048 >= 1600
    # samples): the segment is [5120, 15360), padded by 480 samples each side.
    p = windows((0.0, 10), (0.9, 20), (0.0, 10))
    assert ours(p, 40 * W) == [(4640, 15840)] == reference_timestamps(p, 40 * W)


def test_short_speech_is_dropped_and_short_silence_bridged() -> None:
    short = windows((0.0, 10), (0.9, 7), (0.0, 10))  # 3584 samples < 250 ms
    assert ours(short, 27 * W) == []
    bridged = windows((0.0, 4), (0.9, 10), (0.1, 2), (0.9, 10), (0.0, 10))  # 64 ms of silence
    assert ours(bridged, 36 * W) == [(4 * W - 480, 26 * W + 480)]


def test_close_segments_split_the_gap_between_their_pads() -> None:
    # Silence of 5 windows (2560 samples: it has lasted 100 ms at its fifth window) between two
    # segments, pads of 100 ms (1600): the pads would overlap, so each takes half the gap.
    p = windows((0.0, 4), (0.9, 10), (0.0, 5), (0.9, 10), (0.0, 10))
    got = ours(p, 39 * W, speech_pad_ms=100)
    assert got == [(4 * W - 1600, 14 * W + 1280), (19 * W - 1280, 29 * W + 1600)]
    assert got == reference_timestamps(p, 39 * W, speech_pad_ms=100)
    # Four windows of silence (1536 samples < 1600 when speech returns) do not end the segment.
    assert len(ours(windows((0.0, 4), (0.9, 10), (0.0, 4), (0.9, 10), (0.0, 10)), 38 * W)) == 1


def test_speech_until_the_end_runs_to_the_last_sample() -> None:
    p = windows((0.0, 3), (0.9, 20))
    assert ours(p, 23 * W - 100) == [(3 * W - 480, 23 * W - 100)]


def test_neg_threshold_keeps_speech_between_the_thresholds() -> None:
    # 0.4 is below threshold 0.5 but above the default neg_threshold 0.35: still speech.
    p = windows((0.0, 2), (0.9, 10), (0.4, 20), (0.0, 10))
    assert ours(p, 42 * W) == [(2 * W - 480, 32 * W + 480)]
    assert ours(p, 42 * W, neg_threshold=0.45) == [(2 * W - 480, 12 * W + 480)]


@pytest.mark.parametrize("seed", range(40))
def test_random_sequences_match_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 900))
    # A two-state Markov chain (speech runs and silence runs) with noisy probabilities.
    state, probs = 0, []
    for _ in range(n):
        if rng.random() < 0.08:
            state = 1 - state
        probs.append(float(np.clip(rng.normal(0.8 if state else 0.15, 0.2), 0, 1)))
    kw = dict(threshold=float(rng.choice([0.3, 0.5, 0.7])),
              min_speech_duration_ms=float(rng.choice([0, 100, 250])),
              min_silence_duration_ms=float(rng.choice([0, 50, 100, 500])),
              max_speech_duration_s=float(rng.choice([float("inf"), 2.0, 5.0])),
              speech_pad_ms=float(rng.choice([0, 30, 400])))
    n_samples = n * W - int(rng.integers(0, W))
    assert ours(probs, n_samples, **kw) == reference_timestamps(probs, n_samples, **kw)


def test_max_speech_duration_cuts_long_speech() -> None:
    p = windows((0.9, 60), (0.0, 3), (0.9, 100))
    got = ours(p, 163 * W, max_speech_duration_s=2.0)
    assert got == reference_timestamps(p, 163 * W, max_speech_duration_s=2.0)
    assert len(got) >= 3
    assert all(b - a <= 2.0 * SR + 2 * 480 for a, b in got)


def test_speech_segments_of_real_speech(cpu_vad: SileroVad) -> None:
    x = speech("jfk")
    probs = cpu_vad.speech_probabilities(x)
    for kw in ({}, dict(min_silence_duration_ms=2000, speech_pad_ms=400, min_speech_duration_ms=0),
               dict(threshold=0.3, max_speech_duration_s=3.0)):
        got = cpu_vad.speech_segments(x, **kw)
        want = reference_timestamps(probs, x.size, **kw)
        assert got == [(a / SR, b / SR) for a, b in want]
        assert got, kw
    # Silence before speech is left out: jfk.wav starts with ~0.3 s of quiet.
    assert cpu_vad.speech_segments(x)[0][0] > 0.2


def test_silence_noise_and_tones_give_few_or_no_segments(cpu_vad: SileroVad) -> None:
    assert cpu_vad.speech_segments(signals()["silence"]) == []


@pytest.mark.parametrize("bad", [
    dict(threshold=1.5), dict(threshold=0.0), dict(threshold=float("nan")), dict(threshold="0.5"),
    dict(min_speech_duration_ms=-1), dict(min_silence_duration_ms=float("inf")),
    dict(speech_pad_ms=-30), dict(max_speech_duration_s=0.01), dict(max_speech_duration_s=-1),
    dict(neg_threshold=0.9), dict(neg_threshold=-0.1), dict(threshold=True),
])
def test_absurd_parameters_raise_naming_the_value(cpu_vad: SileroVad, bad: dict) -> None:
    (name, value), = bad.items()
    with pytest.raises(VadError, match=name):
        cpu_vad.speech_segments(signals()["silence"], **bad)
    with pytest.raises(ValueError):
        SegmentOptions(**bad)
