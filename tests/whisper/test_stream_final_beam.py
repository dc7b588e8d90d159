"""The final pass of live transcription decoded with its own beam (Stream final_beam_size): the
pass that closes a stretch at the end of speech gets beam_size=final_beam_size, every hypothesis
before it the stream's own options; bad values raise before anything is built. Scripted world of
test_stream_joins (fake VAD, fake model): no network runs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_stream_joins import SCALE, SR, ScriptedModel, ScriptedVad, expected, world

from metal_backend.whisper import DecodingOptions, Whisper, WhisperError
from metal_backend.whisper.local_agreement import word_key
from metal_backend.whisper.streaming import Stream, stream_options


class BeamRecordingModel(ScriptedModel):
    """The scripted model, noting the beam size each call was asked to decode with."""

    def __init__(self, data, sentences):
        super().__init__(data, sentences)
        self.beams = []

    def transcribe_window(self, audio, options=None, previous=(), prefix=()):
        self.beams.append(options.beam_size)
        return super().transcribe_window(audio, options, previous, prefix)


# Three sentences 3 s apart (longer than context_gap_seconds): three stretches, each its own buffer.
SENTENCES = world([(0.5, 8), (7.0, 10), (14.0, 6)])


def stream_calls(stream: Stream, fake: BeamRecordingModel, seconds: float = 20.0):
    samples = (np.arange(int(seconds * SR)) * SCALE).astype(np.float32)
    for i in range(0, samples.size, SR // 2):
        stream.push(samples[i:i + SR // 2])
    stream.finish()
    return list(zip(fake.calls, fake.beams))


def stretches(calls):
    """The calls grouped by stretch (by where their audio starts), in order."""
    groups: dict[float, list] = {}
    for (start, _), beam in calls:
        groups.setdefault(round(start, 3), []).append(beam)
    return list(groups.values())


@pytest.mark.parametrize("hypothesis_beam", [None, 2])
def test_final_beam_reaches_the_final_pass_of_each_stretch_only(tiny_en, hypothesis_beam):
    fake = BeamRecordingModel(tiny_en, SENTENCES)
    options = stream_options(None, {"language": "en", "word_timestamps": True, "beam_size": hypothesis_beam})
    s = Stream(fake, options, ScriptedVad(SENTENCES), final_beam_size=5)
    groups = stretches(stream_calls(s, fake))
    assert len(groups) == 3, groups
    for beams in groups:
        assert len(beams) >= 2, groups  # hypotheses, then the final pass
        assert beams[-1] == 5 and all(b == hypothesis_beam for b in beams[:-1]), groups
    committed = [word_key(w.word) for seg in s.segments for w in seg.words]
    assert committed == expected(SENTENCES), committed


def test_without_final_beam_the_final_pass_decodes_as_the_hypotheses(tiny_en):
    fake = BeamRecordingModel(tiny_en, SENTENCES)
    s = Stream(fake, stream_options(None, {"language": "en", "word_timestamps": True}), ScriptedVad(SENTENCES),
               final_beam_size=None)
    calls = stream_calls(s, fake)
    assert len(stretches(calls)) == 3 and {beam for _, beam in calls} == {None}, calls


def test_whisper_stream_passes_final_beam_size_on(tiny_en):
    fake = BeamRecordingModel(tiny_en, SENTENCES)
    s = Whisper.stream(fake, vad=ScriptedVad(SENTENCES), language="en", final_beam_size=3)
    groups = stretches(stream_calls(s, fake))
    assert [beams[-1] for beams in groups] == [3, 3, 3] and all(b is None for g in groups for b in g[:-1]), groups
    # By default the final pass decodes with FINAL_BEAM_SIZE (5); None turns it off.
    for given, final in (({}, 5), ({"final_beam_size": None}, None)):
        fake = BeamRecordingModel(tiny_en, SENTENCES)
        s = Whisper.stream(fake, vad=ScriptedVad(SENTENCES), language="en", **given)
        assert [beams[-1] for beams in stretches(stream_calls(s, fake))] == [final] * 3


@pytest.mark.parametrize("beam", [0, -1, 2.5, "5", "default", True, float("nan")])
def test_bad_final_beam_size_raises_naming_it(beam):
    with pytest.raises(WhisperError, match=re.escape(f"final_beam_size must be a positive integer or None "
                                                     f"(got {beam!r})")):
        Stream(None, DecodingOptions(), None, final_beam_size=beam)
