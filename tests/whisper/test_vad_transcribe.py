"""transcribe(vad_filter=True) with the real Silero VAD: long silence, noise and a tone between
three clips give no text, and segment and word times land on the clips in the original audio."""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.whisper import Whisper, WhisperError, load_audio
from whisper_testing import DOOR_TEXT, JFK_TEXT, MORNING_TEXT, word_error_rate

SR = 16000
GAP = 35 * SR


@pytest.fixture(scope="module")
def model(tiny_en_dir) -> Whisper:
    return Whisper.load(tiny_en_dir, device="CPU", threads=2)


@pytest.fixture(scope="module")
def gapped(asset):
    """door, 35 s digital silence, morning, 35 s white noise, jfk, 35 s 440 Hz tone; the clips'
    (start, end) in seconds."""
    rng = np.random.default_rng(0)
    clips = [load_audio(asset(n)) for n in ("door_light.wav", "good_morning.wav", "jfk.wav")]
    gaps = [np.zeros(GAP), 0.03 * rng.standard_normal(GAP), 0.1 * np.sin(2 * np.pi * 440 * np.arange(GAP) / SR)]
    parts, where, pos = [np.zeros(SR)], [], SR
    for clip, gap in zip(clips, gaps):
        where.append((pos / SR, (pos + clip.size) / SR))
        parts += [clip, gap]
        pos += clip.size + gap.size
    return np.concatenate(parts).astype(np.float32), where


def _inside(t, where, slack):
    return any(a - slack <= t <= b + slack for a, b in where)


def test_vad_filter_skips_silence_noise_and_tone(model, gapped):
    audio, where = gapped
    reference = " ".join([DOOR_TEXT, MORNING_TEXT, JFK_TEXT])
    result = model.transcribe(audio, language="en", beam_size=None, vad_filter=True, word_timestamps=True)
    assert word_error_rate(reference, result.text) <= 0.1, result.text
    words = [w for s in result.segments for w in s.words]
    assert len(words) >= 25
    # Every word lies on a clip (within the VAD's 400 ms pad), none in the 35 s gaps.
    for w in words:
        assert _inside(w.start, where, 0.5) and _inside(w.end, where, 0.5), (w, where)
    # Each clip's first word starts near the clip's start (espeak starts speaking at once).
    for a, b in where:
        first = min((w for w in words if a - 0.5 <= w.start <= b), key=lambda w: w.start)
        assert abs(first.start - a) <= 1.0, (first, a)
    assert result.timings["vad"] > 0 and result.timings["total"] >= result.timings["vad"]
    # Without word timestamps the segments still start and end on the clips.
    plain = model.transcribe(audio, language="en", beam_size=None, vad_filter=True)
    assert plain.text == result.text
    for s in plain.segments:
        assert _inside(s.start, where, 1.0) and _inside(s.end, where, 1.0), (s.start, s.end, where)


def test_no_speech_at_all_gives_no_segments(model):
    rng = np.random.default_rng(1)
    noise = np.concatenate([np.zeros(20 * SR), 0.03 * rng.standard_normal(20 * SR)]).astype(np.float32)
    result = model.transcribe(noise, vad_filter=True)
    assert result.text == "" and result.segments == []
    assert model.transcribe(noise, batch_size=4).segments == []


def test_vad_parameters_reach_the_vad(model, gapped):
    audio, where = gapped
    # Speech shorter than 15 s is dropped: all three clips are.
    assert model.transcribe(audio, vad_filter=True, vad_parameters={"min_speech_duration_ms": 15000}).text == ""


@pytest.mark.parametrize("kwargs, match", [
    (dict(vad_filter=True, vad_parameters={"min_silence_ms": 5}), "unknown vad_parameters 'min_silence_ms'"),
    (dict(vad_filter=True, vad_parameters={"speech_pad_ms": -3}), "speech_pad_ms must be.*-3"),
    (dict(vad_filter="yes"), "vad_filter must be True, False or None.*'yes'"),
    (dict(vad_parameters={"threshold": 0.4}), "vad_parameters were given but the VAD is off"),
    (dict(batch_size=0), "batch_size must be a positive integer.*0"),
    (dict(batch_size=2.0), "batch_size must be a positive integer.*2.0"),
    (dict(batch_size=True), "batch_size must be a positive integer.*True"),
    (dict(batch_size=4, vad_parameters={"max_speech_duration_s": 45}), "max_speech_duration_s=45 is longer"),
])
def test_bad_arguments(model, kwargs, match):
    with pytest.raises(WhisperError, match=match):
        model.transcribe(np.zeros(SR, np.float32), **kwargs)


@pytest.mark.parametrize("audio, match", [
    (np.zeros((2, SR), np.float32), "1-D"),
    (np.array([0.0, np.nan] * SR, np.float32), "finite"),
    (np.zeros(0, np.float32), "empty"),
    (np.zeros(SR, np.int16), "float"),
])
def test_bad_audio_with_vad(model, audio, match):
    with pytest.raises(WhisperError, match=match):
        model.transcribe(audio, vad_filter=True)
