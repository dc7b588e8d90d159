"""Greedy decoding rules and windowing, driven by a scripted compute object."""

from __future__ import annotations

import numpy as np
import pytest

from metal_backend.whisper import (DecodingOptions, GreedyDecoder, SpecialTokens, WhisperCompute, WhisperError,
                                   WhisperHParams, WhisperModelData, initial_tokens, transcribe)

EN = WhisperHParams(51864, 1500, 8, 2, 1, 448, 8, 2, 1, 80)
MULTI = WhisperHParams(51865, 1500, 8, 2, 1, 448, 8, 2, 1, 80)
WORDS = {220: b" ", 1000: b" hello", 1001: b" world", 1002: b".", 1003: b" again"}


def fake_model(hp: WhisperHParams, suppress: tuple[int, ...] = ()) -> WhisperModelData:
    special = SpecialTokens.for_hparams(hp)
    names = special.names(hp.n_vocab)
    vocab = [WORDS.get(i, b"t%d" % i) for i in range(special.eot)] + [names[i] for i in range(special.eot, hp.n_vocab)]
    return WhisperModelData(hparams=hp, tensors={}, vocab=vocab, mel_filters=np.zeros((80, 201), np.float32),
                            suppress_tokens=suppress)


class ScriptedCompute:
    """At step i, prefers script[i][0], then script[i][1], ... ; records every call."""

    def __init__(self, n_vocab: int, script: list[list[int]]):
        self.n_vocab = n_vocab
        self.script = script
        self.calls: list[tuple[object, list[int], int]] = []
        self.encoded = 0

    def encode(self, mel):
        assert mel.shape == (80, 3000)
        self.encoded += 1
        return ("features", self.encoded)

    def decode(self, features, tokens, offset):
        self.calls.append((features, list(tokens), offset))
        step = len(self.calls) - 1
        logits = np.zeros(self.n_vocab, np.float16)
        prefs = self.script[min(step, len(self.script) - 1)]
        for rank, token in enumerate(prefs):
            logits[token] = 100 - rank
        return logits


def test_compute_protocol_is_runtime_checkable():
    assert isinstance(ScriptedCompute(10, [[0]]), WhisperCompute)


def test_initial_tokens():
    assert initial_tokens(fake_model(EN), DecodingOptions()) == [50257, 50362]
    assert initial_tokens(fake_model(MULTI), DecodingOptions()) == [50258, 50259, 50359, 50363]
    assert initial_tokens(fake_model(MULTI), DecodingOptions(language="de", task="translate")) == [50258, 50261, 50358, 50363]
    with pytest.raises(WhisperError, match="unknown task"):
        initial_tokens(fake_model(MULTI), DecodingOptions(task="summarize"))


def test_greedy_feeds_prompt_then_one_token_at_a_time():
    compute = ScriptedCompute(EN.n_vocab, [[1000], [1001], [1002], [50256]])
    tokens = GreedyDecoder(fake_model(EN)).decode(compute, "F")
    assert tokens == [1000, 1001, 1002]
    assert [(t, o) for _, t, o in compute.calls] == [([50257, 50362], 0), ([1000], 2), ([1001], 3), ([1002], 4)]
    assert all(f == "F" for f, _, _ in compute.calls)


def test_blank_and_eot_suppressed_at_first_step_only():
    compute = ScriptedCompute(EN.n_vocab, [[220, 50256, 1000], [220, 1001], [50256]])
    assert GreedyDecoder(fake_model(EN)).decode(compute, None) == [1000, 220]
    compute = ScriptedCompute(EN.n_vocab, [[220, 1000], [50256]])
    assert GreedyDecoder(fake_model(EN), DecodingOptions(suppress_blank=False)).decode(compute, None) == [220]


@pytest.mark.parametrize("hp", [EN, MULTI])
def test_special_and_timestamp_tokens_never_sampled(hp):
    sp = SpecialTokens.for_hparams(hp)
    banned = [sp.sot, sp.language("en"), sp.transcribe, sp.translate, sp.no_timestamps, sp.no_speech,
              sp.start_of_prev, sp.timestamp_begin, hp.n_vocab - 1]
    compute = ScriptedCompute(hp.n_vocab, [banned + [1000], banned + [sp.eot]])
    assert GreedyDecoder(fake_model(hp)).decode(compute, None) == [1000]


def test_extra_suppression():
    compute = ScriptedCompute(EN.n_vocab, [[1000, 1001], [50256]])
    assert GreedyDecoder(fake_model(EN), DecodingOptions(suppress_tokens=(1000,))).decode(compute, None) == [1001]
    model = fake_model(EN, suppress=(1000,))
    # The model's non-speech list is suppressed by default, as openai-whisper's suppress_tokens="-1".
    assert GreedyDecoder(model).decode(ScriptedCompute(EN.n_vocab, [[1000, 1001], [50256]]), None) == [1001]
    opts = DecodingOptions(suppress_non_speech=False)
    assert GreedyDecoder(model, opts).decode(ScriptedCompute(EN.n_vocab, [[1000, 1001], [50256]]), None) == [1000]


def test_max_new_tokens_and_context_limit():
    compute = ScriptedCompute(EN.n_vocab, [[1003]])
    assert len(GreedyDecoder(fake_model(EN), DecodingOptions(max_new_tokens=5)).decode(compute, None)) == 5
    compute = ScriptedCompute(EN.n_vocab, [[1003]])
    assert len(GreedyDecoder(fake_model(EN)).decode(compute, None)) == 224
    small = WhisperHParams(51864, 1500, 8, 2, 1, 10, 8, 2, 1, 80)
    compute = ScriptedCompute(small.n_vocab, [[1003]])
    tokens = GreedyDecoder(fake_model(small), DecodingOptions(max_new_tokens=100)).decode(compute, None)
    # 2 prompt tokens + 8 sampled fill the 10 positions; the last sample needs no position of its own.
    assert len(tokens) == 9 and compute.calls[-1][2] == 9


def test_bad_logits_shape():
    class Broken(ScriptedCompute):
        def decode(self, features, tokens, offset):
            return np.zeros(10, np.float32)

    with pytest.raises(WhisperError, match="logits of shape \\(10,\\)"):
        GreedyDecoder(fake_model(EN)).decode(Broken(EN.n_vocab, [[0]]), None)


def test_transcribe_windows_and_concatenates():
    # 65 s of audio: three 30 s windows, each decoded from a fresh prompt.
    compute = ScriptedCompute(EN.n_vocab, [[1000], [1001], [50256], [1003], [50256], [1002], [50256]])
    audio = np.full(16000 * 65, 0.01, np.float32)
    result = transcribe(compute, fake_model(EN), audio)
    assert compute.encoded == 3
    assert [s.text for s in result.segments] == [" hello world", " again", "."]
    assert [(s.start, s.end) for s in result.segments] == [(0.0, 30.0), (30.0, 60.0), (60.0, 65.0)]
    assert result.text == "hello world again."
    assert [o for _, _, o in compute.calls] == [0, 2, 3, 0, 2, 0, 2]
    assert set(result.timings) >= {"mel", "encode", "decode", "total"}


def test_transcribe_rejects_bad_audio():
    compute = ScriptedCompute(EN.n_vocab, [[50256]])
    with pytest.raises(WhisperError, match="audio is empty"):
        transcribe(compute, fake_model(EN), np.zeros(0, np.float32))
    with pytest.raises(WhisperError, match="1-D"):
        transcribe(compute, fake_model(EN), np.zeros((2, 10), np.float32))
