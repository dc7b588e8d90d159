"""DecodingOptions: openai-whisper's defaults, normalisation and the bad values it rejects."""

from __future__ import annotations

from dataclasses import replace

import pytest

from metal_backend.whisper import DecodingOptions, WhisperError


def test_defaults_are_the_peers_defaults():
    o = DecodingOptions()
    assert o.language is None and o.task == "transcribe"
    assert o.temperatures == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert (o.beam_size, o.best_of, o.patience, o.length_penalty) == (5, 5, None, None)
    assert not o.without_timestamps and o.max_initial_timestamp == 1.0
    assert o.condition_on_previous_text and o.initial_prompt is None
    assert (o.compression_ratio_threshold, o.logprob_threshold, o.no_speech_threshold) == (2.4, -1.0, 0.6)
    assert not o.word_timestamps


def test_normalisation():
    assert DecodingOptions(temperature=0).temperature == 0.0
    assert DecodingOptions(temperature=[0, 0.5]).temperatures == (0.0, 0.5)
    assert DecodingOptions(language="auto").language is None
    assert DecodingOptions(language="ES").language == "es"
    assert DecodingOptions(suppress_tokens=[5, 7]).suppress_tokens == (5, 7)
    assert replace(DecodingOptions(), beam_size=None).beam_size is None


@pytest.mark.parametrize("kwargs,message", [
    (dict(language="xx"), "unknown language 'xx'"),
    (dict(language=3), "language must be"),
    (dict(task="summarize"), "unknown task"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(suppress_tokens=[-1]), "suppress_tokens"),
    (dict(suppress_tokens="12"), "suppress_tokens"),
    (dict(temperature=-0.1), "temperatures"),
    (dict(temperature=float("nan")), "temperatures"),
    (dict(temperature=()), "temperatures"),
    (dict(temperature="hot"), "temperature must be"),
    (dict(beam_size=0), "beam_size"),
    (dict(beam_size=2.5), "beam_size"),
    (dict(best_of=-1), "best_of"),
    (dict(patience=0.0), "patience"),
    (dict(patience=1.0, beam_size=None), "patience needs beam search"),
    (dict(length_penalty=-1.0), "length_penalty"),
    (dict(max_initial_timestamp=-1.0), "max_initial_timestamp"),
    (dict(initial_prompt=5), "initial_prompt"),
    (dict(compression_ratio_threshold=0.0), "compression_ratio_threshold"),
    (dict(logprob_threshold=float("inf")), "logprob_threshold"),
    (dict(no_speech_threshold=1.5), "no_speech_threshold"),
    (dict(without_timestamps="yes"), "without_timestamps"),
    (dict(append_punctuations=None), "append_punctuations"),
])
def test_bad_values(kwargs, message):
    with pytest.raises(WhisperError, match=message):
        DecodingOptions(**kwargs)
